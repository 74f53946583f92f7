/**
 * The run-state codec: a framework's run state between the RunModel Steps of one turn, as the JSON text
 * the session stores (`AgentTurnContext.frameworkRunState`). A codec is built from an Effect Schema of the
 * state; decoding text this runner did not write (another version, another runner, no state) gives
 * `undefined`, so the runner starts the turn afresh instead of failing on it.
 *
 * {@link PendingState} is the shape most runners need: the turn's framework messages so far and the calls
 * the run waits for.
 *
 * @since 0.1.0
 */
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/**
 * Encodes a run state to the stored text and decodes it back.
 *
 * @category models
 * @since 0.1.0
 */
export interface Codec<A> {
  readonly encode: (state: A) => string
  /** The state, or `undefined` for no state or text that does not decode. */
  readonly decode: (text: string | null | undefined) => A | undefined
}

/**
 * A codec over a Schema of the state (its encoded side must be JSON).
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <S extends Schema.Codec<any, any, never, never>>(schema: S): Codec<S["Type"]> => {
  const json = Schema.fromJsonString(schema)
  const decode = Schema.decodeUnknownOption(json)
  const encode = Schema.encodeSync(json)
  return {
    encode: (state) => encode(state) as string,
    decode: (text) => (typeof text === "string" ? Option.getOrUndefined(decode(text)) : undefined)
  }
}

/**
 * A deferred call the run waits for.
 *
 * @category schemas
 * @since 0.1.0
 */
export const PendingCall = Schema.Struct({ toolCallId: Schema.String, toolName: Schema.String })

/**
 * The common run state: version 1, the turn's framework messages after the stored history (plain JSON, as
 * the framework made them), and the calls of the last model call that wait for results.
 *
 * @category models
 * @since 0.1.0
 */
export interface PendingState<Message> {
  readonly v: 1
  readonly messages: ReadonlyArray<Message>
  readonly pending: ReadonlyArray<typeof PendingCall.Type>
}

/**
 * The codec of {@link PendingState}, for a framework's message type (not checked beyond being JSON). The text is
 * `{"v":1,"messages":[...],"pending":[{"toolCallId":...,"toolName":...}]}`; it is written and checked as plain
 * JSON, without a Schema walk over the messages (plain JSON the runner wrote itself, often large): a text whose
 * version, message list or pending calls do not check decodes to `undefined`, and a pending call's other keys are
 * dropped.
 *
 * @category constructors
 * @since 0.1.0
 */
export const pending = <Message>(): Codec<PendingState<Message>> => ({
  encode: (state) =>
    JSON.stringify({
      v: state.v,
      messages: state.messages,
      pending: state.pending.map((p) => ({ toolCallId: p.toolCallId, toolName: p.toolName }))
    }),
  decode: (text) => {
    if (typeof text !== "string") return undefined
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return undefined
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return undefined
    const state = parsed as { v?: unknown; messages?: unknown; pending?: unknown }
    if (state.v !== 1 || !Array.isArray(state.messages) || !Array.isArray(state.pending)) return undefined
    const calls: Array<typeof PendingCall.Type> = []
    for (const p of state.pending as ReadonlyArray<unknown>) {
      if (p === null || typeof p !== "object") return undefined
      const call = p as { toolCallId?: unknown; toolName?: unknown }
      if (typeof call.toolCallId !== "string" || typeof call.toolName !== "string") return undefined
      calls.push({ toolCallId: call.toolCallId, toolName: call.toolName })
    }
    return { v: 1, messages: state.messages as ReadonlyArray<Message>, pending: calls }
  }
})
