// The Mastra runner under turn controls and built-in tools, driven through the session's RPCs on the embedded
// engine: cancel_turn aborts a running model call through AgentTurnContext.cancellationSignal, and the
// session's built-ins (ask_user, durable_wait) are offered to the model as client tools and routed to their
// own Steps.
import { Client } from "@durable-agent/engine"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { allEvents, eventually } from "../../session/test/support.ts"
import {
  awaitSnapshot,
  awaitTurns,
  embeddedEngine,
  type Kit,
  prompt,
  stepShape,
  toolResultsIn,
  withMastraSession
} from "./support.ts"

/** The tool names the model call at `index` was offered. */
const offeredTools = (kit: Kit, index: number) => (kit.model.doStreamCalls[index]?.tools ?? []).map((t) => t.name)

/** The Step execution ID of the session's waiting AwaitTimer. */
const waitingTimer = (sessionId: string) =>
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

describe("Mastra runner: cancel_turn", () => {
  it.live("aborts the running model call; the turn ends cancelled and the next message gets an answer", () =>
    withMastraSession(
      [{ text: "never seen", delay: "10 minutes" }, { text: "Second answer." }],
      { engine: embeddedEngine },
      (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("c1", { initialMessage: "think hard" })
          yield* eventually(
            Effect.sync(() => kit.model.doStreamCalls.length),
            (n) => n === 1,
            "the model call"
          )
          assert.deepStrictEqual(kit.model.abortedCalls, [])
          // the scripted call waits ten minutes: a turn that ends at all shows the call was given up
          assert.isTrue(yield* client.cancelTurn("c1"))
          const done = yield* awaitTurns("c1", 1)
          yield* eventually(
            Effect.sync(() => kit.model.abortedCalls),
            (aborted) => aborted.length === 1,
            "the scripted model to see the abort"
          )
          assert.deepStrictEqual(kit.model.abortedCalls, [0])
          assert.strictEqual(done.state?.lastTurnError, null)
          assert.deepStrictEqual(
            done.messages.map((m) => [m.role, m.text]),
            [["user", "think hard"]]
          )
          const cancelled = (yield* allEvents("c1")).filter((e) => e.event.type === "turn_cancelled")
          assert.strictEqual(cancelled.length, 1)
          assert.strictEqual(cancelled[0]!.event.turnId, "turn-1")
          assert.deepStrictEqual(yield* stepShape("c1"), [
            "StartAgentSession",
            "RunModel",
            "FinishTurnCancellation",
            "ApplyTurnControl",
            "AwaitUserMessage"
          ])
          // the session stays open
          assert.isTrue(yield* client.sendUserMessage("c1", "again"))
          const next = yield* awaitTurns("c1", 2)
          assert.strictEqual(next.messages.at(-1)?.text, "Second answer.")
          assert.strictEqual(kit.model.doStreamCalls.length, 2)
          assert.deepStrictEqual(kit.model.abortedCalls, [0], "the second call ran to its end")
        })
    )
  )
})

describe("Mastra runner: built-in tools", () => {
  it.live("ask_user: offered to the model, answered through answerQuestion, and the turn resumes", () =>
    withMastraSession(
      [
        {
          toolCalls: [
            {
              id: "q1",
              name: "ask_user",
              arguments: { question: "Which city?", choices: ["Paris", "Rome"], allows_free_text: false }
            }
          ]
        },
        { text: "Paris it is." }
      ],
      { engine: embeddedEngine, builtInTools: ["ask_user", "durable_wait"] },
      (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("b1", { initialMessage: "plan a trip" })
          const waiting = yield* awaitSnapshot("b1", (s) => s.pendingInterrupts.length === 1, "the question")
          assert.deepStrictEqual(offeredTools(kit, 0).toSorted(), [
            "ask_user",
            "durable_wait",
            "flaky_write",
            "get_weather",
            "save_note",
            "send_email"
          ])
          const interrupt = waiting.pendingInterrupts[0]!
          assert.deepStrictEqual(
            [interrupt.interruptId, interrupt.kind, interrupt.question, interrupt.choices],
            ["q1", "question", "Which city?", ["Paris", "Rome"]]
          )
          assert.strictEqual(waiting.toolCalls[0]!.status, "awaiting_answer")
          assert.isTrue(yield* client.answerQuestion("b1", { interruptId: "q1", answer: "Paris" }))
          const done = yield* awaitTurns("b1", 1)
          assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { q1: '{"status":"answered","answer":"Paris"}' })
          assert.strictEqual(done.messages.at(-1)?.text, "Paris it is.")
          assert.deepStrictEqual(yield* stepShape("b1"), [
            "StartAgentSession",
            "RunModel",
            "AwaitQuestionAnswer",
            "ResumeTurn",
            "RunModel",
            "AwaitUserMessage"
          ])
          assert.strictEqual(kit.model.doStreamCalls.length, 2)
        })
    )
  )

  it.live("durable_wait: waits on a durable timer that SkipTimer ends; the model sees the completed wait", () =>
    withMastraSession(
      [
        { toolCalls: [{ id: "w1", name: "durable_wait", arguments: { seconds: 3600, reason: "cool down" } }] },
        { text: "Done waiting." }
      ],
      { engine: embeddedEngine, builtInTools: ["durable_wait"] },
      (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          const engine = yield* Client.Client
          yield* client.startSession("b2", { initialMessage: "wait an hour" })
          yield* awaitSnapshot("b2", (s) => s.toolCalls.some((c) => c.status === "waiting_for_timer"), "the wait")
          assert.include(offeredTools(kit, 0), "durable_wait")
          assert.notInclude(offeredTools(kit, 0), "ask_user", "a built-in the session did not enable is not offered")
          const timer = yield* waitingTimer("b2")
          assert.isTrue(yield* engine.skipTimer("b2", timer, 0))
          const done = yield* awaitTurns("b2", 1)
          const result = JSON.parse(toolResultsIn(prompt(kit, 1)).w1!) as {
            status: string
            waited_seconds: number
            reason: string
          }
          assert.strictEqual(result.status, "completed")
          assert.strictEqual(result.reason, "cool down")
          assert.isBelow(result.waited_seconds, 3600)
          assert.strictEqual(done.messages.at(-1)?.text, "Done waiting.")
          assert.deepStrictEqual(yield* stepShape("b2"), [
            "StartAgentSession",
            "RunModel",
            "AwaitTimer",
            "ResumeTurn",
            "RunModel",
            "AwaitUserMessage"
          ])
        })
    )
  )
})
