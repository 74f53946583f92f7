/**
 * Names and numbers of the session Flow contract that Python and TypeScript share: Step types, the names
 * of Attributes, Channels and the Stream, built-in tool names, ID and key formats, and limits.
 *
 * Contract: `docs/session-contract.md`, "Session Flow contract", "Message storage" and "Persistence
 * schema".
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * Every Step type of the session Flow ("Session Flow contract", Steps).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentSessionStepType = Schema.Literals([
  "StartAgentSession",
  "AwaitUserMessage",
  "RunModel",
  "CompactContext",
  "AwaitToolApproval",
  "AwaitQuestionAnswer",
  "AwaitTimer",
  "CallTool",
  "CallSingleAttemptTool",
  "PollToolTask",
  "RecordToolFailure",
  "RecordToolOutcomeUnknown",
  "ResumeTurn",
  "ApplyTurnControl",
  "RecordTurnFailure",
  "FinishTurnCancellation",
  "CancelToolTask"
])
/** @since 0.1.0 */
export type AgentSessionStepType = typeof AgentSessionStepType.Type

/**
 * Every Attribute, AttributeMap, Channel, ChannelMap and Stream name of the session ("Persistence
 * schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentSessionStateName = Schema.Literals([
  "AgentState",
  "AgentMessages",
  "AgentMessageChunks",
  "AgentMessageIndex",
  "TurnReplySequence",
  "FrameworkRunState",
  "AgentToolCalls",
  "PendingInterrupts",
  "AgentUsage",
  "QueuedUserMessages",
  "InterruptResolutions",
  "ToolCallResults",
  "SteeredUserMessages",
  "TurnControlRequests",
  "TurnCancellationRequest",
  "ToolCallCancellations",
  "AgentTraceContext",
  "AgentPlan",
  "PlanExecutions",
  "PendingPlanExecution",
  "ContextSummary",
  "SessionSettings",
  "TurnSessionSettings",
  "AgentEvents"
])
/** @since 0.1.0 */
export type AgentSessionStateName = typeof AgentSessionStateName.Type

/**
 * The built-in tools a session can enable ("Session Flow contract", rules).
 *
 * @category schemas
 * @since 0.1.0
 */
export const BuiltInToolName = Schema.Literals(["ask_user", "durable_wait", "write_todos"])
/** @since 0.1.0 */
export type BuiltInToolName = typeof BuiltInToolName.Type

/**
 * A turn ID, `turn-<n>` (`AgentState.active_turn_id`, "Persistence schema").
 *
 * @category constructors
 * @since 0.1.0
 */
export const formatTurnId = (n: number): string => `turn-${n}`

/**
 * The interrupt ID of a tool's `n`th question, `<tool_call_id>-input-<n>` ("Persistence schema",
 * `AgentInterrupt.interrupt_id`; "Session Flow contract", `CallTool`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolQuestionInterruptId = (toolCallId: string, n: number): string => `${toolCallId}-input-${n}`

/**
 * The key of an `AgentMessages` or `AgentMessageChunks` instance: the sequence as 12-digit zero-padded
 * decimal ("Persistence schema").
 *
 * @category constructors
 * @since 0.1.0
 */
export const messageSequenceKey = (sequence: number): string => sequence.toString().padStart(12, "0")

/**
 * The idempotency key of a tool call, `<flowId>/<turnId>/<toolCallId>`, the same on every attempt
 * ("Effects and policies").
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolCallIdempotencyKey = (flowId: string, turnId: string, toolCallId: string): string =>
  `${flowId}/${turnId}/${toolCallId}`

/**
 * `MAX` in the spec: the upper bound of the Channel ranges the session waits for ("Session Flow contract", steering
 * and cancellation rules).
 *
 * @category constants
 * @since 0.1.0
 */
export const CHANNEL_RANGE_MAX = 2_147_483_647

/**
 * The most bytes of compact UTF-8 JSON text a client may send as session settings ("Session Flow
 * contract", rules).
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_SESSION_SETTINGS_BYTES = 16_384

/**
 * The extra bytes the session's own size checks accept over {@link MAX_SESSION_SETTINGS_BYTES}
 * ("Session Flow contract", rules).
 *
 * @category constants
 * @since 0.1.0
 */
export const SESSION_SETTINGS_SIZE_TOLERANCE_BYTES = 1_024

/**
 * The most chunks one commit moves out of the message window ("Message storage", Rollover).
 *
 * @category constants
 * @since 0.1.0
 */
export const MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT = 4

/**
 * The most bytes one commit moves out of the message window, unless its first chunk alone is larger
 * ("Message storage", Rollover).
 *
 * @category constants
 * @since 0.1.0
 */
export const MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT = 8 * 1024 * 1024

/**
 * The number of stored messages `get_agent_snapshot` returns ("RPCs"; "Persistence schema",
 * `AgentSnapshot.messages`).
 *
 * @category constants
 * @since 0.1.0
 */
export const SNAPSHOT_MESSAGE_LIMIT = 200

/**
 * The default `limit` of `list_agent_messages` ("Persistence schema", `ListAgentMessagesRequest`).
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_LIST_AGENT_MESSAGES_LIMIT = 50

/**
 * The largest `limit` of `list_agent_messages`, which clamps it to 1..200 ("RPCs").
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_LIST_AGENT_MESSAGES_LIMIT = 200

/**
 * Default message storage options, named alike in every core ("Message storage", Options):
 * `message_window_size` 64, `message_chunk_size` 32, `message_chunk_max_bytes` 1 MiB (at most 8 MiB) and
 * `retained_message_limit` 1,000.
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_MESSAGE_STORAGE_OPTIONS = {
  messageWindowSize: 64,
  messageChunkSize: 32,
  messageChunkMaxBytes: 1024 * 1024,
  retainedMessageLimit: 1_000
} as const

/**
 * The largest allowed `message_chunk_max_bytes` ("Message storage", Options).
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_MESSAGE_CHUNK_MAX_BYTES = 8 * 1024 * 1024
