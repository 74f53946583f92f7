/**
 * Shared scalar codecs and enumerations of the agent session wire format.
 *
 * Contract: `docs/session-contract.md`, sections "Effects and policies", "Session Flow contract" and
 * "Persistence schema". JSON field names are snake_case on the wire and camelCase in TypeScript.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as SchemaTransformation from "effect/SchemaTransformation"

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

/**
 * The session's form of an RFC 3339 time: UTC with milliseconds and `Z` (`2026-11-01T12:00:00.000Z`).
 * Text that is not an RFC 3339 time is returned unchanged.
 *
 * @category conversions
 * @since 0.1.0
 */
export const canonicalTimestamp = (text: string): string => {
  if (text.length > 64) return canonicalOf(text)
  const known = canonicalTimestamps.get(text)
  if (known !== undefined) return known
  const canonical = canonicalOf(text)
  // every stored value's timestamps are decoded and encoded on each read and write, and most repeat
  if (canonicalTimestamps.size >= CANONICAL_TIMESTAMPS_KEPT) canonicalTimestamps.clear()
  canonicalTimestamps.set(text, canonical)
  return canonical
}

const canonicalOf = (text: string): string => {
  if (!RFC3339.test(text)) return text
  const ms = Date.parse(text)
  return Number.isNaN(ms) ? text : new Date(ms).toISOString()
}

/** The canonical forms of recent timestamp texts (a pure function of the text), at most this many. */
const CANONICAL_TIMESTAMPS_KEPT = 4096
const canonicalTimestamps = new Map<string, string>()

/**
 * An RFC 3339 timestamp as text (docs/session-contract.md, "Wire format"): readers accept any offset
 * (`+00:00` as well as `Z`), and both decoding and encoding give the writers' form, UTC with milliseconds
 * and `Z`, so a decoded `2026-11-01T12:00:00+00:00` encodes as `2026-11-01T12:00:00.000Z`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const Timestamp = Schema.String.pipe(
  Schema.decodeTo(
    Schema.String,
    SchemaTransformation.transform({ decode: canonicalTimestamp, encode: canonicalTimestamp })
  )
).annotate({
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
