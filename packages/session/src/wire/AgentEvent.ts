/**
 * Codecs of the `AgentEvents` Stream: the `AgentEvent` envelope and the payload of every event type.
 *
 * Contract: `docs/session-contract.md`, "Events" and "Persistence schema" (`AgentEvent`). On the wire an
 * event is `{type, turn_id, attempt, payload, step_execution_id}` where `payload` is JSON object text;
 * the codecs here decode that text into the typed payload of the event's `type`.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { AgentInterruptKind } from "./AgentInterrupt.ts"
import { AgentPlanStatus } from "./AgentPlan.ts"
import { AgentUsage } from "./AgentState.ts"
import { AgentToolCallFinalStatus } from "./AgentToolCall.ts"
import { CancellationReason, Timestamp, ToolEffect } from "./Common.ts"
import { wireStruct, withDefault } from "./internal.ts"

/**
 * Every event type the session core writes ("Events"). Adapter-specific types carry an adapter prefix
 * instead, such as `openai_agents.handoff` (see {@link AdapterAgentEvent}).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentEventType = Schema.Literals([
  "turn_started",
  "turn_completed",
  "turn_failed",
  "turn_steered",
  "turn_cancelled",
  "text_delta",
  "reasoning_delta",
  "tool_call_started",
  "tool_call_finished",
  "tool_call_deferred",
  "interrupt_raised",
  "interrupt_resolved",
  "timer_started",
  "plan_updated",
  "plan_execution_started",
  "tool_task_started",
  "usage_recorded",
  "compaction_started",
  "compaction_finished"
])
/** @since 0.1.0 */
export type AgentEventType = typeof AgentEventType.Type

/**
 * The event types that end a turn, after which a UI replaces the turn's live text with the stored
 * messages ("Events").
 *
 * @category schemas
 * @since 0.1.0
 */
export const TurnEndEventType = Schema.Literals(["turn_completed", "turn_failed", "turn_steered", "turn_cancelled"])
/** @since 0.1.0 */
export type TurnEndEventType = typeof TurnEndEventType.Type

/**
 * An adapter-specific event type: an adapter prefix, a dot, and a name, such as `openai_agents.handoff`
 * or `mcp.task_status` ("Events").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AdapterAgentEventType = Schema.TemplateLiteral([Schema.String, ".", Schema.String]).check(
  Schema.isPattern(/^[^.]+\..+$/)
)
/** @since 0.1.0 */
export type AdapterAgentEventType = typeof AdapterAgentEventType.Type

const envelopeKeys = { turnId: "turn_id", stepExecutionId: "step_execution_id" } as const

/** The one-based Step attempt of an event ("Persistence schema", `AgentEvent.attempt`). */
const Attempt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

/**
 * The stored form of an event with its payload left as JSON object text ("Persistence schema",
 * `AgentEvent`). `step_execution_id` is `""` when absent.
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentEventEnvelope = wireStruct(
  {
    type: Schema.String,
    turnId: Schema.NullOr(Schema.String),
    attempt: Attempt,
    payload: Schema.String,
    stepExecutionId: withDefault(Schema.String, "")
  },
  envelopeKeys
)
/** @since 0.1.0 */
export type AgentEventEnvelope = typeof AgentEventEnvelope.Type
/** @since 0.1.0 */
export type AgentEventEnvelopeEncoded = typeof AgentEventEnvelope.Encoded

// ---------------------------------------------------------------------------------------------------------
// payloads
// ---------------------------------------------------------------------------------------------------------

/**
 * Payload of `turn_started`: the turn's user message sequence ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const TurnStartedPayload = Schema.Struct({ sequence: Schema.Int })
/** @since 0.1.0 */
export type TurnStartedPayload = typeof TurnStartedPayload.Type

/**
 * Payload of `turn_completed`: the messages the turn appended ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const TurnCompletedPayload = wireStruct({ messageCount: Schema.Int }, { messageCount: "message_count" })
/** @since 0.1.0 */
export type TurnCompletedPayload = typeof TurnCompletedPayload.Type

