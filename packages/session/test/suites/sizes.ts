// Size rules (docs/session-contract.md, "Size rules"): values around the engine's maxValueBytes, for tool
// outputs, user messages, model text and the framework run state. A size error fails a call or a turn, never
// the session, except for a run state that cannot be stored, which ends the session as the contract says; the
// events agree with the records.
import { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, Persistence, ToolSource, Wire } from "../../src/index.ts"
import {
  allEvents,
  awaitTurns,
  bump,
  type EngineFactory,
  FLOW_TYPE,
  sessionOn,
  stepExecutions,
  toolResults
} from "../support.ts"

const LIMIT = 64 * 1024
const SIZES = [
  ["limit - 1 KiB", LIMIT - 1024],
  ["the limit", LIMIT],
  ["limit + 1", LIMIT + 1]
] as const

/** The events that state an outcome, as [type, subject, payload status or error]. */
const outcomes = (events: ReadonlyArray<AgentSessionClient.AgentSessionEvent>) =>
  events
    .map((e) => e.event)
    .filter((e) => e.type === "tool_call_finished" || e.type === "turn_completed" || e.type === "turn_failed")
    .map((e) => [e.type, e.turnId, (e.payload as { status?: string }).status ?? null] as const)

/** A new message after the size error gets an answer. */
const stillAnswers = (sessionId: string, turns: number, answer: string) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    assert.isTrue(yield* client.sendUserMessage(sessionId, "are you there?"))
    const next = yield* awaitTurns(sessionId, turns + 1)
    assert.strictEqual(next.state?.lastTurnError, null)
    assert.strictEqual(next.messages[next.messages.length - 1]!.text, answer)
  })

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const sizesSuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine, { maxValueBytes: LIMIT })

  describe(`values around maxValueBytes (${LIMIT} bytes)`, () => {
    it.live("a user message that fits the queue but not a stored message fails its turn, not the session", () =>
      withSession({ script: [{ text: "Yes." }] }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-queue", {})
          assert.isTrue(yield* client.sendUserMessage("s-queue", "q".repeat(LIMIT - 100)))
          const failed = yield* awaitTurns("s-queue", 1)
          assert.isTrue(failed.state?.lastTurnError?.startsWith("ValueTooLarge: Value AgentMessages["))
          assert.deepStrictEqual(failed.messages, [], "nothing of the message was stored")
          assert.strictEqual(kit.requests.length, 0, "no model call")
          assert.deepStrictEqual(outcomes(yield* allEvents("s-queue")), [["turn_failed", "turn-1", null]])
          yield* stillAnswers("s-queue", 1, "Yes.")
        })
      )
    )

    for (const [label, size] of SIZES) {
      it.live(`a tool output of ${label}`, () =>
        withSession(
          {
            script: [{ toolCalls: [{ id: "big", name: "huge", arguments: {} }] }, { text: "Done." }, { text: "Yes." }],
            tools: (kit) => [
              ToolSource.tool({
                name: "huge",
                description: "Returns a lot.",
                effect: "read",
                handler: () =>
                  Effect.sync(() => {
                    bump(kit, "huge")
                    return "x".repeat(size)
                  })
              })
            ]
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("s-out", { initialMessage: "go" })
              const done = yield* awaitTurns("s-out", 1)
              assert.strictEqual(done.state?.status, "waiting_for_user_message")
              assert.strictEqual(kit.count("huge"), 1, "the tool ran once")
              const seen = toolResults(kit.requests[1]!).big!
              const events = yield* allEvents("s-out")
              const call = (yield* stepExecutions("s-out")).find((s) => s.stepType === "CallTool")!
              assert.deepStrictEqual(
                call.attempts.map((a) => a.outcome),
                ["success"],
                "the tool Step commits: no failure route"
              )
              if (size < LIMIT) {
                assert.strictEqual(seen, "x".repeat(size))
                const stored = done.messages.find((m) => m.role === "tool")!
                assert.strictEqual(stored.toolOutput, "x".repeat(size))
                const page = yield* client.listMessages("s-out")
                const item = page.messages.find((m) => m.role === "tool")!.frameworkItem
                assert.isBelow(item.length, 200, "the output is stored once, in tool_output")
                assert.deepStrictEqual(outcomes(events), [
                  ["tool_call_finished", "turn-1", "succeeded"],
                  ["turn_completed", "turn-1", null]
                ])
              } else {
                assert.isTrue(seen.startsWith(`${Wire.TOOL_CALL_FAILED_PREFIX}ValueTooLarge: `), seen)
                assert.include(seen, "over the limit")
                // one tool_call_finished, and it says what the record says
                assert.deepStrictEqual(outcomes(events), [
                  ["tool_call_finished", "turn-1", "failed"],
                  ["turn_completed", "turn-1", null]
                ])
              }
              assert.deepStrictEqual(
                Wire.settleEvents(events.map((e) => e.event)),
                events.map((e) => e.event)
              )
              yield* stillAnswers("s-out", 1, "Yes.")
            })
        )
      )

      it.live(`a user message of ${label}`, () =>
        withSession({ script: [{ text: "Read it." }, { text: "Yes." }] }, (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-user", {})
            const sent = yield* Effect.result(client.sendUserMessage("s-user", "u".repeat(size)))
            if (size < LIMIT) {
              assert.isTrue(sent._tag === "Success" && sent.success)
              const done = yield* awaitTurns("s-user", 1)
              assert.strictEqual(done.messages[0]!.text, "u".repeat(size))
              assert.strictEqual(kit.requests.length, 1)
              yield* stillAnswers("s-user", 1, "Yes.")
            } else {
              // the message does not fit the queue: the RPC says so, and nothing of the session changed
              assert.strictEqual(sent._tag === "Failure" ? sent.failure._tag : sent._tag, "ValueTooLarge")
              yield* stillAnswers("s-user", 0, "Read it.")
            }
          })
        )
      )

      it.live(`model text of ${label}`, () =>
        withSession({ script: [{ text: "y".repeat(size) }, { text: "Yes." }] }, () =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-text", { initialMessage: "write" })
            const done = yield* awaitTurns("s-text", 1)
            const events = yield* allEvents("s-text")
            if (size < LIMIT) {
              assert.strictEqual(done.messages[1]!.text, "y".repeat(size))
              assert.deepStrictEqual(outcomes(events), [["turn_completed", "turn-1", null]])
            } else {
              assert.isTrue(done.state?.lastTurnError?.startsWith("ValueTooLarge: Value AgentMessages["))
              assert.deepStrictEqual(
                done.messages.map((m) => m.text),
                ["write"],
                "the answer was not stored"
              )
              // the turn failed, and no event says it completed
              assert.deepStrictEqual(outcomes(events), [["turn_failed", "turn-1", null]])
            }
            yield* stillAnswers("s-text", 1, "Yes.")
          })
        )
      )

      it.live(`a framework run state of ${label}`, () =>
        withSession(
          {
            // Stepwise keeps a tool-calling response's text in its run state until the turn ends
            script: [
              { text: "r".repeat(size - 120), toolCalls: [{ id: "c1", name: "noop", arguments: {} }] },
              { text: "Done." },
              { text: "Yes." }
            ],
            tools: () => [
              ToolSource.tool({
                name: "noop",
                description: "Nothing.",
                effect: "read",
                handler: () => Effect.succeed("ok")
              })
            ]
          },
          () =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              const engine = yield* Client.Client
              yield* client.startSession("s-run", { initialMessage: "go" })
              if (size < LIMIT) {
                const done = yield* awaitTurns("s-run", 1)
                assert.strictEqual(done.state?.lastTurnError, null)
                assert.strictEqual(done.messages[done.messages.length - 1]!.text, "Done.")
                yield* stillAnswers("s-run", 1, "Yes.")
              } else {
                // the contract ends the session on a run state that cannot be stored
                const ended = yield* engine.waitForFlow("s-run")
                assert.strictEqual(ended.status, "failed")
                const state = yield* engine.getAttribute("s-run", Persistence.AgentState)
                assert.strictEqual(state._tag, "Some")
                if (state._tag === "Some") {
                  assert.strictEqual(state.value.status, "failed")
                  assert.include(state.value.lastTurnError ?? "", "run state of")
                }
                const events = yield* allEvents("s-run")
                assert.deepStrictEqual(outcomes(events), [["turn_failed", "turn-1", null]])
                assert.strictEqual(FLOW_TYPE, client.flowType)
              }
            })
        )
      )
    }

    describe("the run budget (maxFlowStateBytes)", () => {
      it.live("a model call whose commit would grow the session past the run budget ends the session", () =>
        withSession(
          {
            maxFlowStateBytes: 20 * 1024,
            // Stepwise keeps a tool-calling response's text in its run state: 25 KB does not fit a 20 KB budget
            script: [{ text: "b".repeat(25 * 1024), toolCalls: [{ id: "c1", name: "noop", arguments: {} }] }],
            tools: () => [
              ToolSource.tool({
                name: "noop",
                description: "Nothing.",
                effect: "read",
                handler: () => Effect.succeed("ok")
              })
            ]
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              const engine = yield* Client.Client
              yield* client.startSession("s-budget", { initialMessage: "go" })
              const ended = yield* engine.waitForFlow("s-budget")
              assert.strictEqual(ended.status, "failed")
              assert.include(ended.reason ?? "", "run state of")
              const state = yield* engine.getAttribute("s-budget", Persistence.AgentState)
              assert.strictEqual(state._tag, "Some")
              if (state._tag === "Some") {
                assert.strictEqual(state.value.status, "failed")
                assert.include(state.value.lastTurnError ?? "", "run state of")
                assert.include(state.value.lastTurnError ?? "", "maxFlowStateBytes")
              }
              assert.strictEqual(kit.count("noop"), 0, "the tool the refused response asked for never ran")
              const runModel = (yield* stepExecutions("s-budget")).filter((s) => s.stepType === "RunModel")
              assert.strictEqual(runModel.length, 1)
              assert.strictEqual(runModel[0]!.attempts.length, 1, "not retried")
              assert.deepStrictEqual(outcomes(yield* allEvents("s-budget")), [["turn_failed", "turn-1", null]])
            })
        )
      )
    })
  })
}
