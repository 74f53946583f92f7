/**
 * Codecs of the session's RPC requests and responses, and a table of every RPC's input and output.
 *
 * Contract: `docs/session-contract.md`, "RPCs", "Persistence schema" (the request types, `AgentSnapshot`,
 * `ListAgentMessagesRequest`, `AgentMessagesPage`) and "UI stream adapters" (the snapshot JSON).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { AgentInterrupt } from "./AgentInterrupt.ts"
import { AgentMessage, AgentUserMessage, PendingUserMessage, UiAgentMessage } from "./AgentMessage.ts"
import { AgentPlan } from "./AgentPlan.ts"
import { AgentState, AgentUsage, ContextSummary } from "./AgentState.ts"
import { AgentToolCall, UiAgentToolCall } from "./AgentToolCall.ts"
import { SessionSettings } from "./Common.ts"
import { wireStruct, withDefault } from "./internal.ts"

/**
 * Input of `execute_plan`: the plan revision the user approves ("RPCs"; "Persistence schema").
 *
 * @category requests
 * @since 0.1.0
 */
export const ExecutePlanRequest = Schema.Struct({ revision: Schema.Int })
/** @since 0.1.0 */
export type ExecutePlanRequest = typeof ExecutePlanRequest.Type

/**
 * Input of `steer_user_message`: a queued message ID or a new text; the RPC returns `false` unless
 * exactly one is set ("RPCs"; "Persistence schema").
 *
 * @category requests
 * @since 0.1.0
 */
export const SteerUserMessageRequest = wireStruct(
  {
    messageId: Schema.NullOr(Schema.String),
    text: Schema.NullOr(Schema.String)
  },
  { messageId: "message_id" }
)
/** @since 0.1.0 */
export type SteerUserMessageRequest = typeof SteerUserMessageRequest.Type
/** @since 0.1.0 */
export type SteerUserMessageRequestEncoded = typeof SteerUserMessageRequest.Encoded

/**
 * Input of `delete_queued_message` ("RPCs"; "Persistence schema").
 *
 * @category requests
 * @since 0.1.0
 */
export const DeleteQueuedMessageRequest = wireStruct(
  {
    messageId: Schema.String
  },
  { messageId: "message_id" }
)
/** @since 0.1.0 */
export type DeleteQueuedMessageRequest = typeof DeleteQueuedMessageRequest.Type
/** @since 0.1.0 */
export type DeleteQueuedMessageRequestEncoded = typeof DeleteQueuedMessageRequest.Encoded

/**
 * Input of `cancel_turn`; `turn_id` is `null` for the active turn ("RPCs"; "Persistence schema").
 *
 * @category requests
 * @since 0.1.0
 */
export const CancelTurnRequest = wireStruct(
  {
    turnId: Schema.NullOr(Schema.String)
  },
  { turnId: "turn_id" }
)
/** @since 0.1.0 */
export type CancelTurnRequest = typeof CancelTurnRequest.Type
/** @since 0.1.0 */
export type CancelTurnRequestEncoded = typeof CancelTurnRequest.Encoded

/**
 * Input of `update_session_settings`: replaces the next turn's settings, `{}` clears them. Absent reads
 * as `null`, which decodes but the RPC refuses ("RPCs"; "Persistence schema").
 *
 * @category requests
 * @since 0.1.0
 */
export const UpdateSessionSettingsRequest = wireStruct(
  {
    sessionSettings: withDefault(Schema.NullOr(SessionSettings), null)
  },
  { sessionSettings: "session_settings" }
)
/** @since 0.1.0 */
export type UpdateSessionSettingsRequest = typeof UpdateSessionSettingsRequest.Type
/** @since 0.1.0 */
export type UpdateSessionSettingsRequestEncoded = typeof UpdateSessionSettingsRequest.Encoded

/**
 * Input of `resolve_interrupt`: approve or reject an approval, or decline a question ("RPCs";
 * "Persistence schema").
 *
 * @category requests
 * @since 0.1.0
 */
export const ResolveInterruptRequest = wireStruct(
  {
    interruptId: Schema.String,
    approved: Schema.Boolean,
    rejectionMessage: Schema.NullOr(Schema.String)
  },
  { interruptId: "interrupt_id", rejectionMessage: "rejection_message" }
)
/** @since 0.1.0 */
export type ResolveInterruptRequest = typeof ResolveInterruptRequest.Type
/** @since 0.1.0 */
export type ResolveInterruptRequestEncoded = typeof ResolveInterruptRequest.Encoded

/**
 * Input of `answer_question` ("RPCs"; "Persistence schema").
 *
 * @category requests
 * @since 0.1.0
 */
export const AnswerQuestionRequest = wireStruct(
  {
    interruptId: Schema.String,
    answer: Schema.String
  },
  { interruptId: "interrupt_id" }
)
/** @since 0.1.0 */
export type AnswerQuestionRequest = typeof AnswerQuestionRequest.Type
/** @since 0.1.0 */
export type AnswerQuestionRequestEncoded = typeof AnswerQuestionRequest.Encoded

/**
 * Input of `list_agent_messages`. `before_sequence` `null` starts after the newest message; `limit`
 * defaults to 50 when absent, and the RPC clamps it to 1..200 ("RPCs"; "Persistence schema").
 *
 * @category requests
 * @since 0.1.0
 */
