/**
 * The runner interface ("Adapter interface" in docs/session-contract.md) as an Effect service: `AgentFrameworkRunner`
 * builds user messages, makes at most one model call per RunModel Step (`runModelStep`), and runs one
 * deferred tool call per tool Step (`executeDeferredToolCall`). Framework adapters and the built-in
 * Stepwise loop implement it; the session Flow calls it.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type { ModelCallError, ToolAttemptError, ToolExecutionError } from "./Errors.ts"
import type { EventWriter } from "./EventWriter.ts"
import type { Heartbeat } from "./Heartbeat.ts"
import type { ModelCallMetadata } from "./ModelClient.ts"
import type { ResolvedToolPolicy, ToolPolicy } from "./Policy.ts"
import type {
  AgentMessage,
  AgentMessageRole,
  AgentPlan,
  AgentToolCall,
  AgentUsage,
  BuiltInToolName,
  ContextSummary,
  InteractionMode,
  QuestionAnswer,
  SessionSettings,
  ToolEffect
} from "./wire/index.ts"

/**
 * A message as a runner builds it: the `AgentMessage` projection plus `frameworkItem`, the framework's own
 * JSON, replayed to it unchanged. The session assigns sequence, turn and time when it stores it.
 *
 * @category models
 * @since 0.1.0
 */
export interface FrameworkMessage {
  readonly role: AgentMessageRole
  readonly text: string | null
  readonly toolCallId: string | null
  readonly toolName: string | null
  readonly toolArguments: string | null
  readonly toolOutput: string | null
  readonly frameworkItem: string
}

/**
 * A tool call the runner deferred to the session, with its resolved policy. `arguments` is JSON text.
 *
 * @category models
 * @since 0.1.0
 */
export interface DeferredToolCall {
  readonly toolCallId: string
  readonly toolName: string
  readonly arguments: string
  readonly policy: ResolvedToolPolicy
  readonly toolSourceReference?: string | null | undefined
}

/**
 * The turn ended with a final answer. `newMessages` holds every item the turn produced that the session has
 * not stored yet. With `turnError` the turn ends as failed, without a retry.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnCompleted {
  readonly _tag: "TurnCompleted"
  /** The spec's TypeScript discriminator (`kind: "turn_completed"`); the constructors set it beside `_tag`. */
  readonly kind?: "turn_completed" | undefined
  readonly newMessages: ReadonlyArray<FrameworkMessage>
  readonly usage: AgentUsage
  readonly turnError?: string | null | undefined
  readonly modelCallMetadata?: ModelCallMetadata | undefined
}

/**
 * The model asked for tools. The session stores `frameworkRunState` and one record per call, runs each call
 * in its own Step, and calls the runner again once every record is final.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolCallsRequested {
  readonly _tag: "ToolCallsRequested"
  /** The spec's TypeScript discriminator (`kind: "tool_calls_requested"`); the constructors set it beside `_tag`. */
  readonly kind?: "tool_calls_requested" | undefined
  readonly frameworkRunState: string
  readonly toolCalls: ReadonlyArray<DeferredToolCall>
  readonly usage: AgentUsage
  /** Items stored incrementally; needs `buildUnfinishedTurnMessages`. */
  readonly newMessages?: ReadonlyArray<FrameworkMessage> | undefined
  readonly modelCallMetadata?: ModelCallMetadata | undefined
}

/**
 * Another model call in the same turn: the session appends `newMessages`, stores `frameworkRunState` and
 * moves to RunModel again.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnContinued {
  readonly _tag: "TurnContinued"
  /** The spec's TypeScript discriminator (`kind: "turn_continued"`); the constructors set it beside `_tag`. */
  readonly kind?: "turn_continued" | undefined
  readonly frameworkRunState: string
  readonly newMessages: ReadonlyArray<FrameworkMessage>
  readonly usage: AgentUsage
  readonly modelCallMetadata?: ModelCallMetadata | undefined
}

/**
 * What one `runModelStep` returns.
 *
 * @category models
 * @since 0.1.0
 */
export type AgentTurnOutcome = TurnCompleted | ToolCallsRequested | TurnContinued

/**
 * Constructors of {@link AgentTurnOutcome}.
 *
 * @category constructors
 * @since 0.1.0
 */
