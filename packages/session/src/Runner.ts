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
import type { ModelCallMetadata } from "./ModelClient.ts"
import type { ResolvedToolPolicy, ToolPolicy } from "./Policy.ts"
import type { EventWriter, Heartbeat } from "./Services.ts"
import type {
  AgentMessage,
  AgentMessageRole,
  AgentToolCall,
  AgentUsage,
  InteractionMode,
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
  turnCompleted: (fields: Omit<TurnCompleted, "_tag">): TurnCompleted => ({ _tag: "TurnCompleted", ...fields }),
  toolCallsRequested: (fields: Omit<ToolCallsRequested, "_tag">): ToolCallsRequested => ({
    _tag: "ToolCallsRequested",
    ...fields
  }),
  turnContinued: (fields: Omit<TurnContinued, "_tag">): TurnContinued => ({ _tag: "TurnContinued", ...fields })
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
  readonly interactionMode: InteractionMode
  readonly toolPolicies: Readonly<Record<string, ToolPolicy>>
  readonly defaultToolEffect: ToolEffect
  /** The policy of a tool: an explicit policy, then `frameworkEffect`, then the session default. */
  readonly resolveToolPolicy: (toolName: string, frameworkEffect?: ToolEffect | undefined) => ResolvedToolPolicy
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
 * The service shape of {@link AgentFrameworkRunner}.
 *
 * @category models
 * @since 0.1.0
 */
export interface AgentFrameworkRunnerShape {
  /** The agent's name, used in spans. */
  readonly name: string
  /** The stored form of a user message (also used for the session's own notes). */
  readonly buildUserMessage: (text: string) => FrameworkMessage
  /** At most one model call; runs no tool it can defer. */
  readonly runModelStep: (
    turn: AgentTurnContext
  ) => Effect.Effect<AgentTurnOutcome, ModelCallError, EventWriter | Heartbeat>
  /** Runs one deferred tool call once. */
  readonly executeDeferredToolCall: (
    call: DeferredToolExecution
  ) => Effect.Effect<ToolExecutionResult, ToolExecutionError | ToolAttemptError, EventWriter | Heartbeat>
  /** The turn's unstored items when a turn ends without a final answer (runners that store incrementally). */
  readonly buildUnfinishedTurnMessages?:
    | ((turn: AgentTurnContext) => Effect.Effect<ReadonlyArray<FrameworkMessage>, unknown>)
    | undefined
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
