// What the session's Step families share (docs/session-contract.md, "Session Flow contract"): the Steps'
// options, the SessionSteps registry, and the helpers more than one family uses. Every Step declares its
// errors (`StepDef<Input, Error, Runner, Recovers>`): RunModel fails with ModelCallError; a tool Step's body
// fails with ToolExecutionError | ToolAttemptError, and the Step records the first as `failed` (the model sees
// it, no retry) while the second fails the attempt. The failure routes recover those errors and the engine's
// (a commit that is too large arrives as a typed ValueTooLarge).
import { type ExecuteContext, RecoveryError, StepDecision, type StepDef, StepMovement } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ModelCallError, ToolAttemptError, ToolExecutionError } from "../../Errors.ts"
import * as P from "../../Persistence.ts"
import { EFFECT_TABLE, resolveToolPolicy } from "../../Policy.ts"
import type { AgentFrameworkRunnerShape, AgentTurnContext, FrameworkMessage } from "../../Runner.ts"
import * as Wire from "../../wire/index.ts"
import type { StartInput } from "../schemas.ts"
import {
  currentPlan,
  type Emitter,
  emitter,
  type SessionConfig,
  storedMessages,
  turnRecords,
  turnSettings
} from "../session.ts"

export const sync = { execute: { durability: "sync" }, waitFor: { durability: "sync" } } as const

/**
 * The options of the session's bookkeeping Steps, which only decide (read and write the session's state, move
 * on) and never wait on the network: SYNC, and run in the runner's control slots, so a cancellation, a
 * steer's decision or a failure route never waits behind the model and tool calls that fill the task slots.
 */
export const controlStep = {
  execute: { durability: "sync", slot: "control" },
  waitFor: { durability: "sync" }
} as const

/** The retry of the session's bookkeeping Steps. */
export const recoveryRetry = { maxAttempts: 5 } as const

/** The heartbeat timeout of RunModel and the tool Steps. */
export const HEARTBEAT_TIMEOUT = "2 minutes"

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
  readonly CompactContext: StepDef<Wire.RecordTurnFailureInput, ModelCallError, Id>
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
 * The move to a call's PollToolTask, with its failure route by the call's effect (the spec's PollToolTask
 * options): RecordToolFailure for `read` and `idempotent_write` calls, RecordToolOutcomeUnknown for the
 * single-attempt effects. The route is a per-movement option, so every move to PollToolTask goes through here.
 */
export const toPollToolTask = <Id>(steps: SessionSteps<Id>, record: Wire.AgentToolCall): StepDecision =>
  StepDecision.goToMany(
    StepMovement.of(steps.PollToolTask, record.toolCallId, {
      onExecuteFailure:
        EFFECT_TABLE[record.effect].step === "CallTool" ? steps.RecordToolFailure : steps.RecordToolOutcomeUnknown
    })
  )

/**
 * Whether steering may abandon a waiting call: only while it has taken no effect, that is an approval, a
 * question that no started task asked, or a durable wait. The one predicate of every such decision.
 */
export const abandonable = (record: Wire.AgentToolCall): boolean =>
  record.status === "awaiting_approval" ||
  (record.status === "awaiting_answer" && record.taskId === null) ||
  record.status === "waiting_for_timer"

/** A question interrupt for a record that asks `inputQuestion`. */
export const questionInterrupt = (
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
export const raised = (events: Emitter, interrupt: Wire.AgentInterrupt) =>
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
export const taskPollSeconds = (seconds: number): number =>
  Math.min(MAX_TASK_POLL_SECONDS, Math.max(1, Math.ceil(Number.isFinite(seconds) ? seconds : 1)))

/** The status a call gets when its Step ran out of attempts: by its effect class. */
export const exhaustedStatus = (record: Wire.AgentToolCall): "failed" | "outcome_unknown" =>
  EFFECT_TABLE[record.effect].exhausted

/** The reason to end the session when the failing Step's commit did not fit the framework run state. */
export const runStateTooLargeDetail = (ctx: ExecuteContext): string | undefined =>
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
export const endSession = Effect.fnUntraced(function* (
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

/** The tool Step of a call's effect class; `steps` is read when the decision is made. */
export const toolStep = <Id>(
  steps: SessionSteps<Id>,
  effect: Wire.ToolEffect
): StepDef<string, ToolAttemptError, Id> =>
  EFFECT_TABLE[effect].step === "CallTool" ? steps.CallTool : steps.CallSingleAttemptTool

/** The runner's view of a turn. */
export const turnContext = (
  config: SessionConfig,
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

/** Whether a value is a FrameworkMessage. */
export const isFrameworkMessage = (m: unknown): m is FrameworkMessage => {
  if (typeof m !== "object" || m === null) return false
  const v = m as Record<string, unknown>
  return (v.role === "user" || v.role === "assistant" || v.role === "tool") && typeof v.frameworkItem === "string"
}

/** Whether the record is an `ask_user` call (the name is reserved while the built-in is enabled). */
export const isAskUser = (config: SessionConfig, record: Wire.AgentToolCall) =>
  record.toolName === "ask_user" && config.builtInTools.has("ask_user")

/** The interrupt ID of a record's question: the call's ID for ask_user, `<id>-input-<n>` for a tool's. */
export const questionInterruptId = (config: SessionConfig, record: Wire.AgentToolCall) =>
  isAskUser(config, record)
    ? record.toolCallId
    : Wire.toolQuestionInterruptId(record.toolCallId, record.inputAnswers.length + 1)

/** The runner's unfinished-turn messages, or `undefined` when it has none or they fail (a warning). */
export const unfinishedMessages = Effect.fnUntraced(function* (
  config: SessionConfig,
  ctx: ExecuteContext,
  runner: AgentFrameworkRunnerShape,
  state: Wire.AgentState,
  turnId: string
) {
  if (runner.buildUnfinishedTurnMessages === undefined) return undefined
  const turn = turnContext(config, ctx, turnId, state, storedMessages(ctx))
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
