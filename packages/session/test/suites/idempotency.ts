// Lost-ack-safe requests: sendUserMessage, resolveInterrupt, answerQuestion, steerUserMessage and cancelTurn with a
// client idempotency key (`requestId`). A repeat with the same key returns the first call's result and commits
// nothing; the same key with other arguments fails with IdempotencyKeyReused. The retry after a SIGKILL of the
// worker between the commit and the reply is in test/idempotency-kill.test.ts.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient } from "../../src/index.ts"
import {
  awaitCount,
  awaitSnapshot,
  awaitTurns,
  countingTools,
  type EngineFactory,
  makeGate,
  sessionOn,
  startAndAwait,
  stepExecutions
} from "../support.ts"

/** The error tag of a failed call, or "ok". */
const tagOf = <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.match(effect, { onFailure: (e) => e._tag, onSuccess: () => "ok" })

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const idempotencySuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine)

  describe("idempotency keys (requestId)", () => {
    it.live("sendUserMessage: a repeat with the key queues no second message; another text under it is refused", () =>
      withSession({ script: [{ text: "First." }, { text: "Second." }, { text: "Third." }] }, (kit) =>
        Effect.gen(function* () {
          const { client } = yield* startAndAwait("s-send", undefined, (s) => s.state !== null, "the session start")
          assert.isTrue(yield* client.sendUserMessage("s-send", "hello", { requestId: "k-1" }))
          assert.isTrue(yield* client.sendUserMessage("s-send", "hello", { requestId: "k-1" }), "the stored reply")
          yield* awaitTurns("s-send", 1)
          // after the turn ended too: still the first call's reply, still no second turn
          assert.isTrue(yield* client.sendUserMessage("s-send", "hello", { requestId: "k-1" }))
          assert.strictEqual(
            yield* tagOf(client.sendUserMessage("s-send", "hello again", { requestId: "k-1" })),
            "IdempotencyKeyReused"
          )
          assert.strictEqual(
            yield* tagOf(client.sendUserMessage("s-send", { text: "hello", planMode: true }, { requestId: "k-1" })),
            "IdempotencyKeyReused",
            "plan mode is part of the arguments"
          )
          assert.strictEqual(
            yield* tagOf(client.steerUserMessage("s-send", { text: "hello" }, { requestId: "k-1" })),
            "IdempotencyKeyReused",
            "another RPC under the same key"
          )
          // a new key is a new request; an unkeyed call is never deduplicated
          assert.isTrue(yield* client.sendUserMessage("s-send", "hello", { requestId: "k-2" }))
          yield* awaitTurns("s-send", 2)
          assert.isTrue(yield* client.sendUserMessage("s-send", "hello"))
          const done = yield* awaitTurns("s-send", 3)
          assert.deepStrictEqual(
            done.messages.map((m) => [m.role, m.text]),
            [
              ["user", "hello"],
              ["assistant", "First."],
              ["user", "hello"],
              ["assistant", "Second."],
              ["user", "hello"],
              ["assistant", "Third."]
            ]
          )
          assert.strictEqual(kit.requests.length, 3, "one model call per accepted message")
          // keys are scoped to their session: the same key starts over on another one
          yield* client.startSession("s-send-2")
          yield* awaitSnapshot("s-send-2", (s) => s.state !== null, "the second session start")
          assert.isTrue(yield* client.sendUserMessage("s-send-2", "other text", { requestId: "k-1" }))
          // the longest key (200 characters) works like any other
          const long = "k".repeat(200)
          assert.isTrue(yield* client.sendUserMessage("s-send-2", "long", { requestId: long }))
          assert.isTrue(yield* client.sendUserMessage("s-send-2", "long", { requestId: long }))
          // a refused message (blank) is a stored reply too: the retry says false again
          assert.isFalse(yield* client.sendUserMessage("s-send", "   ", { requestId: "k-blank" }))
          assert.isFalse(yield* client.sendUserMessage("s-send", "   ", { requestId: "k-blank" }))
          assert.strictEqual(yield* tagOf(client.sendUserMessage("s-send", "x", { requestId: "" })), "InvalidInput")
          assert.strictEqual(
            yield* tagOf(client.sendUserMessage("s-send", "x", { requestId: "k".repeat(201) })),
            "InvalidInput"
          )
        })
      )
    )

    it.live("resolveInterrupt: the repeat returns true again and the write runs once", () =>
      withSession(
        {
          script: [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "ann" } }] }, { text: "Sent." }],
          tools: countingTools
        },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait(
              "s-approve",
              "email ann",
              (s) => s.pendingInterrupts.length > 0,
              "the approval"
            )
            const approve = client.resolveInterrupt(
              "s-approve",
              { interruptId: "w1", approved: true },
              { requestId: "approve-w1" }
            )
            assert.isTrue(yield* approve)
            assert.isTrue(yield* approve, "not false: the first call's result")
            assert.strictEqual(
              yield* tagOf(
                client.resolveInterrupt(
                  "s-approve",
                  { interruptId: "w1", approved: false },
                  { requestId: "approve-w1" }
                )
              ),
              "IdempotencyKeyReused"
            )
            // without a key the repeat is a new request, which finds nothing pending
            assert.isFalse(yield* client.resolveInterrupt("s-approve", { interruptId: "w1", approved: true }))
            yield* awaitTurns("s-approve", 1)
            assert.isTrue(yield* approve)
            assert.strictEqual(kit.count("send_email"), 1)
          })
      )
    )

    it.live("answerQuestion: the repeat returns true again and the question is answered once", () =>
      withSession(
        {
          script: [
            { toolCalls: [{ id: "q1", name: "ask_user", arguments: { question: "Which city?" } }] },
            { text: "Noted." }
          ],
          flow: { builtInTools: ["ask_user"] }
        },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait(
              "s-answer",
              "ask me",
              (s) => s.pendingInterrupts.some((i) => i.kind === "question"),
              "the question"
            )
            const interruptId = (yield* client.getSnapshot("s-answer")).pendingInterrupts[0]!.interruptId
            const answer = client.answerQuestion("s-answer", { interruptId, answer: "Paris" }, { requestId: "a-1" })
            assert.isTrue(yield* answer)
            assert.isTrue(yield* answer)
            assert.strictEqual(
              yield* tagOf(client.answerQuestion("s-answer", { interruptId, answer: "Rome" }, { requestId: "a-1" })),
              "IdempotencyKeyReused"
            )
            yield* awaitTurns("s-answer", 1)
            assert.isTrue(yield* answer)
            assert.strictEqual(kit.requests.length, 2, "the model saw one answer")
            const steps = yield* stepExecutions("s-answer")
            assert.strictEqual(steps.filter((s) => s.stepType === "RunModel").length, 2)
          })
      )
    )

    it.live("steerUserMessage and cancelTurn: repeats return the first result and publish nothing again", () => {
      const firstCall = makeGate()
      return withSession(
        {
          script: [{ text: "never kept" }, { text: "Steered." }, { text: "later", delay: "10 minutes" }],
          holds: { 0: firstCall },
          tools: countingTools
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-steer", { initialMessage: "first" })
            yield* awaitCount(() => kit.requests.length, 1, "the model call")
            const steer = client.steerUserMessage("s-steer", { text: "instead" }, { requestId: "steer-1" })
            assert.isTrue(yield* steer)
            assert.isTrue(yield* steer)
            const during = yield* client.getSnapshot("s-steer")
            assert.deepStrictEqual(
              during.steeredMessages.map((m) => m.message.text),
              ["instead"],
              "one steered message"
            )
            yield* firstCall.open
            yield* awaitTurns("s-steer", 2)
            assert.isTrue(yield* steer, "after the turn: the stored reply, no new steer")
            yield* awaitTurns("s-steer", 2)
            // cancel_turn: the repeat answers true, not false for "no active turn"
            assert.isTrue(yield* client.sendUserMessage("s-steer", "third"))
            yield* awaitCount(() => kit.requests.length, 3, "the third model call")
            const cancel = client.cancelTurn("s-steer", { requestId: "cancel-1" })
            assert.isTrue(yield* cancel)
            yield* awaitTurns("s-steer", 3)
            assert.isTrue(yield* cancel)
            assert.strictEqual(
              yield* tagOf(client.cancelTurn("s-steer", { turnId: "turn-3", requestId: "cancel-1" })),
              "IdempotencyKeyReused"
            )
            assert.isFalse(yield* client.cancelTurn("s-steer"), "unkeyed: no active turn")
            const steps = yield* stepExecutions("s-steer")
            assert.strictEqual(steps.filter((s) => s.stepType === "FinishTurnCancellation").length, 1)
          })
      )
    })
  })
}