/**
 * Payload of `turn_failed` ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const TurnFailedPayload = Schema.Struct({ error: Schema.String })
/** @since 0.1.0 */
export type TurnFailedPayload = typeof TurnFailedPayload.Type

/**
 * Payload of `turn_steered`: the steered messages that start the next turn, and the messages the ended
 * turn appended ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const TurnSteeredPayload = wireStruct(
  {
    steeredMessageCount: Schema.Int,
    messageCount: Schema.Int
  },
  { steeredMessageCount: "steered_message_count", messageCount: "message_count" }
)
/** @since 0.1.0 */
export type TurnSteeredPayload = typeof TurnSteeredPayload.Type

/**
 * Payload of `turn_cancelled`: the messages the ended turn appended ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const TurnCancelledPayload = wireStruct({ messageCount: Schema.Int }, { messageCount: "message_count" })
/** @since 0.1.0 */
export type TurnCancelledPayload = typeof TurnCancelledPayload.Type

/**
 * Payload of `text_delta` and `reasoning_delta` ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const TextDeltaPayload = Schema.Struct({ text: Schema.String })
/** @since 0.1.0 */
export type TextDeltaPayload = typeof TextDeltaPayload.Type

/**
 * Payload of `tool_call_started` ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const ToolCallStartedPayload = wireStruct(
  {
    toolCallId: Schema.String,
    toolName: Schema.String
  },
  { toolCallId: "tool_call_id", toolName: "tool_name" }
)
/** @since 0.1.0 */
export type ToolCallStartedPayload = typeof ToolCallStartedPayload.Type

/**
 * Payload of `tool_call_finished`, written once per call when its record becomes final ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const ToolCallFinishedPayload = wireStruct(
  {
    toolCallId: Schema.String,
    toolName: Schema.String,
    status: AgentToolCallFinalStatus
  },
  { toolCallId: "tool_call_id", toolName: "tool_name" }
)
/** @since 0.1.0 */
export type ToolCallFinishedPayload = typeof ToolCallFinishedPayload.Type

/**
 * Payload of `tool_call_deferred`, written once per requested tool call ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const ToolCallDeferredPayload = wireStruct(
  {
    toolCallId: Schema.String,
    toolName: Schema.String,
    effect: ToolEffect,
    requiresApproval: Schema.Boolean
  },
  { toolCallId: "tool_call_id", toolName: "tool_name", requiresApproval: "requires_approval" }
)
/** @since 0.1.0 */
export type ToolCallDeferredPayload = typeof ToolCallDeferredPayload.Type

/**
 * Payload of `interrupt_raised` ("Events"; field types as in `AgentInterrupt`).
 *
 * @category payloads
 * @since 0.1.0
 */
export const InterruptRaisedPayload = wireStruct(
  {
    interruptId: Schema.String,
    toolCallId: Schema.String,
    toolName: Schema.String,
    deadline: Schema.NullOr(Timestamp),
    kind: AgentInterruptKind,
    question: Schema.NullOr(Schema.String),
    choices: Schema.Array(Schema.String),
    allowsFreeText: Schema.Boolean
  },
  {
    interruptId: "interrupt_id",
    toolCallId: "tool_call_id",
    toolName: "tool_name",
    allowsFreeText: "allows_free_text"
  }
)
/** @since 0.1.0 */
export type InterruptRaisedPayload = typeof InterruptRaisedPayload.Type

/**
 * Payload of `interrupt_resolved`. `cancellation_reason` is `steered` or `turn_cancelled` when steering
 * or `cancel_turn` removed the interrupt, else `null` ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const InterruptResolvedPayload = wireStruct(
  {
    interruptId: Schema.String,
    approved: Schema.Boolean,
    rejectionMessage: Schema.NullOr(Schema.String),
    kind: AgentInterruptKind,
    answered: Schema.Boolean,
    cancellationReason: Schema.NullOr(CancellationReason)
  },
  {
    interruptId: "interrupt_id",
    rejectionMessage: "rejection_message",
    cancellationReason: "cancellation_reason"
  }
)
/** @since 0.1.0 */
export type InterruptResolvedPayload = typeof InterruptResolvedPayload.Type

