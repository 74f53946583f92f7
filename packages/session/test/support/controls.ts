// Turn controls and built-in tools as every framework runner must handle them, checked the same way for
// each: cancel_turn during a running model call, ask_user answered through answerQuestion, durable_wait
// ended by SkipTimer. A runner's test supplies a ModelProbe over its scripted model and its session's
// scripts; these checks drive the session's RPCs on a real engine.
import { Client } from "@durable-agent/engine"
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { AgentSessionClient } from "../../src/index.ts"
import { allEvents, awaitSnapshot, awaitTurns, eventually, stepShape } from "../support.ts"

/** What a runner's test can read off its scripted model. */
export interface ModelProbe {
  /** How many model calls were made. */
  readonly calls: () => number
  /** The indexes of the calls that saw their abort signal fire. */
  readonly aborted: () => ReadonlyArray<number>
  /** The tool names the call at `index` was offered. */
  readonly offeredTools: (index: number) => ReadonlyArray<string>
  /** The tool results, by tool call ID, in the prompt of the call at `index`. */
  readonly toolResults: (index: number) => Readonly<Record<string, string>>
}

/** The scripted turn for {@link cancelRunningModelCall}: a call that never answers, then `Second answer.` */
export const CANCEL_SECOND_ANSWER = "Second answer."

/** The ask_user call the model makes in {@link askUserRound}, and its final answer after the tool result. */
export const ASK_USER_CALL = {
  id: "q1",
  name: "ask_user",
  arguments: { question: "Which city?", choices: ["Paris", "Rome"], allows_free_text: false }
} as const
export const ASK_USER_ANSWER = "Paris it is."

/** The durable_wait call the model makes in {@link durableWaitRound}, and its final answer. */
export const DURABLE_WAIT_CALL = {
  id: "w1",
  name: "durable_wait",
  arguments: { seconds: 3600, reason: "cool down" }
} as const
export const DURABLE_WAIT_ANSWER = "Done waiting."

/** The Step execution ID of the session's waiting AwaitTimer. */
export const waitingTimer = (sessionId: string) =>
  Effect.gen(function* () {
    const engine = yield* Client.Client
    const steps = yield* engine.stepExecutions(sessionId).pipe(
      Effect.repeat({
        schedule: Schedule.spaced("30 millis"),
        until: (steps) => steps.some((s) => s.stepType === "AwaitTimer" && s.status === "waiting")
      })
    )
    return steps.find((s) => s.stepType === "AwaitTimer" && s.status === "waiting")!.stepExecutionId
  })

/**
 * cancel_turn while the first model call runs (it never answers on its own): the call sees its abort, the
 * turn ends cancelled with one turn_cancelled event and no answer, and the next message gets
 * {@link CANCEL_SECOND_ANSWER} from a call that ran to its end.
 */
export const cancelRunningModelCall = (sessionId: string, model: ModelProbe) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    yield* client.startSession(sessionId, { initialMessage: "think hard" })
    yield* eventually(Effect.sync(model.calls), (n) => n === 1, "the model call")
    assert.deepStrictEqual(model.aborted(), [])
    // the scripted call waits ten minutes: a turn that ends at all shows the call was given up
    assert.isTrue(yield* client.cancelTurn(sessionId))
    const done = yield* awaitTurns(sessionId, 1)
    yield* eventually(Effect.sync(model.aborted), (aborted) => aborted.length === 1, "the model to see the abort")
    assert.deepStrictEqual(model.aborted(), [0])
    assert.strictEqual(done.state?.lastTurnError, null)
    assert.deepStrictEqual(
      done.messages.map((m) => [m.role, m.text]),
      [["user", "think hard"]]
    )
    const cancelled = (yield* allEvents(sessionId)).filter((e) => e.event.type === "turn_cancelled")
    assert.strictEqual(cancelled.length, 1)
    assert.strictEqual(cancelled[0]!.event.turnId, "turn-1")
    assert.deepStrictEqual(yield* stepShape(sessionId), [
      "StartAgentSession",
      "RunModel",
      "FinishTurnCancellation",
      "ApplyTurnControl",
      "AwaitUserMessage"
    ])
    // the session stays open
    assert.isTrue(yield* client.sendUserMessage(sessionId, "again"))
    const next = yield* awaitTurns(sessionId, 2)
    assert.strictEqual(next.messages.at(-1)?.text, CANCEL_SECOND_ANSWER)
    assert.strictEqual(model.calls(), 2)
    assert.deepStrictEqual(model.aborted(), [0], "the second call ran to its end")
  })

/**
 * The model calls {@link ASK_USER_CALL}: the question is pending as an interrupt, answerQuestion resumes the
 * turn with no extra model call, and the next call sees the answer as the tool result. Returns the tools
 * the first call was offered.
 */
export const askUserRound = (sessionId: string, model: ModelProbe) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    yield* client.startSession(sessionId, { initialMessage: "plan a trip" })
    const waiting = yield* awaitSnapshot(sessionId, (s) => s.pendingInterrupts.length === 1, "the question")
    const interrupt = waiting.pendingInterrupts[0]!
    assert.deepStrictEqual(
      [interrupt.interruptId, interrupt.kind, interrupt.question, interrupt.choices],
      ["q1", "question", "Which city?", ["Paris", "Rome"]]
    )
    assert.strictEqual(waiting.toolCalls[0]!.status, "awaiting_answer")
    assert.isTrue(yield* client.answerQuestion(sessionId, { interruptId: "q1", answer: "Paris" }))
    const done = yield* awaitTurns(sessionId, 1)
    assert.deepStrictEqual(model.toolResults(1), { q1: '{"status":"answered","answer":"Paris"}' })
    assert.strictEqual(done.messages.at(-1)?.text, ASK_USER_ANSWER)
    assert.deepStrictEqual(yield* stepShape(sessionId), [
      "StartAgentSession",
      "RunModel",
      "AwaitQuestionAnswer",
      "ResumeTurn",
      "RunModel",
      "AwaitUserMessage"
    ])
    assert.strictEqual(model.calls(), 2)
    return model.offeredTools(0)
  })

/**
 * The model calls {@link DURABLE_WAIT_CALL} in a session that enabled durable_wait only: the call waits on a
 * durable timer, SkipTimer ends it, and the next call sees the completed wait. ask_user, not enabled, is
 * not offered.
 */
export const durableWaitRound = (sessionId: string, model: ModelProbe) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const engine = yield* Client.Client
    yield* client.startSession(sessionId, { initialMessage: "wait an hour" })
    yield* awaitSnapshot(sessionId, (s) => s.toolCalls.some((c) => c.status === "waiting_for_timer"), "the wait")
    assert.include(model.offeredTools(0), "durable_wait")
    assert.notInclude(model.offeredTools(0), "ask_user", "a built-in the session did not enable is not offered")
    const timer = yield* waitingTimer(sessionId)
    assert.isTrue(yield* engine.skipTimer(sessionId, timer, 0))
    const done = yield* awaitTurns(sessionId, 1)
    const result = JSON.parse(model.toolResults(1).w1!) as { status: string; waited_seconds: number; reason: string }
    assert.strictEqual(result.status, "completed")
    assert.strictEqual(result.reason, "cool down")
    assert.isBelow(result.waited_seconds, 3600)
    assert.strictEqual(done.messages.at(-1)?.text, DURABLE_WAIT_ANSWER)
    assert.deepStrictEqual(yield* stepShape(sessionId), [
      "StartAgentSession",
      "RunModel",
      "AwaitTimer",
      "ResumeTurn",
      "RunModel",
      "AwaitUserMessage"
    ])
  })