export const ListAgentMessagesRequest = wireStruct(
  {
    beforeSequence: Schema.NullOr(Schema.Int),
    limit: withDefault(Schema.Int, 50)
  },
  { beforeSequence: "before_sequence" }
)
/** @since 0.1.0 */
export type ListAgentMessagesRequest = typeof ListAgentMessagesRequest.Type
/** @since 0.1.0 */
export type ListAgentMessagesRequestEncoded = typeof ListAgentMessagesRequest.Encoded

/**
 * Output of `list_agent_messages`: a page of messages, oldest first ("RPCs"; "Persistence schema";
 * "Message storage", Reads).
 *
 * @category responses
 * @since 0.1.0
 */
export const AgentMessagesPage = wireStruct(
  {
    messages: Schema.Array(AgentMessage),
    nextBeforeSequence: Schema.NullOr(Schema.Int),
    deletedBeforeSequence: Schema.NullOr(Schema.Int)
  },
  { nextBeforeSequence: "next_before_sequence", deletedBeforeSequence: "deleted_before_sequence" }
)
/** @since 0.1.0 */
export type AgentMessagesPage = typeof AgentMessagesPage.Type
/** @since 0.1.0 */
export type AgentMessagesPageEncoded = typeof AgentMessagesPage.Encoded

const snapshotKeys = {
  pendingInterrupts: "pending_interrupts",
  toolCalls: "tool_calls",
  queuedMessageCount: "queued_message_count",
  queuedMessages: "queued_messages",
  steeredMessages: "steered_messages",
  contextSummary: "context_summary",
  sessionSettings: "session_settings"
} as const

/** The fields of `AgentSnapshot` (and, with the UI forms of two, `UiAgentSnapshot`), in their wire order. */
const snapshotFields = {
  state: Schema.NullOr(AgentState),
  messages: Schema.Array(AgentMessage),
  pendingInterrupts: Schema.Array(AgentInterrupt),
  toolCalls: Schema.Array(AgentToolCall),
  usage: AgentUsage,
  queuedMessageCount: Schema.Int,
  plan: withDefault(Schema.NullOr(AgentPlan), null),
  queuedMessages: withDefault(Schema.Array(PendingUserMessage), []),
  steeredMessages: withDefault(Schema.Array(PendingUserMessage), []),
  contextSummary: withDefault(Schema.NullOr(ContextSummary), null),
  sessionSettings: withDefault(Schema.NullOr(SessionSettings), null)
}

/**
 * Output of `get_agent_snapshot` ("RPCs"; "Persistence schema"). `state` is `null` until
 * `StartAgentSession` commits; `plan`, `queued_messages`, `steered_messages`, `context_summary` and
 * `session_settings` take their defaults when absent.
 *
 * @category responses
 * @since 0.1.0
 */
export const AgentSnapshot = wireStruct(snapshotFields, snapshotKeys)
/** @since 0.1.0 */
export type AgentSnapshot = typeof AgentSnapshot.Type
/** @since 0.1.0 */
export type AgentSnapshotEncoded = typeof AgentSnapshot.Encoded

/**
 * The snapshot JSON that the UI stream adapters serve: an `AgentSnapshot` without the fields only the
 * session's Steps use (`framework_item`, `tool_source_reference`, `trace_context`, `input_continuation`,
 * `input_answers`, `task_answer_pending`) ("UI stream adapters").
 *
 * @category responses
 * @since 0.1.0
 */
export const UiAgentSnapshot = wireStruct(
  // the same fields in the same order, with the UI forms of the messages and tool calls
  { ...snapshotFields, messages: Schema.Array(UiAgentMessage), toolCalls: Schema.Array(UiAgentToolCall) },
  snapshotKeys
)
/** @since 0.1.0 */
export type UiAgentSnapshot = typeof UiAgentSnapshot.Type
/** @since 0.1.0 */
export type UiAgentSnapshotEncoded = typeof UiAgentSnapshot.Encoded

/**
 * The input of an RPC that takes none (`get_agent_snapshot`): JSON `null` ("RPCs").
 *
 * @category requests
 * @since 0.1.0
 */
export const NoInput = Schema.Null
/** @since 0.1.0 */
export type NoInput = typeof NoInput.Type

/**
 * Every RPC name of the session Flow; TypeScript uses the same names ("RPCs").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentRpcName = Schema.Literals([
  "send_user_message",
  "execute_plan",
  "steer_user_message",
  "delete_queued_message",
  "cancel_turn",
  "update_session_settings",
  "resolve_interrupt",
  "answer_question",
  "get_agent_snapshot",
  "list_agent_messages"
])
/** @since 0.1.0 */
export type AgentRpcName = typeof AgentRpcName.Type

/**
 * The input and output codec of every session RPC, keyed by RPC name ("RPCs").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentSessionRpcs = {
  send_user_message: { input: AgentUserMessage, output: Schema.Boolean },
  execute_plan: { input: ExecutePlanRequest, output: Schema.Boolean },
  steer_user_message: { input: SteerUserMessageRequest, output: Schema.Boolean },
  delete_queued_message: { input: DeleteQueuedMessageRequest, output: Schema.Boolean },
  cancel_turn: { input: CancelTurnRequest, output: Schema.Boolean },
  update_session_settings: { input: UpdateSessionSettingsRequest, output: Schema.Boolean },
  resolve_interrupt: { input: ResolveInterruptRequest, output: Schema.Boolean },
  answer_question: { input: AnswerQuestionRequest, output: Schema.Boolean },
  get_agent_snapshot: { input: NoInput, output: AgentSnapshot },
  list_agent_messages: { input: ListAgentMessagesRequest, output: AgentMessagesPage }
} as const satisfies Record<AgentRpcName, { readonly input: Schema.Top; readonly output: Schema.Top }>
