/**
 * Codecs of tool call records and the internal tool call Channel messages.
 *
 * Contract: `docs/session-contract.md`, "Persistence schema" (`AgentToolCall`, `QuestionAnswer`,
 * `ToolCallCompleted`, `ToolCallCancellation`), "Effects and policies", "Adapter interface" (the six
 * runner-facing statuses), and "UI stream adapters" (the snapshot JSON projection).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as Struct from "effect/Struct"
import { CancellationReason, JsonText, Timestamp, ToolEffect } from "./Common.ts"
import { wireStruct, withDefault } from "./internal.ts"

const nonFinalStatuses = [
  "awaiting_approval",
  "approved",
  "awaiting_answer",
  "waiting_for_timer",
  "waiting_for_task"
] as const
const finalStatuses = ["rejected", "succeeded", "failed", "outcome_unknown"] as const

/**
 * The statuses of a record that is not final yet ("Persistence schema", `AgentToolCall.status`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentToolCallNonFinalStatus = Schema.Literals(nonFinalStatuses)
/** @since 0.1.0 */
export type AgentToolCallNonFinalStatus = typeof AgentToolCallNonFinalStatus.Type

/**
 * The final statuses of a tool call record; `tool_call_finished` reports one of them ("Persistence
 * schema"; "Events"; "Turn-failure note and model-visible results").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentToolCallFinalStatus = Schema.Literals(finalStatuses)
/** @since 0.1.0 */
export type AgentToolCallFinalStatus = typeof AgentToolCallFinalStatus.Type

/**
 * Whether a status is final ("Persistence schema", `AgentToolCall.status`).
 *
 * @category guards
 * @since 0.1.0
 */
export const isAgentToolCallFinalStatus = Schema.is(AgentToolCallFinalStatus)

/**
 * Every status of a stored record, the three waiting statuses included (`AgentToolCallRecord` in the
 * TypeScript core; "Persistence schema", "Adapter interface").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentToolCallRecordStatus = Schema.Literals([...nonFinalStatuses, ...finalStatuses])
/** @since 0.1.0 */
export type AgentToolCallRecordStatus = typeof AgentToolCallRecordStatus.Type

/**
 * The six statuses a runner sees, without `awaiting_answer`, `waiting_for_timer` and `waiting_for_task`
 * ("Adapter interface": the runner-facing `AgentToolCallStatus`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentToolCallStatus = Schema.Literals([
  "awaiting_approval",
  "approved",
  "rejected",
  "succeeded",
  "failed",
  "outcome_unknown"
])
/** @since 0.1.0 */
export type AgentToolCallStatus = typeof AgentToolCallStatus.Type

/**
 * How a question was resolved ("Persistence schema", `QuestionAnswer.resolution`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const QuestionResolution = Schema.Literals(["answered", "declined", "deadline_passed"])
/** @since 0.1.0 */
export type QuestionResolution = typeof QuestionResolution.Type

/**
 * An answer to a tool's question, kept in `AgentToolCall.input_answers` ("Persistence schema").
 * `resolution` defaults to `answered`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const QuestionAnswer = wireStruct(
  {
    interruptId: Schema.String,
    question: Schema.String,
    answer: Schema.String,
    resolution: withDefault(QuestionResolution, "answered")
  },
  { interruptId: "interrupt_id" }
)
/** @since 0.1.0 */
export type QuestionAnswer = typeof QuestionAnswer.Type
/** @since 0.1.0 */
export type QuestionAnswerEncoded = typeof QuestionAnswer.Encoded

