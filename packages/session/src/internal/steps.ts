// The Steps of the session Flow (docs/session-contract.md, "Session Flow contract"). Every Step declares its
// errors (`StepDef<Input, Error, Runner, Recovers>`): RunModel fails with ModelCallError; a tool Step's body
// fails with ToolExecutionError | ToolAttemptError, and the Step records the first as `failed` (the model sees
// it, no retry) while the second fails the attempt. The failure routes recover those errors and the engine's
// (a commit that is too large arrives as a typed ValueTooLarge).
import {
  type ExecuteContext,
  RecoveryError,
  Step,
  type StepContext,
  StepDecision,
  type StepDef,
  StepMovement,
  Timer,
  Wait
} from "@durable-agent/engine"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as BuiltInTools from "../BuiltInTools.ts"
import { ModelCallError, ToolAttemptError, type ToolExecutionError } from "../Errors.ts"
import type { EventWriter } from "../EventWriter.ts"
import type { Heartbeat } from "../Heartbeat.ts"
import * as P from "../Persistence.ts"
import { EFFECT_TABLE, parseToolArguments, resolveToolPolicy, toolCallIdProblem } from "../Policy.ts"
import {
  type AgentFrameworkRunnerShape,
  type AgentTurnContext,
  type DeferredToolCall,
  type FrameworkMessage,
  isToolInputRequested,
  isToolTaskPending,
  isToolTaskStarted,
  type ToolExecutionResult,
  type ToolInputRequested,
  type ToolTaskPending,
  type ToolTaskStarted
} from "../Runner.ts"
import * as Wire from "../wire/index.ts"
import { NoInput, ResultCountInput, StartInput, ToolCallIdInput, TurnIdInput } from "./schemas.ts"
import {
  appendMessages,
  beginTurn,
  beginTurnFromMessages,
  cancellationRejection,
  currentPlan,
  type Emitter,
  emitter,
  endControlledTurn,
  endTurn,
  failTurn,
  finalizeRecord,
  initialState,
  isBlank,
  isFinal,
  isTurnCancelled,
  messagesOversize,
  nowIso,
  provideStepServices,
  recordUsage,
  requireState,
  type SessionConfig,
  secondsUntil,
  settingsProblem,
  storedMessages,
  turnControl,
  turnRecords,
  turnSettings,
  withHeartbeats,
  ZERO_USAGE
} from "./session.ts"
import { maxValueBytes, oversize, storedBytes, truncateText } from "./sizes.ts"

/** Both methods SYNC, as every Step of the session sets explicitly ("Session Flow contract", Rules). */
const sync = { execute: { durability: "sync" }, waitFor: { durability: "sync" } } as const

/** The retry of the session's bookkeeping Steps. */
const recoveryRetry = { maxAttempts: 5 } as const

/** The heartbeat timeout of RunModel and the tool Steps. */
const HEARTBEAT_TIMEOUT = "2 minutes"

/**
 * The session's Steps with their failure channels; `Id` is the runner's service key. RunModel fails with
 * ModelCallError, which RecordTurnFailure recovers; the tool Steps and PollToolTask fail with ToolAttemptError
 * (their bodies also raise ToolExecutionError, which they record themselves), which RecordToolFailure and
 * RecordToolOutcomeUnknown recover. Every failure route also reads the engine's own failures.
 */
export interface SessionSteps<Id = unknown> {
  readonly StartAgentSession: StepDef<typeof StartInput.Type, never, Id>
  readonly AwaitUserMessage: StepDef<null, never, Id>
  readonly RunModel: StepDef<Wire.RecordTurnFailureInput, ModelCallError, Id>
  readonly RecordTurnFailure: StepDef<Wire.RecordTurnFailureInput, never, Id, ModelCallError>
  readonly CallTool: StepDef<string, ToolAttemptError, Id>
  readonly CallSingleAttemptTool: StepDef<string, ToolAttemptError, Id>
  readonly AwaitToolApproval: StepDef<string>
  readonly RecordToolFailure: StepDef<string, never, never, ToolAttemptError>
  readonly RecordToolOutcomeUnknown: StepDef<string, never, never, ToolAttemptError>
  readonly PollToolTask: StepDef<string, ToolAttemptError, Id>
  readonly ResumeTurn: StepDef<number>
  readonly ApplyTurnControl: StepDef<null, never, Id>
  readonly FinishTurnCancellation: StepDef<string, never, Id>
  readonly CancelToolTask: StepDef<string, ToolAttemptError, Id>
  readonly AwaitQuestionAnswer: StepDef<string, never, Id>
  readonly AwaitTimer: StepDef<string, never, Id>
}

/**
 * The body of a tool Step (CallTool, CallSingleAttemptTool, PollToolTask): it fails with the tool's
 * ToolExecutionError, which the Step records as `failed`, or ToolAttemptError, which fails the attempt.
 */
export type ToolStepBody<Id = unknown> = (
  ctx: ExecuteContext,
  toolCallId: string
) => Effect.Effect<StepDecision, ToolExecutionError | ToolAttemptError, Id>

/**
 * Whether steering may abandon a waiting call: only while it has taken no effect, that is an approval, a
 * question that no started task asked, or a durable wait. The one predicate of every such decision.
 */
export const abandonable = (record: Wire.AgentToolCall): boolean =>
  record.status === "awaiting_approval" ||
  (record.status === "awaiting_answer" && record.taskId === null) ||
  record.status === "waiting_for_timer"

/** A question interrupt for a record that asks `inputQuestion`. */
const questionInterrupt = (
  record: Wire.AgentToolCall,
  interruptId: string,
  createdAt: string,
  deadline: string | null
): Wire.AgentInterrupt => ({
  interruptId,
  kind: "question",
  toolCallId: record.toolCallId,
  toolName: record.toolName,
  arguments: record.arguments,
  createdAt,
  deadline,
  question: record.inputQuestion,
  choices: record.inputChoices,
  allowsFreeText: record.inputAllowsFreeText
})

/** Writes `interrupt_raised` for an interrupt. */
const raised = (events: Emitter, interrupt: Wire.AgentInterrupt) =>
  events.interruptRaised({
    interruptId: interrupt.interruptId,
    toolCallId: interrupt.toolCallId,
    toolName: interrupt.toolName,
    deadline: interrupt.deadline,
    kind: interrupt.kind,
    question: interrupt.question,
    choices: interrupt.choices,
    allowsFreeText: interrupt.allowsFreeText
  })

/** The longest wait between two polls of a task: a day. */
const MAX_TASK_POLL_SECONDS = 86_400

/** A task's poll interval as the record keeps it: whole seconds, from 1 to a day. */
const taskPollSeconds = (seconds: number): number =>
  Math.min(MAX_TASK_POLL_SECONDS, Math.max(1, Math.ceil(Number.isFinite(seconds) ? seconds : 1)))

/** The status a call gets when its Step ran out of attempts: by its effect class. */
const exhaustedStatus = (record: Wire.AgentToolCall): "failed" | "outcome_unknown" =>
  EFFECT_TABLE[record.effect].exhausted

/** A new record for a requested call, before approval or its tool Step. */
const newRecord = (call: DeferredToolCall, turnId: string, deferralOrder: number): Wire.AgentToolCall => ({
  toolCallId: call.toolCallId,
  turnId,
  toolName: call.toolName,
  arguments: call.arguments,
  effect: call.policy.effect,
  requiresApproval: call.policy.requiresApproval,
  status: call.policy.requiresApproval ? "awaiting_approval" : "approved",
  output: null,
  error: null,
  rejectionMessage: null,
  deferralOrder,
  toolSourceReference: call.toolSourceReference ?? null,
  traceContext: null,
  waitUntil: null,
  inputContinuation: null,
  inputAnswers: [],
  inputQuestion: null,
  inputChoices: [],
  inputAllowsFreeText: true,
  cancellationReason: null,
  taskId: null,
  taskPollIntervalSeconds: null,
  taskAnswerPending: false
})

/** The `ValueTooLarge` detail of the first requested call whose record would not fit, if any. */
const recordsOversize = (calls: ReadonlyArray<DeferredToolCall>, turnId: string, limit: number): string | undefined => {
  for (const call of calls) {
    const problem = oversize(
      `AgentToolCalls[${call.toolCallId}]`,
      Wire.AgentToolCall,
      newRecord(call, turnId, 0),
      limit
    )
    if (problem !== undefined) return problem
  }
  return undefined
}

/** The reason to end the session when the failing Step's commit did not fit the framework run state. */
const runStateTooLargeDetail = (ctx: ExecuteContext): string | undefined =>
  Option.match(ctx.recoveryError, {
    onNone: () => undefined,
    onSome: (e) =>
      RecoveryError.is(e, "ValueTooLarge") &&
      (e.detail.includes("run state of") || e.error.name === P.FrameworkRunState.name)
        ? e.detail.includes("run state of")
          ? e.detail
          : `ValueTooLarge: ${e.detail}`
        : undefined
  })

/**
 * Ends the session on a framework run state that cannot be stored: status `failed`, `last_turn_error` the
 * detail, the turn cleared with its run state and pending interrupts (its records stay), `turn_failed`, and a
 * force-fail with the detail. It stores no turn message, because this commit would meet the same limit.
 */