export const AgentTurnOutcome = {
  turnCompleted: (fields: Omit<TurnCompleted, "_tag" | "kind">): TurnCompleted => ({
    ...fields,
    _tag: "TurnCompleted",
    kind: "turn_completed"
  }),
  toolCallsRequested: (fields: Omit<ToolCallsRequested, "_tag" | "kind">): ToolCallsRequested => ({
    ...fields,
    _tag: "ToolCallsRequested",
    kind: "tool_calls_requested"
  }),
  turnContinued: (fields: Omit<TurnContinued, "_tag" | "kind">): TurnContinued => ({
    ...fields,
    _tag: "TurnContinued",
    kind: "turn_continued"
  })
}

/**
 * The spec's `kind` of each outcome tag.
 *
 * @category constants
 * @since 0.1.0
 */
export const OUTCOME_KINDS = {
  TurnCompleted: "turn_completed",
  ToolCallsRequested: "tool_calls_requested",
  TurnContinued: "turn_continued"
} as const

/**
 * An outcome as a runner written to the spec's TypeScript names may return it: `kind` without `_tag`.
 *
 * @category models
 * @since 0.1.0
 */
export type AgentTurnOutcomeByKind =
  | (Omit<TurnCompleted, "_tag" | "kind"> & { readonly kind: "turn_completed" })
  | (Omit<ToolCallsRequested, "_tag" | "kind"> & { readonly kind: "tool_calls_requested" })
  | (Omit<TurnContinued, "_tag" | "kind"> & { readonly kind: "turn_continued" })

/**
 * An outcome with both discriminators, from either form: `_tag` (ours) or `kind` (the spec's TypeScript name).
 * The session reads every `runModelStep` result through it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const normalizeOutcome = (outcome: AgentTurnOutcome | AgentTurnOutcomeByKind): AgentTurnOutcome => {
  if ("_tag" in outcome && typeof outcome._tag === "string") {
    return { ...outcome, kind: OUTCOME_KINDS[outcome._tag] } as AgentTurnOutcome
  }
  switch (outcome.kind) {
    case "turn_completed":
      return AgentTurnOutcome.turnCompleted(outcome)
    case "tool_calls_requested":
      return AgentTurnOutcome.toolCallsRequested(outcome)
    case "turn_continued":
      return AgentTurnOutcome.turnContinued(outcome)
  }
}

/**
 * What `runModelStep` sees: the stored messages, the run state when continuing the turn, the turn's tool call
 * records (all final when RunModel runs, in `deferral_order`), the policy lookup, the turn's settings, and
 * the IDs of the Flow, turn, Step execution and attempt. Events and heartbeats are the `EventWriter` and
 * `Heartbeat` services.
 *
 * @category models
 * @since 0.1.0
 */
export interface AgentTurnContext {
  readonly flowId: string
  readonly turnId: string
  readonly stepExecutionId: string
  readonly attempt: number
  readonly messages: ReadonlyArray<AgentMessage>
  readonly frameworkRunState: string | null
  readonly toolCalls: ReadonlyArray<AgentToolCall>
  readonly sessionSettings: SessionSettings
  /**
   * The turn's mode: `planning` (only `write_todos` may run), `executing` (started by `execute_plan`), or
   * `chat`. A runner with `supportsPlanMode` offers only `write_todos` in a planning turn.
   */
  readonly interactionMode: InteractionMode
  /** The committed plan (`AgentPlan`), or `null` before the first `write_todos`. */
  readonly plan?: AgentPlan | null | undefined
  readonly toolPolicies: Readonly<Record<string, ToolPolicy>>
  readonly defaultToolEffect: ToolEffect
  /** The policy of a tool: an explicit policy, then `frameworkEffect`, then the session default. */
  readonly resolveToolPolicy: (toolName: string, frameworkEffect?: ToolEffect | undefined) => ResolvedToolPolicy
  /**
   * Aborts when `cancel_turn` cancels this model call (or the Step is interrupted otherwise): pass it to the
   * framework and the provider request. The session drops the call's result.
   */
  readonly cancellationSignal?: AbortSignal | undefined
  /**
   * When this attempt's method timeout ends it (RunModel: 15 minutes after the attempt started); the
   * spec's TypeScript context field.
   */
  readonly deadline?: Date | undefined
  /** The session's enabled built-in tools; a runner offers their `BuiltInTools.definitions` to its model. */
  readonly enabledBuiltInTools?: ReadonlyArray<BuiltInToolName> | undefined
  /**
   * The session's `ContextSummary` once it compacted, for a runner with the compaction capability
   * ({@link ContextCompactionRunner}): `messages` then holds only the messages after its `lastSequence`, and
   * the runner shows the summary first. `null` (or absent) before the first compaction and for other runners.
   */
  readonly contextSummary?: ContextSummary | null | undefined
}