const agentToolCallFields = {
  toolCallId: Schema.String,
  turnId: Schema.String,
  toolName: Schema.String,
  arguments: JsonText,
  effect: ToolEffect,
  requiresApproval: Schema.Boolean,
  status: AgentToolCallRecordStatus,
  output: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  rejectionMessage: Schema.NullOr(Schema.String),
  deferralOrder: Schema.Int,
  toolSourceReference: Schema.NullOr(Schema.String),
  traceContext: Schema.NullOr(Schema.String),
  waitUntil: withDefault(Schema.NullOr(Timestamp), null),
  inputContinuation: withDefault(Schema.NullOr(Schema.String), null),
  inputAnswers: withDefault(Schema.Array(QuestionAnswer), []),
  inputQuestion: withDefault(Schema.NullOr(Schema.String), null),
  inputChoices: withDefault(Schema.Array(Schema.String), []),
  inputAllowsFreeText: withDefault(Schema.Boolean, true),
  cancellationReason: withDefault(Schema.NullOr(CancellationReason), null),
  taskId: withDefault(Schema.NullOr(Schema.String), null),
  taskPollIntervalSeconds: withDefault(Schema.NullOr(Schema.Int), null),
  taskAnswerPending: withDefault(Schema.Boolean, false)
}

const agentToolCallKeys = {
  toolCallId: "tool_call_id",
  turnId: "turn_id",
  toolName: "tool_name",
  requiresApproval: "requires_approval",
  rejectionMessage: "rejection_message",
  deferralOrder: "deferral_order",
  toolSourceReference: "tool_source_reference",
  traceContext: "trace_context",
  waitUntil: "wait_until",
  inputContinuation: "input_continuation",
  inputAnswers: "input_answers",
  inputQuestion: "input_question",
  inputChoices: "input_choices",
  inputAllowsFreeText: "input_allows_free_text",
  cancellationReason: "cancellation_reason",
  taskId: "task_id",
  taskPollIntervalSeconds: "task_poll_interval_seconds",
  taskAnswerPending: "task_answer_pending"
} as const

/**
 * A stored tool call record: an `AgentToolCalls` instance, keyed by tool call ID and deleted when the
 * turn ends (`AgentToolCallRecord` in the TypeScript core; "Persistence schema"). Fields written with a
 * default in the spec (from `wait_until` on) take it when absent.
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentToolCall = wireStruct(agentToolCallFields, agentToolCallKeys)
/** @since 0.1.0 */
export type AgentToolCall = typeof AgentToolCall.Type
/** @since 0.1.0 */
export type AgentToolCallEncoded = typeof AgentToolCall.Encoded

/**
 * An `AgentToolCall` as the UI snapshot JSON shows it: without `tool_source_reference`, `trace_context`,
 * `input_continuation`, `input_answers` and `task_answer_pending` ("UI stream adapters").
 *
 * @category schemas
 * @since 0.1.0
 */
export const UiAgentToolCall = wireStruct(
  Struct.omit(agentToolCallFields, [
    "toolSourceReference",
    "traceContext",
    "inputContinuation",
    "inputAnswers",
    "taskAnswerPending"
  ]),
  agentToolCallKeys
)
/** @since 0.1.0 */
export type UiAgentToolCall = typeof UiAgentToolCall.Type
/** @since 0.1.0 */
export type UiAgentToolCallEncoded = typeof UiAgentToolCall.Encoded

/**
 * A message of the internal `ToolCallResults` Channel, published in the commit that makes a record
 * final ("Persistence schema"; "Session Flow contract", rules).
 *
 * @category schemas
 * @since 0.1.0
 */
export const ToolCallCompleted = wireStruct(
  {
    toolCallId: Schema.String
  },
  { toolCallId: "tool_call_id" }
)
/** @since 0.1.0 */
export type ToolCallCompleted = typeof ToolCallCompleted.Type
/** @since 0.1.0 */
export type ToolCallCompletedEncoded = typeof ToolCallCompleted.Encoded

/**
 * A message of the internal `ToolCallCancellations` ChannelMap, which wakes a call's waiting Step
 * ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const ToolCallCancellation = Schema.Struct({ reason: CancellationReason })
/** @since 0.1.0 */
export type ToolCallCancellation = typeof ToolCallCancellation.Type
