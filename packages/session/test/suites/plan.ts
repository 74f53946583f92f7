import { Client, Engine } from "@durable-agent/engine"
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
  Stepwise,
  type Wire
} from "../../src/index.ts"
import {
  allEvents,
  awaitCount,
  awaitSnapshot,
  awaitTurns,
  type EngineFactory,
  FLOW_TYPE,
  type Kit,
  makeGate,
  type Setup,
  sendEmailTool,
  toolResults,
  weatherTool,
  withSession as withSessionOn
} from "../support.ts"

/**
 * Takes every control slot of the runner until the returned effect gives them back. The session's bookkeeping
 * Steps (AwaitUserMessage among them) run in the control slots, never behind model calls, so a test that must
 * keep a woken AwaitUserMessage from running holds these, as a burst of other sessions' bookkeeping would.
 */
const holdControlSlots = Effect.gen(function* () {
  const runner = yield* Engine.RunnerState
  const leases = Array.from({ length: runner.slots.controlTotal }, () => runner.slots.lease())
  for (const lease of leases) yield* runner.slots.acquire("control", lease)
  return Effect.sync(() => {
    for (const lease of leases) lease.free()
  })
})

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
/** Starts an empty session and sends `text` as a plan-mode message; returns the client. */
const sendPlanning = (sessionId: string, text: string) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    yield* client.startSession(sessionId)
    yield* awaitSnapshot(sessionId, (s) => s.state !== null, "the session start")
    assert.isTrue(yield* client.sendUserMessage(sessionId, { text, planMode: true }))
    return client
  })

