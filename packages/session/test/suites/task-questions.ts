import type { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, Errors, Runner, type ToolSource, Wire } from "../../src/index.ts"
import {
  allEvents,
  awaitSnapshot,
  awaitTurns,
  bump,
  type EngineFactory,
  type Kit,
  type Setup,
  toolResults,
  withSession as withSessionOn
} from "../support.ts"

/**
 * A source whose `deploy` tool starts a task that asks a question and whose poll with the answer fails with a
 * tool error, and whose `slow_read` runs until the test bumps "release" (it keeps the turn, and so the records,
 * open).
 */
const failingTaskSource = (kit: Kit, polls: Array<ToolSource.ToolTaskRequest>): ToolSource.ToolSourceShape => ({
  tools: [
    { name: "deploy", description: "Deploy in a remote task.", parameters: { type: "object", properties: {} } },
    { name: "slow_read", description: "A slow read.", parameters: { type: "object", properties: {} } }
  ].map((t) => ({ ...t, effect: "read" as const })),
  call: (request) =>
    request.toolName === "slow_read"
      ? Effect.gen(function* () {
          while (kit.count("release") === 0) yield* Effect.sleep("20 millis")
          return { output: "slow result" }
        })
      : Effect.succeed(Runner.toolTaskStarted("task-1", 1)),
  pollToolTask: (request) =>
    Effect.suspend(() => {
      polls.push(request)
      return request.pendingAnswer == null
        ? Effect.succeed(Runner.toolInputRequested({ question: QUESTION, continuation: "req-1" }))
        : Effect.fail(new Errors.ToolExecutionError({ message: "the region is closed" }))
    })
})

const QUESTION = "Which region?"

/**
 * A source whose `deploy` tool starts a task. The task's first poll asks the user (continuation `req-1`); a poll
 * with `pendingAnswer` takes the resolution and stays pending; the next poll finishes with what it took.
 */
