// The wait family: durable waits for a human or the clock (AwaitToolApproval, AwaitQuestionAnswer,
// AwaitTimer), with interrupt deadlines and the cancellation wake they share.
import { type ExecuteContext, Step, StepDecision, type StepDef, Timer, Wait } from "@durable-agent/engine"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as BuiltInTools from "../../BuiltInTools.ts"
import * as P from "../../Persistence.ts"
import * as Wire from "../../wire/index.ts"
import { ToolCallIdInput } from "../schemas.ts"
import {
  cancellationRejection,
  type Emitter,
  emitter,
  finalizeRecord,
  isFinal,
  type SessionConfig,
  secondsUntil,
  turnControl
} from "../session.ts"
import { noteActivation, tracedActivation } from "../tracing.ts"
import {
  abandonable,
  controlStep,
  exhaustedStatus,
  isAskUser,
  questionInterrupt,
  questionInterruptId,
  raised,
  recoveryRetry,
  type SessionSteps,
  toolStep,
  toPollToolTask
} from "./common.ts"

/** The wait family. Other families' Steps are read from `steps` when a decision is made. */
export const makeWaitSteps = <Id>(config: SessionConfig<Id>, steps: SessionSteps<Id>) => {
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
    const interruptId = record.status === "awaiting_answer" ? questionInterruptId(config, record) : record.toolCallId
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
    options: {
      ...controlStep,
      execute: { ...controlStep.execute, retry: recoveryRetry, locks: [P.PendingInterrupts] }
    },
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
    execute: tracedActivation(
      config,
      "AwaitToolApproval",
      Effect.fnUntraced(function* (ctx, toolCallId: string) {
        const found = ctx.getAt(P.AgentToolCalls, toolCallId)
        if (Option.isNone(found) || isFinal(found.value)) return StepDecision.deadEnd()
        const record = found.value
        const events = emitter(ctx, config, record.turnId)
        const resolution = ctx.channelResults(P.InterruptResolutions, toolCallId)[0]
        if (resolution !== undefined) {
          // an answer from outside the session: an activation, whose root the record's tool spans join
          noteActivation(ctx, toolCallId)
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
            return StepDecision.goTo(toolStep(steps, record.effect), toolCallId)
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
          noteActivation(ctx, toolCallId)
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
    )
  })

  // -------------------------------------------------------------------------------------------------------
  // AwaitQuestionAnswer
  // -------------------------------------------------------------------------------------------------------

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
    return toPollToolTask(steps, record)
  }

  const AwaitQuestionAnswer: StepDef<string, never, Id> = Step({
    type: "AwaitQuestionAnswer",
    input: ToolCallIdInput,
    options: {
      ...controlStep,
      execute: { ...controlStep.execute, retry: recoveryRetry, locks: [P.PendingInterrupts] }
    },
    waitFor: (ctx, toolCallId) => {
      const record = Option.getOrUndefined(ctx.getAt(P.AgentToolCalls, toolCallId))
      if (record === undefined) return Wait.anyOf(Timer.seconds(0))
      const interruptId = questionInterruptId(config, record)
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
    execute: Effect.fnUntraced(function* (ctx, toolCallId) {
      const found = ctx.getAt(P.AgentToolCalls, toolCallId)
      if (Option.isNone(found) || found.value.status !== "awaiting_answer") return StepDecision.deadEnd()
      const record = found.value
      const events = emitter(ctx, config, record.turnId)
      const interruptId = questionInterruptId(config, record)
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
        if (answered && isAskUser(config, record)) {
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
          return StepDecision.goTo(toolStep(steps, record.effect), toolCallId)
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
            return StepDecision.goTo(steps.FinishTurnCancellation, record.turnId)
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
    options: { ...controlStep, execute: { ...controlStep.execute, retry: recoveryRetry } },
    waitFor: (ctx, toolCallId) => {
      const record = Option.getOrUndefined(ctx.getAt(P.AgentToolCalls, toolCallId))
      const seconds = record?.waitUntil == null ? 0 : secondsUntil(record.waitUntil, Date.now())
      return Wait.anyOf(Timer.seconds(seconds), P.ToolCallCancellations.forOne(toolCallId))
    },
    execute: Effect.fnUntraced(function* (ctx, toolCallId) {
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

  return { AwaitToolApproval, AwaitQuestionAnswer, AwaitTimer }
}