/**
 * Payload of `timer_started`, written for a `durable_wait` call ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const TimerStartedPayload = wireStruct(
  {
    toolCallId: Schema.String,
    waitUntil: Timestamp,
    reason: Schema.String
  },
  { toolCallId: "tool_call_id", waitUntil: "wait_until" }
)
/** @since 0.1.0 */
export type TimerStartedPayload = typeof TimerStartedPayload.Type

/**
 * Payload of `plan_updated`, written when `write_todos` replaces the plan or an approval marks a draft
 * plan active ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const PlanUpdatedPayload = wireStruct(
  {
    revision: Schema.Int,
    status: AgentPlanStatus,
    taskCount: Schema.Int
  },
  { taskCount: "task_count" }
)
/** @since 0.1.0 */
export type PlanUpdatedPayload = typeof PlanUpdatedPayload.Type

/**
 * Payload of `plan_execution_started`, written after the `turn_started` of an executing turn ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const PlanExecutionStartedPayload = Schema.Struct({ revision: Schema.Int })
/** @since 0.1.0 */
export type PlanExecutionStartedPayload = typeof PlanExecutionStartedPayload.Type

/**
 * Payload of `tool_task_started` ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const ToolTaskStartedPayload = wireStruct(
  {
    toolCallId: Schema.String,
    toolName: Schema.String,
    taskId: Schema.String
  },
  { toolCallId: "tool_call_id", toolName: "tool_name", taskId: "task_id" }
)
/** @since 0.1.0 */
export type ToolTaskStartedPayload = typeof ToolTaskStartedPayload.Type

/**
 * Payload of `usage_recorded`: the model call's usage and the session total ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const UsageRecordedPayload = Schema.Struct({ recorded: AgentUsage, session: AgentUsage })
/** @since 0.1.0 */
export type UsageRecordedPayload = typeof UsageRecordedPayload.Type

/**
 * Payload of `compaction_started`, written each time a `CompactContext` attempt starts ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const CompactionStartedPayload = wireStruct(
  { throughSequence: Schema.Int },
  { throughSequence: "through_sequence" }
)
/** @since 0.1.0 */
export type CompactionStartedPayload = typeof CompactionStartedPayload.Type

/**
 * Payload of `compaction_finished`, written when `CompactContext` wrote the summary ("Events").
 *
 * @category payloads
 * @since 0.1.0
 */
export const CompactionFinishedPayload = wireStruct(
  {
    generation: Schema.Int,
    throughSequence: Schema.Int
  },
  { throughSequence: "through_sequence" }
)
/** @since 0.1.0 */
export type CompactionFinishedPayload = typeof CompactionFinishedPayload.Type

// ---------------------------------------------------------------------------------------------------------
// events
// ---------------------------------------------------------------------------------------------------------

const makeEvent = <const T extends AgentEventType, P extends Schema.Top>(type: T, payload: P) =>
  wireStruct(
    {
      type: Schema.Literal(type),
      turnId: Schema.NullOr(Schema.String),
      attempt: Attempt,
      payload: Schema.fromJsonString(payload),
      stepExecutionId: withDefault(Schema.String, "")
    },
    envelopeKeys
  )

/**
 * A `turn_started` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const TurnStartedEvent = makeEvent("turn_started", TurnStartedPayload)
/** @since 0.1.0 */
export type TurnStartedEvent = typeof TurnStartedEvent.Type

/**
 * A `turn_completed` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const TurnCompletedEvent = makeEvent("turn_completed", TurnCompletedPayload)
/** @since 0.1.0 */
export type TurnCompletedEvent = typeof TurnCompletedEvent.Type

/**
 * A `turn_failed` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const TurnFailedEvent = makeEvent("turn_failed", TurnFailedPayload)
/** @since 0.1.0 */
export type TurnFailedEvent = typeof TurnFailedEvent.Type

/**
 * A `turn_steered` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const TurnSteeredEvent = makeEvent("turn_steered", TurnSteeredPayload)
/** @since 0.1.0 */
export type TurnSteeredEvent = typeof TurnSteeredEvent.Type

/**
 * A `turn_cancelled` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const TurnCancelledEvent = makeEvent("turn_cancelled", TurnCancelledPayload)
/** @since 0.1.0 */
export type TurnCancelledEvent = typeof TurnCancelledEvent.Type

