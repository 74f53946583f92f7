// The client's own check of the session-settings limit (the spec: settings are at most
// MAX_SESSION_SETTINGS_BYTES of compact UTF-8 JSON, "which Clients check"): over it, startSession and
// updateSessionSettings fail with SessionSettingsTooLarge and send nothing; at it, they go through.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, Errors, Wire } from "../src/index.ts"
import * as SessionTesting from "../src/testing.ts"

/** Settings whose compact JSON text is exactly `bytes` bytes of UTF-8 (`{"k":"…"}` is 8 bytes of frame). */
const settingsOf = (bytes: number, char = "x"): Wire.SessionSettings => {
  const width = new TextEncoder().encode(char).length
  const body = bytes - 8
  return { k: char.repeat(Math.floor(body / width)) + "x".repeat(body % width) }
}

const size = (settings: Wire.SessionSettings) => new TextEncoder().encode(JSON.stringify(settings)).length

describe("AgentSessionClient: the session-settings limit", () => {
  it("the helper builds settings of the exact size, multi-byte characters counted in UTF-8", () => {
    assert.strictEqual(size(settingsOf(Wire.MAX_SESSION_SETTINGS_BYTES)), 16_384)
    assert.strictEqual(size(settingsOf(Wire.MAX_SESSION_SETTINGS_BYTES + 1, "é")), 16_385)
  })

  it.live("startSession refuses settings over 16,384 bytes before anything is sent; at the limit it starts", () =>
    Effect.gen(function* () {
      const client = yield* AgentSessionClient.AgentSessionClient
      const over = settingsOf(Wire.MAX_SESSION_SETTINGS_BYTES + 1, "é")
      const error = yield* Effect.flip(client.startSession("big", { initialMessage: "hi", sessionSettings: over }))
      assert.instanceOf(error, Errors.SessionSettingsTooLarge)
      assert.deepStrictEqual([error.bytes, error.limit], [16_385, 16_384])
      // nothing was sent: the same ID starts afterwards with settings at the limit
      const atLimit = settingsOf(Wire.MAX_SESSION_SETTINGS_BYTES)
      yield* client.startSession("big", { initialMessage: "hi", sessionSettings: atLimit })
      const snapshot = yield* SessionTesting.awaitTurn("big")
      assert.strictEqual(snapshot.messages[0]?.text, "hi")
    }).pipe(Effect.provide(SessionTesting.layer({ model: [{ text: "Hello." }] })))
  )

  it.live("updateSessionSettings refuses settings over the limit and keeps the old ones; at the limit it applies", () =>
    Effect.gen(function* () {
      const client = yield* AgentSessionClient.AgentSessionClient
      yield* client.startSession("upd", { initialMessage: "hi", sessionSettings: { model: "small" } })
      yield* SessionTesting.awaitTurn("upd")
      const error = yield* Effect.flip(
        client.updateSessionSettings("upd", settingsOf(Wire.MAX_SESSION_SETTINGS_BYTES + 1))
      )
      assert.instanceOf(error, Errors.SessionSettingsTooLarge)
      assert.deepStrictEqual((yield* client.getSnapshot("upd")).sessionSettings, { model: "small" })
      const atLimit = settingsOf(Wire.MAX_SESSION_SETTINGS_BYTES)
      assert.isTrue(yield* client.updateSessionSettings("upd", atLimit))
      assert.deepStrictEqual((yield* client.getSnapshot("upd")).sessionSettings, atLimit)
    }).pipe(Effect.provide(SessionTesting.layer({ model: [{ text: "Hello." }] })))
  )
})
