import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, Wire } from "../../src/index.ts"
import {
  allEvents,
  awaitCount,
  awaitSnapshot,
  awaitTurns,
  bump,
  countingTools,
  type EngineFactory,
  type Kit,
  makeGate,
  sessionOn,
  startAndAwait
} from "../support.ts"

const userTexts = (request: Kit["requests"][number]) =>
  request.messages.flatMap((m) => (m.role === "user" ? [m.text] : []))

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const steerSuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine)

  describe("steering", () => {
    it.live("a steer during a model call applies at the next boundary: the requested tool never runs", () => {
      // the model call answers only after the steer committed
      const firstCall = makeGate()
      return withSession(
        {
          script: [{ toolCalls: [{ id: "r1", name: "get_weather", arguments: {} }] }, { text: "Steered answer." }],
          holds: { 0: firstCall },
          tools: countingTools
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-model", { initialMessage: "weather?" })
            yield* awaitCount(() => kit.requests.length, 1, "the model call")
            assert.isTrue(yield* client.steerUserMessage("s-model", { text: "no, the news" }))
            const during = yield* client.getSnapshot("s-model")
            assert.deepStrictEqual(
              during.steeredMessages.map((m) => m.message.text),
              ["no, the news"]
            )
            yield* firstCall.open
            const done = yield* awaitTurns("s-model", 2)
            assert.strictEqual(kit.count("get_weather"), 0, "the call was abandoned before it started")
            assert.strictEqual(done.steeredMessages.length, 0)
            // Stepwise keeps the steered turn's exact transcript instead of the steered note
            assert.deepStrictEqual(
              done.messages.map((m) => [m.turnId, m.role, m.text ?? m.toolOutput]),
              [
                ["turn-1", "user", "weather?"],
                ["turn-1", "assistant", null],
                ["turn-1", "tool", Wire.STEERED_REJECTION_MESSAGE],
                ["turn-2", "user", "no, the news"],
                ["turn-2", "assistant", "Steered answer."]
              ]
            )
            assert.isFalse(done.messages.some((m) => m.text?.startsWith(Wire.TURN_STEERED_NOTE_HEADER) === true))
            const events = yield* allEvents("s-model")
            const steered = events.find((e) => e.event.type === "turn_steered")!.event
            assert.deepStrictEqual(steered.payload, { steeredMessageCount: 1, messageCount: 2 })
            assert.isFalse(events.some((e) => e.event.type === "tool_call_started"))
            assert.deepStrictEqual(userTexts(kit.requests[1]!).slice(-1), ["no, the news"])
          })
      )
    })

    it.live("a steer while an approval waits abandons it, never the started call, and starts the next turn", () =>
      withSession(
        {
          script: [
            {
              toolCalls: [
                { id: "w1", name: "send_email", arguments: { to: "ann" } },
                { id: "s1", name: "slow_read", arguments: {} }
              ]
            },
            { text: "Answer to the steer." }
          ],
          tools: countingTools
        },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait(
              "s-wait",
              "email ann",
              (s) => s.pendingInterrupts.length === 1,
              "the approval"
            )
            yield* awaitCount(() => kit.count("slow_read:started"), 1, "the slow tool")
            assert.isTrue(yield* client.steerUserMessage("s-wait", { text: "forget the email" }))
            const abandoned = yield* awaitSnapshot(
              "s-wait",
              (s) => s.toolCalls.some((c) => c.toolCallId === "w1" && c.status === "rejected"),
              "the abandoned approval"
            )
            const w1 = abandoned.toolCalls.find((c) => c.toolCallId === "w1")!
            assert.strictEqual(w1.cancellationReason, "steered")
            assert.strictEqual(w1.rejectionMessage, Wire.STEERED_REJECTION_MESSAGE)
            assert.strictEqual(abandoned.toolCalls.find((c) => c.toolCallId === "s1")!.status, "approved")
            assert.deepStrictEqual(abandoned.pendingInterrupts, [])
            assert.isFalse(yield* client.resolveInterrupt("s-wait", { interruptId: "w1", approved: true }))
            bump(kit, "release")
            const done = yield* awaitTurns("s-wait", 2)
            assert.strictEqual(kit.count("send_email"), 0)
            assert.strictEqual(kit.count("slow_read"), 1, "the started call ran to its end")
            const results = Object.fromEntries(
              done.messages.flatMap((m) => (m.role === "tool" ? [[m.toolCallId, m.toolOutput] as const] : []))
            )
            assert.deepStrictEqual(results, { w1: Wire.STEERED_REJECTION_MESSAGE, s1: "slow result" })
            assert.deepStrictEqual(
              done.messages.slice(-2).map((m) => [m.turnId, m.text]),
              [
                ["turn-2", "forget the email"],
                ["turn-2", "Answer to the steer."]
              ]
            )
            const events = yield* allEvents("s-wait")
            const resolved = events.find((e) => e.event.type === "interrupt_resolved")!.event
            assert.deepStrictEqual(resolved.payload, {
              interruptId: "w1",
              approved: false,
              rejectionMessage: Wire.STEERED_REJECTION_MESSAGE,
              kind: "tool_approval",
              answered: false,
              cancellationReason: "steered"
            })
            assert.strictEqual(kit.requests.length, 2, "the steered turn made no model call")
          })
      )
    )

    it.live("queued messages show their IDs, steer by ID keeps order, delete_queued_message removes one", () => {
      // the model call answers only after the test's requests
      const firstCall = makeGate()
      return withSession({ script: [{ text: "First." }, { text: "Second." }], holds: { 0: firstCall } }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-ids", { initialMessage: "one" })
          yield* awaitCount(() => kit.requests.length, 1, "the model call")
          assert.isTrue(yield* client.sendUserMessage("s-ids", "two"))
          assert.isTrue(yield* client.sendUserMessage("s-ids", "three"))
          const queued = (yield* client.getSnapshot("s-ids")).queuedMessages
          assert.deepStrictEqual(
            queued.map((m) => m.message.text),
            ["two", "three"]
          )
          assert.notStrictEqual(queued[0]!.messageId, queued[1]!.messageId)
          // refused requests change nothing
          assert.isFalse(yield* client.steerUserMessage("s-ids", { text: "   " }))
          assert.isFalse(yield* client.steerUserMessage("s-ids", { messageId: "no-such-id" }))
          assert.isTrue(yield* client.steerUserMessage("s-ids", { messageId: queued[1]!.messageId }))
          assert.isTrue(yield* client.steerUserMessage("s-ids", { text: "four" }))
          const during = yield* client.getSnapshot("s-ids")
          assert.deepStrictEqual(
            during.queuedMessages.map((m) => m.message.text),
            ["two"]
          )
          assert.deepStrictEqual(
            during.steeredMessages.map((m) => m.message.text),
            ["three", "four"]
          )
          assert.isTrue(during.steeredMessages.every((m) => m.messageId.length > 0))
          assert.isTrue(yield* client.deleteQueuedMessage("s-ids", queued[0]!.messageId))
          assert.isFalse(yield* client.deleteQueuedMessage("s-ids", queued[0]!.messageId), "already deleted")
          yield* firstCall.open
          const done = yield* awaitTurns("s-ids", 2)
          // a final answer committed during the steer: turn 1 completes, and the steered messages start turn 2
          assert.deepStrictEqual(
            done.messages.map((m) => [m.turnId, m.text]),
            [
              ["turn-1", "one"],
              ["turn-1", "First."],
              ["turn-2", "three"],
              ["turn-2", "four"],
              ["turn-2", "Second."]
            ]
          )
          assert.strictEqual(done.queuedMessageCount, 0)
          assert.deepStrictEqual(userTexts(kit.requests[1]!).slice(-2), ["three", "four"])
          const types = (yield* allEvents("s-ids")).map((e) => e.event.type)
          assert.deepStrictEqual(
            types.filter((t) => t.startsWith("turn_")),
            ["turn_started", "turn_completed", "turn_started", "turn_completed"]
          )
        })
      )
    })

    it.live("without an active turn a steer is queued like a message", () =>
      withSession({ script: [{ text: "Hello." }] }, () =>
        Effect.gen(function* () {
          const { client } = yield* startAndAwait("s-idle", undefined, (s) => s.state !== null, "the session start")
          assert.isTrue(yield* client.steerUserMessage("s-idle", { text: "hi" }))
          const done = yield* awaitTurns("s-idle", 1)
          assert.deepStrictEqual(
            done.messages.map((m) => m.text),
            ["hi", "Hello."]
          )
        })
      )
    )
  })
}
