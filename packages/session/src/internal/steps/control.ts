// The control family: steering and cancel_turn end a turn (ApplyTurnControl) and cancel its waiting calls
// (FinishTurnCancellation).
import { Step, StepDecision, type StepDef, StepMovement, Wait } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as P from "../../Persistence.ts"
import * as Wire from "../../wire/index.ts"
import { NoInput, TurnIdInput } from "../schemas.ts"
import {
  beginTurnFromMessages,
  emitter,
  endControlledTurn,
  finalizeRecord,
  isFinal,
  requireState,
  type SessionConfig,
  turnControl,
  turnRecords
} from "../session.ts"
import { noteActivation, tracedActivation } from "../tracing.ts"
import { controlStep, questionInterruptId, recoveryRetry, type SessionSteps, unfinishedMessages } from "./common.ts"

/** The control family. Other families' Steps are read from `steps` when a decision is made. */
export const makeControlSteps = <Id>(config: SessionConfig<Id>, steps: SessionSteps<Id>) => {
  // -------------------------------------------------------------------------------------------------------
  // ApplyTurnControl
  // -------------------------------------------------------------------------------------------------------

  // Consumes every steered message and stale control wake at once (both conditions never block), ends a
  // steered or cancelled turn, and starts the next turn with the steered messages, in order.
  const ApplyTurnControl: StepDef<null, never, Id> = Step({
    type: "ApplyTurnControl",
    input: NoInput,
    options: {
      ...controlStep,
      execute: { ...controlStep.execute, retry: recoveryRetry, locks: [P.TurnCancellationRequest] }
    },
    waitFor: () =>
      Wait.allOf(
        P.SteeredUserMessages.atMost(Wire.CHANNEL_RANGE_MAX),
        P.TurnControlRequests.atMost(Wire.CHANNEL_RANGE_MAX)
      ),
    execute: tracedActivation(
      config,
      "ApplyTurnControl",
      Effect.fnUntraced(function* (ctx, _: null) {
        const runner = yield* config.runner
        let state = yield* requireState(ctx)
        const steered = ctx.channelResults(P.SteeredUserMessages)
        // a steered user message from outside the session: an activation
        if (steered.length > 0) noteActivation(ctx)
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
          const unfinished = yield* unfinishedMessages(config, ctx, runner, state, turnId)
          yield* endControlledTurn(ctx, config, runner, state, turnId, reason, unfinished, steered.length)
          state = yield* requireState(ctx)
        }
        const started = yield* beginTurnFromMessages(ctx, config, runner, state, steered)
        return started ? StepDecision.goTo(steps.RunModel, null) : StepDecision.goTo(steps.AwaitUserMessage, null)
      })
    )
  })

  // -------------------------------------------------------------------------------------------------------
  // FinishTurnCancellation
  // -------------------------------------------------------------------------------------------------------

  /** The Step that waits for a record's approval or answer. */
  const waitingStep = (record: Wire.AgentToolCall): StepDef<string, never, Id> | undefined =>
    record.status === "awaiting_approval"
      ? steps.AwaitToolApproval
      : record.status === "awaiting_answer"
        ? steps.AwaitQuestionAnswer
        : undefined

  // Scheduled by cancel_turn's commit, which cancelled the model call and every waiting Step. It decides from
  // committed state under the locks cancel_turn holds, and records every call whose waiting Step was
  // cancelled; approved calls belong to their tool Steps. It never ends the turn while ResumeTurn waits.
  const FinishTurnCancellation: StepDef<string, never, Id> = Step({
    type: "FinishTurnCancellation",
    input: TurnIdInput,
    options: {
      ...controlStep,
      execute: { ...controlStep.execute, retry: recoveryRetry, locks: [P.TurnCancellationRequest, P.PendingInterrupts] }
    },
    execute: Effect.fnUntraced(function* (ctx, turnId) {
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
          movements.push(StepMovement.of(steps.CancelToolTask, record.toolCallId))
          continue
        }
        const interrupt = pending.find((i) => i.toolCallId === record.toolCallId)
        const step = waitingStep(record)
        if (
          interrupt === undefined &&
          step !== undefined &&
          ctx.channelSize(
            P.InterruptResolutions,
            record.status === "awaiting_answer" ? questionInterruptId(config, record) : record.toolCallId
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

  return { ApplyTurnControl, FinishTurnCancellation }
}