/**
 * A `text_delta` event: live answer text ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const TextDeltaEvent = makeEvent("text_delta", TextDeltaPayload)
/** @since 0.1.0 */
export type TextDeltaEvent = typeof TextDeltaEvent.Type

/**
 * A `reasoning_delta` event: live reasoning text ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const ReasoningDeltaEvent = makeEvent("reasoning_delta", TextDeltaPayload)
/** @since 0.1.0 */
export type ReasoningDeltaEvent = typeof ReasoningDeltaEvent.Type

/**
 * A `tool_call_started` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const ToolCallStartedEvent = makeEvent("tool_call_started", ToolCallStartedPayload)
/** @since 0.1.0 */
export type ToolCallStartedEvent = typeof ToolCallStartedEvent.Type

/**
 * A `tool_call_finished` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const ToolCallFinishedEvent = makeEvent("tool_call_finished", ToolCallFinishedPayload)
/** @since 0.1.0 */
export type ToolCallFinishedEvent = typeof ToolCallFinishedEvent.Type

/**
 * A `tool_call_deferred` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const ToolCallDeferredEvent = makeEvent("tool_call_deferred", ToolCallDeferredPayload)
/** @since 0.1.0 */
export type ToolCallDeferredEvent = typeof ToolCallDeferredEvent.Type

/**
 * An `interrupt_raised` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const InterruptRaisedEvent = makeEvent("interrupt_raised", InterruptRaisedPayload)
/** @since 0.1.0 */
export type InterruptRaisedEvent = typeof InterruptRaisedEvent.Type

/**
 * An `interrupt_resolved` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const InterruptResolvedEvent = makeEvent("interrupt_resolved", InterruptResolvedPayload)
/** @since 0.1.0 */
export type InterruptResolvedEvent = typeof InterruptResolvedEvent.Type

/**
 * A `timer_started` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const TimerStartedEvent = makeEvent("timer_started", TimerStartedPayload)
/** @since 0.1.0 */
export type TimerStartedEvent = typeof TimerStartedEvent.Type

/**
 * A `plan_updated` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const PlanUpdatedEvent = makeEvent("plan_updated", PlanUpdatedPayload)
/** @since 0.1.0 */
export type PlanUpdatedEvent = typeof PlanUpdatedEvent.Type

/**
 * A `plan_execution_started` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const PlanExecutionStartedEvent = makeEvent("plan_execution_started", PlanExecutionStartedPayload)
/** @since 0.1.0 */
export type PlanExecutionStartedEvent = typeof PlanExecutionStartedEvent.Type

/**
 * A `tool_task_started` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const ToolTaskStartedEvent = makeEvent("tool_task_started", ToolTaskStartedPayload)
/** @since 0.1.0 */
export type ToolTaskStartedEvent = typeof ToolTaskStartedEvent.Type

/**
 * A `usage_recorded` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const UsageRecordedEvent = makeEvent("usage_recorded", UsageRecordedPayload)
/** @since 0.1.0 */
export type UsageRecordedEvent = typeof UsageRecordedEvent.Type

/**
 * A `compaction_started` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const CompactionStartedEvent = makeEvent("compaction_started", CompactionStartedPayload)
/** @since 0.1.0 */
export type CompactionStartedEvent = typeof CompactionStartedEvent.Type

/**
 * A `compaction_finished` event ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const CompactionFinishedEvent = makeEvent("compaction_finished", CompactionFinishedPayload)
/** @since 0.1.0 */
export type CompactionFinishedEvent = typeof CompactionFinishedEvent.Type

/**
 * An adapter-specific event, such as `openai_agents.handoff`, whose payload is any JSON object
 * ("Events": adapter-specific types use an adapter prefix).
 *
 * @category events
 * @since 0.1.0
 */
export const AdapterAgentEvent = wireStruct(
  {
    type: AdapterAgentEventType,
    turnId: Schema.NullOr(Schema.String),
    attempt: Attempt,
    payload: Schema.fromJsonString(Schema.JsonObject),
    stepExecutionId: withDefault(Schema.String, "")
  },
  envelopeKeys
)
/** @since 0.1.0 */
export type AdapterAgentEvent = typeof AdapterAgentEvent.Type

