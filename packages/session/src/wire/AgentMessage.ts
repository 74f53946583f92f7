/**
 * Codecs of stored conversation messages, user messages, and the message chunk index.
 *
 * Contract: `docs/session-contract.md`, "Persistence schema" (`AgentMessage`, `AgentUserMessage`,
 * `PendingUserMessage`, `AgentMessageChunk`, `AgentMessageChunkRange`, `AgentMessageIndex`), "Message
 * storage", and "UI stream adapters" (the snapshot JSON projection).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as Struct from "effect/Struct"
import { JsonText, Timestamp } from "./Common.ts"
import { wireStruct, withDefault } from "./internal.ts"

/**
 * The role of a stored message ("Persistence schema", `AgentMessage.role`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentMessageRole = Schema.Literals(["user", "assistant", "tool"])
/** @since 0.1.0 */
export type AgentMessageRole = typeof AgentMessageRole.Type

const agentMessageFields = {
  sequence: Schema.Int,
  turnId: Schema.String,
  role: AgentMessageRole,
  text: Schema.NullOr(Schema.String),
  toolCallId: Schema.NullOr(Schema.String),
  toolName: Schema.NullOr(Schema.String),
  toolArguments: Schema.NullOr(JsonText),
  toolOutput: Schema.NullOr(Schema.String),
  frameworkItem: JsonText,
  createdAt: Timestamp
}

const agentMessageKeys = {
  turnId: "turn_id",
  toolCallId: "tool_call_id",
  toolName: "tool_name",
  toolArguments: "tool_arguments",
  toolOutput: "tool_output",
  frameworkItem: "framework_item",
  createdAt: "created_at"
} as const

/**
 * One stored conversation message: an `AgentMessages` instance, or an entry of an `AgentMessageChunk`
 * ("Persistence schema"; "Message storage").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentMessage = wireStruct(agentMessageFields, agentMessageKeys)
/** @since 0.1.0 */
export type AgentMessage = typeof AgentMessage.Type
/** @since 0.1.0 */
export type AgentMessageEncoded = typeof AgentMessage.Encoded

/**
 * An `AgentMessage` as the UI snapshot JSON shows it: without `framework_item` ("UI stream adapters").
 *
 * @category schemas
 * @since 0.1.0
 */
export const UiAgentMessage = wireStruct(Struct.omit(agentMessageFields, ["frameworkItem"]), agentMessageKeys)
/** @since 0.1.0 */
export type UiAgentMessage = typeof UiAgentMessage.Type
/** @since 0.1.0 */
export type UiAgentMessageEncoded = typeof UiAgentMessage.Encoded

/**
 * A user message: the input of `send_user_message` and the `QueuedUserMessages` and
 * `SteeredUserMessages` Channel message ("Persistence schema"; "RPCs"). `plan_mode` defaults to `false`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentUserMessage = wireStruct(
  {
    text: Schema.String,
    planMode: withDefault(Schema.Boolean, false)
  },
  { planMode: "plan_mode" }
)
/** @since 0.1.0 */
export type AgentUserMessage = typeof AgentUserMessage.Type
/** @since 0.1.0 */
export type AgentUserMessageEncoded = typeof AgentUserMessage.Encoded

/**
 * A queued or steered user message with its Channel message ID, as `get_agent_snapshot` lists them
 * ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const PendingUserMessage = wireStruct(
  {
    messageId: Schema.String,
    message: AgentUserMessage
  },
  { messageId: "message_id" }
)
/** @since 0.1.0 */
export type PendingUserMessage = typeof PendingUserMessage.Type
/** @since 0.1.0 */
export type PendingUserMessageEncoded = typeof PendingUserMessage.Encoded

/**
 * An `AgentMessageChunks` instance: consecutive messages, immutable once written ("Persistence schema";
 * "Message storage", Rollover).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentMessageChunk = Schema.Struct({ messages: Schema.Array(AgentMessage) })
/** @since 0.1.0 */
export type AgentMessageChunk = typeof AgentMessageChunk.Type
/** @since 0.1.0 */
export type AgentMessageChunkEncoded = typeof AgentMessageChunk.Encoded

/**
 * The sequence range of one chunk, listed in `AgentMessageIndex.chunks` ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentMessageChunkRange = wireStruct(
  {
    firstSequence: Schema.Int,
    lastSequence: Schema.Int
  },
  { firstSequence: "first_sequence", lastSequence: "last_sequence" }
)
/** @since 0.1.0 */
export type AgentMessageChunkRange = typeof AgentMessageChunkRange.Type
/** @since 0.1.0 */
export type AgentMessageChunkRangeEncoded = typeof AgentMessageChunkRange.Encoded

/**
 * The `AgentMessageIndex` Attribute value: every kept chunk, the oldest stored message, and the oldest
 * message of the window ("Persistence schema"; "Message storage").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentMessageIndex = wireStruct(
  {
    chunks: Schema.Array(AgentMessageChunkRange),
    firstSequence: Schema.Int,
    windowFirstSequence: Schema.Int
  },
  { firstSequence: "first_sequence", windowFirstSequence: "window_first_sequence" }
)
/** @since 0.1.0 */
export type AgentMessageIndex = typeof AgentMessageIndex.Type
/** @since 0.1.0 */
export type AgentMessageIndexEncoded = typeof AgentMessageIndex.Encoded