/**
 * One deferred call as a tool Step hands it to the runner. `idempotencyKey` is
 * `<flowId>/<turnId>/<toolCallId>`, the same on every attempt; `heartbeatCheckpoint` is what an earlier
 * attempt saved with `Heartbeat.beat`.
 *
 * @category models
 * @since 0.1.0
 */
export interface DeferredToolExecution {
  readonly flowId: string
  readonly turnId: string
  readonly toolCall: AgentToolCall
  readonly idempotencyKey: string
  readonly attempt: number
  readonly heartbeatCheckpoint: Option.Option<unknown>
  /**
   * Whether the runner polls tasks (`pollToolTask`): a tool may then return {@link ToolTaskStarted};
   * without it, a tool runs its remote work to the end inside the call.
   */
  readonly supportsToolTasks?: boolean | undefined
  /**
   * Saves a checkpoint for a retried attempt of this Step (`heartbeatCheckpoint`), such as a started task's
   * handle; later heartbeats of the attempt repeat it. Resolves once it is durable.
   */
  readonly saveHeartbeatCheckpoint?: ((checkpoint: unknown) => Effect.Effect<void>) | undefined
  /** The user's answers to the questions this call asked so far ({@link ToolInputRequested}), oldest first. */
  readonly inputAnswers?: ReadonlyArray<QuestionAnswer> | undefined
  /**
   * When this attempt's method timeout ends it; `undefined` for the tool Steps, which have none (a heartbeat
   * timeout bounds them). The spec's TypeScript context field.
   */
  readonly deadline?: Date | undefined
}

/**
 * A tool's result: the output text the model sees.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolExecutionResult {
  readonly output: string
}

/**
 * The tool started remote work that the session polls in PollToolTask Steps (`pollToolTask`).
 * `pollIntervalSeconds` is the wait before the first poll. Return it only after the task's handle is saved
 * with `saveHeartbeatCheckpoint`, so a retried attempt returns the same task instead of starting another.
 *
 * It is also a {@link ToolExecutionResult} whose `output` says that the task started, so code written for
 * runners without tasks, which reads only `output`, keeps its types; the session tells the two apart with
 * {@link isToolTaskStarted}. Build it with {@link toolTaskStarted}.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolTaskStarted extends ToolExecutionResult {
  readonly _tag: "ToolTaskStarted"
  readonly taskId: string
  readonly pollIntervalSeconds: number
}

/**
 * A {@link ToolTaskStarted}.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolTaskStarted = (taskId: string, pollIntervalSeconds: number): ToolTaskStarted => ({
  _tag: "ToolTaskStarted",
  taskId,
  pollIntervalSeconds,
  output: `task ${taskId} started`
})

/**
 * A poll found the task still running: the next poll comes after `pollIntervalSeconds`, and reads
 * `continuation` back as the record's `inputContinuation` (`null` clears it).
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolTaskPending {
  readonly _tag: "ToolTaskPending"
  readonly pollIntervalSeconds: number
  readonly continuation?: string | null | undefined
}

/**
 * The tool needs the user's answer before it takes any effect. The session asks the question (interrupt
 * `<tool_call_id>-input-<n>`) and runs the tool again with the answer in `inputAnswers`; `continuation` comes
 * back as the record's `inputContinuation`. Build it with {@link toolInputRequested}.
 *
 * It is also a {@link ToolExecutionResult} (its `output` names the question), as {@link ToolTaskStarted} is.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolInputRequested extends ToolExecutionResult {
  readonly _tag: "ToolInputRequested"
  readonly question: string
  readonly choices: ReadonlyArray<string>
  readonly allowsFreeText: boolean
  readonly continuation: string | null
}

/**
 * A {@link ToolInputRequested}.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolInputRequested = (options: {
  readonly question: string
  readonly choices?: ReadonlyArray<string> | undefined
  readonly allowsFreeText?: boolean | undefined
  readonly continuation?: string | null | undefined
}): ToolInputRequested => ({
  _tag: "ToolInputRequested",
  question: options.question,
  choices: options.choices ?? [],
  allowsFreeText: options.allowsFreeText ?? true,
  continuation: options.continuation ?? null,
  output: `the tool asks: ${options.question}`
})

/**
 * Whether an outcome is a question for the user.
 *
 * @category guards
 * @since 0.1.0
 */