/**
 * Every event the session core writes, discriminated on `type` ("Events").
 *
 * @category events
 * @since 0.1.0
 */
export const SessionAgentEvent = Schema.Union([
  TurnStartedEvent,
  TurnCompletedEvent,
  TurnFailedEvent,
  TurnSteeredEvent,
  TurnCancelledEvent,
  TextDeltaEvent,
  ReasoningDeltaEvent,
  ToolCallStartedEvent,
  ToolCallFinishedEvent,
  ToolCallDeferredEvent,
  InterruptRaisedEvent,
  InterruptResolvedEvent,
  TimerStartedEvent,
  PlanUpdatedEvent,
  PlanExecutionStartedEvent,
  ToolTaskStartedEvent,
  UsageRecordedEvent,
  CompactionStartedEvent,
  CompactionFinishedEvent
])
/** @since 0.1.0 */
export type SessionAgentEvent = typeof SessionAgentEvent.Type

/**
 * An `AgentEvents` Stream entry with its payload decoded per `type`: one of the session core's events or
 * an adapter-specific event ("Events"; "Persistence schema", `AgentEvent`). An unknown type without an
 * adapter prefix, or a payload that does not match its type, fails to decode.
 *
 * @category events
 * @since 0.1.0
 */
export const AgentEvent = Schema.Union([SessionAgentEvent, AdapterAgentEvent])
/** @since 0.1.0 */
export type AgentEvent = typeof AgentEvent.Type
/** @since 0.1.0 */
export type AgentEventEncoded = typeof AgentEvent.Encoded

/**
 * The codec of each session event type.
 *
 * @category events
 * @since 0.1.0
 */
export const SessionAgentEventByType: {
  readonly [T in AgentEventType]: Schema.Codec<Extract<SessionAgentEvent, { readonly type: T }>, unknown>
} = {
  turn_started: TurnStartedEvent,
  turn_completed: TurnCompletedEvent,
  turn_failed: TurnFailedEvent,
  turn_steered: TurnSteeredEvent,
  turn_cancelled: TurnCancelledEvent,
  text_delta: TextDeltaEvent,
  reasoning_delta: ReasoningDeltaEvent,
  tool_call_started: ToolCallStartedEvent,
  tool_call_finished: ToolCallFinishedEvent,
  tool_call_deferred: ToolCallDeferredEvent,
  interrupt_raised: InterruptRaisedEvent,
  interrupt_resolved: InterruptResolvedEvent,
  timer_started: TimerStartedEvent,
  plan_updated: PlanUpdatedEvent,
  plan_execution_started: PlanExecutionStartedEvent,
  tool_task_started: ToolTaskStartedEvent,
  usage_recorded: UsageRecordedEvent,
  compaction_started: CompactionStartedEvent,
  compaction_finished: CompactionFinishedEvent
}

const sessionTypes = new Set<string>(AgentEventType.literals)

/**
 * The one codec an encoded event is decoded with: its session event type's, the adapter codec for a type with
 * an adapter prefix, else the whole union (which refuses it).
 */
const codecFor = (input: unknown): Schema.Codec<AgentEvent, unknown> => {
  const type = typeof input === "object" && input !== null ? (input as { readonly type?: unknown }).type : undefined
  if (typeof type === "string" && sessionTypes.has(type)) {
    return SessionAgentEventByType[type as AgentEventType] as Schema.Codec<AgentEvent, unknown>
  }
  if (typeof type === "string" && type.includes(".")) return AdapterAgentEvent as Schema.Codec<AgentEvent, unknown>
  return AgentEvent as Schema.Codec<AgentEvent, unknown>
}

/**
 * Decodes an encoded event (`{type, turn_id, attempt, payload, step_execution_id}`) with the codec of its
 * `type` only, so an error names that one event type (decoding with {@link AgentEvent} reports every member).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeAgentEvent = (input: unknown): Effect.Effect<AgentEvent, Schema.SchemaError> =>
  Schema.decodeUnknownEffect(codecFor(input))(input)
