// The tool family: a call runs in CallTool (retried: reads) or CallSingleAttemptTool (one attempt), and its
// failure routes RecordToolFailure and RecordToolOutcomeUnknown record a call whose Step ran out of attempts.
import { type ExecuteContext, Step, StepDecision, type StepDef } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ToolAttemptError, type ToolExecutionError } from "../../Errors.ts"
import type { EventWriter } from "../../EventWriter.ts"
import type { Heartbeat } from "../../Heartbeat.ts"
import * as P from "../../Persistence.ts"
import { EFFECT_TABLE } from "../../Policy.ts"
import {
  type AgentFrameworkRunnerShape,
  isToolInputRequested,
  isToolTaskStarted,
  type ToolExecutionResult,
  type ToolInputRequested,
  type ToolTaskStarted
} from "../../Runner.ts"
import * as Wire from "../../wire/index.ts"
import { ToolCallIdInput } from "../schemas.ts"
import {
  cancellationRejection,
  type Emitter,
  emitter,
  finalizeRecord,
  isFinal,
  provideStepServices,
  requireState,
  type SessionConfig,
  turnControl,
  withHeartbeats
} from "../session.ts"
import { maxValueBytes, oversize, truncateText } from "../sizes.ts"
import { tracedTool } from "../tracing.ts"
import {
  controlStep,
  endSession,
  exhaustedStatus,
  HEARTBEAT_TIMEOUT,
  recoveryRetry,
  runStateTooLargeDetail,
  type SessionSteps,
  sync,
  type ToolStepBody,
  taskPollSeconds,
  toPollToolTask
} from "./common.ts"

/**
 * The tool family, with the helpers the task family shares (how a call settles and records). Other families'
 * Steps are read from `steps` when a decision is made.
 */
export const makeToolSteps = <Id>(config: SessionConfig<Id>, steps: SessionSteps<Id>) => {
  // -------------------------------------------------------------------------------------------------------
  // Tool Steps
  // -------------------------------------------------------------------------------------------------------

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
  const recordingToolErrors = (body: ToolStepBody<Id>) => (ctx: ExecuteContext, toolCallId: string) =>
    Effect.suspend(() =>
      body(ctx, toolCallId).pipe(
        Effect.catchTag("ToolExecutionError", (e) =>
          Effect.suspend(() => {
            const found = ctx.getAt(P.AgentToolCalls, toolCallId)
            if (Option.isNone(found)) return Effect.succeed(StepDecision.deadEnd())
            const events = emitter(ctx, config, found.value.turnId)
            return finishCall(ctx, events, found.value, { status: "failed", output: null, error: e.message })
          })
        )
      )
    )

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
    return Effect.succeed(StepDecision.goTo(steps.AwaitQuestionAnswer, record.toolCallId))
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
    return toPollToolTask(steps, record)
  })

  /** Records a call whose tool Step ran out of attempts, from the recovery error. */
  const recordExhausted = (exhausted: (record: Wire.AgentToolCall) => "failed" | "outcome_unknown") =>
    Effect.fnUntraced(function* (ctx: ExecuteContext, toolCallId: string) {
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
    options: { ...controlStep, execute: { ...controlStep.execute, retry: recoveryRetry } },
    execute: recordExhausted((r) => EFFECT_TABLE[r.effect].exhausted)
  })

  const RecordToolOutcomeUnknown: StepDef<string, never, never, ToolAttemptError> = Step({
    type: "RecordToolOutcomeUnknown",
    input: ToolCallIdInput,
    recovers: ToolAttemptError,
    options: { ...controlStep, execute: { ...controlStep.execute, retry: recoveryRetry } },
    execute: recordExhausted(() => "outcome_unknown")
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
    execute: tracedTool("CallTool", recordingToolErrors(callToolBody))
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
    execute: tracedTool("CallSingleAttemptTool", recordingToolErrors(callToolBody))
  })

  return {
    RecordToolFailure,
    RecordToolOutcomeUnknown,
    CallTool,
    CallSingleAttemptTool,
    callToolBody,
    settle,
    recordingToolErrors,
    recordInputRequested,
    finishCall
  }
}

/** The tool family and its shared helpers, as `makeToolSteps` builds them. */
export type ToolSteps<Id> = ReturnType<typeof makeToolSteps<Id>>
