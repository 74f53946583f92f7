/**
 * Codecs of interrupts (tool approvals and questions) and their resolutions.
 *
 * Contract: `docs/session-contract.md`, "Persistence schema" (`AgentInterrupt`,
 * `AgentInterruptResolution`, the `PendingInterrupts` Attribute).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { JsonText, Timestamp } from "./Common.ts"
import { wireStruct, withDefault } from "./internal.ts"

/**
 * The kind of an interrupt ("Persistence schema", `AgentInterrupt.kind`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentInterruptKind = Schema.Literals(["tool_approval", "question"])
/** @since 0.1.0 */
export type AgentInterruptKind = typeof AgentInterruptKind.Type

/**
 * A pending interrupt: an approval request or a question ("Persistence schema"). `interrupt_id` is the
 * tool call ID for approvals and `ask_user`, and `<id>-input-<n>` for tool questions. `question`,
 * `choices` and `allows_free_text` default to `null`, `[]` and `true`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentInterrupt = wireStruct(
  {
    interruptId: Schema.String,
    kind: AgentInterruptKind,
    toolCallId: Schema.String,
    toolName: Schema.String,
    arguments: JsonText,
    createdAt: Timestamp,
    deadline: Schema.NullOr(Timestamp),
    question: withDefault(Schema.NullOr(Schema.String), null),
    choices: withDefault(Schema.Array(Schema.String), []),
    allowsFreeText: withDefault(Schema.Boolean, true)
  },
  {
    interruptId: "interrupt_id",
    toolCallId: "tool_call_id",
    toolName: "tool_name",
    createdAt: "created_at",
    allowsFreeText: "allows_free_text"
  }
)
/** @since 0.1.0 */
export type AgentInterrupt = typeof AgentInterrupt.Type
/** @since 0.1.0 */
export type AgentInterruptEncoded = typeof AgentInterrupt.Encoded

/**
 * The `PendingInterrupts` Attribute value: the list of pending interrupts ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const PendingInterrupts = Schema.Array(AgentInterrupt)
/** @since 0.1.0 */
export type PendingInterrupts = typeof PendingInterrupts.Type

/**
 * The `InterruptResolutions` ChannelMap message that `resolve_interrupt` and `answer_question` publish
 * ("Persistence schema"; "RPCs"). `answer` defaults to `null`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentInterruptResolution = wireStruct(
  {
    approved: Schema.Boolean,
    rejectionMessage: Schema.NullOr(Schema.String),
    answer: withDefault(Schema.NullOr(Schema.String), null)
  },
  { rejectionMessage: "rejection_message" }
)
/** @since 0.1.0 */
export type AgentInterruptResolution = typeof AgentInterruptResolution.Type
/** @since 0.1.0 */
export type AgentInterruptResolutionEncoded = typeof AgentInterruptResolution.Encoded
