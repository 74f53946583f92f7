import { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import {
  AgentSessionClient,
  AgentSessionFlow,
  Errors,
  type ModelClient,
  Persistence,
  Runner,
  Stepwise
} from "../../src/index.ts"
import {
  allEvents,
  awaitCount,
  awaitSnapshot,
  awaitTurns,
  type EngineFactory,
  eventually,
  FLOW_TYPE,
  type Kit,
  makeGate,
  type Setup,
  sendEmailTool,
  toolResults,
  weatherTool,
  withSession as withSessionOn
} from "../support.ts"

const tools = (kit: Kit) => [weatherTool(kit), sendEmailTool(kit)]

const planned = { builtInTools: ["write_todos" as const], planModeEnabled: true }

const offered = (request: ModelClient.ModelRequest) => request.tools.map((t) => t.name)

const userTexts = (request: ModelClient.ModelRequest) =>
  request.messages.flatMap((m) => (m.role === "user" ? [m.text] : []))

const todos = (...tasks: ReadonlyArray<readonly [string, string]>) => ({
  todos: tasks.map(([content, status]) => ({ content, status }))
})

const REJECTED = "The tool call was not run: a planning turn can only call write_todos."

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const planSuite = (engine: EngineFactory) => {
  const withSession = <A, E>(
    setup: Omit<Setup, "engine">,
    body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>
  ) => withSessionOn({ ...setup, flow: { ...planned, ...setup.flow }, engine }, body)

  describe("plan mode", () => {
    it.live("plans, executes an approved revision once, and keeps the task statuses current", () =>
      withSession(
        {
          script: [
            {
              toolCalls: [
                { id: "r1", name: "get_weather", arguments: {} },
                { id: "p1", name: "write_todos", arguments: todos(["Book the train", "pending"], ["Pack", "pending"]) }
              ]
            },
            { text: "Here is the plan." },
            {
              toolCalls: [
                { id: "w1", name: "get_weather", arguments: {} },
                {
                  id: "p2",
                  name: "write_todos",
                  arguments: todos(["Book the train", "completed"], ["Pack", "in_progress"])
                }
              ]
            },
            {
              toolCalls: [
                {
                  id: "p3",
                  name: "write_todos",
                  arguments: todos(["Book the train", "completed"], ["Pack", "completed"])
                }
              ]
            },
            { text: "Done." },
            { text: "You are welcome." }
          ],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-plan")
            yield* awaitSnapshot("s-plan", (s) => s.state !== null, "the session start")
            assert.isTrue(yield* client.sendUserMessage("s-plan", { text: "plan a trip", planMode: true }))
            const drafted = yield* awaitTurns("s-plan", 1)

            // The planning turn: only write_todos offered, the note before the turn's message, the other call
            // rejected without running, and a draft plan.
            assert.deepStrictEqual(offered(kit.requests[0]!), ["write_todos"])
            assert.deepStrictEqual(userTexts(kit.requests[0]!), ["[Dex] There is no plan yet.", "plan a trip"])
            assert.strictEqual(kit.count("get_weather"), 0)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), {
              r1: REJECTED,
              p1: '{"status":"updated","revision":1,"task_count":2}'
            })
            assert.deepStrictEqual(userTexts(kit.requests[1]!), [
              [
                "[Dex] The current plan, revision 1, is draft:",
                "- [pending] Book the train",
                "- [pending] Pack",
                "This turn only plans: write or revise the plan with write_todos, and do not do or claim any of its tasks. The user reviews the plan before it runs."
              ].join("\n"),
              "plan a trip"
            ])
            assert.strictEqual(drafted.state?.interactionMode, "planning")
            assert.strictEqual(drafted.plan?.revision, 1)
            assert.strictEqual(drafted.plan?.status, "draft")
            assert.deepStrictEqual(
              drafted.plan?.tasks.map((t) => [t.content, t.status]),
              [
                ["Book the train", "pending"],
                ["Pack", "pending"]
              ]
            )

            // Approval: a wrong revision is refused, the right one is accepted once.
            assert.isFalse(yield* client.executePlan("s-plan", 2))
            // (that a revision is accepted once is the next test's)
            assert.isTrue(yield* client.executePlan("s-plan", 1))
            const done = yield* awaitTurns("s-plan", 2)
            assert.strictEqual(done.state?.interactionMode, "executing")
            assert.strictEqual(kit.count("get_weather"), 1, "an executing turn runs tools")
            assert.includeMembers(offered(kit.requests[2]!), ["get_weather", "send_email", "write_todos"])
            assert.deepStrictEqual(userTexts(kit.requests[2]!).slice(-2), [
              ["[Dex] The current plan, revision 1, is active:", "- [pending] Book the train", "- [pending] Pack"].join(
                "\n"
              ),
              "[Dex] The user approved plan revision 1. Execute it and keep the task statuses current with write_todos."
            ])
            const executing = toolResults(kit.requests[3]!)
            assert.deepStrictEqual(
              [executing.w1, executing.p2],
              ["sunny", '{"status":"updated","revision":2,"task_count":2}']
            )
            assert.strictEqual(done.plan?.revision, 3)
            assert.strictEqual(done.plan?.status, "completed")
            assert.isFalse(yield* client.executePlan("s-plan", 3), "a completed plan is not executed")
            assert.deepStrictEqual(
              done.messages.filter((m) => m.turnId === "turn-2" && m.role === "user").map((m) => m.text),
              [
                "[Dex] The user approved plan revision 1. Execute it and keep the task statuses current with write_todos."
              ]
            )

            const events = (yield* allEvents("s-plan")).map((e) => e.event)
            assert.deepStrictEqual(
              events.filter((e) => e.type === "plan_updated").map((e) => e.payload),
              [
                { revision: 1, status: "draft", taskCount: 2 },
                { revision: 1, status: "active", taskCount: 2 },
                { revision: 2, status: "active", taskCount: 2 },
                { revision: 3, status: "completed", taskCount: 2 }
              ]
            )
            const started = events.findIndex((e) => e.type === "turn_started" && e.turnId === "turn-2")
            assert.strictEqual(events[started + 1]?.type, "plan_execution_started")
            assert.deepStrictEqual(events[started + 1]?.payload, { revision: 1 })
            assert.strictEqual(events.filter((e) => e.type === "plan_execution_started").length, 1)

            // A later message without plan_mode, with no draft, is a chat turn that sees the plan.
            assert.isTrue(yield* client.sendUserMessage("s-plan", "thanks"))
            const chat = yield* awaitTurns("s-plan", 3)
            assert.strictEqual(chat.state?.interactionMode, "chat")
            assert.include(offered(kit.requests[5]!), "get_weather")
            assert.deepStrictEqual(userTexts(kit.requests[5]!).slice(-2), [
              [
                "[Dex] The current plan, revision 3, is completed:",
                "- [completed] Book the train",
                "- [completed] Pack"
              ].join("\n"),
              "thanks"
            ])
          })
      )
    )

    // A second approval of one revision is refused until AwaitUserMessage consumed the first. The runner has one
    // Step slot (and the RPC reserve), which another session's held model call takes, so AwaitUserMessage cannot
    // consume the first approval while the test asks again. The approval's own commit wakes AwaitUserMessage,
    // whose Execute then holds the PendingPlanExecution lock while it waits for the slot: through RPCs a second
    // request meets that lock (RpcLockConflict, which AgentSessionClient retries for up to 5 seconds) before it
    // could read PendingPlanExecution. The request that PendingPlanExecution holds refuses a second approval on
    // its own only when AwaitUserMessage is not holding the lock, a state no sequence of RPCs keeps open, so the
    // last part writes the Attribute with the engine client, as an approval that AwaitUserMessage has not taken.
    it.live(
      "execute_plan accepts a revision once: a second approval is refused until AwaitUserMessage consumes it",
      () => {
        const otherCall = makeGate()
        return withSession(
          {
            script: [
              { toolCalls: [{ id: "p1", name: "write_todos", arguments: todos(["Book the train", "pending"]) }] },
              { text: "Here is the plan." },
              { text: "The other session's answer." },
              { text: "Executed." },
              { text: "Executed again." }
            ],
            holds: { 2: otherCall },
            maxConcurrentTasks: 2,
            tools
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              const engine = yield* Client.Client
              const rpcFlow = AgentSessionClient.clientFlow(FLOW_TYPE)
              const pendingApproval = engine.getAttribute("s-once", Persistence.PendingPlanExecution)
              yield* client.startSession("s-once")
              yield* awaitSnapshot("s-once", (s) => s.state !== null, "the session start")
              assert.isTrue(yield* client.sendUserMessage("s-once", { text: "plan a trip", planMode: true }))
              const drafted = yield* awaitTurns("s-once", 1)
              assert.strictEqual(drafted.plan?.status, "draft")
              // the other session's model call holds the only Step slot until the test opens its gate
              yield* client.startSession("s-other", { initialMessage: "hold the slot" })
              yield* awaitCount(() => kit.requests.length, 3, "the other session's model call")

              assert.isTrue(yield* client.executePlan("s-once", 1))
              assert.deepStrictEqual(yield* pendingApproval, Option.some({ revision: 1 }))
              const second = yield* Effect.flip(
                engine.invokeRpc(rpcFlow, rpcFlow.rpcs_.execute_plan, "s-once", { revision: 1 })
              )
              assert.strictEqual(second._tag, "RpcLockConflict", "AwaitUserMessage holds the approval's lock")
              const waiting = yield* client.getSnapshot("s-once")
              assert.strictEqual(waiting.state?.status, "waiting_for_user_message")
              assert.isNull(waiting.state?.activeTurnId ?? null, "the approval is not consumed yet")

              yield* otherCall.open
              const done = yield* awaitTurns("s-once", 2)
              yield* awaitTurns("s-other", 1)
              assert.strictEqual(done.state?.interactionMode, "executing")
              assert.strictEqual(done.messages.at(-1)?.text, "Executed.")
              assert.isTrue(Option.isNone(yield* pendingApproval), "AwaitUserMessage consumed the approval")
              const started = (yield* allEvents("s-once")).filter((e) => e.event.type === "plan_execution_started")
              assert.deepStrictEqual(
                started.map((e) => [e.event.turnId, e.event.payload]),
                [["turn-2", { revision: 1 }]]
              )

              // The rule itself: the session waits for a user message, the plan is active at revision 1, nothing is
              // queued, steered or pending, and only an unconsumed approval of revision 1 refuses the request.
              yield* engine.setAttribute("s-once", Persistence.PendingPlanExecution, { revision: 1 })
              assert.isFalse(yield* client.executePlan("s-once", 1), "an approval of this revision is pending")
              const refused = yield* client.getSnapshot("s-once")
              assert.strictEqual(refused.state?.status, "waiting_for_user_message")
              assert.isNull(refused.state?.activeTurnId ?? null)
              assert.deepStrictEqual([refused.plan?.revision, refused.plan?.status], [1, "active"])
              assert.strictEqual(refused.queuedMessageCount, 0)
              assert.lengthOf(refused.steeredMessages, 0)
              assert.lengthOf(refused.pendingInterrupts, 0)
              yield* engine.setAttribute("s-once", Persistence.PendingPlanExecution, null)
              assert.isTrue(yield* client.executePlan("s-once", 1), "once consumed, the active plan may run again")
              const again = yield* awaitTurns("s-once", 3)
              assert.strictEqual(again.state?.interactionMode, "executing")
              assert.strictEqual(again.messages.at(-1)?.text, "Executed again.")
            })
        )
      }
    )

    it.live("execute_plan is false while a message is queued; a queued plan_mode message steered by ID plans", () =>
      withSession(
        {
          script: [
            { toolCalls: [{ id: "p1", name: "write_todos", arguments: todos(["Draft", "pending"]) }] },
            { text: "Drafted." },
            { text: "Thinking slowly.", delay: "2 seconds" },
            {
              toolCalls: [
                { id: "p2", name: "write_todos", arguments: todos(["Draft", "pending"], ["Edit", "pending"]) }
              ]
            },
            { text: "Revised." },
            { text: "Executed." }
          ],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-queue", { initialMessage: "hi" })
            // A chat turn may call write_todos too: outside a planning turn it writes an active plan.
            const first = yield* awaitTurns("s-queue", 1)
            assert.strictEqual(first.state?.interactionMode, "chat")
            assert.strictEqual(first.plan?.status, "active", "write_todos outside a planning turn writes active")
            assert.isTrue(yield* client.sendUserMessage("s-queue", "slow one"))
            yield* eventually(
              Effect.sync(() => kit.requests.length),
              (n) => n === 3,
              "the slow model call"
            )
            assert.isTrue(yield* client.sendUserMessage("s-queue", { text: "revise the plan", planMode: true }))
            assert.isFalse(yield* client.executePlan("s-queue", 1), "a turn is active and a message is queued")
            const queued = yield* client.getSnapshot("s-queue")
            assert.strictEqual(queued.queuedMessages[0]?.message.planMode, true)
            assert.isTrue(yield* client.steerUserMessage("s-queue", { messageId: queued.queuedMessages[0]!.messageId }))
            const steered = yield* client.getSnapshot("s-queue")
            assert.deepStrictEqual(
              steered.steeredMessages.map((m) => m.message),
              [{ text: "revise the plan", planMode: true }]
            )
            assert.isFalse(yield* client.executePlan("s-queue", 1), "a steered message is pending")
            const revised = yield* awaitTurns("s-queue", 3)
            assert.strictEqual(revised.state?.interactionMode, "planning", "the steered message kept plan_mode")
            assert.deepStrictEqual(offered(kit.requests[3]!), ["write_todos"])
            assert.strictEqual(revised.plan?.revision, 2)
            assert.strictEqual(revised.plan?.status, "draft")
            assert.isTrue(yield* client.executePlan("s-queue", 2))
            const executed = yield* awaitTurns("s-queue", 4)
            assert.strictEqual(executed.state?.interactionMode, "executing")
            assert.strictEqual(executed.plan?.status, "active")
          })
      )
    )

    it.live("planningToolChoice auto: no forced tool, a text answer ends the planning turn without a draft", () =>
      withSession({ script: [{ text: "Which city?" }] }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-auto")
          yield* awaitSnapshot("s-auto", (s) => s.state !== null, "the session start")
          assert.isTrue(yield* client.sendUserMessage("s-auto", { text: "plan a trip", planMode: true }))
          const done = yield* awaitTurns("s-auto", 1)
          assert.isUndefined(kit.requests[0]!.toolChoice)
          assert.deepStrictEqual(offered(kit.requests[0]!), ["write_todos"])
          assert.isNull(done.plan)
          assert.strictEqual(done.messages.at(-1)?.text, "Which city?")
          assert.isFalse(yield* client.executePlan("s-auto", 1), "there is no plan to execute")
        })
      )
    )

    it.live("planningToolChoice required: forces write_todos on the first call while no draft exists", () =>
      withSession(
        {
          agent: { planningToolChoice: "required" },
          script: [
            { toolCalls: [{ id: "p1", name: "write_todos", arguments: todos(["Book", "pending"]) }] },
            { text: "Drafted." },
            { text: "Anything else?" }
          ],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-required")
            yield* awaitSnapshot("s-required", (s) => s.state !== null, "the session start")
            assert.isTrue(yield* client.sendUserMessage("s-required", { text: "plan a trip", planMode: true }))
            yield* awaitTurns("s-required", 1)
            assert.deepStrictEqual(kit.requests[0]!.toolChoice, { tool: "write_todos" })
            assert.isUndefined(kit.requests[1]!.toolChoice, "only the first call of the turn is forced")
            // A draft exists, so a message without plan_mode plans too, and nothing is forced.
            assert.isTrue(yield* client.sendUserMessage("s-required", "looks good"))
            const second = yield* awaitTurns("s-required", 2)
            assert.strictEqual(second.state?.interactionMode, "planning")
            assert.deepStrictEqual(offered(kit.requests[2]!), ["write_todos"])
            assert.isUndefined(kit.requests[2]!.toolChoice)
          })
      )
    )

    it.live("send_user_message accepts plan_mode only with plan mode; execute_plan is false without it", () =>
      withSessionOn({ script: [{ text: "chat" }], flow: { builtInTools: ["write_todos"] }, engine }, () =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-off")
          yield* awaitSnapshot("s-off", (s) => s.state !== null, "the session start")
          assert.isFalse(yield* client.sendUserMessage("s-off", { text: "plan it", planMode: true }))
          assert.isFalse(yield* client.executePlan("s-off", 1))
        })
      )
    )

    it.live("the worker refuses plan mode for a runner without supportsPlanMode", () =>
      Effect.gen(function* () {
        const flow = AgentSessionFlow.make({ flowType: FLOW_TYPE, ...planned })
        const runner: Runner.AgentFrameworkRunnerShape = {
          name: "no-plans",
          buildUserMessage: (text) => Stepwise.toFrameworkMessage({ type: "user", text }),
          runModelStep: () =>
            Effect.succeed(Runner.AgentTurnOutcome.turnCompleted({ newMessages: [], usage: zeroUsage })),
          executeDeferredToolCall: () => Effect.succeed({ output: "" })
        }
        const error = yield* Layer.build(
          AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(Runner.layer(runner)), Layer.provideMerge(engine({})))
        ).pipe(Effect.scoped, Effect.flip)
        assert.instanceOf(error, Errors.AgentSessionDefinitionError)
        assert.strictEqual(
          (error as Errors.AgentSessionDefinitionError).message,
          `planModeEnabled needs a runner whose supportsPlanMode is true (Flow type ${FLOW_TYPE})`
        )
      })
    )
  })
}

const zeroUsage = { modelCalls: 1, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }
