// The turn family: a session starts, waits for a message, runs the model (RunModel, failing into
// RecordTurnFailure) and resumes the turn once its tool calls are final (ResumeTurn).
import { Step, type StepContext, StepDecision, type StepDef, StepMovement, Wait } from "@durable-agent/engine"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as BuiltInTools from "../../BuiltInTools.ts"
import { ModelCallError } from "../../Errors.ts"
import * as P from "../../Persistence.ts"
import { parseToolArguments, toolCallIdProblem } from "../../Policy.ts"
import {
  type DeferredToolCall,
  type FrameworkMessage,
  isContextCompactionRunner,
  normalizeOutcome
} from "../../Runner.ts"
import * as Wire from "../../wire/index.ts"
import { NoInput, ResultCountInput, StartInput } from "../schemas.ts"
import {
  appendMessages,
  beginTurn,
  beginTurnFromMessages,
  currentPlan,
  emitter,
  endControlledTurn,
  endTurn,
  failTurn,
  finalizeRecord,
  initialState,
  isBlank,
  isFinal,
  messageStorageFor,
  messagesOversize,
  nowIso,
  provideStepServices,
  recordUsage,
  requireState,
  type SessionConfig,
  settingsProblem,
  storedMessages,
  turnControl,
  turnRecords,
  withHeartbeats,
  ZERO_USAGE
} from "../session.ts"
import { maxValueBytes, oversize, sizeBound, storedBytes } from "../sizes.ts"
import { noteActivation, noteChat, tracedActivation, tracedChat } from "../tracing.ts"
import {
  abandonable,
  controlStep,
  endSession,
  HEARTBEAT_TIMEOUT,
  isFrameworkMessage,
  questionInterrupt,
  questionInterruptId,
  raised,
  recoveryRetry,
  runStateTooLargeDetail,
  type SessionSteps,
  sync,
  toolStep,
  turnContext,
  unfinishedMessages
} from "./common.ts"
import { compactionCutoff, modelInput } from "./compaction.ts"

/** RunModel's method timeout: what `AgentTurnContext.deadline` is counted from. */
const RUN_MODEL_TIMEOUT = "15 minutes"
const RUN_MODEL_TIMEOUT_MS = Duration.toMillis(Duration.fromInputUnsafe(RUN_MODEL_TIMEOUT))

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

/**
 * The turn family: StartAgentSession, AwaitUserMessage, RunModel with its failure route RecordTurnFailure, and
 * ResumeTurn. Other families' Steps are read from `steps` when a decision is made.
 */
