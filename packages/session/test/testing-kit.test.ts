// The testing kit (`@durable-agent/session/testing`) as an application's test uses it, and
// AgentSessionClient.awaitTurn.

import { AgentSessionClient, ToolSource } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"

const weather = ToolSource.tool({
  name: "get_weather",
  description: "The weather of a city.",
  effect: "read",
  handler: (args) => Effect.succeed({ city: args.city, temperature: 21 })
})

describe("@durable-agent/session/testing", () => {
  it.live("a session on a scripted model: awaitTurn returns the settled snapshot of each turn", () =>
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("s-1", { initialMessage: "Weather in Paris?" })
      const first = yield* SessionTesting.awaitTurn("s-1")
      assert.strictEqual(first.state?.turnCount, 1)
      assert.strictEqual(first.messages.at(-1)?.text, "It is 21 degrees in Paris.")
      assert.isTrue(yield* sessions.sendUserMessage("s-1", "Thanks"))
      const second = yield* sessions.awaitTurn("s-1")
      assert.strictEqual(second.state?.turnCount, 2)
      assert.strictEqual(second.messages.at(-1)?.text, "You are welcome.")
      const waited = yield* SessionTesting.awaitSnapshot("s-1", (s) => s.usage.modelCalls === 3)
      assert.strictEqual(waited.usage.modelCalls, 3)
    }).pipe(
      Effect.provide(
        SessionTesting.layer({
          model: [
            { toolCalls: [{ id: "c1", name: "get_weather", arguments: { city: "Paris" } }] },
            { text: "It is 21 degrees in Paris." },
            { text: "You are welcome." }
          ],
          tools: [weather]
        })
      )
    )
  )

  it.live("awaitTurn times out with what it last saw", () =>
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("s-slow", { initialMessage: "Hi" })
      const error = yield* Effect.flip(sessions.awaitTurn("s-slow", { timeout: "200 millis" }))
      assert.strictEqual(error._tag, "AwaitTurnTimeout")
    }).pipe(Effect.provide(SessionTesting.layer({ model: [{ text: "late", delay: "2 seconds" }] })))
  )

  it.effect("under it.effect (TestClock) the kit fails at once and says to use it.live", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Effect.provide(
          Effect.flatMap(AgentSessionClient.AgentSessionClient, (s) => s.awaitTurn("s-x")),
          SessionTesting.layer({ model: [] })
        )
      )
      assert.include(String((error as { message?: unknown }).message), "it.live")
      const direct = yield* Effect.flip(
        Effect.provide(
          SessionTesting.awaitSnapshot("s-x", () => true),
          SessionTesting.layer({ model: [] })
        )
      )
      assert.include(String((direct as { message?: unknown }).message), "write this test with it.live")
    })
  )
})
