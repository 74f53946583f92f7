/**
 * Shared scalar codecs and enumerations of the agent session wire format.
 *
 * Spec: `agent-framework-adapters.md`, sections "Effects and policies", "Session Flow contract" and
 * "Persistence schema". JSON field names are snake_case on the wire and camelCase in TypeScript.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * An RFC 3339 timestamp, kept as text so it round-trips unchanged ("Persistence schema"; "Session Flow
 * contract" rules: writers emit UTC with milliseconds and `Z`, readers also accept the `+00:00` form).
 *
 * @category schemas
 * @since 0.1.0
 */
export const Timestamp = Schema.String.annotate({
  description: "RFC 3339 timestamp, such as 2026-11-01T12:00:00.123Z"
})
/** @since 0.1.0 */
export type Timestamp = typeof Timestamp.Type

/**
 * JSON text carried as a string, such as tool arguments, tool output or a framework item ("Persistence
 * schema"). The session never parses it.
 *
 * @category schemas
 * @since 0.1.0
 */
export const JsonText = Schema.String.annotate({ description: "JSON text" })
/** @since 0.1.0 */
export type JsonText = typeof JsonText.Type

/**
 * A JSON object of session settings: the `SessionSettings` Attribute value and the `session_settings`
 * fields ("Persistence schema"; "Session Flow contract" rules on session settings).
 *
 * @category schemas
 * @since 0.1.0
 */
export const SessionSettings = Schema.JsonObject.annotate({ description: "session settings JSON object" })
/** @since 0.1.0 */
export type SessionSettings = typeof SessionSettings.Type

/**
 * A tool's effect class, which picks its Step, retry and default approval ("Effects and policies").
 *
 * @category schemas
 * @since 0.1.0
 */
export const ToolEffect = Schema.Literals(["read", "idempotent_write", "non_idempotent_write", "unclassified"])
/** @since 0.1.0 */
export type ToolEffect = typeof ToolEffect.Type

/**
 * Why steering or `cancel_turn` abandoned a call or removed an interrupt ("Session Flow contract",
 * steering and cancellation rules; `AgentToolCall.cancellation_reason`, `ToolCallCancellation.reason`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const CancellationReason = Schema.Literals(["steered", "turn_cancelled"])
/** @since 0.1.0 */
export type CancellationReason = typeof CancellationReason.Type

/**
 * The mode of a turn: `chat`, `planning` or `executing` ("Persistence schema", `AgentState.interaction_mode`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const InteractionMode = Schema.Literals(["chat", "planning", "executing"])
/** @since 0.1.0 */
export type InteractionMode = typeof InteractionMode.Type
