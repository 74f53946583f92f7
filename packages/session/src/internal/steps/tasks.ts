// The task family: a tool that started a task is polled by PollToolTask and cancelled by CancelToolTask. Its
// failure routes are the tool family's, so it is defined after it.
import { type ExecuteContext, Step, StepDecision, type StepDef, Timer, Wait } from "@durable-agent/engine"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ToolAttemptError } from "../../Errors.ts"
import * as P from "../../Persistence.ts"
import { EFFECT_TABLE } from "../../Policy.ts"
import { isToolInputRequested, isToolTaskPending, type ToolInputRequested, type ToolTaskPending } from "../../Runner.ts"
import * as Wire from "../../wire/index.ts"
import { ToolCallIdInput } from "../schemas.ts"
import {
  emitter,
  finalizeRecord,
  isFinal,
  isTurnCancelled,
  provideStepServices,
  type SessionConfig
} from "../session.ts"
import { tracedTool } from "../tracing.ts"
import {
  exhaustedStatus,
  HEARTBEAT_TIMEOUT,
  type SessionSteps,
  sync,
  taskPollSeconds,
  toPollToolTask
} from "./common.ts"
import type { ToolSteps } from "./tools.ts"

/** CancelToolTask's method timeout: what `ToolTaskCancellation.deadline` is counted from. */
const CANCEL_TOOL_TASK_TIMEOUT = "30 seconds"
const CANCEL_TOOL_TASK_TIMEOUT_MS = Duration.toMillis(Duration.fromInputUnsafe(CANCEL_TOOL_TASK_TIMEOUT))

/**
 * The task family; its failure routes and the way a poll settles come from the tool family, `tools`. Other
 * families' Steps are read from `steps` when a decision is made.
 */
export const makeTaskSteps = <Id>(config: SessionConfig<Id>, steps: SessionSteps<Id>, tools: ToolSteps<Id>) => {
  const { finishCall, recordInputRequested, recordingToolErrors, settle } = tools

  // -------------------------------------------------------------------------------------------------------
  // PollToolTask
  // -------------------------------------------------------------------------------------------------------

  // One poll per execution, after the record's interval; a pending task moves to itself again. The failure
  // route is by effect (`toPollToolTask` sets it on every move here): RecordToolFailure for read and
  // idempotent_write calls, RecordToolOutcomeUnknown for the single-attempt effects; the static route below is
  // only the default of a movement that names none.
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
      onExecuteFailure: tools.RecordToolFailure
    },
    waitFor: (ctx, toolCallId) => {
      const record = Option.getOrUndefined(ctx.getAt(P.AgentToolCalls, toolCallId))
      const cancelled = record !== undefined && isTurnCancelled(ctx, record.turnId)
      const seconds =
        record === undefined || record.taskAnswerPending || cancelled ? 0 : (record.taskPollIntervalSeconds ?? 1)
      return Wait.anyOf(Timer.seconds(seconds))
    },
    execute: tracedTool(
      "PollToolTask",
      recordingToolErrors((ctx, toolCallId) => pollToolTaskBody(ctx, toolCallId))
    )
  })

  const pollToolTaskBody = (ctx: ExecuteContext, toolCallId: string) =>
    Effect.gen(function* () {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      if (Option.isNone(found) || found.value.status !== "waiting_for_task") return StepDecision.deadEnd()
      const record = found.value
      // Started after cancel_turn committed: FinishTurnCancellation hands the task to CancelToolTask.
      if (isTurnCancelled(ctx, record.turnId)) return StepDecision.goTo(steps.FinishTurnCancellation, record.turnId)
      const runner = yield* config.runner
      const events = emitter(ctx, config, record.turnId)
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
        return toPollToolTask(steps, record)
      }
      return yield* finishCall(ctx, events, { ...record, taskAnswerPending: false }, outcome)
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
        timeout: CANCEL_TOOL_TASK_TIMEOUT,
        retry: { maxAttempts: 3, totalDuration: "2 minutes", initialInterval: config.retryInitialInterval }
      },
      onExecuteFailure: tools.RecordToolOutcomeUnknown
    },
    execute: Effect.fnUntraced(function* (ctx, toolCallId) {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      if (Option.isNone(found) || isFinal(found.value)) return StepDecision.deadEnd()
      const record = found.value
      const runner = yield* config.runner
      const events = emitter(ctx, config, record.turnId)
      if (runner.cancelToolTask !== undefined) {
        // the attempt's interruption (its method timeout, a lost owner) aborts the cancelling request
        const controller = new AbortController()
        yield* runner
          .cancelToolTask({
            flowId: ctx.flowId,
            turnId: record.turnId,
            toolCall: record,
            idempotencyKey: Wire.toolCallIdempotencyKey(ctx.flowId, record.turnId, record.toolCallId),
            attempt: ctx.attempt,
            cancellationSignal: controller.signal,
            deadline: new Date((yield* Clock.currentTimeMillis) + CANCEL_TOOL_TASK_TIMEOUT_MS)
          })
          .pipe(
            Effect.onInterrupt(() =>
              Effect.sync(() => controller.abort(new Error("the task cancellation was interrupted")))
            ),
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

  return { PollToolTask, CancelToolTask, pollToolTaskBody }
}