export const makeTurnSteps = <Id>(config: SessionConfig<Id>, steps: SessionSteps<Id>) => {
  // -------------------------------------------------------------------------------------------------------
  // StartAgentSession
  // -------------------------------------------------------------------------------------------------------

  const StartAgentSession: StepDef<typeof StartInput.Type, never, Id> = Step({
    type: "StartAgentSession",
    input: StartInput,
    options: { ...controlStep, execute: { ...controlStep.execute, retry: recoveryRetry } },
    execute: tracedActivation(
      config,
      "StartAgentSession",
      Effect.fnUntraced(function* (ctx, input: typeof StartInput.Type) {
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
      }),
      true
    )
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
      ...controlStep,
      execute: {
        ...controlStep.execute,
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
    execute: tracedActivation(
      config,
      "AwaitUserMessage",
      Effect.fnUntraced(function* (ctx, _: null) {
        if (ctx.channelResults(P.TurnControlRequests).length > 0) return StepDecision.goTo(steps.ApplyTurnControl, null)
        const runner = yield* config.runner
        const state = yield* requireState(ctx)
        const plan = approvablePlan(ctx)
        const approvals = plan === null ? [] : ctx.channelResults(P.PlanExecutions, String(plan.revision))
        const queued = ctx.channelResults(P.QueuedUserMessages)
        // a message or a plan execution from outside the session: an activation (its invoke_agent root)
        if (approvals.length > 0 || queued.length > 0) noteActivation(ctx)
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
        const started = yield* beginTurnFromMessages(ctx, config, runner, state, queued)
        return started ? StepDecision.goTo(RunModel, null) : StepDecision.goTo(AwaitUserMessage, null)
      })
    )
  })
  const RecordTurnFailure: StepDef<Wire.RecordTurnFailureInput, never, Id, ModelCallError> = Step({
    type: "RecordTurnFailure",
    input: Wire.RecordTurnFailureInput,
    recovers: ModelCallError,
    options: { ...controlStep, execute: { ...controlStep.execute, retry: recoveryRetry } },
    execute: Effect.fnUntraced(function* (ctx) {
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
        const turn = turnContext(config, ctx, turnId, state, storedMessages(ctx))
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
        timeout: RUN_MODEL_TIMEOUT,
        retry: { maxAttempts: 3, totalDuration: "30 minutes", initialInterval: config.retryInitialInterval }
      },
      heartbeatTimeout: HEARTBEAT_TIMEOUT,
      onExecuteFailure: RecordTurnFailure
    },
    execute: tracedChat(
      "RunModel",
      Effect.fnUntraced(function* (ctx, _: Wire.RecordTurnFailureInput) {
        const runner = yield* config.runner
        const state = yield* requireState(ctx)
        const turnId = state.activeTurnId
        if (turnId === null) return StepDecision.goTo(AwaitUserMessage, null)
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
            yield* unfinishedMessages(config, ctx, runner, state, turnId),
            ctx.channelSize(P.SteeredUserMessages)
          )
          return StepDecision.goTo(steps.ApplyTurnControl, null)
        }
        // cancel_turn interrupts this attempt: the signal aborts the framework's call and its provider request.
        const controller = new AbortController()
        const input = yield* modelInput(ctx, runner)
        const turn = {
          ...turnContext(config, ctx, turnId, state, input.messages),
          contextSummary: input.contextSummary,
          cancellationSignal: controller.signal,
          deadline: new Date((yield* Clock.currentTimeMillis) + RUN_MODEL_TIMEOUT_MS)
        }
        // Compaction's decision points, in the spec's order: the input's size, then at the trigger the cutoff.
        // without compaction there is no decision point: no call, and no services to provide for one
        const cutoff =
          config.compaction === null || !isContextCompactionRunner(runner)
            ? null
            : yield* compactionCutoff(config, runner, turn, state).pipe(
                provideStepServices(ctx, config, turnId),
                Effect.onInterrupt(() => Effect.sync(() => controller.abort(new Error("the turn was cancelled"))))
              )
        if (cutoff !== null) {
          ctx.set(P.AgentState, { ...state, status: "compacting_context" })
          return StepDecision.goTo(steps.CompactContext, { throughSequence: cutoff })
        }
        const outcome = yield* runner.runModelStep(turn).pipe(
          // a runner may name its outcome by the spec's `kind` alone; the session reads `_tag`
          Effect.map(normalizeOutcome),
          withHeartbeats(ctx, config.heartbeatInterval),
          provideStepServices(ctx, config, turnId),
          Effect.onInterrupt(() => Effect.sync(() => controller.abort(new Error("the turn was cancelled"))))
        )
        noteChat(ctx, {
          usage: outcome.usage,
          metadata: outcome.modelCallMetadata,
          messageSequences: Array.from(
            { length: outcome.newMessages?.length ?? 0 },
            (_, i) => state.nextMessageSequence + i
          ),
          toolCallIds: outcome._tag === "ToolCallsRequested" ? outcome.toolCalls.map((c) => c.toolCallId) : [],
          input: () => turn.messages.map((m) => ({ role: m.role, text: m.text, tool_call_id: m.toolCallId })),
          output: () =>
            (outcome.newMessages ?? []).map((m) => ({ role: m.role, text: m.text, tool_call_id: m.toolCallId }))
        })
        const events = emitter(ctx, config, turnId)
        const nowMs = yield* Clock.currentTimeMillis
        const now = new Date(nowMs).toISOString()
        const limit = yield* maxValueBytes
        const storage = messageStorageFor(config, limit)
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
          const runStateBytes =
            sizeBound(outcome.frameworkRunState) <= limit ? 0 : storedBytes(Schema.String, outcome.frameworkRunState)
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
            const next = appendMessages(ctx, storage, state, turnId, outcome.newMessages, now)
            yield* endTurn(ctx, config, next, turnId, outcome.turnError ?? null)
            return StepDecision.goTo(AwaitUserMessage, null)
          }
          case "TurnContinued": {
            const next = appendMessages(ctx, storage, state, turnId, outcome.newMessages, now)
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
            const next = appendMessages(ctx, storage, state, turnId, outcome.newMessages ?? [], now)
            ctx.set(P.FrameworkRunState, outcome.frameworkRunState)
            const pending = [...Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])]
            const movements: Array<StepMovement> = []
            const deadline =
              config.approvalDeadlineMs === null ? null : new Date(nowMs + config.approvalDeadlineMs).toISOString()
            const planning = state.interactionMode === "planning"
            const root = Option.getOrNull(ctx.get(P.AgentTraceContext))
            for (const [i, call] of outcome.toolCalls.entries()) {
              const builtIn = config.builtInTools.has(call.toolName) ? call.toolName : undefined
              // the activation's root (written when tracing is on): the record's tool span goes under it
              const base = { ...newRecord(call, turnId, existing.length + i), traceContext: root }
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
                movements.push(StepMovement.of(steps.AwaitQuestionAnswer, record.toolCallId))
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
                movements.push(StepMovement.of(steps.AwaitTimer, record.toolCallId))
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
                movements.push(StepMovement.of(steps.AwaitToolApproval, record.toolCallId))
              } else {
                ctx.setAt(P.AgentToolCalls, record.toolCallId, record)
                movements.push(StepMovement.of(toolStep(steps, record.effect), record.toolCallId))
              }
            }
            ctx.set(P.PendingInterrupts, pending)
            ctx.set(P.AgentState, { ...next, status: "running_tools" })
            return StepDecision.goToMany(...movements, StepMovement.of(ResumeTurn, outcome.toolCalls.length))
          }
        }
      })
    )
  })

  // -------------------------------------------------------------------------------------------------------
  // ResumeTurn
  // -------------------------------------------------------------------------------------------------------

  const ResumeTurn: StepDef<number> = Step({
    type: "ResumeTurn",
    input: ResultCountInput,
    options: {
      ...controlStep,
      execute: { ...controlStep.execute, retry: recoveryRetry, locks: [P.PendingInterrupts] }
    },
    waitFor: (_ctx, count) =>
      Wait.anyOf(P.ToolCallResults.forN(count), P.TurnControlRequests.forRange(1, Wire.CHANNEL_RANGE_MAX)),
    execute: Effect.fnUntraced(function* (ctx, count) {
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
              const id = record.status === "awaiting_answer" ? questionInterruptId(config, record) : record.toolCallId
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
      if (turnControl(ctx, turnId) !== null) return StepDecision.goTo(steps.ApplyTurnControl, null)
      ctx.set(P.AgentState, { ...state, status: "running_model" })
      return StepDecision.goTo(RunModel, null)
    })
  })

  return { StartAgentSession, AwaitUserMessage, RunModel, RecordTurnFailure, ResumeTurn }
}
