// Size checks before a Step returns: the engine refuses a commit with a value over `maxValueBytes`, and the
// session checks every value it stages against the same limit first, so a Step takes its size fallback
// itself (docs/session-contract.md, "Size rules") instead of failing at commit after it wrote events.
import { Engine } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/** The engine's default `maxValueBytes`, used when the engine configuration is not in context (unit tests). */
export const DEFAULT_MAX_VALUE_BYTES = 16 * 1024 * 1024

/** The engine's largest stored value, in bytes. */
export const maxValueBytes: Effect.Effect<number> = Effect.map(Effect.serviceOption(Engine.EngineConfig), (config) =>
  Option.match(config, { onNone: () => DEFAULT_MAX_VALUE_BYTES, onSome: (c) => c.maxValueBytes })
)

const encoders = new WeakMap<object, (value: unknown) => unknown>()

/**
 * The sizes already measured, by value (stored values are immutable data): a Step that checks a value and then
 * its chunk's size, or checks it twice on two paths, encodes it once.
 */
const measured = new WeakMap<object, { readonly schema: object; readonly bytes: number }>()

/** The UTF-8 size of a value as the engine stores it: the JSON text of its JSON encoding. */
export const storedBytes = <A>(schema: Schema.Codec<A, any, never, never>, value: A): number => {
  const known = typeof value === "object" && value !== null ? measured.get(value) : undefined
  if (known !== undefined && known.schema === schema) return known.bytes
  let encode = encoders.get(schema)
  if (encode === undefined) {
    encode = Schema.encodeUnknownSync(Schema.toCodecJson(schema))
    encoders.set(schema, encode)
  }
  const bytes = textBytes(JSON.stringify(encode(value)) ?? "null")
  if (typeof value === "object" && value !== null) measured.set(value, { schema, bytes })
  return bytes
}

/** The UTF-8 size of a text. */
export const textBytes = (text: string): number => Buffer.byteLength(text, "utf8")

/** The longest JSON text of a number (`-1.2345678901234567e-308`). */
const MAX_NUMBER_CHARS = 25

/**
 * An upper bound of a session value's stored size that needs no encoding. The session's stored values are
 * JSON data whose encodings only rename keys (to snake_case: at most twice as long) and normalize timestamps
 * (24 characters, from texts of at least 20), so every UTF-16 unit of a string takes at most 6 bytes of JSON
 * text (`\u001f`), a key at most 12, a number at most {@link MAX_NUMBER_CHARS}. Anything else (a class
 * instance, a bigint) has no bound here: `Infinity`, and the exact size is measured.
 */
export const sizeBound = (value: unknown): number => {
  switch (typeof value) {
    case "string":
      return 6 * value.length + 2
    case "number":
      return MAX_NUMBER_CHARS
    case "boolean":
    case "undefined":
      return 5
    case "object": {
      if (value === null) return 4
      let n = 2
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) n += sizeBound(value[i]) + 1
        return n
      }
      if (Object.getPrototypeOf(value) !== Object.prototype) return Number.POSITIVE_INFINITY
      // its own enumerable keys, without an array per entry
      const record = value as Record<string, unknown>
      const keys = Object.keys(record)
      for (let i = 0; i < keys.length; i++) n += 12 * keys[i]!.length + 3 + sizeBound(record[keys[i]!]) + 1
      return n
    }
    default:
      return Number.POSITIVE_INFINITY
  }
}

/** The engine's `ValueTooLarge` detail for a value, or `undefined` when it fits. */
export const oversize = <A>(
  name: string,
  schema: Schema.Codec<A, any, never, never>,
  value: A,
  limit: number
): string | undefined => {
  // a value far below the limit (every value but the largest) is not encoded to be measured
  if (sizeBound(value) <= limit) return undefined
  const bytes = storedBytes(schema, value)
  return bytes > limit ? `Value ${name} is ${bytes} bytes, over the limit of ${limit}` : undefined
}

/** `text` cut to at most `maxBytes` UTF-8 bytes (never inside a character), with `suffix` when it was cut. */
export const truncateText = (text: string, maxBytes: number, suffix = " [truncated]"): string => {
  if (textBytes(text) <= maxBytes) return text
  const budget = Math.max(0, maxBytes - textBytes(suffix))
  let low = 0
  let high = text.length
  while (low < high) {
    const mid = Math.ceil((low + high) / 2)
    if (textBytes(text.slice(0, mid)) <= budget) low = mid
    else high = mid - 1
  }
  // do not end on the first half of a surrogate pair
  const end = low > 0 && /[\uD800-\uDBFF]/.test(text.charAt(low - 1)) ? low - 1 : low
  return `${text.slice(0, end)}${suffix}`
}
