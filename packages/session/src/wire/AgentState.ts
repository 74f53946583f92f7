/**
 * Codecs of the session's own state values: `AgentState`, `AgentUsage`, the start input, the turn's
 * settings and reply sequence, turn control and cancellation requests, and context compaction values.
 *
 * Contract: `docs/session-contract.md`, "Persistence schema" (value types) and "Session Flow contract".
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { InteractionMode, SessionSettings, Timestamp } from "./Common.ts"
import { wireStruct, withDefault } from "./internal.ts"

/**
 * The session's status ("Persistence schema", `AgentState.status`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentStateStatus = Schema.Literals([
  "waiting_for_user_message",
  "running_model",
  "running_tools",
  "compacting_context",
  "failed"
])
/** @since 0.1.0 */
export type AgentStateStatus = typeof AgentStateStatus.Type

/**
 * The `AgentState` Attribute value ("Persistence schema"). `interaction_mode` defaults to `chat` and
 * `accepts_turn_control` to `false` when absent, as written by 0.1.0.
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentState = wireStruct(
  {
    status: AgentStateStatus,
    turnCount: Schema.Int,
    activeTurnId: Schema.NullOr(Schema.String),
    nextMessageSequence: Schema.Int,
    lastTurnError: Schema.NullOr(Schema.String),
    interactionMode: withDefault(InteractionMode, "chat"),
    acceptsTurnControl: withDefault(Schema.Boolean, false)
  },
  {
    turnCount: "turn_count",
    activeTurnId: "active_turn_id",
    nextMessageSequence: "next_message_sequence",
    lastTurnError: "last_turn_error",
    interactionMode: "interaction_mode",
    acceptsTurnControl: "accepts_turn_control"
  }
)
/** @since 0.1.0 */
export type AgentState = typeof AgentState.Type
/** @since 0.1.0 */
export type AgentStateEncoded = typeof AgentState.Encoded

/**
 * Token and call counts: the `AgentUsage` Attribute value and the two objects of `usage_recorded`
 * ("Persistence schema"; "Events").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentUsage = wireStruct(
  {
    modelCalls: Schema.Int,
    inputTokens: Schema.Int,
    outputTokens: Schema.Int,
    cachedInputTokens: Schema.Int,
    reasoningTokens: Schema.Int
  },
  {
    modelCalls: "model_calls",
    inputTokens: "input_tokens",
    outputTokens: "output_tokens",
    cachedInputTokens: "cached_input_tokens",
    reasoningTokens: "reasoning_tokens"
  }
)
/** @since 0.1.0 */
export type AgentUsage = typeof AgentUsage.Type
/** @since 0.1.0 */
export type AgentUsageEncoded = typeof AgentUsage.Encoded

/**
 * The input of the `StartAgentSession` Step ("Persistence schema"; "Session Flow contract", Steps).
 * `session_settings` is absent in 0.1.0 and defaults to `null`; `{}` means none.
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentSessionStartInput = wireStruct(
  {
    initialMessage: Schema.NullOr(Schema.String),
    sessionSettings: withDefault(Schema.NullOr(SessionSettings), null)
  },
  { initialMessage: "initial_message", sessionSettings: "session_settings" }
)
/** @since 0.1.0 */
export type AgentSessionStartInput = typeof AgentSessionStartInput.Type
/** @since 0.1.0 */
export type AgentSessionStartInputEncoded = typeof AgentSessionStartInput.Encoded

/**
 * The `TurnSessionSettings` Attribute value: the settings a turn started with, tagged with its turn
 * ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const TurnSessionSettings = wireStruct(
  {
    turnId: Schema.String,
    sessionSettings: SessionSettings
  },
  { turnId: "turn_id", sessionSettings: "session_settings" }
)
/** @since 0.1.0 */
export type TurnSessionSettings = typeof TurnSessionSettings.Type
/** @since 0.1.0 */
export type TurnSessionSettingsEncoded = typeof TurnSessionSettings.Encoded

/**
 * The `TurnReplySequence` Attribute value: the first sequence after the turn's user messages
 * ("Persistence schema"; "Message storage", Counts).
 *
 * @category schemas
 * @since 0.1.0
 */
export const TurnReplySequence = wireStruct(
  {
    turnId: Schema.String,
    sequence: Schema.Int
  },
  { turnId: "turn_id" }
)
/** @since 0.1.0 */
export type TurnReplySequence = typeof TurnReplySequence.Type
/** @since 0.1.0 */
export type TurnReplySequenceEncoded = typeof TurnReplySequence.Encoded

/**
 * The kind of a `TurnControlRequest` ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const TurnControlKind = Schema.Literals(["steer", "cancel_turn"])
/** @since 0.1.0 */
export type TurnControlKind = typeof TurnControlKind.Type

/**
 * A message of the internal `TurnControlRequests` Channel, which wakes `ResumeTurn` or
 * `AwaitUserMessage` ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const TurnControlRequest = Schema.Struct({ kind: TurnControlKind })
/** @since 0.1.0 */
export type TurnControlRequest = typeof TurnControlRequest.Type

/**
 * The `TurnCancellationRequest` Attribute value that only `cancel_turn` writes ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const TurnCancellationRequest = wireStruct(
  {
    turnId: Schema.String,
    requestedAt: Timestamp
  },
  { turnId: "turn_id", requestedAt: "requested_at" }
)
/** @since 0.1.0 */
export type TurnCancellationRequest = typeof TurnCancellationRequest.Type
/** @since 0.1.0 */
export type TurnCancellationRequestEncoded = typeof TurnCancellationRequest.Encoded

/**
 * The input of the `CompactContext` Step, also received by `RecordTurnFailure` ("Persistence schema";
 * "Session Flow contract", Steps).
 *
 * @category schemas
 * @since 0.1.0
 */
export const CompactContextInput = wireStruct(
  {
    throughSequence: Schema.Int
  },
  { throughSequence: "through_sequence" }
)
/** @since 0.1.0 */
export type CompactContextInput = typeof CompactContextInput.Type
/** @since 0.1.0 */
export type CompactContextInputEncoded = typeof CompactContextInput.Encoded

/**
 * The input of `RecordTurnFailure`: the failing Step's `CompactContextInput`, or JSON `null` from
 * `RunModel` ("Session Flow contract", rules).
 *
 * @category schemas
 * @since 0.1.0
 */
export const RecordTurnFailureInput = Schema.NullOr(CompactContextInput)
/** @since 0.1.0 */
export type RecordTurnFailureInput = typeof RecordTurnFailureInput.Type

/**
 * The `ContextSummary` Attribute value that `CompactContext` writes ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const ContextSummary = wireStruct(
  {
    generation: Schema.Int,
    firstSequence: Schema.Int,
    lastSequence: Schema.Int,
    text: Schema.String,
    createdAt: Timestamp
  },
  { firstSequence: "first_sequence", lastSequence: "last_sequence", createdAt: "created_at" }
)
/** @since 0.1.0 */
export type ContextSummary = typeof ContextSummary.Type
/** @since 0.1.0 */
export type ContextSummaryEncoded = typeof ContextSummary.Encoded
