/**
 * The session's persistence schema as engine definitions: Attributes, AttributeMaps, Channels and the
 * `AgentEvents` Stream, named as in "Persistence schema" of docs/session-contract.md and typed by the wire codecs.
 * Clients read state with them (`client.getAttribute(flowId, Persistence.AgentState)`).
 *
 * Declared for the later steering, plan and compaction features so their state fits without a rewrite:
 * `SteeredUserMessages`, `TurnControlRequests`, `TurnCancellationRequest`, `ToolCallCancellations`.
 *
 * @since 0.1.0
 */
import { Attribute, AttributeMap, Channel, ChannelMap, FlowStream } from "@durable-agent/engine"
import * as Schema from "effect/Schema"
import * as Wire from "./wire/index.ts"

/**
 * `AgentState`: the session's status, turn and message counters.
 *
 * @category attributes
 * @since 0.1.0
 */
export const AgentState = Attribute("AgentState", Wire.AgentState)

/**
 * `AgentMessages`: the window of the newest messages, one per instance, keyed by its 12-digit zero-padded
 * sequence; older messages are in {@link AgentMessageChunks}.
 *
 * @category attributes
 * @since 0.1.0
 */
export const AgentMessages = AttributeMap("AgentMessages", Wire.AgentMessage)

/**
 * `AgentMessageChunks`: immutable runs of consecutive messages moved out of the window, keyed by the chunk's
 * first sequence (12 digits, zero-padded); each chunk's range is listed in {@link AgentMessageIndex}
 * ("Message storage").
 *
 * @category attributes
 * @since 0.1.0
 */
export const AgentMessageChunks = AttributeMap("AgentMessageChunks", Wire.AgentMessageChunk)

/**
 * `AgentMessageIndex`: the chunks' ranges, the oldest stored message and the oldest message of the window;
 * unset until a Step first writes a chunk (a session without it stores every message in `AgentMessages`).
 *
 * @category attributes
 * @since 0.1.0
 */
export const AgentMessageIndex = Attribute("AgentMessageIndex", Wire.AgentMessageIndex)

/**
 * `TurnReplySequence`: the first sequence after the active turn's user messages.
 *
 * @category attributes
 * @since 0.1.0
 */
export const TurnReplySequence = Attribute("TurnReplySequence", Wire.TurnReplySequence)

/**
 * `FrameworkRunState`: the runner's opaque run state, present only while a turn waits for tool calls.
 *
 * @category attributes
 * @since 0.1.0
 */
export const FrameworkRunState = Attribute("FrameworkRunState", Schema.String)

/**
 * `AgentToolCalls`: the active turn's tool call records, keyed by tool call ID.
 *
 * @category attributes
 * @since 0.1.0
 */
export const AgentToolCalls = AttributeMap("AgentToolCalls", Wire.AgentToolCall)

/**
 * `PendingInterrupts`: the interrupts waiting for an answer.
 *
 * @category attributes
 * @since 0.1.0
 */
export const PendingInterrupts = Attribute("PendingInterrupts", Wire.PendingInterrupts)

/**
 * `AgentUsage`: the session's total usage.
 *
 * @category attributes
 * @since 0.1.0
 */
export const AgentUsage = Attribute("AgentUsage", Wire.AgentUsage)

/**
 * `SessionSettings`: the settings the next turn starts with; unset when there are none.
 *
 * @category attributes
 * @since 0.1.0
 */
export const SessionSettings = Attribute("SessionSettings", Wire.SessionSettings)

/**
 * `TurnSessionSettings`: the settings the active turn started with.
 *
 * @category attributes
 * @since 0.1.0
 */
export const TurnSessionSettings = Attribute("TurnSessionSettings", Wire.TurnSessionSettings)

/**
 * `TurnCancellationRequest`: written only by `cancel_turn`; AwaitUserMessage, ApplyTurnControl and FinishTurnCancellation lock it.
 *
 * @category attributes
 * @since 0.1.0
 */
export const TurnCancellationRequest = Attribute("TurnCancellationRequest", Wire.TurnCancellationRequest)

/**
 * `AgentTraceContext`: the W3C traceparent of the current activation's `invoke_agent` root span, written
 * only while tracing is on (see `Tracer`); an activation whose root has no valid context deletes it.
 *
 * @category attributes
 * @since 0.1.0
 */
export const AgentTraceContext = Attribute("AgentTraceContext", Schema.String)

