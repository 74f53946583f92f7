/**
 * Merges consecutive text deltas before they become events: a merged delta is flushed once it holds
 * 1,024 characters or its first piece is 100 ms old (checked when the next piece arrives), and at the
 * end of the model call. A streamed answer thus costs a few events a second, not one per token.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

/** Limits of one merged delta. */
export interface DeltaBufferOptions {
  readonly maxChars?: number | undefined
  readonly maxAgeMs?: number | undefined
}

/** A buffer in front of `emit`; `push` a piece, `flush` at the end. */
export interface DeltaBuffer {
  readonly push: (text: string) => Effect.Effect<void>
  readonly flush: Effect.Effect<void>
}

/** Makes a buffer that merges pieces for `emit`. */
export const make = (emit: (text: string) => Effect.Effect<void>, options?: DeltaBufferOptions): DeltaBuffer => {
  const maxChars = options?.maxChars ?? 1024
  const maxAgeMs = options?.maxAgeMs ?? 100
  let buffer = ""
  let since = 0
  const flush = Effect.suspend(() => {
    if (buffer === "") return Effect.void
    const text = buffer
    buffer = ""
    return emit(text)
  })
  const push = (text: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (text === "") return Effect.void
      if (buffer === "") since = now
      buffer += text
      return buffer.length >= maxChars || now - since >= maxAgeMs ? flush : Effect.void
    })
  return { push, flush }
}