export const planSuite = (engine: EngineFactory) => {
  const withSession = <A, E>(
    setup: Omit<Setup, "engine">,
    body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client | Engine.RunnerState>
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
            const client = yield* sendPlanning("s-plan", "plan a trip")
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
    // Step slot (and the RPC reserve), which another session's held model call takes, and the test holds every
    // control slot (where AwaitUserMessage runs), so AwaitUserMessage cannot consume the first approval while the
    // test asks again. The approval's own commit wakes AwaitUserMessage, whose Execute then holds the
    // PendingPlanExecution lock while it waits for a slot: through RPCs a second
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
              const releaseControl = yield* holdControlSlots

              assert.isTrue(yield* client.executePlan("s-once", 1))
              assert.deepStrictEqual(yield* pendingApproval, Option.some({ revision: 1 }))
              const second = yield* Effect.flip(
                engine.invokeRpc(rpcFlow, rpcFlow.rpcs_.execute_plan, "s-once", { revision: 1 })
              )
              assert.strictEqual(second._tag, "RpcLockConflict", "AwaitUserMessage holds the approval's lock")
              const waiting = yield* client.getSnapshot("s-once")
              assert.strictEqual(waiting.state?.status, "waiting_for_user_message")
              assert.isNull(waiting.state?.activeTurnId ?? null, "the approval is not consumed yet")

              yield* releaseControl
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

    // execute_plan is false while a turn is active, and, with the session waiting for a user message, while a
    // queued or steered message or an interrupt is pending. RPCs reach the last three with no active turn only in
    // part, so each is checked in the state where it alone decides:
    // - a queued message: its own commit wakes AwaitUserMessage, which takes it from the channel, and its Execute
    //   holds the PendingPlanExecution lock until it started the turn. The test keeps that Execute from running
    //   (another session's held model call takes the only Step slot, and the test holds every control slot, where
    //   AwaitUserMessage runs): execute_plan meets the lock
    //   (RpcLockConflict, which AgentSessionClient retries until the turn started and then gets false for the
    //   active turn). A queued message stays in the channel with no active turn only in the window of a steered
    //   message below.
    // - a steered message: steer_user_message without an active turn queues its text, and steered messages are
    //   pending with no active turn only between the RunModel commit that ends a steered turn and
    //   ApplyTurnControl's commit, which starts the next turn with them; no RPC holds that window open. The test
    //   publishes a steered message with the engine client while the session waits.
    // - an interrupt: interrupts belong to a turn, and every turn end empties PendingInterrupts. The test writes
    //   one with the engine client while the session waits, then removes it and the same request is accepted.
    it.live(
      "execute_plan is false for the condition that holds: an active turn, an interrupt, a queued or steered message",
      () => {
        const slowCall = makeGate()
        const otherCall = makeGate()
        return withSession(
          {
            script: [
              { toolCalls: [{ id: "p1", name: "write_todos", arguments: todos(["Draft", "pending"]) }] },
              { text: "Drafted." },
              { text: "Thinking slowly." },
              {
                toolCalls: [
                  { id: "p2", name: "write_todos", arguments: todos(["Draft", "pending"], ["Edit", "pending"]) }
                ]
              },
              { text: "Revised." },
              { text: "Executed." },
              { text: "The other session's answer." },
              { text: "Noted." }
            ],
            holds: { 2: slowCall, 6: otherCall },
            maxConcurrentTasks: 2,
            tools
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              const engine = yield* Client.Client
              const rpcFlow = AgentSessionClient.clientFlow(FLOW_TYPE)
              const idle = (snapshot: Wire.AgentSnapshot) => {
                assert.strictEqual(snapshot.state?.status, "waiting_for_user_message")
                assert.isNull(snapshot.state?.activeTurnId ?? null)
              }
              yield* client.startSession("s-queue", { initialMessage: "hi" })
              // A chat turn may call write_todos too: outside a planning turn it writes an active plan.
              const first = yield* awaitTurns("s-queue", 1)
              assert.strictEqual(first.state?.interactionMode, "chat")
              assert.strictEqual(first.plan?.status, "active", "write_todos outside a planning turn writes active")

              // An active turn (its model call held), with nothing queued or steered yet.
              assert.isTrue(yield* client.sendUserMessage("s-queue", "slow one"))
              yield* awaitCount(() => kit.requests.length, 3, "the slow model call")
              const during = yield* client.getSnapshot("s-queue")
              assert.strictEqual(during.state?.activeTurnId, "turn-2")
              assert.strictEqual(during.queuedMessageCount + during.steeredMessages.length, 0)
              assert.isFalse(yield* client.executePlan("s-queue", 1), "a turn is active")
              // A queued plan_mode message steered by ID keeps plan_mode and plans.
              assert.isTrue(yield* client.sendUserMessage("s-queue", { text: "revise the plan", planMode: true }))
              const queued = yield* client.getSnapshot("s-queue")
              assert.strictEqual(queued.queuedMessages[0]?.message.planMode, true)
              assert.isTrue(
                yield* client.steerUserMessage("s-queue", { messageId: queued.queuedMessages[0]!.messageId })
              )
              const steered = yield* client.getSnapshot("s-queue")
              assert.deepStrictEqual(
                steered.steeredMessages.map((m) => m.message),
                [{ text: "revise the plan", planMode: true }]
              )
              yield* slowCall.open
              const revised = yield* awaitTurns("s-queue", 3)
              assert.strictEqual(revised.state?.interactionMode, "planning", "the steered message kept plan_mode")
              assert.deepStrictEqual(offered(kit.requests[3]!), ["write_todos"])
              assert.deepStrictEqual([revised.plan?.revision, revised.plan?.status], [2, "draft"])

              // An interrupt pending while the session waits: false; without it the same request is accepted.
              const interrupt: Wire.AgentInterrupt = {
                interruptId: "w1",
                kind: "tool_approval",
                toolCallId: "w1",
                toolName: "send_email",
                arguments: "{}",
                createdAt: new Date().toISOString(),
                deadline: null,
                question: null,
                choices: [],
                allowsFreeText: true
              }
              yield* engine.setAttribute("s-queue", Persistence.PendingInterrupts, [interrupt])
              const interrupted = yield* client.getSnapshot("s-queue")
              idle(interrupted)
              assert.lengthOf(interrupted.pendingInterrupts, 1)
              assert.strictEqual(interrupted.queuedMessageCount + interrupted.steeredMessages.length, 0)
              assert.isFalse(yield* client.executePlan("s-queue", 2), "an interrupt is pending")
              yield* engine.setAttribute("s-queue", Persistence.PendingInterrupts, [])
              assert.isTrue(yield* client.executePlan("s-queue", 2))
              const executed = yield* awaitTurns("s-queue", 4)
              assert.strictEqual(executed.state?.interactionMode, "executing")
              assert.deepStrictEqual([executed.plan?.revision, executed.plan?.status], [2, "active"])

              // A queued message while the session waits: the wait it wakes holds the lock execute_plan takes.
              yield* client.startSession("s-queue-other", { initialMessage: "hold the slot" })
              yield* awaitCount(() => kit.requests.length, 7, "the other session's model call")
              const releaseControl = yield* holdControlSlots
              assert.isTrue(yield* client.sendUserMessage("s-queue", "one more thing"))
              const waiting = yield* client.getSnapshot("s-queue")
              idle(waiting)
              assert.strictEqual(waiting.queuedMessageCount, 0, "the woken wait took the message in its commit")
              const refused = yield* Effect.flip(
                engine.invokeRpc(rpcFlow, rpcFlow.rpcs_.execute_plan, "s-queue", { revision: 2 })
              )
              assert.strictEqual(refused._tag, "RpcLockConflict", "the woken AwaitUserMessage holds the lock")
              yield* releaseControl
              yield* otherCall.open
              const chat = yield* awaitTurns("s-queue", 5)
              assert.strictEqual(chat.state?.interactionMode, "chat")
              assert.strictEqual(chat.messages.at(-1)?.text, "Noted.")

              // A steered message while the session waits: false.
              yield* engine.publish("s-queue", Persistence.SteeredUserMessages, { text: "and then", planMode: false })
              const pending = yield* client.getSnapshot("s-queue")
              idle(pending)
              assert.lengthOf(pending.steeredMessages, 1)
              assert.strictEqual(pending.queuedMessageCount, 0)
              assert.lengthOf(pending.pendingInterrupts, 0)
              assert.deepStrictEqual([pending.plan?.revision, pending.plan?.status], [2, "active"])
              assert.isFalse(yield* client.executePlan("s-queue", 2), "a steered message is pending")
            })
        )
      }
    )

    it.live("planningToolChoice auto: no forced tool, a text answer ends the planning turn without a draft", () =>
      withSession({ script: [{ text: "Which city?" }] }, (kit) =>
        Effect.gen(function* () {
          const client = yield* sendPlanning("s-auto", "plan a trip")
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
            const client = yield* sendPlanning("s-required", "plan a trip")
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
