// The runner kit's conformance suite for the Claude Agent SDK runner, on one engine: the kit's control
// suite as it is (with a 150 s bound on its waits), and the kit's matrix cases adapted where the whole-turn
// harness differs (the README's "Conformance" section lists each adaptation): a READ tool runs inline inside
// the RunModel (no CallTool Step, no record, the two model calls in one RunModel), so this file's cases 1, 2
// and 3+7 assert that shape; the kit's own matrixSuite runs the other cases as they are.

import type { Client as EngineClient } from "@durable-agent/engine"
import {
  controlSuite,
  type EngineFactory,
  type Kit,
  matrixSuite,
  type ScriptEntry,
  type SessionOptions,
  stepShape,
  withSession
} from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { harness } from "../harness.ts"
// the package's own waits (150 s): the binary is a real process, slow on a loaded machine
import { awaitSnapshot, awaitTurns } from "../support.ts"

const TIMEOUT = { timeout: 240_000 }

export const conformanceSuite = (engineName: string, engine: EngineFactory): void => {
  // the kit's control suite and the matrix cases a whole-turn harness passes as they are, with the package's
  // 150 s bound on their waits
  const options = { engines: { [engineName]: engine }, timeout: "150 seconds" } as const
  controlSuite(harness, options)
  matrixSuite(harness, { ...options, matrixCases: ["7", "4", "single-attempt-failure", "8", "10+11"] })

  const session = <A, E>(
    script: ReadonlyArray<ScriptEntry>,
    body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | EngineClient.Client>,
    options?: SessionOptions
  ) => withSession(harness, engine, script, body, options)

  describe(`${harness.name} on the ${engineName} engine: the session matrix (whole-turn harness: the adapted cases)`, () => {
    it.live(
      "1. a READ tool runs inline: one RunModel makes both model calls; the history replays",
      () =>
        session(
          [
            {
              text: "Checking.",
              toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
              usage: { inputTokens: 10, outputTokens: 3 }
            },
            { text: "It is 21 degrees in Paris.", usage: { inputTokens: 20, outputTokens: 7 } },
            { text: "You are welcome." }
          ],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m1", { initialMessage: "Weather in Paris?" })
              const first = yield* awaitTurns("m1", 1)
              // adapted: no CallTool Step, the read ran inside the RunModel
              assert.deepStrictEqual(yield* stepShape("m1"), ["StartAgentSession", "RunModel", "AwaitUserMessage"])
              assert.strictEqual(kit.count("get_weather"), 1)
              assert.strictEqual(kit.player.calls().length, 2, "two model calls in the one RunModel")
              assert.deepStrictEqual(
                first.messages.map((m) => [m.role, m.text, m.toolCallId, m.toolOutput]),
                [
                  ["user", "Weather in Paris?", null, null],
                  ["assistant", "Checking.", null, null],
                  ["assistant", null, "call_1", null],
                  ["tool", null, "call_1", '{"city":"Paris","temperature":21}'],
                  ["assistant", "It is 21 degrees in Paris.", null, null]
                ]
              )
              assert.deepStrictEqual(first.toolCalls, [], "an inline read has no record")
              assert.strictEqual(first.usage.modelCalls, 2)
              assert.strictEqual(first.usage.inputTokens, 30)
              assert.strictEqual(first.usage.outputTokens, 10)
              assert.deepStrictEqual(kit.toolResults(1), { call_1: '{"city":"Paris","temperature":21}' })
              // the next turn resumes the harness transcript
              assert.isTrue(yield* client.sendUserMessage("m1", "Thanks!"))
              yield* awaitTurns("m1", 2)
              const replay = kit.player.calls()[2]!
              assert.deepStrictEqual(replay.userTexts, ["Weather in Paris?", "Thanks!"])
              assert.deepStrictEqual(kit.toolResults(2), { call_1: '{"city":"Paris","temperature":21}' })
            })
        ),
      TIMEOUT
    )

    it.live(
      "2. parallel calls of one response: the READs inline, the write in its own Step with its idempotency key",
      () =>
        session(
          [
            {
              toolCalls: [
                { id: "a", name: "get_weather", arguments: { city: "Oslo" } },
                { id: "b", name: "get_weather", arguments: { city: "Rome" } },
                { id: "c", name: "save_note", arguments: { text: "x" } }
              ]
            },
            { text: "Done." }
          ],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m2", { initialMessage: "both" })
              yield* awaitTurns("m2", 1)
              // adapted: one tool Step, for the write; the reads ran inside the first RunModel
              assert.deepStrictEqual(yield* stepShape("m2"), [
                "StartAgentSession",
                "RunModel",
                "CallTool",
                "ResumeTurn",
                "RunModel",
                "AwaitUserMessage"
              ])
              assert.strictEqual(kit.count("get_weather"), 2)
              assert.strictEqual(kit.count("save_note"), 1)
              assert.deepStrictEqual(Object.keys(kit.toolResults(1)).sort(), ["a", "b", "c"])
              const turnId = (yield* client.getSnapshot("m2")).messages[0]!.turnId
              assert.deepStrictEqual(kit.idempotencyKeys, [`m2/${turnId}/c`])
            })
        ),
      TIMEOUT
    )

    it.live(
      "3+7. a write that needs approval waits beside an inline READ, runs once after approval; a second resolve is false",
      () =>
        session(
          [
            {
              toolCalls: [
                { id: "w1", name: "send_email", arguments: { to: "ann" } },
                { id: "r1", name: "get_weather", arguments: { city: "Oslo" } }
              ]
            },
            { text: "Sent." }
          ],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m3", { initialMessage: "email ann" })
              yield* awaitSnapshot("m3", (s) => s.pendingInterrupts.length === 1, "the approval")
              // adapted: the read ran inline before the RunModel committed; it has no record
              assert.strictEqual(kit.count("get_weather"), 1)
              assert.strictEqual(kit.count("send_email"), 0)
              assert.isTrue(yield* client.resolveInterrupt("m3", { interruptId: "w1", approved: true }))
              assert.isFalse(yield* client.resolveInterrupt("m3", { interruptId: "w1", approved: true }))
              yield* awaitTurns("m3", 1)
              assert.strictEqual(kit.count("send_email"), 1)
              assert.deepStrictEqual(kit.toolResults(1), {
                w1: "sent to ann",
                r1: '{"city":"Oslo","temperature":21}'
              })
              assert.isTrue((yield* stepShape("m3")).includes("CallSingleAttemptTool"))
            })
        ),
      TIMEOUT
    )
  })
}
