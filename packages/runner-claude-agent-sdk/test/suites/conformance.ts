// The runner kit's conformance suite for the Claude Agent SDK runner, on one engine: the kit's control
// suite as it is (with a 150 s bound on its waits), and the kit's matrix cases adapted where the whole-turn
// harness differs (the README's "Conformance" section lists each adaptation): a READ tool runs inline inside
// the RunModel (no CallTool Step, no record, the two model calls in one RunModel), so cases 1, 2 and 3+7
// assert that shape; the other cases are the kit's own.

import type { Client as EngineClient } from "@durable-agent/engine"
import {
  controlSuite,
  type EngineFactory,
  type Kit,
  type ScriptEntry,
  type SessionOptions,
  stepShape,
  withSession
} from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { harness } from "../harness.ts"
// the package's own waits (150 s): the binary is a real process, slow on a loaded machine
import { awaitSnapshot, awaitTurns } from "../support.ts"

const TIMEOUT = { timeout: 240_000 }

export const conformanceSuite = (engineName: string, engine: EngineFactory): void => {
  // the kit's control suite as it is, with the package's 150 s bound on its waits
  controlSuite(harness, { engines: { [engineName]: engine }, timeout: "150 seconds" })

  const session = <A, E>(
    script: ReadonlyArray<ScriptEntry>,
    body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | EngineClient.Client>,
    options?: SessionOptions
  ) => withSession(harness, engine, script, body, options)

  describe(`${harness.name} on the ${engineName} engine: the session matrix (whole-turn harness)`, () => {
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

    it.live(
      '7. an approval deadline rejects the call with "approval deadline passed"; resolving after it is false',
      () =>
        session(
          [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "cy" } }] }, { text: "Too late." }],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m7", { initialMessage: "email cy" })
              yield* awaitTurns("m7", 1)
              assert.isFalse(yield* client.resolveInterrupt("m7", { interruptId: "w1", approved: true }))
              assert.strictEqual(kit.count("send_email"), 0)
              assert.deepStrictEqual(kit.toolResults(1), { w1: "approval deadline passed" })
            }),
          { interruptDeadline: "1 second" }
        ),
      TIMEOUT
    )

    it.live(
      "4. a rejected write never runs, and the model sees the rejection message",
      () =>
        session(
          [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "bob" } }] }, { text: "OK, I will not." }],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m4", { initialMessage: "email bob" })
              yield* awaitSnapshot("m4", (s) => s.pendingInterrupts.length === 1, "the approval")
              assert.isTrue(
                yield* client.resolveInterrupt("m4", {
                  interruptId: "w1",
                  approved: false,
                  rejectionMessage: "Not today."
                })
              )
              yield* awaitTurns("m4", 1)
              assert.strictEqual(kit.count("send_email"), 0)
              assert.deepStrictEqual(kit.toolResults(1), { w1: "Not today." })
            })
        ),
      TIMEOUT
    )

    it.live(
      "a single-attempt write whose tool throws records failed with the error, runs once, and the model sees it",
      () =>
        session(
          [{ toolCalls: [{ id: "f1", name: "flaky_write", arguments: {} }] }, { text: "It may have gone through." }],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m5", { initialMessage: "do it" })
              yield* awaitSnapshot("m5", (s) => s.pendingInterrupts.length === 1, "the approval")
              assert.isTrue(yield* client.resolveInterrupt("m5", { interruptId: "f1", approved: true }))
              yield* awaitTurns("m5", 1)
              assert.strictEqual(kit.count("flaky_write"), 1)
              assert.include(kit.toolResults(1).f1, "the mail server hung up")
              assert.notStrictEqual(kit.toolResults(1).f1, Wire.OUTCOME_UNKNOWN_TEXT)
            }),
          { toolPolicies: { flaky_write: { effect: "non_idempotent_write", requiresApproval: true } } }
        ),
      TIMEOUT
    )

    it.live(
      "8. a turn that fails after a write ran leaves the turn-failure note, and the write is not repeated",
      () =>
        session(
          [
            { toolCalls: [{ id: "n1", name: "save_note", arguments: { text: "hello" } }] },
            { fail: "provider down 1" },
            { fail: "provider down 2" },
            { fail: "provider down 3" },
            { text: "Recovered." }
          ],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m8", { initialMessage: "save hello" })
              const failed = yield* awaitTurns("m8", 1)
              assert.strictEqual(kit.count("save_note"), 1)
              assert.include(failed.state?.lastTurnError ?? "", "provider down 3")
              const note = failed.messages[failed.messages.length - 1]!
              assert.isTrue(note.text?.startsWith(Wire.TURN_FAILURE_NOTE_HEADER))
              assert.include(note.text ?? "", "save_note")
              assert.isTrue(yield* client.sendUserMessage("m8", "and now?"))
              const done = yield* awaitTurns("m8", 2)
              const last = kit.player.calls().at(-1)!
              assert.isTrue(
                last.userTexts.some((t) => t.includes(Wire.TURN_FAILURE_NOTE_HEADER.slice(0, 20))),
                "the next model call sees the turn-failure note"
              )
              assert.strictEqual(done.messages.at(-1)?.text, "Recovered.")
              assert.strictEqual(kit.count("save_note"), 1)
            })
        ),
      TIMEOUT
    )

    it.live(
      "10+11. a message sent during a turn is queued and handled after it; the snapshot returns the conversation",
      () =>
        session([{ text: "First answer.", delay: "800 millis" }, { text: "Second answer." }], (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("m10", { initialMessage: "one" })
            yield* awaitSnapshot("m10", (s) => s.state?.activeTurnId !== null, "the first turn")
            assert.isTrue(yield* client.sendUserMessage("m10", "two"))
            const snapshot = yield* awaitTurns("m10", 2)
            assert.deepStrictEqual(
              snapshot.messages.map((m) => [m.role, m.text]),
              [
                ["user", "one"],
                ["assistant", "First answer."],
                ["user", "two"],
                ["assistant", "Second answer."]
              ]
            )
            assert.strictEqual(kit.player.calls().length, 2)
            assert.isFalse(yield* client.sendUserMessage("m10", "   "), "a blank message is refused")
          })
        ),
      TIMEOUT
    )
  })
}