export const isToolInputRequested = (outcome: ToolExecutionResult): outcome is ToolInputRequested =>
  "_tag" in outcome && (outcome as { readonly _tag: unknown })._tag === "ToolInputRequested"

/**
 * What one deferred call returns: its result, a started task (see {@link isToolTaskStarted}), or a question
 * for the user (see {@link isToolInputRequested}).
 *
 * @category models
 * @since 0.1.0
 */
export type DeferredToolOutcome = ToolExecutionResult | ToolTaskStarted | ToolInputRequested

/**
 * What one task poll returns: the task's result, a pending task, or a question the task asks the user (see
 * {@link isToolInputRequested}); the session hands the resolution to the next poll as `pendingAnswer`.
 *
 * @category models
 * @since 0.1.0
 */
export type ToolTaskPollOutcome = ToolExecutionResult | ToolTaskPending | ToolInputRequested

/**
 * Whether an outcome is a started task.
 *
 * @category guards
 * @since 0.1.0
 */
export const isToolTaskStarted = (outcome: DeferredToolOutcome): outcome is ToolTaskStarted =>
  "_tag" in outcome && (outcome as { readonly _tag: unknown })._tag === "ToolTaskStarted"

/**
 * Whether a poll outcome is a pending task.
 *
 * @category guards
 * @since 0.1.0
 */
export const isToolTaskPending = (outcome: ToolTaskPollOutcome): outcome is ToolTaskPending =>
  "_tag" in outcome && (outcome as { readonly _tag: unknown })._tag === "ToolTaskPending"

/**
 * One poll of a started task, as PollToolTask hands it to the runner. `toolCall` carries `taskId`,
 * `taskPollIntervalSeconds` (the interval that just passed) and `inputContinuation` (what the last
 * {@link ToolTaskPending} returned).
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolTaskPoll {
  readonly flowId: string
  readonly turnId: string
  readonly toolCall: AgentToolCall
  readonly idempotencyKey: string
  readonly attempt: number
  /** The user's answers to the questions this call asked so far. */
  readonly inputAnswers: ReadonlyArray<QuestionAnswer>
  /**
   * The resolution of the task's last question (answered, declined or deadline passed) while it has not reached
   * the task: deliver it to the request that `toolCall.inputContinuation` names, idempotently, or return the
   * question again when a retried attempt cannot tell whether an earlier one delivered it. `null` otherwise.
   */
  readonly pendingAnswer: QuestionAnswer | null
  /** When this attempt's method timeout ends it; `undefined` for PollToolTask, which has none. */
  readonly deadline?: Date | undefined
}

/**
 * A task that the session abandoned, as CancelToolTask hands it to the runner. Cancelling must be
 * idempotent by `toolCall.taskId`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolTaskCancellation {
  readonly flowId: string
  readonly turnId: string
  readonly toolCall: AgentToolCall
  readonly idempotencyKey: string
  readonly attempt: number
  /**
   * Aborts when this CancelToolTask attempt is interrupted (its 30 s method timeout, a lost owner): pass it to
   * the request that cancels the task. The spec's TypeScript field.
   */
  readonly cancellationSignal?: AbortSignal | undefined
  /** When this attempt's method timeout (30 seconds) ends it. */
  readonly deadline?: Date | undefined
}

/**
 * What `summarizeContext` gets ("Adapter interface", `ContextSummaryRequest`): the previous summary and the
 * stored messages after it through `throughSequence`, the budget of the summary request
 * (`inputTokenBudget`, the policy's `contextWindowTokens`), and the Step attempt's IDs, cancellation signal and
 * deadline. Events and heartbeats are the `EventWriter` and `Heartbeat` services, as for `runModelStep`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ContextSummaryRequest {
  readonly flowId: string
  readonly turnId: string
  readonly stepExecutionId: string
  readonly attempt: number
  readonly previousSummary: ContextSummary | null
  readonly messages: ReadonlyArray<AgentMessage>
  readonly throughSequence: number
  readonly inputTokenBudget: number
  /** The settings the turn started with. */
  readonly sessionSettings: SessionSettings
  /** Aborts when `cancel_turn` cancels the compaction (or the attempt is interrupted otherwise). */
  readonly cancellationSignal?: AbortSignal | undefined
  /** When this attempt's method timeout (15 minutes, as RunModel's) ends it. */
  readonly deadline?: Date | undefined
}