/**
 * `QueuedUserMessages`: user messages waiting for the next turn.
 *
 * @category channels
 * @since 0.1.0
 */
export const QueuedUserMessages = Channel("QueuedUserMessages", Wire.AgentUserMessage)

/**
 * `InterruptResolutions`: resolutions of interrupts, keyed by interrupt ID.
 *
 * @category channels
 * @since 0.1.0
 */
export const InterruptResolutions = ChannelMap("InterruptResolutions", Wire.AgentInterruptResolution)

/**
 * `ToolCallResults` (internal): one `ToolCallCompleted` per call, in the commit that makes its record final.
 *
 * @category channels
 * @since 0.1.0
 */
export const ToolCallResults = Channel("ToolCallResults", Wire.ToolCallCompleted)

/**
 * `SteeredUserMessages`: steered messages (steering is a later feature).
 *
 * @category channels
 * @since 0.1.0
 */
export const SteeredUserMessages = Channel("SteeredUserMessages", Wire.AgentUserMessage)

/**
 * `TurnControlRequests` (internal): wakes ResumeTurn for steering (a later feature).
 *
 * @category channels
 * @since 0.1.0
 */
export const TurnControlRequests = Channel("TurnControlRequests", Wire.TurnControlRequest)

/**
 * `ToolCallCancellations` (internal): wakes a call's waiting Step for steering (a later feature).
 *
 * @category channels
 * @since 0.1.0
 */
export const ToolCallCancellations = ChannelMap("ToolCallCancellations", Wire.ToolCallCancellation)

/**
 * The default byte capacity of `AgentEvents` per Flow type: 10 MiB.
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_EVENTS_CAPACITY_BYTES = 10 * 1024 * 1024

/**
 * `AgentEvents`: the session's best-effort event Stream; each message is an `AgentEventEnvelope` whose
 * payload is JSON object text.
 *
 * @category streams
 * @since 0.1.0
 */
export const agentEvents = (capacityBytes: number = DEFAULT_EVENTS_CAPACITY_BYTES) =>
  FlowStream("AgentEvents", Wire.AgentEventEnvelope, { capacityBytes })

/**
 * `AgentEvents` with the default capacity; clients read it by name, so any capacity reads the same stream.
 *
 * @category streams
 * @since 0.1.0
 */
export const AgentEvents = agentEvents()

/**
 * The session's plan: replaced by each successful `write_todos`; unset until the first one.
 *
 * @category attributes
 * @since 0.1.0
 */
export const AgentPlan = Attribute("AgentPlan", Wire.AgentPlan)

/**
 * `PendingPlanExecution`: the approval `execute_plan` accepted that AwaitUserMessage has not consumed yet.
 * `execute_plan` locks it; AwaitUserMessage is the only other writer.
 *
 * @category attributes
 * @since 0.1.0
 */
export const PendingPlanExecution = Attribute("PendingPlanExecution", Wire.PlanExecutionRequest)

/**
 * `PlanExecutions`: plan approvals, keyed by the approved revision as decimal text; `execute_plan` publishes,
 * AwaitUserMessage consumes the current revision's.
 *
 * @category channels
 * @since 0.1.0
 */
export const PlanExecutions = ChannelMap("PlanExecutions", Wire.PlanExecutionRequest)

/**
 * The session's summary of its earlier conversation (`ContextSummary`); set once the session compacts; only
 * CompactContext writes it.
 *
 * @category attributes
 * @since 0.1.0
 */
export const ContextSummary = Attribute("ContextSummary", Wire.ContextSummary)

/**
 * Every Attribute and AttributeMap of the session.
 *
 * @category collections
 * @since 0.1.0
 */
export const attributes = [
  AgentState,
  AgentMessages,
  AgentMessageChunks,
  AgentMessageIndex,
  TurnReplySequence,
  FrameworkRunState,
  AgentToolCalls,
  PendingInterrupts,
  AgentUsage,
  SessionSettings,
  TurnSessionSettings,
  TurnCancellationRequest,
  AgentTraceContext,
  AgentPlan,
  PendingPlanExecution,
  ContextSummary
] as const

/**
 * Every Channel and ChannelMap of the session.
 *
 * @category collections
 * @since 0.1.0
 */
export const channels = [
  QueuedUserMessages,
  InterruptResolutions,
  ToolCallResults,
  SteeredUserMessages,
  TurnControlRequests,
  ToolCallCancellations,
  PlanExecutions
] as const