const taskSource = (
  kit: Kit,
  polls: Array<ToolSource.ToolTaskRequest>,
  effect: "read" | "non_idempotent_write" = "read"
): ToolSource.ToolSourceShape => {
  let taken: string | undefined
  return {
    tools: [
      {
        name: "deploy",
        description: "Deploy in a remote task.",
        parameters: { type: "object", properties: {} },
        effect
      },
      {
        name: "get_weather",
        description: "Read the weather.",
        parameters: { type: "object", properties: {} },
        effect: "read"
      }
    ],
    call: (request) =>
      Effect.sync(() => {
        if (request.toolName === "get_weather") return { output: "sunny" }
        bump(kit, "deploy:started")
        return Runner.toolTaskStarted("task-1", 1)
      }),
    pollToolTask: (request) =>
      Effect.sync(() => {
        polls.push(request)
        if (request.pendingAnswer != null) {
          taken = `${request.pendingAnswer.resolution}: ${request.pendingAnswer.answer}`
          return { _tag: "ToolTaskPending" as const, pollIntervalSeconds: 1, continuation: null }
        }
        if (taken === undefined) {
          return Runner.toolInputRequested({ question: QUESTION, choices: ["eu", "us"], continuation: "req-1" })
        }
        return { output: `deployed after ${taken}` }
      })
  }
}

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const taskQuestionsSuite = (engine: EngineFactory) => {
  const withSession = <A, E>(
    setup: Omit<Setup, "engine">,
    body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>
  ) => withSessionOn({ ...setup, engine }, body)

  const cases: ReadonlyArray<{
    readonly resolution: Wire.QuestionResolution
    readonly answer: string
    readonly resolve: (sessionId: string) => Effect.Effect<boolean, unknown, AgentSessionClient.AgentSessionClient>
  }> = [
    {
      resolution: "answered",
      answer: "eu",
      resolve: (sessionId) =>
        Effect.flatMap(AgentSessionClient.AgentSessionClient, (c) =>
          c.answerQuestion(sessionId, { interruptId: "t1-input-1", answer: "eu" })
        )
    },
    {
      resolution: "declined",
      answer: Wire.QUESTION_DECLINED_MESSAGE,
      resolve: (sessionId) =>
        Effect.flatMap(AgentSessionClient.AgentSessionClient, (c) =>
          c.resolveInterrupt(sessionId, { interruptId: "t1-input-1", approved: false })
        )
    },
    {
      resolution: "deadline_passed",
      answer: Wire.QUESTION_DEADLINE_PASSED_MESSAGE,
      // nobody answers: the interrupt's deadline passes
      resolve: () => Effect.succeed(true)
    }
  ]

  describe("questions from started tasks", () => {
    for (const { resolution, answer, resolve } of cases) {
      it.live(`${resolution}: the task receives pending_answer once and the call then finishes`, () => {
        const polls: Array<ToolSource.ToolTaskRequest> = []
        const sessionId = `s-task-${resolution}`
        return withSession(
          {
            script: [{ toolCalls: [{ id: "t1", name: "deploy", arguments: {} }] }, { text: "Deployed." }],
            toolSource: (kit) => taskSource(kit, polls),
            flow: resolution === "deadline_passed" ? { interruptDeadline: "2 seconds" } : {}
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession(sessionId, { initialMessage: "deploy it" })
              const asking = yield* awaitSnapshot(
                sessionId,
                (s) => s.pendingInterrupts.some((i) => i.interruptId === "t1-input-1"),
                "the task's question"
              )
              const record = asking.toolCalls.find((c) => c.toolCallId === "t1")!
              assert.strictEqual(record.status, "awaiting_answer")
              assert.strictEqual(record.taskId, "task-1")
              assert.strictEqual(record.inputQuestion, QUESTION)
              assert.isTrue(yield* resolve(sessionId))
              yield* awaitTurns(sessionId, 1)
              // the task took the resolution in exactly one poll, which read the question's continuation
              assert.deepStrictEqual(
                polls.map((p) => p.pendingAnswer ?? null),
                [null, { interruptId: "t1-input-1", question: QUESTION, answer, resolution }, null]
              )
              assert.strictEqual(polls[1]!.continuation, "req-1")
              assert.strictEqual(kit.count("deploy:started"), 1, "the call never ran again")
              assert.strictEqual(toolResults(kit.requests[1]!).t1, `deployed after ${resolution}: ${answer}`)
              const events = yield* allEvents(sessionId)
              const finished = events.filter((e) => e.event.type === "tool_call_finished").map((e) => e.event.payload)
              assert.deepStrictEqual(finished, [{ toolCallId: "t1", toolName: "deploy", status: "succeeded" }])
              const resolved = events.find((e) => e.event.type === "interrupt_resolved")!.event.payload
              assert.deepInclude(resolved, {
                interruptId: "t1-input-1",
                kind: "question",
                answered: resolution === "answered"
              })
            })
        )
      })
    }

    it.live("a started task's question whose interrupt ID another call uses records the call by effect", () => {
      const polls: Array<ToolSource.ToolTaskRequest> = []
      return withSession(
        {
          script: [
            {
              toolCalls: [
                { id: "t1", name: "deploy", arguments: {} },
                { id: "t1-input-1", name: "get_weather", arguments: {} }
              ]
            },
            { text: "Done." }
          ],
          toolSource: (kit) => taskSource(kit, polls, "non_idempotent_write")
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-task-collide", { initialMessage: "deploy it" })
            yield* awaitSnapshot(
              "s-task-collide",
              (s) => s.pendingInterrupts.some((i) => i.interruptId === "t1"),
              "the approval"
            )
            assert.isTrue(yield* client.resolveInterrupt("s-task-collide", { interruptId: "t1", approved: true }))
            yield* awaitTurns("s-task-collide", 1)
            assert.strictEqual(kit.count("deploy:started"), 1)
            assert.strictEqual(polls.length, 1)
            const finished = (yield* allEvents("s-task-collide"))
              .filter((e) => e.event.type === "tool_call_finished")
              .map((e) => e.event.payload)
            // the task may have taken effect: a single-attempt write's call is outcome_unknown, not failed
            assert.deepInclude(finished, { toolCallId: "t1", toolName: "deploy", status: "outcome_unknown" })
            assert.strictEqual(toolResults(kit.requests[1]!)["t1-input-1"], "sunny")
          })
      )
    })

    it.live("a poll with the answer that fails with a tool error records failed and clears task_answer_pending", () => {
      const polls: Array<ToolSource.ToolTaskRequest> = []
      return withSession(
        {
          script: [
            {
              toolCalls: [
                { id: "t1", name: "deploy", arguments: {} },
                { id: "r1", name: "slow_read", arguments: {} }
              ]
            },
            { text: "The deploy failed." }
          ],
          toolSource: (kit) => failingTaskSource(kit, polls)
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-task-fail", { initialMessage: "deploy it" })
            yield* awaitSnapshot(
              "s-task-fail",
              (s) => s.pendingInterrupts.some((i) => i.interruptId === "t1-input-1"),
              "the task's question"
            )
            assert.isTrue(yield* client.answerQuestion("s-task-fail", { interruptId: "t1-input-1", answer: "eu" }))
            // slow_read keeps the turn open, so the final record is still there to read
            const failed = yield* awaitSnapshot(
              "s-task-fail",
              (s) => s.toolCalls.some((c) => c.toolCallId === "t1" && c.status === "failed"),
              "the failed poll"
            )
            const record = failed.toolCalls.find((c) => c.toolCallId === "t1")!
            assert.strictEqual(record.error, "the region is closed")
            assert.isFalse(record.taskAnswerPending, "a final record never waits to deliver an answer")
            assert.strictEqual(polls.length, 2)
            assert.strictEqual(polls[1]!.pendingAnswer?.answer, "eu")
            bump(kit, "release")
            yield* awaitTurns("s-task-fail", 1)
            assert.strictEqual(toolResults(kit.requests[1]!).r1, "slow result")
            const finished = (yield* allEvents("s-task-fail"))
              .filter((e) => e.event.type === "tool_call_finished")
              .map((e) => e.event.payload)
            assert.deepInclude(finished, { toolCallId: "t1", toolName: "deploy", status: "failed" })
          })
      )
    })

    it.live("a steer never abandons a started task's question: it is answered, then the steered turn starts", () => {
      const polls: Array<ToolSource.ToolTaskRequest> = []
      return withSession(
        {
          script: [{ toolCalls: [{ id: "t1", name: "deploy", arguments: {} }] }, { text: "Steered answer." }],
          toolSource: (kit) => taskSource(kit, polls)
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-task-steer", { initialMessage: "deploy it" })
            yield* awaitSnapshot(
              "s-task-steer",
              (s) => s.pendingInterrupts.some((i) => i.interruptId === "t1-input-1"),
              "the task's question"
            )
            assert.isTrue(yield* client.steerUserMessage("s-task-steer", { text: "also the docs" }))
            const waiting = yield* awaitSnapshot(
              "s-task-steer",
              (s) => s.steeredMessages.length === 1,
              "the steered message"
            )
            assert.deepStrictEqual(
              waiting.pendingInterrupts.map((i) => i.interruptId),
              ["t1-input-1"],
              "the question stays"
            )
            assert.isTrue(yield* client.answerQuestion("s-task-steer", { interruptId: "t1-input-1", answer: "us" }))
            const done = yield* awaitTurns("s-task-steer", 2)
            assert.strictEqual(kit.count("deploy:started"), 1)
            assert.deepStrictEqual(
              done.messages
                .filter((m) => m.turnId === "turn-1" && m.role === "tool")
                .map((m) => [m.toolCallId, m.toolOutput]),
              [["t1", "deployed after answered: us"]]
            )
            assert.deepStrictEqual(done.messages.at(-1)?.text, "Steered answer.")
          })
      )
    })
  })
}