const endSession = Effect.fnUntraced(function* (
  ctx: ExecuteContext,
  config: SessionConfig,
  state: Wire.AgentState,
  turnId: string,
  detail: string
) {
  ctx.delete(P.FrameworkRunState)
  ctx.set(P.PendingInterrupts, [])
  ctx.set(P.AgentState, {
    ...state,
    status: "failed",
    turnCount: state.turnCount + 1,
    activeTurnId: null,
    lastTurnError: detail
  })
  yield* emitter(ctx, config, turnId).turnFailed({ error: detail })
  return StepDecision.forceFail(detail)
})

/**
 * The session's Steps, and the tool Steps' bodies as they are (their types inferred, so the type tests pin
 * what the bodies really fail with).
 */
export const makeSteps = <Id>(config: SessionConfig<Id>) => {
  const toolStep = (effect: Wire.ToolEffect): StepDef<string, ToolAttemptError, Id> =>
    EFFECT_TABLE[effect].step === "CallTool" ? CallTool : CallSingleAttemptTool

  const turnContext = (
    ctx: ExecuteContext,
    turnId: string,
    state: Wire.AgentState,
    messages: ReadonlyArray<Wire.AgentMessage>
  ): AgentTurnContext => ({
    flowId: ctx.flowId,
    turnId,
    stepExecutionId: ctx.stepExecutionId,
    attempt: ctx.attempt,
    messages,
    frameworkRunState: Option.getOrNull(ctx.get(P.FrameworkRunState)),
    toolCalls: turnRecords(ctx, turnId),
    sessionSettings: turnSettings(ctx, turnId),
    interactionMode: state.interactionMode,
    plan: currentPlan(ctx),
    enabledBuiltInTools: Wire.BuiltInToolName.literals.filter((name) => config.builtInTools.has(name)),
    toolPolicies: config.toolPolicies,
    defaultToolEffect: config.defaultToolEffect,
    resolveToolPolicy: (toolName, frameworkEffect) =>
      resolveToolPolicy(toolName, {
        toolPolicies: config.toolPolicies,
        defaultToolEffect: config.defaultToolEffect,
        frameworkEffect
      })
  })

  // -------------------------------------------------------------------------------------------------------
  // StartAgentSession
  // -------------------------------------------------------------------------------------------------------

  const StartAgentSession: StepDef<typeof StartInput.Type, never, Id> = Step({
    type: "StartAgentSession",
    input: StartInput,
    options: { ...sync, execute: { ...sync.execute, retry: recoveryRetry } },
    execute: Effect.fn("AgentSession.StartAgentSession")(function* (ctx, input) {
      const settings = input.sessionSettings
      if (settings !== null) {
        const problem = settingsProblem(settings)
        if (problem !== undefined) {
          return StepDecision.forceFail(`${Wire.INVALID_START_SESSION_SETTINGS_REASON}: ${problem}`)
        }
      }
      const runner = yield* config.runner
      ctx.set(P.AgentState, initialState)
      ctx.set(P.AgentUsage, ZERO_USAGE)
      ctx.set(P.PendingInterrupts, [])
      if (settings !== null && Object.keys(settings).length > 0) {
        ctx.set(P.SessionSettings, settings as Wire.SessionSettings)
      }
      if (input.initialMessage !== null && !isBlank(input.initialMessage)) {
        const turnId = yield* beginTurn(ctx, config, runner, initialState, [input.initialMessage])
        return turnId === null ? StepDecision.goTo(AwaitUserMessage, null) : StepDecision.goTo(RunModel, null)
      }
      return StepDecision.goTo(AwaitUserMessage, null)
    })
  })

  // -------------------------------------------------------------------------------------------------------
  // AwaitUserMessage
  // -------------------------------------------------------------------------------------------------------

  /** The plan whose approval AwaitUserMessage waits for: a draft or active plan. */
  const approvablePlan = (ctx: StepContext): Wire.AgentPlan | null => {
    const plan = currentPlan(ctx)
    return plan !== null && (plan.status === "draft" || plan.status === "active") ? plan : null
  }

  const AwaitUserMessage: StepDef<null, never, Id> = Step({
    type: "AwaitUserMessage",
    input: NoInput,
    options: {
      ...sync,
      execute: {
        ...sync.execute,
        retry: recoveryRetry,
        // PendingPlanExecution too: execute_plan meets the lock while a woken wait has not started its turn.
        locks: [P.TurnCancellationRequest, P.PendingPlanExecution]
      }
    },
    // A steer beats a queued message, which beats a plan execution: Channel conditions are selected in
    // argument order. A plan execution is waited for only while the plan is draft or active.
    waitFor: (ctx) => {
      const plan = approvablePlan(ctx)
      return plan === null
        ? Wait.anyOf(P.TurnControlRequests.forRange(1, Wire.CHANNEL_RANGE_MAX), P.QueuedUserMessages.forOne())
        : Wait.anyOf(
            P.TurnControlRequests.forRange(1, Wire.CHANNEL_RANGE_MAX),
            P.QueuedUserMessages.forOne(),
            P.PlanExecutions.forOne(String(plan.revision))
          )
    },
    execute: Effect.fn("AgentSession.AwaitUserMessage")(function* (ctx) {
      if (ctx.channelResults(P.TurnControlRequests).length > 0) return StepDecision.goTo(ApplyTurnControl, null)
      const runner = yield* config.runner
      const state = yield* requireState(ctx)
      const plan = approvablePlan(ctx)
      const approvals = plan === null ? [] : ctx.channelResults(P.PlanExecutions, String(plan.revision))
      if (approvals.length > 0) {
        // An approval: it is consumed whatever happens next, and runs only for the plan it names.
        ctx.delete(P.PendingPlanExecution)
        const revision = approvals[0]!.revision
        if (plan === null || plan.revision !== revision) return StepDecision.goTo(AwaitUserMessage, null)
        const turnId = Wire.formatTurnId(state.turnCount + 1)
        if (plan.status === "draft") {
          const now = yield* nowIso
          ctx.set(P.AgentPlan, { ...plan, status: "active", updatedAt: now })
          yield* emitter(ctx, config, turnId).planUpdated({
            revision,
            status: "active",
            taskCount: plan.tasks.length
          })
        }
        const started = yield* beginTurn(
          ctx,
          config,
          runner,
          state,
          [Wire.planExecutionApprovedMessage(revision)],
          "executing"
        )
        if (started === null) return StepDecision.goTo(AwaitUserMessage, null)
        yield* emitter(ctx, config, started).planExecutionStarted({ revision })
        return StepDecision.goTo(RunModel, null)
      }
      const started = yield* beginTurnFromMessages(ctx, config, runner, state, ctx.channelResults(P.QueuedUserMessages))
      return started ? StepDecision.goTo(RunModel, null) : StepDecision.goTo(AwaitUserMessage, null)
    })
  })

  // -------------------------------------------------------------------------------------------------------
  // RecordTurnFailure
  // -------------------------------------------------------------------------------------------------------

  const isFrameworkMessage = (m: unknown): m is FrameworkMessage => {
    if (typeof m !== "object" || m === null) return false
    const v = m as Record<string, unknown>
    return (v.role === "user" || v.role === "assistant" || v.role === "tool") && typeof v.frameworkItem === "string"
  }

  const RecordTurnFailure: StepDef<Wire.RecordTurnFailureInput, never, Id, ModelCallError> = Step({
    type: "RecordTurnFailure",
    input: Wire.RecordTurnFailureInput,
    recovers: ModelCallError,
    options: { ...sync, execute: { ...sync.execute, retry: recoveryRetry } },
    execute: Effect.fn("AgentSession.RecordTurnFailure")(function* (ctx) {
      const runner = yield* config.runner
      const state = yield* requireState(ctx)
      const turnId = state.activeTurnId
      if (turnId === null) return StepDecision.goTo(AwaitUserMessage, null)
      const runStateTooLarge = runStateTooLargeDetail(ctx)
      if (runStateTooLarge !== undefined) return yield* endSession(ctx, config, state, turnId, runStateTooLarge)
      const error = Option.match(ctx.recoveryError, {
        onNone: () => "the turn failed",
        onSome: (e) => `${e.errorType}: ${e.detail}`
      })
      let unfinished: ReadonlyArray<FrameworkMessage> = []
      if (runner.buildUnfinishedTurnMessages !== undefined) {
        const turn = turnContext(ctx, turnId, state, storedMessages(ctx))
        unfinished = yield* runner.buildUnfinishedTurnMessages(turn).pipe(
          Effect.flatMap((messages) =>
            Array.isArray(messages) && messages.every(isFrameworkMessage)
              ? Effect.succeed(messages)
              : Effect.fail(new Error("build_unfinished_turn_messages returned something other than messages"))
          ),
          Effect.catchCause((cause) =>
            Effect.as(Effect.logWarning("build_unfinished_turn_messages failed; its messages are left out", cause), [])
          )
        )
      }
      yield* failTurn(ctx, config, runner, state, turnId, error, unfinished)
      return StepDecision.goTo(AwaitUserMessage, null)
    })
  })
  // -------------------------------------------------------------------------------------------------------
  // RunModel
  // -------------------------------------------------------------------------------------------------------

  const RunModel: StepDef<Wire.RecordTurnFailureInput, ModelCallError, Id> = Step({
    type: "RunModel",
    input: Wire.RecordTurnFailureInput,
    error: ModelCallError,
    options: {
      ...sync,
      execute: {
        ...sync.execute,
        timeout: "15 minutes",
        retry: { maxAttempts: 3, totalDuration: "30 minutes", initialInterval: config.retryInitialInterval }
      },
      heartbeatTimeout: HEARTBEAT_TIMEOUT,
      onExecuteFailure: RecordTurnFailure
    },
    execute: Effect.fn("AgentSession.RunModel")(function* (ctx) {
      const runner = yield* config.runner
      const state = yield* requireState(ctx)
      const turnId = state.activeTurnId
      if (turnId === null) return StepDecision.goTo(AwaitUserMessage, null)
      yield* Effect.annotateCurrentSpan({
        "gen_ai.conversation.id": ctx.flowId,
        "dex.flow.id": ctx.flowId,
        "dex.step.execution_id": ctx.stepExecutionId,
        "dex.step.attempt": ctx.attempt,
        "dex.agent.turn.id": turnId
      })
      // A steered or cancelled turn ends here, before any model call, as ApplyTurnControl ends it.
      const control = turnControl(ctx, turnId)
      if (control !== null) {
        yield* endControlledTurn(
          ctx,
          config,
          runner,
          state,
          turnId,
          control,
          yield* unfinishedMessages(ctx, runner, state, turnId),
          ctx.channelSize(P.SteeredUserMessages)
        )
        return StepDecision.goTo(ApplyTurnControl, null)
      }
      // cancel_turn interrupts this attempt: the signal aborts the framework's call and its provider request.
      const controller = new AbortController()
      const turn = { ...turnContext(ctx, turnId, state, storedMessages(ctx)), cancellationSignal: controller.signal }
      const outcome = yield* runner.runModelStep(turn).pipe(
        withHeartbeats(ctx, config.heartbeatInterval),
        provideStepServices(ctx, config, turnId),
        Effect.onInterrupt(() => Effect.sync(() => controller.abort(new Error("the turn was cancelled"))))
      )
      const events = emitter(ctx, config, turnId)
      const nowMs = yield* Clock.currentTimeMillis
      const now = new Date(nowMs).toISOString()
      const limit = yield* maxValueBytes
      yield* recordUsage(ctx, events, outcome.usage)
      // Size rules: a message or record that cannot be stored fails the turn, and a run state that cannot be
      // stored ends the session, decided here so that no event claims what the commit would not keep.
      const tooLarge =
        messagesOversize(state, turnId, outcome.newMessages ?? [], now, limit) ??
        (outcome._tag === "ToolCallsRequested" ? recordsOversize(outcome.toolCalls, turnId, limit) : undefined)
      if (tooLarge !== undefined) {
        yield* failTurn(ctx, config, runner, state, turnId, `ValueTooLarge: ${tooLarge}`)
        return StepDecision.goTo(AwaitUserMessage, null)
      }
      if (outcome._tag !== "TurnCompleted") {
        const runStateBytes = storedBytes(Schema.String, outcome.frameworkRunState)
        if (runStateBytes > limit) {
          return yield* endSession(ctx, config, state, turnId, Wire.runStateTooLargeDetail(runStateBytes, limit))
        }
      }
      const unfinishedWithoutBuilder =
        outcome._tag !== "TurnCompleted" &&
        (outcome.newMessages?.length ?? 0) > 0 &&
        runner.buildUnfinishedTurnMessages === undefined
      if (unfinishedWithoutBuilder) {
        yield* failTurn(ctx, config, runner, state, turnId, Wire.UNFINISHED_TURN_MESSAGES_REQUIRED_ERROR)
        return StepDecision.goTo(AwaitUserMessage, null)
      }
      switch (outcome._tag) {
        case "TurnCompleted": {
          const next = appendMessages(ctx, state, turnId, outcome.newMessages, now)
          yield* endTurn(ctx, config, next, turnId, outcome.turnError ?? null)
          return StepDecision.goTo(AwaitUserMessage, null)
        }
        case "TurnContinued": {
          const next = appendMessages(ctx, state, turnId, outcome.newMessages, now)
          ctx.set(P.FrameworkRunState, outcome.frameworkRunState)
          ctx.set(P.AgentState, { ...next, status: "running_model" })
          return StepDecision.goTo(RunModel, null)
        }
        case "ToolCallsRequested": {
          const existing = turnRecords(ctx, turnId)
          const used = new Set(existing.map((r) => r.toolCallId))
          if (outcome.toolCalls.length === 0) {
            yield* failTurn(ctx, config, runner, state, turnId, "the runner requested tool calls but listed none")
            return StepDecision.goTo(AwaitUserMessage, null)
          }
          for (const call of outcome.toolCalls) {
            const problem = toolCallIdProblem(call.toolCallId, used)
            if (problem !== undefined) {
              yield* failTurn(ctx, config, runner, state, turnId, `invalid tool call: ${problem}`)
              return StepDecision.goTo(AwaitUserMessage, null)
            }
            used.add(call.toolCallId)
          }
          const next = appendMessages(ctx, state, turnId, outcome.newMessages ?? [], now)
          ctx.set(P.FrameworkRunState, outcome.frameworkRunState)
          const pending = [...Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])]
          const movements: Array<StepMovement> = []
          const deadline =
            config.approvalDeadlineMs === null ? null : new Date(nowMs + config.approvalDeadlineMs).toISOString()
          const planning = state.interactionMode === "planning"
          for (const [i, call] of outcome.toolCalls.entries()) {
            const builtIn = config.builtInTools.has(call.toolName) ? call.toolName : undefined
            const base = newRecord(call, turnId, existing.length + i)
            // A built-in call runs in the session's own Steps: no approval, the read effect.
            const record: Wire.AgentToolCall =
              builtIn === undefined
                ? base
                : { ...base, effect: "read", requiresApproval: false, status: "approved", toolSourceReference: null }
            yield* events.toolCallDeferred({
              toolCallId: record.toolCallId,
              toolName: record.toolName,
              effect: record.effect,
              requiresApproval: record.requiresApproval
            })
            if (planning && builtIn !== "write_todos") {
              // A planning turn only plans: every other call is rejected in this commit and never runs.
              yield* finalizeRecord(ctx, events, record, {
                status: "rejected",
                rejectionMessage: Wire.PLANNING_TURN_REJECTION_MESSAGE
              })
              continue
            }
            if (builtIn === "ask_user") {
              const args = BuiltInTools.validateAskUser(call.arguments)
              if (args._tag === "Invalid") {
                yield* finalizeRecord(ctx, events, record, {
                  status: "failed",
                  error: Wire.invalidBuiltInArgumentsError("ask_user", args.reason)
                })
                continue
              }
              const asking: Wire.AgentToolCall = {
                ...record,
                status: "awaiting_answer",
                inputQuestion: args.value.question,
                inputChoices: args.value.choices,
                inputAllowsFreeText: args.value.allowsFreeText
              }
              ctx.setAt(P.AgentToolCalls, record.toolCallId, asking)
              const interrupt = questionInterrupt(asking, record.toolCallId, now, deadline)
              pending.push(interrupt)
              yield* raised(events, interrupt)
              movements.push(StepMovement.of(AwaitQuestionAnswer, record.toolCallId))
              continue
            }
            if (builtIn === "durable_wait") {
              const args = BuiltInTools.validateDurableWait(call.arguments, config.maxDurableWaitSeconds)
              if (args._tag === "Invalid") {
                yield* finalizeRecord(ctx, events, record, {
                  status: "failed",
                  error: Wire.invalidBuiltInArgumentsError("durable_wait", args.reason)
                })
                continue
              }
              const waitUntil = new Date(nowMs + args.value.seconds * 1000).toISOString()
              ctx.setAt(P.AgentToolCalls, record.toolCallId, { ...record, status: "waiting_for_timer", waitUntil })
              yield* events.timerStarted({ toolCallId: record.toolCallId, waitUntil, reason: args.value.reason })
              movements.push(StepMovement.of(AwaitTimer, record.toolCallId))
              continue
            }
            if (builtIn === "write_todos") {
              // Settles in this commit: the plan is replaced, or every call of a response that called it more
              // than once fails and the plan stays as it was.
              const repeated = outcome.toolCalls.filter((c) => c.toolName === "write_todos").length > 1
              const tasks = repeated ? undefined : BuiltInTools.validateWriteTodos(call.arguments)
              if (tasks === undefined || tasks._tag === "Invalid") {
                yield* finalizeRecord(ctx, events, record, {
                  status: "failed",
                  error:
                    tasks === undefined
                      ? Wire.WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR
                      : Wire.invalidTodosError(tasks.reason)
                })
                continue
              }
              const revision = Option.match(ctx.get(P.AgentPlan), { onNone: () => 0, onSome: (p) => p.revision }) + 1
              const list = tasks.value
              const status: Wire.AgentPlanStatus =
                list.length === 0
                  ? "cleared"
                  : planning
                    ? "draft"
                    : list.every((t) => t.status === "completed")
                      ? "completed"
                      : "active"
              ctx.set(P.AgentPlan, { revision, status, tasks: list, updatedAt: now })
              yield* events.planUpdated({ revision, status, taskCount: list.length })
              yield* finalizeRecord(ctx, events, record, {
                status: "succeeded",
                output: Schema.encodeSync(Wire.WriteTodosResultJson)(
                  list.length === 0
                    ? { status: "cleared", revision }
                    : { status: "updated", revision, taskCount: list.length }
                )
              })
              continue
            }
            if (Option.isNone(parseToolArguments(call.arguments))) {
              yield* finalizeRecord(ctx, events, record, {
                status: "failed",
                error: Wire.invalidBuiltInArgumentsError(call.toolName, Wire.ARGUMENTS_NOT_JSON_OBJECT_REASON)
              })
            } else if (record.requiresApproval) {
              ctx.setAt(P.AgentToolCalls, record.toolCallId, record)
              const interrupt: Wire.AgentInterrupt = {
                interruptId: record.toolCallId,
                kind: "tool_approval",
                toolCallId: record.toolCallId,
                toolName: record.toolName,
                arguments: record.arguments,
                createdAt: now,
                deadline,
                question: null,
                choices: [],
                allowsFreeText: true
              }
              pending.push(interrupt)
              yield* events.interruptRaised({
                interruptId: interrupt.interruptId,
                toolCallId: interrupt.toolCallId,
                toolName: interrupt.toolName,
                deadline: interrupt.deadline,
                kind: interrupt.kind,
                question: null,
                choices: [],
                allowsFreeText: true
              })
              movements.push(StepMovement.of(AwaitToolApproval, record.toolCallId))
            } else {
              ctx.setAt(P.AgentToolCalls, record.toolCallId, record)
              movements.push(StepMovement.of(toolStep(record.effect), record.toolCallId))
            }
          }
          ctx.set(P.PendingInterrupts, pending)
          ctx.set(P.AgentState, { ...next, status: "running_tools" })
          return StepDecision.goToMany(...movements, StepMovement.of(ResumeTurn, outcome.toolCalls.length))
        }
      }
    })
  })

  // -------------------------------------------------------------------------------------------------------
  // Tool Steps
  // -------------------------------------------------------------------------------------------------------

  /** The span attributes of a tool Step or a poll. */
  const annotateToolSpan = (ctx: ExecuteContext, record: Wire.AgentToolCall) =>
    Effect.annotateCurrentSpan({
      "gen_ai.tool.name": record.toolName,
      "gen_ai.tool.call.id": record.toolCallId,
      "dex.flow.id": ctx.flowId,
      "dex.step.execution_id": ctx.stepExecutionId,
      "dex.step.attempt": ctx.attempt,
      "dex.agent.turn.id": record.turnId
    })

  /**
   * Runs a tool call or a task poll with heartbeats and the Step's services: a result becomes `succeeded`, and
   * what `passOn` recognizes (a started or a pending task) comes back as is. Both errors pass through.
   */
  const settle = <T>(
    ctx: ExecuteContext,
    record: Wire.AgentToolCall,
    passOn: (outcome: ToolExecutionResult | T) => outcome is T,
    call: Effect.Effect<ToolExecutionResult | T, ToolExecutionError | ToolAttemptError, EventWriter | Heartbeat>
  ) =>
    call.pipe(
      Effect.map((r) => (passOn(r) ? r : { status: "succeeded" as const, output: r.output, error: null })),
      withHeartbeats(ctx, config.heartbeatInterval),
      provideStepServices(ctx, config, record.turnId)
    )

  /**
   * A tool Step's execute: its body, with a ToolExecutionError recorded as `failed` with the error's message
   * (the model sees it; not retried). ToolAttemptError fails the attempt.
   */
  const recordingToolErrors = (name: string, body: ToolStepBody<Id>) =>
    Effect.fn(name)(function* (ctx: ExecuteContext, toolCallId: string) {
      return yield* body(ctx, toolCallId).pipe(
        Effect.catchTag("ToolExecutionError", (e) =>
          Effect.gen(function* () {
            const found = ctx.getAt(P.AgentToolCalls, toolCallId)
            if (Option.isNone(found)) return StepDecision.deadEnd()
            const events = emitter(ctx, config, found.value.turnId)
            return yield* finishCall(ctx, events, found.value, { status: "failed", output: null, error: e.message })
          })
        )
      )
    })

  const callToolBody = (ctx: ExecuteContext, toolCallId: string) =>
    Effect.gen(function* () {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      // A record that is gone (the turn ended) or already final ends the Step without running or publishing.
      if (Option.isNone(found) || isFinal(found.value) || found.value.status !== "approved") {
        return StepDecision.deadEnd()
      }
      const record = found.value
      const runner = yield* config.runner
      const events = emitter(ctx, config, record.turnId)
      // Before tool_call_started, a steered or cancelled turn abandons the call: it never runs.
      const control = turnControl(ctx, record.turnId)
      if (control !== null) {
        yield* finalizeRecord(ctx, events, record, {
          status: "rejected",
          rejectionMessage: cancellationRejection(control),
          cancellationReason: control
        })
        return StepDecision.deadEnd()
      }
      yield* annotateToolSpan(ctx, record)
      // The event's heartbeat (see `announce`) comes first: a started tool is never handed out again as never-run.
      yield* events.toolCallStarted({ toolCallId: record.toolCallId, toolName: record.toolName })
      const outcome = yield* settle(
        ctx,
        record,
        (o): o is ToolTaskStarted | ToolInputRequested => isToolTaskStarted(o) || isToolInputRequested(o),
        runner.executeDeferredToolCall({
          inputAnswers: record.inputAnswers,
          flowId: ctx.flowId,
          turnId: record.turnId,
          toolCall: record,
          idempotencyKey: Wire.toolCallIdempotencyKey(ctx.flowId, record.turnId, record.toolCallId),
          attempt: ctx.attempt,
          heartbeatCheckpoint: ctx.heartbeatCheckpoint,
          supportsToolTasks: runner.pollToolTask !== undefined,
          saveHeartbeatCheckpoint: (checkpoint) => ctx.heartbeat(checkpoint)
        })
      )
      if ("_tag" in outcome) {
        return isToolInputRequested(outcome)
          ? yield* recordInputRequested(ctx, record, outcome)
          : yield* recordTaskStarted(ctx, events, record, outcome, runner)
      }
      return yield* finishCall(ctx, events, record, outcome)
    })

  /**
   * The tool asks the user before it takes effect: the record waits for the answer, and AwaitQuestionAnswer
   * raises the question under the PendingInterrupts lock (a tool Step never writes PendingInterrupts).
   */
  const recordInputRequested = (ctx: ExecuteContext, record: Wire.AgentToolCall, request: ToolInputRequested) => {
    ctx.setAt(P.AgentToolCalls, record.toolCallId, {
      ...record,
      status: "awaiting_answer",
      inputContinuation: request.continuation,
      inputQuestion: request.question,
      inputChoices: request.choices,
      inputAllowsFreeText: request.allowsFreeText
    })
    return Effect.succeed(StepDecision.goTo(AwaitQuestionAnswer, record.toolCallId))
  }

  /** Records a tool's result or failure, unless its output does not fit in the record. */
  const finishCall = Effect.fnUntraced(function* (
    ctx: ExecuteContext,
    events: Emitter,
    record: Wire.AgentToolCall,
    result: {
      readonly status: "succeeded" | "failed"
      readonly output: string | null
      readonly error: string | null
    }
  ) {
    const limit = yield* maxValueBytes
    const problem = oversize(
      `AgentToolCalls[${record.toolCallId}]`,
      Wire.AgentToolCall,
      { ...record, ...result },
      limit
    )
    if (problem !== undefined) {
      // The output does not fit in the record: recorded as the failure route would record a ValueTooLarge
      // commit (by effect, without the output), in this commit, so tool_call_finished tells the truth.
      yield* finalizeRecord(ctx, events, record, {
        status: exhaustedStatus(record),
        error: truncateText(`ValueTooLarge: ${problem}`, Math.floor(limit / 4))
      })
      return StepDecision.deadEnd()
    }
    yield* finalizeRecord(ctx, events, record, result)
    return StepDecision.deadEnd()
  })

  /**
   * A tool started a task: the record waits for it (`waiting_for_task`) and PollToolTask polls it. A runner
   * that cannot poll, a blank task ID or an interval that is not a number end the call by effect, since the
   * task may run.
   */
  const recordTaskStarted = Effect.fnUntraced(function* (
    ctx: ExecuteContext,
    events: Emitter,
    record: Wire.AgentToolCall,
    task: ToolTaskStarted,
    runner: AgentFrameworkRunnerShape
  ) {
    const problem =
      runner.pollToolTask === undefined
        ? "the tool started a task, but the runner does not poll tool tasks"
        : typeof task.taskId !== "string" || task.taskId.trim().length === 0
          ? "the tool started a task with a blank task ID"
          : typeof task.pollIntervalSeconds !== "number" || Number.isNaN(task.pollIntervalSeconds)
            ? "the tool started a task without a numeric poll interval"
            : undefined
    if (problem !== undefined) {
      yield* finalizeRecord(ctx, events, record, {
        status: record.effect === "read" ? "failed" : "outcome_unknown",
        error: problem
      })
      return StepDecision.deadEnd()
    }
    ctx.setAt(P.AgentToolCalls, record.toolCallId, {
      ...record,
      status: "waiting_for_task",
      taskId: task.taskId,
      taskPollIntervalSeconds: taskPollSeconds(task.pollIntervalSeconds),
      inputContinuation: null
    })
    yield* events.raw(
      "tool_task_started",
      Schema.encodeSync(Wire.ToolTaskStartedPayload)({
        toolCallId: record.toolCallId,
        toolName: record.toolName,
        taskId: task.taskId
      })
    )
    return StepDecision.goTo(PollToolTask, record.toolCallId)
  })

  /** Records a call whose tool Step ran out of attempts, from the recovery error. */
  const recordExhausted = (name: string, exhausted: (record: Wire.AgentToolCall) => "failed" | "outcome_unknown") =>
    Effect.fn(name)(function* (ctx: ExecuteContext, toolCallId: string) {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      if (Option.isNone(found) || isFinal(found.value)) return StepDecision.deadEnd()
      const record = found.value
      const runStateTooLarge = runStateTooLargeDetail(ctx)
      if (runStateTooLarge !== undefined) {
        const state = yield* requireState(ctx)
        if (state.activeTurnId !== null)
          return yield* endSession(ctx, config, state, state.activeTurnId, runStateTooLarge)
      }
      const events = emitter(ctx, config, record.turnId)
      const limit = yield* maxValueBytes
      const recovery = Option.getOrElse(ctx.recoveryError, () => ({
        errorType: "Unknown",
        detail: "the tool Step failed",
        attemptProgress: "unspecified" as const
      }))
      const neverRan =
        recovery.attemptProgress === "not_started" && record.status === "approved" && record.inputAnswers.length === 0
      if (record.taskId !== null && record.cancellationReason === "turn_cancelled") {
        // CancelToolTask ran out of attempts: the task may have run, recorded as cancel_turn abandoned it.
        yield* finalizeRecord(ctx, events, record, { status: "outcome_unknown", error: Wire.TOOL_TASK_CANCELLED_ERROR })
        return StepDecision.deadEnd()
      }
      yield* finalizeRecord(
        ctx,
        events,
        record,
        neverRan
          ? { status: "failed", error: truncateText(Wire.toolCallNotRunError(recovery.detail), Math.floor(limit / 4)) }
          : { status: exhausted(record), error: truncateText(recovery.detail, Math.floor(limit / 4)) }
      )
      return StepDecision.deadEnd()
    })

  const RecordToolFailure: StepDef<string, never, never, ToolAttemptError> = Step({
    type: "RecordToolFailure",
    input: ToolCallIdInput,
    recovers: ToolAttemptError,
    options: { ...sync, execute: { ...sync.execute, retry: recoveryRetry } },
    execute: recordExhausted("AgentSession.RecordToolFailure", (r) => EFFECT_TABLE[r.effect].exhausted)
  })

  const RecordToolOutcomeUnknown: StepDef<string, never, never, ToolAttemptError> = Step({
    type: "RecordToolOutcomeUnknown",
    input: ToolCallIdInput,
    recovers: ToolAttemptError,
    options: { ...sync, execute: { ...sync.execute, retry: recoveryRetry } },
    execute: recordExhausted("AgentSession.RecordToolOutcomeUnknown", () => "outcome_unknown")
  })

  const CallTool: StepDef<string, ToolAttemptError, Id> = Step({
    type: "CallTool",
    input: ToolCallIdInput,
    error: ToolAttemptError,
    options: {
      ...sync,
      execute: {
        ...sync.execute,
        retry: { maxAttempts: EFFECT_TABLE.read.maxAttempts, initialInterval: config.retryInitialInterval }
      },
      heartbeatTimeout: HEARTBEAT_TIMEOUT,
      onExecuteFailure: RecordToolFailure
    },
    execute: recordingToolErrors("AgentSession.CallTool", callToolBody)
  })

  const CallSingleAttemptTool: StepDef<string, ToolAttemptError, Id> = Step({
    type: "CallSingleAttemptTool",
    input: ToolCallIdInput,
    error: ToolAttemptError,
    options: {
      ...sync,
      execute: { ...sync.execute, retry: { maxAttempts: EFFECT_TABLE.unclassified.maxAttempts } },
      heartbeatTimeout: HEARTBEAT_TIMEOUT,
      onExecuteFailure: RecordToolOutcomeUnknown
    },
    execute: recordingToolErrors("AgentSession.CallSingleAttemptTool", callToolBody)
  })

  // -------------------------------------------------------------------------------------------------------
  // PollToolTask
  // -------------------------------------------------------------------------------------------------------

  // One poll per execution, after the record's interval; a pending task moves to itself again. The failure
  // route records by effect: RecordToolFailure records `failed` for a read and `outcome_unknown` otherwise.
  const PollToolTask: StepDef<string, ToolAttemptError, Id> = Step({
    type: "PollToolTask",
    input: ToolCallIdInput,
    error: ToolAttemptError,
    options: {
      ...sync,
      execute: {
        ...sync.execute,
        retry: { maxAttempts: EFFECT_TABLE.read.maxAttempts, initialInterval: config.retryInitialInterval }
      },
      heartbeatTimeout: HEARTBEAT_TIMEOUT,
      onExecuteFailure: RecordToolFailure
    },
    waitFor: (ctx, toolCallId) => {
      const record = Option.getOrUndefined(ctx.getAt(P.AgentToolCalls, toolCallId))
      const cancelled = record !== undefined && isTurnCancelled(ctx, record.turnId)
      const seconds =
        record === undefined || record.taskAnswerPending || cancelled ? 0 : (record.taskPollIntervalSeconds ?? 1)
      return Wait.anyOf(Timer.seconds(seconds))
    },
    execute: recordingToolErrors("AgentSession.PollToolTask", (ctx, toolCallId) => pollToolTaskBody(ctx, toolCallId))
  })

  const pollToolTaskBody = (ctx: ExecuteContext, toolCallId: string) =>
    Effect.gen(function* () {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      if (Option.isNone(found) || found.value.status !== "waiting_for_task") return StepDecision.deadEnd()
      const record = found.value
      // Started after cancel_turn committed: FinishTurnCancellation hands the task to CancelToolTask.
      if (isTurnCancelled(ctx, record.turnId)) return StepDecision.goTo(FinishTurnCancellation, record.turnId)
      const runner = yield* config.runner
      const events = emitter(ctx, config, record.turnId)
      yield* annotateToolSpan(ctx, record)
      if (runner.pollToolTask === undefined) {
        yield* finalizeRecord(ctx, events, record, {
          status: exhaustedStatus(record),
          error: "the runner does not poll tool tasks"
        })
        return StepDecision.deadEnd()
      }
      const outcome = yield* settle(
        ctx,
        record,
        (o): o is ToolTaskPending | ToolInputRequested => isToolTaskPending(o) || isToolInputRequested(o),
        runner.pollToolTask({
          flowId: ctx.flowId,
          turnId: record.turnId,
          toolCall: record,
          idempotencyKey: Wire.toolCallIdempotencyKey(ctx.flowId, record.turnId, record.toolCallId),
          attempt: ctx.attempt,
          inputAnswers: record.inputAnswers,
          // The resolution of the task's last question until a poll's commit says it reached the task.
          pendingAnswer: record.taskAnswerPending ? (record.inputAnswers.at(-1) ?? null) : null
        })
      )
      // Every poll's commit clears task_answer_pending: the runner delivered the answer or asks again.
      if ("_tag" in outcome && outcome._tag === "ToolInputRequested") {
        return yield* recordInputRequested(ctx, { ...record, taskAnswerPending: false }, outcome)
      }
      if ("_tag" in outcome) {
        ctx.setAt(P.AgentToolCalls, toolCallId, {
          ...record,
          taskPollIntervalSeconds: taskPollSeconds(outcome.pollIntervalSeconds),
          inputContinuation: outcome.continuation ?? null,
          taskAnswerPending: false
        })
        return StepDecision.goTo(PollToolTask, toolCallId)
      }
      return yield* finishCall(ctx, events, { ...record, taskAnswerPending: false }, outcome)
    })

  // -------------------------------------------------------------------------------------------------------
  // Interrupt deadlines (AwaitToolApproval, AwaitQuestionAnswer)
  // -------------------------------------------------------------------------------------------------------

  /** Whether an interrupt's deadline has passed; a Timer may fire before it (Timers take whole seconds). */
  const deadlinePassed = (interrupt: Wire.AgentInterrupt, nowMs: number): boolean =>
    interrupt.deadline != null && nowMs >= Date.parse(interrupt.deadline)

  /** An interrupt whose deadline passed: removes it from PendingInterrupts and writes its interrupt_resolved. */
  const expireInterrupt = Effect.fnUntraced(function* (
    ctx: ExecuteContext,
    events: Emitter,
    interrupt: Wire.AgentInterrupt,
    kind: Wire.AgentInterrupt["kind"],
    message: string
  ) {
    const pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])
    ctx.set(
      P.PendingInterrupts,
      pending.filter((i) => i !== interrupt)
    )
    yield* events.interruptResolved({
      interruptId: interrupt.interruptId,
      approved: false,
      rejectionMessage: message,
      kind,
      answered: false,
      cancellationReason: null
    })
  })

  /** An interrupt whose deadline passed ends its call: the interrupt goes and the call records `rejected`. */
  const rejectAtDeadline = Effect.fnUntraced(function* (
    ctx: ExecuteContext,
    events: Emitter,
    record: Wire.AgentToolCall,
    interrupt: Wire.AgentInterrupt,
    kind: Wire.AgentInterrupt["kind"],
    message: string
  ) {
    yield* expireInterrupt(ctx, events, interrupt, kind, message)
    yield* finalizeRecord(ctx, events, record, { status: "rejected", rejectionMessage: message })
    return StepDecision.deadEnd()
  })

  // -------------------------------------------------------------------------------------------------------
  // AwaitToolApproval
  // -------------------------------------------------------------------------------------------------------

  /**
   * A waiting Step woken by ToolCallCancellations. A turn neither steered nor cancelled (a wake left from an
   * earlier turn whose call reused the ID) waits again, and so does a call whose interrupt is gone while its
   * answer is queued. Otherwise the call is abandoned: its interrupt goes, and it records `rejected` with the
   * cancellation result.
   */
  const cancellationWake = Effect.fnUntraced(function* (
    ctx: ExecuteContext,
    events: Emitter,
    record: Wire.AgentToolCall,
    again: StepDef<string, never, Id>
  ) {
    const reason = turnControl(ctx, record.turnId)
    const pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])
    const interrupt = pending.find((i) => i.toolCallId === record.toolCallId)
    const interruptId = record.status === "awaiting_answer" ? questionInterruptId(record) : record.toolCallId
    const answered = interrupt === undefined && ctx.channelSize(P.InterruptResolutions, interruptId) > 0
    if (reason === null || answered || !abandonable(record)) return StepDecision.goTo(again, record.toolCallId)
    if (interrupt !== undefined) {
      ctx.set(
        P.PendingInterrupts,
        pending.filter((i) => i !== interrupt)
      )
      yield* events.interruptResolved({
        interruptId: interrupt.interruptId,
        approved: false,
        rejectionMessage: cancellationRejection(reason),
        kind: interrupt.kind,
        answered: false,
        cancellationReason: reason
      })
    }
    yield* finalizeRecord(ctx, events, record, {
      status: "rejected",
      rejectionMessage: cancellationRejection(reason),
      cancellationReason: reason
    })
    return StepDecision.deadEnd()
  })

  const AwaitToolApproval: StepDef<string> = Step({
    type: "AwaitToolApproval",
    input: ToolCallIdInput,
    options: { ...sync, execute: { ...sync.execute, retry: recoveryRetry, locks: [P.PendingInterrupts] } },
    waitFor: (ctx, toolCallId) => {
      const pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => []).find(
        (i) => i.interruptId === toolCallId && i.kind === "tool_approval"
      )
      const channels = [P.ToolCallCancellations.forOne(toolCallId), P.InterruptResolutions.forOne(toolCallId)]
      // waitFor has no clock in the engine's Step context: the wall clock stands in (see the report).
      return pending?.deadline
        ? Wait.anyOf(Timer.seconds(secondsUntil(pending.deadline, Date.now())), ...channels)
        : Wait.anyOf(...channels)
    },
    execute: Effect.fn("AgentSession.AwaitToolApproval")(function* (ctx, toolCallId) {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      if (Option.isNone(found) || isFinal(found.value)) return StepDecision.deadEnd()
      const record = found.value
      const events = emitter(ctx, config, record.turnId)
      const resolution = ctx.channelResults(P.InterruptResolutions, toolCallId)[0]
      if (resolution !== undefined) {
        yield* events.interruptResolved({
          interruptId: toolCallId,
          approved: resolution.approved,
          rejectionMessage: resolution.approved ? null : resolution.rejectionMessage,
          kind: "tool_approval",
          answered: false,
          cancellationReason: null
        })
        if (resolution.approved) {
          ctx.setAt(P.AgentToolCalls, toolCallId, { ...record, status: "approved" })
          return StepDecision.goTo(toolStep(record.effect), toolCallId)
        }
        yield* finalizeRecord(ctx, events, record, {
          status: "rejected",
          rejectionMessage: resolution.rejectionMessage
        })
        return StepDecision.deadEnd()
      }
      if (ctx.timerFired()) {
        const pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])
        const interrupt = pending.find((i) => i.interruptId === toolCallId && i.kind === "tool_approval")
        const nowMs = yield* Clock.currentTimeMillis
        // resolve_interrupt already removed it (its resolution is queued), or the Timer fired early: wait again.
        if (interrupt === undefined || !deadlinePassed(interrupt, nowMs)) {
          return StepDecision.goTo(AwaitToolApproval, toolCallId)
        }
        return yield* rejectAtDeadline(
          ctx,
          events,
          record,
          interrupt,
          "tool_approval",
          Wire.APPROVAL_DEADLINE_PASSED_MESSAGE
        )
      }
      // A cancellation wake: only the flags decide, and an answer that committed first wins.
      return yield* cancellationWake(ctx, events, record, AwaitToolApproval)
    })
  })

  // -------------------------------------------------------------------------------------------------------
  // AwaitQuestionAnswer
  // -------------------------------------------------------------------------------------------------------

  /** Whether the record is an `ask_user` call (the name is reserved while the built-in is enabled). */
  const isAskUser = (record: Wire.AgentToolCall) =>
    record.toolName === "ask_user" && config.builtInTools.has("ask_user")

  /** The interrupt ID of a record's question: the call's ID for ask_user, `<id>-input-<n>` for a tool's. */
  const questionInterruptId = (record: Wire.AgentToolCall) =>
    isAskUser(record)
      ? record.toolCallId
      : Wire.toolQuestionInterruptId(record.toolCallId, record.inputAnswers.length + 1)

  /**
   * A started task's question was resolved: the resolution joins `input_answers`, `task_answer_pending` marks it
   * for the next poll, and the record waits for the task again, which PollToolTask polls at once.
   */
  const resumeTask = (ctx: ExecuteContext, record: Wire.AgentToolCall, resolution: Wire.QuestionAnswer) => {
    ctx.setAt(P.AgentToolCalls, record.toolCallId, {
      ...record,
      status: "waiting_for_task",
      inputQuestion: null,
      inputChoices: [],
      inputAllowsFreeText: true,
      inputAnswers: [...record.inputAnswers, resolution],
      taskAnswerPending: true
    })
    return StepDecision.goTo(PollToolTask, record.toolCallId)
  }

  const AwaitQuestionAnswer: StepDef<string, never, Id> = Step({
    type: "AwaitQuestionAnswer",
    input: ToolCallIdInput,
    options: { ...sync, execute: { ...sync.execute, retry: recoveryRetry, locks: [P.PendingInterrupts] } },
    waitFor: (ctx, toolCallId) => {
      const record = Option.getOrUndefined(ctx.getAt(P.AgentToolCalls, toolCallId))
      if (record === undefined) return Wait.anyOf(Timer.seconds(0))
      const interruptId = questionInterruptId(record)
      const pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => []).find(
        (i) => i.interruptId === interruptId
      )
      const channels = [P.ToolCallCancellations.forOne(toolCallId), P.InterruptResolutions.forOne(interruptId)]
      if (pending === undefined && ctx.channelSize(P.InterruptResolutions, interruptId) === 0) {
        // A tool's question that is neither raised nor answered: Execute raises it at once.
        return Wait.anyOf(Timer.seconds(0), ...channels)
      }
      return pending?.deadline
        ? Wait.anyOf(Timer.seconds(secondsUntil(pending.deadline, Date.now())), ...channels)
        : Wait.anyOf(...channels)
    },
    execute: Effect.fn("AgentSession.AwaitQuestionAnswer")(function* (ctx, toolCallId) {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      if (Option.isNone(found) || found.value.status !== "awaiting_answer") return StepDecision.deadEnd()
      const record = found.value
      const events = emitter(ctx, config, record.turnId)
      const interruptId = questionInterruptId(record)
      const pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])
      const interrupt = pending.find((i) => i.interruptId === interruptId)
      const resolution = ctx.channelResults(P.InterruptResolutions, interruptId)[0]
      const question = record.inputQuestion ?? ""
      if (resolution !== undefined) {
        const answered = resolution.approved && resolution.answer !== null
        yield* events.interruptResolved({
          interruptId,
          approved: resolution.approved,
          rejectionMessage: answered ? null : resolution.rejectionMessage,
          kind: "question",
          answered,
          cancellationReason: null
        })
        if (answered && isAskUser(record)) {
          yield* finalizeRecord(ctx, events, record, {
            status: "succeeded",
            output: Schema.encodeSync(Wire.AskUserAnsweredResultJson)({
              status: "answered",
              answer: resolution.answer!
            })
          })
          return StepDecision.deadEnd()
        }
        if (record.taskId !== null) {
          // A started task's question never ends the call: the next poll hands the resolution to the task.
          return resumeTask(ctx, record, {
            interruptId,
            question,
            answer: answered ? resolution.answer! : (resolution.rejectionMessage ?? Wire.QUESTION_DECLINED_MESSAGE),
            resolution: answered ? "answered" : "declined"
          })
        }
        if (answered) {
          // The tool runs again with the answer.
          ctx.setAt(P.AgentToolCalls, toolCallId, {
            ...record,
            status: "approved",
            inputQuestion: null,
            inputChoices: [],
            inputAllowsFreeText: true,
            inputAnswers: [
              ...record.inputAnswers,
              { interruptId, question, answer: resolution.answer!, resolution: "answered" }
            ]
          })
          return StepDecision.goTo(toolStep(record.effect), toolCallId)
        }
        yield* finalizeRecord(ctx, events, record, {
          status: "rejected",
          rejectionMessage: resolution.rejectionMessage ?? Wire.QUESTION_DECLINED_MESSAGE
        })
        return StepDecision.deadEnd()
      }
      if (ctx.timerFired()) {
        if (interrupt === undefined) {
          // Answered meanwhile (its resolution is queued): wait again and apply it.
          if (ctx.channelSize(P.InterruptResolutions, interruptId) > 0) {
            return StepDecision.goTo(AwaitQuestionAnswer, toolCallId)
          }
          // A tool's question not raised yet. A steered or cancelled turn asks nothing.
          const control = turnControl(ctx, record.turnId)
          // A started task's question is asked even in a steered turn (steering never abandons a started task);
          // a cancelled turn hands the task to FinishTurnCancellation.
          if (control === "turn_cancelled" && record.taskId !== null) {
            return StepDecision.goTo(FinishTurnCancellation, record.turnId)
          }
          if (control !== null && record.taskId === null) {
            yield* finalizeRecord(ctx, events, record, {
              status: "rejected",
              rejectionMessage: cancellationRejection(control),
              cancellationReason: control
            })
            return StepDecision.deadEnd()
          }
          const inUse =
            pending.some((i) => i.interruptId === interruptId && i.toolCallId !== toolCallId) ||
            Option.isSome(ctx.getAt(P.AgentToolCalls, interruptId))
          if (inUse) {
            // A started task may have taken effect: such a call is recorded by effect.
            yield* finalizeRecord(ctx, events, record, {
              status: record.taskId === null ? "failed" : exhaustedStatus(record),
              error: Wire.interruptIdInUseError(interruptId)
            })
            return StepDecision.deadEnd()
          }
          const nowMs = yield* Clock.currentTimeMillis
          const deadline =
            config.approvalDeadlineMs === null ? null : new Date(nowMs + config.approvalDeadlineMs).toISOString()
          const raisedInterrupt = questionInterrupt(record, interruptId, new Date(nowMs).toISOString(), deadline)
          ctx.set(P.PendingInterrupts, [...pending, raisedInterrupt])
          yield* raised(events, raisedInterrupt)
          return StepDecision.goTo(AwaitQuestionAnswer, toolCallId)
        }
        const nowMs = yield* Clock.currentTimeMillis
        if (!deadlinePassed(interrupt, nowMs)) {
          return StepDecision.goTo(AwaitQuestionAnswer, toolCallId)
        }
        if (record.taskId !== null) {
          // A started task's question never ends the call: the task learns that the deadline passed.
          yield* expireInterrupt(ctx, events, interrupt, "question", Wire.QUESTION_DEADLINE_PASSED_MESSAGE)
          return resumeTask(ctx, record, {
            interruptId,
            question,
            answer: Wire.QUESTION_DEADLINE_PASSED_MESSAGE,
            resolution: "deadline_passed"
          })
        }
        return yield* rejectAtDeadline(
          ctx,
          events,
          record,
          interrupt,
          "question",
          Wire.QUESTION_DEADLINE_PASSED_MESSAGE
        )
      }
      return yield* cancellationWake(ctx, events, record, AwaitQuestionAnswer)
    })
  })

  // -------------------------------------------------------------------------------------------------------
  // AwaitTimer
  // -------------------------------------------------------------------------------------------------------

  // The Timer is the authority: a wait that ends as a steer arrives completes (Timers are selected before
  // Channels), and SkipTimer ends it early.
  const AwaitTimer: StepDef<string, never, Id> = Step({
    type: "AwaitTimer",
    input: ToolCallIdInput,
    options: { ...sync, execute: { ...sync.execute, retry: recoveryRetry } },
    waitFor: (ctx, toolCallId) => {
      const record = Option.getOrUndefined(ctx.getAt(P.AgentToolCalls, toolCallId))
      const seconds = record?.waitUntil == null ? 0 : secondsUntil(record.waitUntil, Date.now())
      return Wait.anyOf(Timer.seconds(seconds), P.ToolCallCancellations.forOne(toolCallId))
    },
    execute: Effect.fn("AgentSession.AwaitTimer")(function* (ctx, toolCallId) {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      if (Option.isNone(found) || found.value.status !== "waiting_for_timer") return StepDecision.deadEnd()
      const record = found.value
      const events = emitter(ctx, config, record.turnId)
      if (!ctx.timerFired()) return yield* cancellationWake(ctx, events, record, AwaitTimer)
      const args = BuiltInTools.validateDurableWait(record.arguments, Number.MAX_SAFE_INTEGER)
      const requested = args._tag === "Valid" ? args.value.seconds : 0
      const nowMs = yield* Clock.currentTimeMillis
      const startedMs = Date.parse(record.waitUntil ?? new Date(nowMs).toISOString()) - requested * 1000
      const waited = Math.max(0, Math.min(requested, Math.round((nowMs - startedMs) / 1000)))
      yield* finalizeRecord(ctx, events, record, {
        status: "succeeded",
        output: Schema.encodeSync(Wire.DurableWaitCompletedResultJson)({
          status: "completed",
          waitedSeconds: waited,
          reason: args._tag === "Valid" ? args.value.reason : ""
        })
      })
      return StepDecision.deadEnd()
    })
  })

  // -------------------------------------------------------------------------------------------------------
  // ResumeTurn
  // -------------------------------------------------------------------------------------------------------

  const ResumeTurn: StepDef<number> = Step({
    type: "ResumeTurn",
    input: ResultCountInput,
    options: { ...sync, execute: { ...sync.execute, retry: recoveryRetry, locks: [P.PendingInterrupts] } },
    waitFor: (_ctx, count) =>
      Wait.anyOf(P.ToolCallResults.forN(count), P.TurnControlRequests.forRange(1, Wire.CHANNEL_RANGE_MAX)),
    execute: Effect.fn("AgentSession.ResumeTurn")(function* (ctx, count) {
      const state = yield* requireState(ctx)
      const turnId = state.activeTurnId
      if (turnId === null) return StepDecision.goTo(AwaitUserMessage, null)
      if (ctx.channelResults(P.ToolCallResults).length === 0) {
        // A control wake. In a steered turn that is not cancelled, every call that took no effect is abandoned:
        // its interrupt goes now, and its waiting Step records it. Then wait again for the same count.
        if (turnControl(ctx, turnId) === "steered") {
          const events = emitter(ctx, config, turnId)
          let pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])
          for (const record of turnRecords(ctx, turnId)) {
            if (!abandonable(record)) continue
            const interrupt = pending.find((i) => i.toolCallId === record.toolCallId)
            if (interrupt !== undefined) {
              pending = pending.filter((i) => i !== interrupt)
              yield* events.interruptResolved({
                interruptId: interrupt.interruptId,
                approved: false,
                rejectionMessage: Wire.STEERED_REJECTION_MESSAGE,
                kind: interrupt.kind,
                answered: false,
                cancellationReason: "steered"
              })
            } else if (record.status !== "waiting_for_timer") {
              // Its answer committed first: the waiting Step applies it. An unraised question is cancelled.
              const id = record.status === "awaiting_answer" ? questionInterruptId(record) : record.toolCallId
              if (ctx.channelSize(P.InterruptResolutions, id) > 0) continue
            }
            ctx.publishAt(P.ToolCallCancellations, record.toolCallId, { reason: "steered" })
          }
          ctx.set(P.PendingInterrupts, pending)
        }
        return StepDecision.goTo(ResumeTurn, count)
      }
      // A consumed result of an earlier turn: wait again for what is still unfinished.
      const unfinished = turnRecords(ctx, turnId).filter((r) => !isFinal(r)).length
      if (unfinished > 0) return StepDecision.goTo(ResumeTurn, unfinished)
      // Every record is final: a steered or cancelled turn ends in ApplyTurnControl instead of a model call.
      if (turnControl(ctx, turnId) !== null) return StepDecision.goTo(ApplyTurnControl, null)
      ctx.set(P.AgentState, { ...state, status: "running_model" })
      return StepDecision.goTo(RunModel, null)
    })
  })

  // -------------------------------------------------------------------------------------------------------
  // ApplyTurnControl
  // -------------------------------------------------------------------------------------------------------

  /** The runner's unfinished-turn messages, or `undefined` when it has none or they fail (a warning). */
  const unfinishedMessages = Effect.fnUntraced(function* (
    ctx: ExecuteContext,
    runner: AgentFrameworkRunnerShape,
    state: Wire.AgentState,
    turnId: string
  ) {
    if (runner.buildUnfinishedTurnMessages === undefined) return undefined
    const turn = turnContext(ctx, turnId, state, storedMessages(ctx))
    return yield* runner.buildUnfinishedTurnMessages(turn).pipe(
      Effect.flatMap((messages) =>
        Array.isArray(messages) && messages.every(isFrameworkMessage)
          ? Effect.succeed<ReadonlyArray<FrameworkMessage> | undefined>(messages)
          : Effect.fail(new Error("build_unfinished_turn_messages returned something other than messages"))
      ),
      Effect.catchCause((cause) =>
        Effect.as(
          Effect.logWarning("build_unfinished_turn_messages failed; the turn keeps its note instead", cause),
          undefined
        )
      )
    )
  })

  // Consumes every steered message and stale control wake at once (both conditions never block), ends a
  // steered or cancelled turn, and starts the next turn with the steered messages, in order.
  const ApplyTurnControl: StepDef<null, never, Id> = Step({
    type: "ApplyTurnControl",
    input: NoInput,
    options: { ...sync, execute: { ...sync.execute, retry: recoveryRetry, locks: [P.TurnCancellationRequest] } },
    waitFor: () =>
      Wait.allOf(
        P.SteeredUserMessages.atMost(Wire.CHANNEL_RANGE_MAX),
        P.TurnControlRequests.atMost(Wire.CHANNEL_RANGE_MAX)
      ),
    execute: Effect.fn("AgentSession.ApplyTurnControl")(function* (ctx) {
      const runner = yield* config.runner
      let state = yield* requireState(ctx)
      const steered = ctx.channelResults(P.SteeredUserMessages)
      const turnId = state.activeTurnId
      if (turnId !== null) {
        const reason = turnControl(ctx, turnId) ?? (steered.length > 0 ? "steered" : null)
        if (reason === null) {
          // Nothing to apply to the active turn (a stale wake): it goes on where it waits.
          return StepDecision.deadEnd()
        }
        if (turnRecords(ctx, turnId).some((r) => !isFinal(r))) {
          // Not every record is final yet: ResumeTurn still waits and comes back here (defensive).
          for (const message of steered) ctx.publish(P.SteeredUserMessages, message)
          return StepDecision.deadEnd()
        }
        const unfinished = yield* unfinishedMessages(ctx, runner, state, turnId)
        yield* endControlledTurn(ctx, config, runner, state, turnId, reason, unfinished, steered.length)
        state = yield* requireState(ctx)
      }
      const started = yield* beginTurnFromMessages(ctx, config, runner, state, steered)
      return started ? StepDecision.goTo(RunModel, null) : StepDecision.goTo(AwaitUserMessage, null)
    })
  })

  // -------------------------------------------------------------------------------------------------------
  // FinishTurnCancellation
  // -------------------------------------------------------------------------------------------------------

  /** The Step that waits for a record's approval or answer. */
  const waitingStep = (record: Wire.AgentToolCall): StepDef<string, never, Id> | undefined =>
    record.status === "awaiting_approval"
      ? AwaitToolApproval
      : record.status === "awaiting_answer"
        ? AwaitQuestionAnswer
        : undefined

  // Scheduled by cancel_turn's commit, which cancelled the model call and every waiting Step. It decides from
  // committed state under the locks cancel_turn holds, and records every call whose waiting Step was
  // cancelled; approved calls belong to their tool Steps. It never ends the turn while ResumeTurn waits.
  const FinishTurnCancellation: StepDef<string, never, Id> = Step({
    type: "FinishTurnCancellation",
    input: TurnIdInput,
    options: {
      ...sync,
      execute: { ...sync.execute, retry: recoveryRetry, locks: [P.TurnCancellationRequest, P.PendingInterrupts] }
    },
    execute: Effect.fn("AgentSession.FinishTurnCancellation")(function* (ctx, turnId) {
      const state = yield* requireState(ctx)
      if (state.activeTurnId !== turnId || turnControl(ctx, turnId) !== "turn_cancelled") {
        return StepDecision.deadEnd()
      }
      // The model call or the turn's failure route was cancelled: the turn ends now.
      if (state.status !== "running_tools") return StepDecision.goTo(ApplyTurnControl, null)
      const events = emitter(ctx, config, turnId)
      let pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])
      const movements: Array<StepMovement> = []
      for (const record of turnRecords(ctx, turnId)) {
        if (isFinal(record) || record.status === "approved") continue
        if (record.taskId !== null) {
          // Already handed to CancelToolTask by an earlier run of this Step.
          if (record.cancellationReason === "turn_cancelled" && record.status === "waiting_for_task") continue
          // A started task is never rejected: it is cancelled best-effort and recorded by its effect.
          ctx.setAt(P.AgentToolCalls, record.toolCallId, {
            ...record,
            status: "waiting_for_task",
            cancellationReason: "turn_cancelled"
          })
          movements.push(StepMovement.of(CancelToolTask, record.toolCallId))
          continue
        }
        const interrupt = pending.find((i) => i.toolCallId === record.toolCallId)
        const step = waitingStep(record)
        if (
          interrupt === undefined &&
          step !== undefined &&
          ctx.channelSize(
            P.InterruptResolutions,
            record.status === "awaiting_answer" ? questionInterruptId(record) : record.toolCallId
          ) > 0
        ) {
          // The answer committed first: its waiting Step applies it.
          movements.push(StepMovement.of(step, record.toolCallId))
          continue
        }
        if (interrupt !== undefined) {
          pending = pending.filter((i) => i !== interrupt)
          yield* events.interruptResolved({
            interruptId: interrupt.interruptId,
            approved: false,
            rejectionMessage: Wire.TURN_CANCELLED_REJECTION_MESSAGE,
            kind: interrupt.kind,
            answered: false,
            cancellationReason: "turn_cancelled"
          })
        }
        yield* finalizeRecord(ctx, events, record, {
          status: "rejected",
          rejectionMessage: Wire.TURN_CANCELLED_REJECTION_MESSAGE,
          cancellationReason: "turn_cancelled"
        })
      }
      ctx.set(P.PendingInterrupts, pending)
      return movements.length > 0 ? StepDecision.goToMany(...movements) : StepDecision.deadEnd()
    })
  })

  // -------------------------------------------------------------------------------------------------------
  // CancelToolTask
  // -------------------------------------------------------------------------------------------------------

  const CancelToolTask: StepDef<string, ToolAttemptError, Id> = Step({
    type: "CancelToolTask",
    input: ToolCallIdInput,
    error: ToolAttemptError,
    options: {
      ...sync,
      execute: {
        ...sync.execute,
        timeout: "30 seconds",
        retry: { maxAttempts: 3, totalDuration: "2 minutes", initialInterval: config.retryInitialInterval }
      },
      onExecuteFailure: RecordToolOutcomeUnknown
    },
    execute: Effect.fn("AgentSession.CancelToolTask")(function* (ctx, toolCallId) {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      if (Option.isNone(found) || isFinal(found.value)) return StepDecision.deadEnd()
      const record = found.value
      const runner = yield* config.runner
      const events = emitter(ctx, config, record.turnId)
      if (runner.cancelToolTask !== undefined) {
        yield* runner
          .cancelToolTask({
            flowId: ctx.flowId,
            turnId: record.turnId,
            toolCall: record,
            idempotencyKey: Wire.toolCallIdempotencyKey(ctx.flowId, record.turnId, record.toolCallId),
            attempt: ctx.attempt
          })
          .pipe(
            // The server answered the cancellation with an error (a task already done or unknown): nothing to
            // retry; the record says the task may have taken effect either way.
            Effect.catchTag("ToolExecutionError", (error) =>
              Effect.logWarning(`cancelling the task of ${record.toolCallId} failed: ${error.message}`)
            ),
            provideStepServices(ctx, config, record.turnId)
          )
      }
      yield* finalizeRecord(ctx, events, record, { status: "outcome_unknown", error: Wire.TOOL_TASK_CANCELLED_ERROR })
      return StepDecision.deadEnd()
    })
  })

  const steps: SessionSteps<Id> = {
    StartAgentSession,
    AwaitUserMessage,
    RunModel,
    RecordTurnFailure,
    CallTool,
    CallSingleAttemptTool,
    AwaitToolApproval,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
    PollToolTask,
    ResumeTurn,
    ApplyTurnControl,
    FinishTurnCancellation,
    CancelToolTask,
    AwaitQuestionAnswer,
    AwaitTimer
  }
  return { steps, toolBodies: { callTool: callToolBody, pollToolTask: pollToolTaskBody } }
}