/**
 * What one `summarizeContext` call returns: the summary text (a blank one fails the attempt), the call's usage,
 * and optionally what names its `chat` span.
 *
 * @category models
 * @since 0.1.0
 */
export interface ContextSummaryResult {
  readonly text: string
  readonly usage: AgentUsage
  readonly modelCallMetadata?: ModelCallMetadata | undefined
}

/**
 * A number now, later, or from an effect: what `estimateInputTokens` and `selectCompactionCutoff` may return
 * (the spec lets TypeScript runners return a Promise).
 *
 * @category models
 * @since 0.1.0
 */
export type MaybeDeferred<A> = A | PromiseLike<A> | Effect.Effect<A, ModelCallError>

/**
 * The compaction capability (`ContextCompactionRunner`), which `AgentSessionOptions.compaction` requires:
 * the three optional methods of {@link AgentFrameworkRunnerShape}, all present.
 *
 * @category models
 * @since 0.1.0
 */
export interface ContextCompactionRunner {
  /** The next model input's size in tokens, as `runModelStep` would send it for this turn. */
  readonly estimateInputTokens: (turn: AgentTurnContext) => MaybeDeferred<number>
  /**
   * The last sequence to summarize so that the messages after it take about `retainedTokenBudget` tokens, or
   * `null` for none; a cutoff never separates a tool call from its result.
   */
  readonly selectCompactionCutoff: (turn: AgentTurnContext, retainedTokenBudget: number) => MaybeDeferred<number | null>
  /** One model call that folds the previous summary and the messages after it into a new summary. */
  readonly summarizeContext: (
    request: ContextSummaryRequest
  ) => Effect.Effect<ContextSummaryResult, ModelCallError, EventWriter | Heartbeat>
}

/**
 * Whether a runner has the compaction capability: all three {@link ContextCompactionRunner} methods.
 *
 * @category guards
 * @since 0.1.0
 */
export const isContextCompactionRunner = (
  runner: AgentFrameworkRunnerShape
): runner is AgentFrameworkRunnerShape & ContextCompactionRunner =>
  typeof runner.estimateInputTokens === "function" &&
  typeof runner.selectCompactionCutoff === "function" &&
  typeof runner.summarizeContext === "function"

/**
 * The service shape of {@link AgentFrameworkRunner}.
 *
 * @category models
 * @since 0.1.0
 */
export interface AgentFrameworkRunnerShape {
  /** The agent's name, used in spans. */
  readonly name: string
  /**
   * Whether the runner supports plan mode: it offers only `write_todos` in a planning turn and shows
   * `buildPlanNote(turn.plan, turn.interactionMode)` before the turn's messages. Only such a runner can
   * serve a session with `planModeEnabled`.
   */
  readonly supportsPlanMode?: boolean | undefined
  /** The stored form of a user message (also used for the session's own notes). */
  readonly buildUserMessage: (text: string) => FrameworkMessage
  /** At most one model call; runs no tool it can defer. */
  readonly runModelStep: (
    turn: AgentTurnContext
  ) => Effect.Effect<AgentTurnOutcome, ModelCallError, EventWriter | Heartbeat>
  /** Runs one deferred tool call once; a tool may start a task instead when `supportsToolTasks` is set. */
  readonly executeDeferredToolCall: (
    call: DeferredToolExecution
  ) => Effect.Effect<DeferredToolOutcome, ToolExecutionError | ToolAttemptError, EventWriter | Heartbeat>
  /** Polls a started task once (runners whose tools return {@link ToolTaskStarted}). */
  readonly pollToolTask?:
    | ((
        poll: ToolTaskPoll
      ) => Effect.Effect<ToolTaskPollOutcome, ToolExecutionError | ToolAttemptError, EventWriter | Heartbeat>)
    | undefined
  /** Cancels an abandoned task, best effort and idempotent by task ID. */
  readonly cancelToolTask?:
    | ((
        cancellation: ToolTaskCancellation
      ) => Effect.Effect<void, ToolExecutionError | ToolAttemptError, EventWriter | Heartbeat>)
    | undefined
  /** The turn's unstored items when a turn ends without a final answer (runners that store incrementally). */
  readonly buildUnfinishedTurnMessages?:
    | ((turn: AgentTurnContext) => Effect.Effect<ReadonlyArray<FrameworkMessage>, unknown>)
    | undefined
  /** The compaction capability ({@link ContextCompactionRunner}): the next model input's size. */
  readonly estimateInputTokens?: ContextCompactionRunner["estimateInputTokens"] | undefined
  /** The compaction capability ({@link ContextCompactionRunner}): the last sequence to summarize. */
  readonly selectCompactionCutoff?: ContextCompactionRunner["selectCompactionCutoff"] | undefined
  /** The compaction capability ({@link ContextCompactionRunner}): the summary call. */
  readonly summarizeContext?: ContextCompactionRunner["summarizeContext"] | undefined
}

