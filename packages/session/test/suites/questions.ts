import { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { AgentSessionClient, Runner, ToolSource, Wire } from "../../src/index.ts"
import {
  allEvents,
  awaitSnapshot,
  awaitTurns,
  bump,
  type EngineFactory,
  type Kit,
  sessionOn,
  startAndAwait,
  stepExecutions,
  stepShape,
  toolResults
} from "../support.ts"

const tools = (kit: Kit) => [
  ToolSource.tool({
    name: "charge",
    description: "Charge a card.",
    effect: "non_idempotent_write",
    handler: () =>
      Effect.sync(() => {
        bump(kit, "charge")
        return "charged"
      })
  }),
  ToolSource.tool({
    name: "deploy",
    description: "Deploy; asks where first.",
    effect: "non_idempotent_write",
    handler: (_args, request) =>
      Effect.sync(() => {
        const answer = request.inputAnswers?.at(-1)
        if (answer === undefined) {
          bump(kit, "deploy:asked")
          return Runner.toolInputRequested({
            question: "Which environment?",
            choices: ["staging", "prod"],
            allowsFreeText: false,
            continuation: "env"
          })
        }
        bump(kit, "deploy")
        return `deployed to ${answer.answer}`
      })
  })
]

const ask = (id: string, args: Record<string, unknown>) => ({ toolCalls: [{ id, name: "ask_user", arguments: args }] })

const policies = {
  charge: { effect: "non_idempotent_write" as const, requiresApproval: false },
  deploy: { effect: "non_idempotent_write" as const, requiresApproval: false }
}

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const questionsSuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine, {
    flow: { builtInTools: ["ask_user", "durable_wait", "write_todos"], toolPolicies: policies }
  })

  describe("questions", () => {
    it.live("ask_user answered: a choice, once; the model sees the answer", () =>
      withSession(
        {
          script: [
            ask("q1", { question: "Which city?", choices: ["Paris", "Rome"], allows_free_text: false }),
            { text: "Paris it is." }
          ],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const { client, snapshot: waiting } = yield* startAndAwait(
              "s-ask",
              "plan a trip",
              (s) => s.pendingInterrupts.length === 1,
              "the question"
            )
            assert.deepStrictEqual(
              kit.requests[0]!.tools.map((t) => t.name).filter((n) => n === "ask_user" || n === "durable_wait"),
              ["ask_user", "durable_wait"]
            )
            const interrupt = waiting.pendingInterrupts[0]!
            assert.deepStrictEqual(
              [interrupt.interruptId, interrupt.kind, interrupt.question, interrupt.choices, interrupt.allowsFreeText],
              ["q1", "question", "Which city?", ["Paris", "Rome"], false]
            )
            assert.strictEqual(waiting.toolCalls[0]!.status, "awaiting_answer")
            assert.isFalse(yield* client.answerQuestion("s-ask", { interruptId: "q1", answer: "Berlin" }))
            assert.isFalse(yield* client.answerQuestion("s-ask", { interruptId: "q1", answer: "  " }))
            assert.isFalse(yield* client.resolveInterrupt("s-ask", { interruptId: "q1", approved: true }))
            assert.isTrue(yield* client.answerQuestion("s-ask", { interruptId: "q1", answer: "Paris" }))
            assert.isFalse(yield* client.answerQuestion("s-ask", { interruptId: "q1", answer: "Paris" }))
            yield* awaitTurns("s-ask", 1)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { q1: '{"status":"answered","answer":"Paris"}' })
            assert.deepStrictEqual(yield* stepShape("s-ask"), [
              "StartAgentSession",
              "RunModel",
              "AwaitQuestionAnswer",
              "ResumeTurn",
              "RunModel",
              "AwaitUserMessage"
            ])
            const events = yield* allEvents("s-ask")
            const resolved = events.find((e) => e.event.type === "interrupt_resolved")!.event
            assert.deepStrictEqual(resolved.payload, {
              interruptId: "q1",
              approved: true,
              rejectionMessage: null,
              kind: "question",
              answered: true,
              cancellationReason: null
            })
          })
      )
    )

    it.live("ask_user declined and past its deadline; invalid arguments fail at once", () =>
      withSession(
        {
          script: [
            ask("q1", { question: "Proceed?" }),
            { text: "ok, not proceeding" },
            ask("q2", { question: "Still there?", choices: null, allows_free_text: null }),
            { text: "timed out" },
            {
              toolCalls: [
                { id: "bad1", name: "ask_user", arguments: { question: " " } },
                { id: "bad2", name: "ask_user", arguments: { zeta: 1, alpha: 2, question: "q" } },
                { id: "bad3", name: "ask_user", arguments: "not json" }
              ]
            },
            { text: "fixed" }
          ],
          tools,
          flow: { interruptDeadline: "2 seconds" }
        },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait(
              "s-dec",
              "go",
              (s) => s.pendingInterrupts.length === 1,
              "the question"
            )
            assert.isTrue(yield* client.resolveInterrupt("s-dec", { interruptId: "q1", approved: false }))
            yield* awaitTurns("s-dec", 1)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { q1: Wire.QUESTION_DECLINED_MESSAGE })
            assert.isTrue(yield* client.sendUserMessage("s-dec", "again"))
            yield* awaitTurns("s-dec", 2)
            assert.strictEqual(toolResults(kit.requests[3]!).q2, Wire.QUESTION_DEADLINE_PASSED_MESSAGE)
            assert.isFalse(yield* client.answerQuestion("s-dec", { interruptId: "q2", answer: "yes" }))
            assert.isTrue(yield* client.sendUserMessage("s-dec", "bad"))
            yield* awaitTurns("s-dec", 3)
            const { bad1, bad2, bad3 } = toolResults(kit.requests[5]!)
            assert.deepStrictEqual(
              { bad1, bad2, bad3 },
              {
                bad1: "The tool call failed: invalid ask_user arguments: question must be a non-blank string",
                bad2: "The tool call failed: invalid ask_user arguments: unknown argument alpha",
                bad3: "The tool call failed: invalid ask_user arguments: arguments must be a JSON object"
              }
            )
          })
      )
    )

    it.live("ask_user three turns in a row: each answer resumes exactly once, with no extra model call", () =>
      withSession(
        {
          script: [
            ask("q", { question: "One?" }),
            { text: "a1" },
            ask("q", { question: "Two?" }),
            { text: "a2" },
            ask("q", { question: "Three?" }),
            { text: "a3" }
          ],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-three")
            for (const [i, question] of ["One?", "Two?", "Three?"].entries()) {
              assert.isTrue(yield* client.sendUserMessage("s-three", `turn ${i + 1}`))
              yield* awaitSnapshot(
                "s-three",
                (s) => s.pendingInterrupts.some((p) => p.question === question),
                `question ${question}`
              )
              assert.strictEqual(kit.requests.length, 2 * i + 1)
              assert.isTrue(yield* client.answerQuestion("s-three", { interruptId: "q", answer: `answer ${i + 1}` }))
              const done = yield* awaitTurns("s-three", i + 1)
              assert.strictEqual(done.messages.at(-1)?.text, `a${i + 1}`)
              assert.strictEqual(kit.requests.length, 2 * i + 2, "one model call resumed the turn")
              assert.strictEqual(
                toolResults(kit.requests[2 * i + 1]!).q,
                `{"status":"answered","answer":"answer ${i + 1}"}`
              )
            }
            const steps = yield* stepExecutions("s-three")
            assert.strictEqual(steps.filter((s) => s.stepType === "RunModel").length, 6)
            assert.strictEqual(steps.filter((s) => s.stepType === "AwaitQuestionAnswer").length, 3)
          })
      )
    )

    it.live("ask_user and a write in one response: the write runs once", () =>
      withSession(
        {
          script: [
            {
              toolCalls: [
                { id: "q1", name: "ask_user", arguments: { question: "Receipt?" } },
                { id: "c1", name: "charge", arguments: {} }
              ]
            },
            { text: "Charged." }
          ],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait(
              "s-mix",
              "charge",
              (s) => s.pendingInterrupts.length === 1 && s.toolCalls.some((c) => c.status === "succeeded"),
              "the question and the write"
            )
            assert.isTrue(yield* client.answerQuestion("s-mix", { interruptId: "q1", answer: "yes" }))
            yield* awaitTurns("s-mix", 1)
            assert.strictEqual(kit.count("charge"), 1)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), {
              q1: '{"status":"answered","answer":"yes"}',
              c1: "charged"
            })
          })
      )
    )

    it.live("a tool that asks before taking effect runs again with input_answers", () =>
      withSession(
        { script: [{ toolCalls: [{ id: "d1", name: "deploy", arguments: {} }] }, { text: "Deployed." }], tools },
        (kit) =>
          Effect.gen(function* () {
            const { client, snapshot: waiting } = yield* startAndAwait(
              "s-tq",
              "deploy",
              (s) => s.pendingInterrupts.length === 1,
              "the tool's question"
            )
            const interrupt = waiting.pendingInterrupts[0]!
            assert.deepStrictEqual(
              [interrupt.interruptId, interrupt.kind, interrupt.toolCallId, interrupt.question, interrupt.choices],
              ["d1-input-1", "question", "d1", "Which environment?", ["staging", "prod"]]
            )
            const record = waiting.toolCalls[0]!
            assert.deepStrictEqual(
              [record.status, record.inputContinuation, record.inputQuestion],
              ["awaiting_answer", "env", "Which environment?"]
            )
            assert.strictEqual(kit.count("deploy"), 0, "no effect before the answer")
            assert.isFalse(yield* client.answerQuestion("s-tq", { interruptId: "d1-input-1", answer: "moon" }))
            assert.isTrue(yield* client.answerQuestion("s-tq", { interruptId: "d1-input-1", answer: "staging" }))
            yield* awaitTurns("s-tq", 1)
            assert.strictEqual(kit.count("deploy:asked"), 1)
            assert.strictEqual(kit.count("deploy"), 1)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { d1: "deployed to staging" })
            assert.deepStrictEqual(yield* stepShape("s-tq"), [
              "StartAgentSession",
              "RunModel",
              "CallSingleAttemptTool",
              "ResumeTurn",
              "AwaitQuestionAnswer",
              "AwaitQuestionAnswer",
              "CallSingleAttemptTool",
              "RunModel",
              "AwaitUserMessage"
            ])
          })
      )
    )

    it.live("resolve_interrupt and answer_question serialize: exactly one wins, the others return false", () =>
      withSession({ script: [ask("q1", { question: "Pick" }), { text: "done" }], tools }, (kit) =>
        Effect.gen(function* () {
          const { client } = yield* startAndAwait(
            "s-lock",
            "go",
            (s) => s.pendingInterrupts.length === 1,
            "the question"
          )
          const results = yield* Effect.all(
            [
              client.answerQuestion("s-lock", { interruptId: "q1", answer: "a" }),
              client.resolveInterrupt("s-lock", { interruptId: "q1", approved: false }),
              client.answerQuestion("s-lock", { interruptId: "q1", answer: "b" }),
              client.answerQuestion("s-lock", { interruptId: "q1", answer: "c" })
            ],
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter((r) => r).length, 1)
          yield* awaitTurns("s-lock", 1)
          const seen = toolResults(kit.requests[1]!).q1
          const winner = results.findIndex((r) => r)
          assert.strictEqual(
            seen,
            winner === 1
              ? Wire.QUESTION_DECLINED_MESSAGE
              : `{"status":"answered","answer":"${["a", "", "b", "c"][winner]}"}`
          )
        })
      )
    )

    it.live("an answer that commits before a steer wins; cancel_turn rejects an open question", () =>
      withSession(
        {
          // The answer resumes turn-1; the steer lands before or after the model call that answer schedules.
          // Before: turn-1 ends at once and turn-2 asks q2. After: turn-1 asks q2, which the steer abandons
          // (it took no effect), and turn-2 asks q3. Either way the answer wins.
          script: [ask("q1", { question: "Name?" }), ask("q2", { question: "Age?" }), ask("q3", { question: "City?" })],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait(
              "s-race",
              "hi",
              (s) => s.pendingInterrupts.length === 1,
              "the question"
            )
            assert.isTrue(yield* client.answerQuestion("s-race", { interruptId: "q1", answer: "Ann" }))
            assert.isTrue(yield* client.steerUserMessage("s-race", { text: "new topic" }))
            const done = yield* awaitSnapshot(
              "s-race",
              (s) =>
                s.state?.turnCount === 1 &&
                s.toolCalls.some((c) => c.turnId === "turn-2" && c.status === "awaiting_answer"),
              "the steered turn's question"
            )
            const open = done.toolCalls.find((c) => c.turnId === "turn-2" && c.status === "awaiting_answer")!
            const events = yield* allEvents("s-race")
            const finished = events
              .filter((e) => e.event.type === "tool_call_finished" && e.event.turnId === "turn-1")
              .map((e) => e.event.payload)
            // q1 was answered before the steer: it succeeded; a question turn-1 asked after it was abandoned
            assert.deepStrictEqual(finished[0], { toolCallId: "q1", toolName: "ask_user", status: "succeeded" })
            const abandoned =
              open.toolCallId === "q3" ? [{ toolCallId: "q2", toolName: "ask_user", status: "rejected" }] : []
            assert.deepStrictEqual(finished.slice(1), abandoned)
            assert.isTrue(events.some((e) => e.event.type === "turn_steered"))
            const result = done.messages.find(
              (m) => m.turnId === "turn-1" && m.role === "tool" && m.toolCallId === "q1"
            )!
            assert.strictEqual(result.toolOutput, '{"status":"answered","answer":"Ann"}')
            assert.strictEqual(
              kit.requests.length,
              open.toolCallId === "q3" ? 3 : 2,
              "each model call ran once: the steered turn started with one model call"
            )
            assert.isTrue(yield* client.cancelTurn("s-race"))
            yield* awaitTurns("s-race", 2)
            const cancelled = (yield* allEvents("s-race")).filter(
              (e) => e.event.type === "tool_call_finished" && e.event.turnId === "turn-2"
            )
            assert.deepStrictEqual(
              cancelled.map((e) => e.event.payload),
              [{ toolCallId: open.toolCallId, toolName: "ask_user", status: "rejected" }]
            )
            const last = (yield* client.getSnapshot("s-race")).messages.at(-1)!
            assert.deepStrictEqual([last.role, last.toolOutput], ["tool", Wire.TURN_CANCELLED_REJECTION_MESSAGE])
          })
      )
    )
  })

  describe("write_todos", () => {
    it.live("replaces the plan in RunModel's commit; twice in one response fails both and keeps the plan", () =>
      withSession(
        {
          script: [
            {
              toolCalls: [
                {
                  id: "p1",
                  name: "write_todos",
                  arguments: {
                    todos: [
                      { content: "Read the notes", status: "completed" },
                      { content: "Write the summary", status: "in_progress" }
                    ]
                  }
                }
              ]
            },
            { text: "Planned." },
            {
              toolCalls: [
                { id: "p2", name: "write_todos", arguments: { todos: [] } },
                { id: "p3", name: "write_todos", arguments: { todos: [{ content: "x", status: "pending" }] } },
                { id: "p4", name: "write_todos", arguments: { todos: [{ content: "x", status: "done" }] } }
              ]
            },
            { text: "Not replanned." }
          ],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-todo", { initialMessage: "plan" })
            const first = yield* awaitTurns("s-todo", 1)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), {
              p1: '{"status":"updated","revision":1,"task_count":2}'
            })
            assert.strictEqual(first.plan?.revision, 1)
            assert.strictEqual(first.plan?.status, "active")
            assert.deepStrictEqual(
              first.plan?.tasks.map((t) => [t.content, t.status]),
              [
                ["Read the notes", "completed"],
                ["Write the summary", "in_progress"]
              ]
            )
            const updated = (yield* allEvents("s-todo")).filter((e) => e.event.type === "plan_updated")
            assert.deepStrictEqual(
              updated.map((e) => e.event.payload),
              [{ revision: 1, status: "active", taskCount: 2 }]
            )
            assert.isTrue(yield* client.sendUserMessage("s-todo", "replan"))
            const second = yield* awaitTurns("s-todo", 2)
            const { p2, p3, p4 } = toolResults(kit.requests[3]!)
            const twice = "The tool call failed: write_todos was called more than once in one response"
            assert.deepStrictEqual([p2, p3, p4], [twice, twice, twice])
            assert.strictEqual(second.plan?.revision, 1, "the plan is unchanged")
          })
      )
    )
  })

  describe("durable_wait", () => {
    it.live("completes after its seconds; SkipTimer ends a long one; a steer abandons one", () =>
      withSession(
        {
          script: [
            { toolCalls: [{ id: "t1", name: "durable_wait", arguments: { seconds: 1, reason: "cool down" } }] },
            { text: "waited" },
            { toolCalls: [{ id: "t2", name: "durable_wait", arguments: { seconds: 3600 } }] },
            { text: "skipped" },
            { toolCalls: [{ id: "t3", name: "durable_wait", arguments: { seconds: 3600, reason: "later" } }] },
            { text: "steered" }
          ],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            const engine = yield* Client.Client
            yield* client.startSession("s-wait", { initialMessage: "wait a second" })
            yield* awaitTurns("s-wait", 1)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), {
              t1: '{"status":"completed","waited_seconds":1,"reason":"cool down"}'
            })
            const started = (yield* allEvents("s-wait")).find((e) => e.event.type === "timer_started")!.event
            assert.deepStrictEqual(Object.keys(started.payload as object), ["toolCallId", "waitUntil", "reason"])
            assert.isTrue(yield* client.sendUserMessage("s-wait", "wait an hour"))
            yield* awaitSnapshot("s-wait", (s) => s.toolCalls.some((c) => c.status === "waiting_for_timer"), "t2")
            const timer = yield* awaitSnapshotSteps("s-wait")
            assert.isTrue(yield* engine.skipTimer("s-wait", timer, 0))
            yield* awaitTurns("s-wait", 2)
            const skipped = JSON.parse(toolResults(kit.requests[3]!).t2!) as { status: string; waited_seconds: number }
            assert.strictEqual(skipped.status, "completed")
            assert.isBelow(skipped.waited_seconds, 3600)
            assert.isTrue(yield* client.sendUserMessage("s-wait", "wait again"))
            yield* awaitSnapshot("s-wait", (s) => s.toolCalls.some((c) => c.toolCallId === "t3"), "t3")
            assert.isTrue(yield* client.steerUserMessage("s-wait", { text: "stop waiting" }))
            const done = yield* awaitTurns("s-wait", 4)
            // the steered turn keeps its transcript: the call and its result
            assert.strictEqual(
              done.messages.find((m) => m.turnId === "turn-3" && m.role === "tool" && m.toolCallId === "t3")!
                .toolOutput,
              Wire.STEERED_REJECTION_MESSAGE
            )
            assert.strictEqual(done.messages.at(-1)?.text, "steered")
          })
      )
    )
  })
}

/** The Step execution ID of the session's waiting AwaitTimer. */
const awaitSnapshotSteps = (sessionId: string) =>
  Effect.map(
    Effect.repeat(stepExecutions(sessionId), {
      schedule: Schedule.spaced("30 millis"),
      until: (steps) => steps.some((s) => s.stepType === "AwaitTimer" && s.status === "waiting")
    }),
    (steps) => steps.find((s) => s.stepType === "AwaitTimer" && s.status === "waiting")!.stepExecutionId
  )
