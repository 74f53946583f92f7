import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, type ModelClient, Wire } from "../../src/index.ts"
import {
  allEvents,
  awaitCount,
  awaitSnapshot,
  awaitTurns,
  bump,
  countingTools,
  type EngineFactory,
  eventually,
  lastUserText,
  sessionOn,
  startAndAwait,
  stepExecutions
} from "../support.ts"

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const cancelSuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine)

  describe("cancel_turn", () => {
    it.live("cancels a running model call through its abort signal; the session stays open", () =>
      withSession({ script: [{ text: "never seen", delay: "10 minutes" }, { text: "Second answer." }] }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-model", { initialMessage: "think hard" })
          yield* awaitCount(() => kit.requests.length, 1, "the model call")
          const signal = kit.requests[0]!.cancellationSignal
          assert.isDefined(signal)
          assert.isFalse(signal!.aborted)
          // a turn ID that is not the active turn is refused
          assert.isFalse(yield* client.cancelTurn("s-model", { turnId: "turn-7" }))
          // the call hangs for ten minutes: returning at all shows cancel_turn does not wait for it
          assert.isTrue(yield* client.cancelTurn("s-model", { turnId: "turn-1" }))
          const done = yield* awaitTurns("s-model", 1)
          yield* eventually(
            Effect.sync(() => signal!.aborted),
            (aborted) => aborted,
            "the abort signal"
          )
          assert.strictEqual(done.state?.lastTurnError, null)
          assert.strictEqual(done.state?.acceptsTurnControl, false)
          assert.deepStrictEqual(
            done.messages.map((m) => [m.role, m.text]),
            [["user", "think hard"]]
          )
          const steps = yield* stepExecutions("s-model")
          assert.strictEqual(steps.find((s) => s.stepType === "RunModel")!.status, "cancelled")
          assert.deepStrictEqual(
            steps.map((s) => s.stepType),
            ["StartAgentSession", "RunModel", "FinishTurnCancellation", "ApplyTurnControl", "AwaitUserMessage"]
          )
          const events = yield* allEvents("s-model")
          const cancelled = events.filter((e) => e.event.type === "turn_cancelled")
          assert.strictEqual(cancelled.length, 1)
          assert.deepStrictEqual(cancelled[0]!.event.payload, { messageCount: 0 })
          assert.strictEqual(cancelled[0]!.event.turnId, "turn-1")
          assert.isFalse(
            events.some((e) => e.event.type === "usage_recorded"),
            "the dropped call records no usage"
          )
          assert.isFalse(yield* client.cancelTurn("s-model"), "no active turn")
          // the session ends only by an explicit stop: the next message gets an answer
          assert.isTrue(yield* client.sendUserMessage("s-model", "again"))
          const next = yield* awaitTurns("s-model", 2)
          assert.strictEqual(next.messages.at(-1)?.text, "Second answer.")
          assert.strictEqual(lastUserText(kit.requests[1]!), "again")
        })
      )
    )

    it.live("records every waiting call, keeps the finished ones, and leaves the cancelled note", () =>
      withSession(
        {
          script: [
            {
              toolCalls: [
                { id: "w1", name: "send_email", arguments: { to: "ann" } },
                { id: "r1", name: "get_weather", arguments: {} }
              ]
            },
            { text: "Next turn." }
          ],
          tools: countingTools
        },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait(
              "s-wait",
              "email ann",
              (s) => s.pendingInterrupts.length === 1 && s.toolCalls.some((c) => c.status === "succeeded"),
              "the approval and the read"
            )
            assert.isTrue(yield* client.cancelTurn("s-wait"))
            const done = yield* awaitTurns("s-wait", 1)
            assert.strictEqual(kit.count("send_email"), 0)
            assert.deepStrictEqual(done.pendingInterrupts, [])
            assert.deepStrictEqual(done.toolCalls, [])
            assert.isFalse(yield* client.resolveInterrupt("s-wait", { interruptId: "w1", approved: true }))
            // Stepwise keeps the turn's exact transcript instead of the cancelled note: a result for every call
            assert.deepStrictEqual(
              done.messages.map((m) => [m.role, m.toolCallId, m.text ?? m.toolOutput]),
              [
                ["user", null, "email ann"],
                ["assistant", "w1", null],
                ["assistant", "r1", null],
                ["tool", "w1", Wire.TURN_CANCELLED_REJECTION_MESSAGE],
                ["tool", "r1", "sunny"]
              ]
            )
            assert.isFalse(done.messages.some((m) => m.text?.startsWith(Wire.TURN_CANCELLED_NOTE_HEADER) === true))
            const events = yield* allEvents("s-wait")
            const resolved = events.find((e) => e.event.type === "interrupt_resolved")!.event
            assert.deepStrictEqual(resolved.payload, {
              interruptId: "w1",
              approved: false,
              rejectionMessage: Wire.TURN_CANCELLED_REJECTION_MESSAGE,
              kind: "tool_approval",
              answered: false,
              cancellationReason: "turn_cancelled"
            })
            assert.deepStrictEqual(
              events
                .filter((e) => e.event.type === "tool_call_finished")
                .map((e) => e.event.payload as { toolCallId: string; status: string })
                .map((p) => [p.toolCallId, p.status])
                .sort(),
              [
                ["r1", "succeeded"],
                ["w1", "rejected"]
              ]
            )
            assert.deepStrictEqual(
              events.find((e) => e.event.type === "turn_cancelled")!.event.payload,
              { messageCount: 4 },
              "the two calls and their results are the messages the cancelled turn appended"
            )
            assert.strictEqual(kit.requests.length, 1, "no model call after the cancel")
            assert.isTrue(yield* client.sendUserMessage("s-wait", "and now?"))
            yield* awaitTurns("s-wait", 2)
            const seen = kit.requests[1]!.messages.map((m) => (m.role === "tool" ? m.output : m.role))
            assert.deepStrictEqual(seen.slice(-4), [
              "assistant",
              Wire.TURN_CANCELLED_REJECTION_MESSAGE,
              "sunny",
              "user"
            ])
          })
      )
    )

    it.live("never cancels a started tool call: it runs to its end, then the turn ends cancelled", () =>
      withSession(
        {
          script: [{ toolCalls: [{ id: "s1", name: "slow_read", arguments: {} }] }, { text: "unused" }],
          tools: countingTools
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-tool", { initialMessage: "read slowly" })
            yield* awaitCount(() => kit.count("slow_read:started"), 1, "the tool start")
            assert.isTrue(yield* client.cancelTurn("s-tool"))
            assert.isTrue(yield* client.cancelTurn("s-tool"), "true and no change when already cancelled")
            assert.strictEqual((yield* client.getSnapshot("s-tool")).state?.activeTurnId, "turn-1")
            bump(kit, "release")
            const done = yield* awaitTurns("s-tool", 1)
            assert.strictEqual(kit.count("slow_read"), 1, "the started call finished")
            assert.strictEqual(kit.requests.length, 1, "no model call after the cancel")
            assert.deepStrictEqual(
              [done.messages.at(-1)!.role, done.messages.at(-1)!.toolOutput],
              ["tool", "slow result"]
            )
            const steps = yield* stepExecutions("s-tool")
            assert.strictEqual(steps.find((s) => s.stepType === "CallTool")!.status, "completed")
            const types = (yield* allEvents("s-tool")).map((e) => e.event.type)
            assert.deepStrictEqual(types.slice(-2), ["tool_call_finished", "turn_cancelled"])
          })
      )
    )

    it.live("a final answer committed before cancel_turn wins", () =>
      withSession({ script: [{ text: "Quick." }, { text: "Also quick." }] }, () =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-win", { initialMessage: "hi" })
          yield* awaitTurns("s-win", 1)
          assert.isFalse(yield* client.cancelTurn("s-win", { turnId: "turn-1" }))
          // a race: whichever commits first decides, and the events agree with the stored turn
          assert.isTrue(yield* client.sendUserMessage("s-win", "again"))
          yield* awaitSnapshot("s-win", (s) => s.state?.activeTurnId === "turn-2" || s.state?.turnCount === 2)
          const accepted = yield* client.cancelTurn("s-win", { turnId: "turn-2" })
          const done = yield* awaitTurns("s-win", 2)
          // a RunModel attempt that cancel_turn interrupted after it wrote turn_completed leaves that event
          // behind; the later turn_cancelled of the same turn supersedes it (the last turn end counts)
          const settled = Wire.settleEvents((yield* allEvents("s-win")).map((e) => e.event))
          const ends = settled.map((e) => e.type).filter((t) => t === "turn_completed" || t === "turn_cancelled")
          if (accepted) {
            assert.deepStrictEqual(ends, ["turn_completed", "turn_cancelled"])
            assert.deepStrictEqual(
              done.messages.map((m) => m.text),
              ["hi", "Quick.", "again"]
            )
          } else {
            assert.deepStrictEqual(ends, ["turn_completed", "turn_completed"])
            assert.deepStrictEqual(
              done.messages.map((m) => m.text),
              ["hi", "Quick.", "again", "Also quick."]
            )
          }
        })
      )
    )

    it.live("approve a write, then cancel at once: it ran 0 or 1 times and its record says which", () =>
      withSession(
        {
          // by the request, not by position: a turn whose cancel lost the race makes a second model call
          script: Array.from({ length: 6 }, () => (request: ModelClient.ModelRequest) => {
            const last = request.messages.at(-1)
            return last?.role === "tool"
              ? { text: "Sent." }
              : { toolCalls: [{ id: "w1", name: "send_email", arguments: { to: lastUserText(request)!.slice(6) } }] }
          }),
          tools: countingTools
        },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait("s-race", undefined, (s) => s.state !== null, "the session start")
            for (const [i, to] of ["a", "b", "c"].entries()) {
              const before = kit.count("send_email")
              assert.isTrue(yield* client.sendUserMessage("s-race", `email ${to}`))
              yield* awaitSnapshot("s-race", (s) => s.pendingInterrupts.length === 1, "the approval")
              assert.isTrue(yield* client.resolveInterrupt("s-race", { interruptId: "w1", approved: true }))
              // false only when the turn ended first: the write ran and its answer committed before the cancel
              const accepted = yield* client.cancelTurn("s-race")
              const done = yield* awaitTurns("s-race", i + 1)
              const ran = kit.count("send_email") - before
              assert.include([0, 1], ran)
              const turnEvents = (yield* allEvents("s-race")).filter((e) => e.event.turnId === `turn-${i + 1}`)
              const finished = turnEvents.filter((e) => e.event.type === "tool_call_finished")
              assert.strictEqual(finished.length, 1, "the record became final once")
              const status = (finished[0]!.event.payload as { status: string }).status
              const started = turnEvents.some((e) => e.event.type === "tool_call_started")
              const last = done.messages.at(-1)!
              const lastText = last.role === "tool" ? last.toolOutput : last.text
              if (ran === 1) {
                assert.strictEqual(status, "succeeded")
                assert.isTrue(started)
                assert.strictEqual(lastText, accepted ? `sent to ${to}` : "Sent.")
              } else {
                assert.strictEqual(status, "rejected")
                assert.isFalse(started, "cancelled before tool_call_started")
                assert.strictEqual(lastText, Wire.TURN_CANCELLED_REJECTION_MESSAGE)
              }
              if (accepted) {
                assert.isTrue(turnEvents.some((e) => e.event.type === "turn_cancelled"))
              } else {
                assert.strictEqual(ran, 1)
                assert.isTrue(turnEvents.some((e) => e.event.type === "turn_completed"))
              }
            }
          })
      )
    )
  })
}