/**
 * The framework runner of a session Flow. Provide it as a layer to the worker: `Stepwise.layer(agent)` or
 * a framework adapter's layer.
 *
 * @category services
 * @since 0.1.0
 */
export class AgentFrameworkRunner extends Context.Service<AgentFrameworkRunner, AgentFrameworkRunnerShape>()(
  "@durable-agent/session/AgentFrameworkRunner"
) {
  /** A layer from a runner value (framework adapters build theirs with `Layer.effect`). */
  static readonly layer = (runner: AgentFrameworkRunnerShape): Layer.Layer<AgentFrameworkRunner> =>
    Layer.succeed(AgentFrameworkRunner, runner)
}

/**
 * An `AgentFrameworkRunner` layer from a runner value.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: (runner: AgentFrameworkRunnerShape) => Layer.Layer<AgentFrameworkRunner> =
  AgentFrameworkRunner.layer

// ---------------------------------------------------------------------------------------------------------
// Compaction helpers for adapters
// ---------------------------------------------------------------------------------------------------------

/**
 * Where stored messages may be cut for compaction, from their projections: `cuts[i]` is true when a cut after
 * message `i` leaves every tool call (an assistant message with a `toolCallId`) on the same side as its result
 * (a `tool` message with that ID), so no cut separates them ("Adapter interface", `select_compaction_cutoff`).
 *
 * @category compaction
 * @since 0.1.0
 */
export const compactionCuts = (messages: ReadonlyArray<AgentMessage>): Array<boolean> => {
  const open = new Set<string>()
  return messages.map((m, i) => {
    if (m.toolCallId !== null && m.role === "assistant") open.add(m.toolCallId)
    if (m.toolCallId !== null && m.role === "tool") open.delete(m.toolCallId)
    const next = messages[i + 1]
    return open.size === 0 && (next === undefined || next.role !== "tool")
  })
}

/**
 * An estimate of a stored message's tokens for runners whose framework does not count them: a token per four
 * characters of what the model sees of it (its text, tool arguments and output) and four per message.
 *
 * @category compaction
 * @since 0.1.0
 */
export const estimateMessageTokens = (message: AgentMessage): number =>
  Math.ceil(
    ((message.text?.length ?? 0) +
      (message.toolArguments?.length ?? 0) +
      (message.toolOutput?.length ?? 0) +
      (message.toolName?.length ?? 0)) /
      4
  ) + 4

/**
 * The earliest cut of `messages` ({@link compactionCuts}) whose later messages take at most
 * `retainedTokenBudget` tokens by `tokensOf`: the last sequence to summarize, or `null` for none. A
 * `selectCompactionCutoff` for runners without their own.
 *
 * @category compaction
 * @since 0.1.0
 */
export const selectCutoffWithin = (
  messages: ReadonlyArray<AgentMessage>,
  retainedTokenBudget: number,
  tokensOf: (message: AgentMessage) => number = estimateMessageTokens
): number | null => {
  const tokens = messages.map(tokensOf)
  const cuts = compactionCuts(messages)
  let after = tokens.reduce((a, b) => a + b, 0)
  for (let i = 0; i < messages.length; i++) {
    after -= tokens[i]!
    if (cuts[i] && after <= retainedTokenBudget) return messages[i]!.sequence
  }
  return null
}
