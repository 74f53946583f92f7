/**
 * The UI stream resume token: the engine's position in the session's `AgentEvents` plus what the browser holds
 * open (the open step, text and reasoning parts, and the stage of each tool part). One token follows every
 * part of a UI message stream. See `docs/ui-stream.md`.
 *
 * The token is opaque to the browser (`u1.` and base64url JSON). It is not a credential: every handler checks
 * the request against the application's authorization hook, and the token must name the session of the URL.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * How far a tool part got in the browser: 1 input shown, 2 approval requested, 3 settled (output, error or
 * denial shown).
 *
 * @category models
 * @since 0.1.0
 */
export type ToolStage = 1 | 2 | 3

/**
 * What the browser holds open of one turn's assistant message.
 *
 * @category schemas
 * @since 0.1.0
 */
export const OpenParts = Schema.Struct({
  /** `start` was sent. */
  started: Schema.Boolean,
  /** The open AI SDK step: the RunModel Step execution ID, or null. */
  step: Schema.NullOr(Schema.String),
  /** The attempt of the open step. */
  attempt: Schema.Int,
  text: Schema.NullOr(Schema.String),
  reasoning: Schema.NullOr(Schema.String),
  /** A counter for part IDs. */
  counter: Schema.Int,
  /** Tool call ID → stage (1 input, 2 approval requested, 3 settled). */
  tools: Schema.Record(Schema.String, Schema.Int),
  /** Whether any content part of the turn was sent (text, reasoning or tool). */
  content: Schema.Boolean,
  /** Question interrupt ID → stage (1 sent as pending, 2 sent as resolved); absent in older tokens. */
  questions: Schema.optionalKey(Schema.Record(Schema.String, Schema.Int)),
  /** The plan revision the `data-plan` part shows; absent when none was sent. */
  plan: Schema.optionalKey(Schema.Int)
})
/** @since 0.1.0 */
export type OpenParts = typeof OpenParts.Type

/**
 * The decoded token.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ResumeTokenData = Schema.Struct({
  v: Schema.Literal(1),
  /** Session ID. */
  s: Schema.String,
  /** Turn ID. */
  t: Schema.String,
  /** The engine token just before the turn's `turn_started`, or null when the turn is read from the oldest event. */
  a: Schema.NullOr(Schema.String),
  /** The engine token of the last event applied, or null. */
  p: Schema.NullOr(Schema.String),
  /** How many parts of the event after `p` were already sent. */
  k: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  /** What the browser holds open. */
  o: OpenParts
})
/** @since 0.1.0 */
export type ResumeTokenData = typeof ResumeTokenData.Type

/**
 * A token that does not decode, or names another session than the request.
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidUiResumeToken extends Schema.TaggedError<InvalidUiResumeToken>()("InvalidUiResumeToken", {
  token: Schema.String,
  reason: Schema.String
}) {}

/** The largest token accepted (a token grows with the turn's tool calls). */
const MAX_TOKEN_CHARS = 64 * 1024

const PREFIX = "u1."

const toBase64Url = (text: string): string => {
  const bytes = new TextEncoder().encode(text)
  let binary = ""
  for (const b of bytes) binary += String.fromCharCode(b)
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "")
}

const fromBase64Url = (text: string): string => {
  const binary = atob(text.replaceAll("-", "+").replaceAll("_", "/"))
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0))
  return new TextDecoder("utf-8", { fatal: true }).decode(bytes)
}

const decodeJson = Schema.decodeUnknownEffect(Schema.fromJsonString(ResumeTokenData))

/**
 * Encodes a token.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encode = (data: ResumeTokenData): string => PREFIX + toBase64Url(JSON.stringify(data))

/**
 * Decodes a token; fails with {@link InvalidUiResumeToken} when it is malformed. The caller checks that its
 * session (`s`) is the request's.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decode = (token: string): Effect.Effect<ResumeTokenData, InvalidUiResumeToken> =>
  Effect.gen(function* () {
    const fail = (reason: string) => Effect.fail(new InvalidUiResumeToken({ token: token.slice(0, 200), reason }))
    if (token.length > MAX_TOKEN_CHARS) return yield* fail("the token is too long")
    if (!token.startsWith(PREFIX)) return yield* fail("not a UI stream resume token")
    const json = yield* Effect.try({
      try: () => fromBase64Url(token.slice(PREFIX.length)),
      catch: () => new InvalidUiResumeToken({ token: token.slice(0, 200), reason: "the token is not base64url" })
    })
    const data = yield* decodeJson(json).pipe(
      Effect.mapError((e) => new InvalidUiResumeToken({ token: token.slice(0, 200), reason: e.message }))
    )
    return data
  })

/**
 * The open parts of a turn nothing was sent of yet.
 *
 * @category constructors
 * @since 0.1.0
 */
export const emptyOpenParts = (): OpenParts => ({
  started: false,
  step: null,
  attempt: 0,
  text: null,
  reasoning: null,
  counter: 0,
  tools: {},
  content: false,
  questions: {}
})
