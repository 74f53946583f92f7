// Pure pieces of the engine: JSON codecs, the staged TxView, and wait selection.
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  type Attribute,
  type AttributeMap,
  type Channel,
  type ChannelMap,
  type Codec,
  type Condition,
  type FlowDef,
  JsonCodecAnnotation,
  type LockRef,
  type RpcContext,
  type TxView,
  type Wait
} from "../Flow.ts"

// ------------------------------------------------------------------------------------------------
// JSON codecs
// ------------------------------------------------------------------------------------------------

const jsonCodecs = new WeakMap<object, { encode: (a: unknown) => unknown; decode: (u: unknown) => unknown }>()

interface OwnJsonCodec {
  readonly ast: unknown
  readonly encode: (a: unknown) => unknown
  readonly decode: (u: unknown) => unknown
}

const ownJsonCodec = (schema: Codec<any>): OwnJsonCodec | undefined => {
  const own = (schema.ast.annotations as Record<string, unknown> | undefined)?.[JsonCodecAnnotation] as
    | Partial<OwnJsonCodec>
    | undefined
  return own !== undefined &&
    own.ast === schema.ast &&
    typeof own.encode === "function" &&
    typeof own.decode === "function"
    ? (own as OwnJsonCodec)
    : undefined
}

const jsonCodec = (schema: Codec<any>) => {
  let c = jsonCodecs.get(schema)
  if (c === undefined) {
    const own = ownJsonCodec(schema)
    if (own !== undefined) c = { encode: own.encode, decode: own.decode }
    else {
      const json = Schema.toCodecJson(schema)
      c = { encode: Schema.encodeUnknownSync(json), decode: Schema.decodeUnknownSync(json) }
    }
    jsonCodecs.set(schema, c)
  }
  return c
}

/** Encodes a value to its stored JSON text. Throws (a defect) when the value does not match. */
export const encodeJson = <A>(schema: Codec<A>, value: A): string => {
  const encoded = jsonCodec(schema).encode(value)
  return encoded === undefined ? "null" : JSON.stringify(encoded)
}

/** Decodes stored JSON text. Throws (a defect) when it does not match. */
export const decodeJson = <A>(schema: Codec<A>, text: string): A => jsonCodec(schema).decode(JSON.parse(text)) as A

// ------------------------------------------------------------------------------------------------
// Decode cache
// ------------------------------------------------------------------------------------------------

/** Stored texts shorter than this are decoded on every read: caching them would cost more than it saves. */
const DECODE_CACHE_MIN_CHARS = 64
/** The most text (in UTF-16 code units) whose decoded values the cache keeps. */
const DECODE_CACHE_MAX_CHARS = 32 * 1024 * 1024

/** Decoded attribute values by stored text, least recently used first. */
const decodeCache = new Map<string, { readonly schema: Codec<any>; readonly value: unknown; used: number }>()
let decodeCacheChars = 0
/** Counts the cache's insertions and moves: an entry's `used` is the count when it last moved to the end. */
let decodeCacheClock = 0

/**
 * Decodes a stored attribute value once per stored text: an owner keeps a Flow's values as the JSON text it
 * wrote or loaded, so the same string comes back on every read until the value changes, and a Step that
 * reads a large value (a session's message chunks) does not decode it again. The decoded value is shared by
 * every reader, which treat it as read-only (attribute values are immutable data). A text stored under
 * another codec is decoded without the cache.
 */
export const decodeAttr = <A>(schema: Codec<A>, text: string): A => {
  if (text.length < DECODE_CACHE_MIN_CHARS) return decodeJson(schema, text)
  const hit = decodeCache.get(text)
  if (hit !== undefined && hit.schema === schema) {
    // least recently used first, approximately: an entry among the newer half of the moves stays where it is,
    // so the values a Step reads on every turn (a long session's chunks) do not each cost a delete and insert
    if (decodeCacheClock - hit.used > decodeCache.size / 2) {
      decodeCache.delete(text)
      hit.used = ++decodeCacheClock
      decodeCache.set(text, hit)
    }
    return hit.value as A
  }
  const value = decodeJson(schema, text)
  if (hit !== undefined || text.length > DECODE_CACHE_MAX_CHARS / 4) return value
  decodeCache.set(text, { schema, value, used: ++decodeCacheClock })
  decodeCacheChars += text.length
  for (const [oldest] of decodeCache) {
    if (decodeCacheChars <= DECODE_CACHE_MAX_CHARS) break
    decodeCache.delete(oldest)
    decodeCacheChars -= oldest.length
  }
  return value
}

/** Byte length of a stored value. */
export const byteLength = (text: string): number => Buffer.byteLength(text, "utf8")

// ------------------------------------------------------------------------------------------------
// Flow state and staged writes
// ------------------------------------------------------------------------------------------------

export interface StoredMessage {
  readonly id: string
  readonly value: string
}

/** The state a handler reads: attribute values (as JSON text) and queued channel messages. */
export interface FlowState {
  /** `name` → instance key (`""` for a plain Attribute) → JSON text */
  readonly attrs: Map<string, Map<string, string>>
  /** channel key (see `channelKey`) → queued messages, oldest first; or only counts for a Step snapshot */
  readonly channels: Map<string, ReadonlyArray<StoredMessage> | number>
}

export const channelKey = (channel: string, key: string) => `${channel}\u0000${key}`
export const splitChannelKey = (k: string): [string, string] => {
  const i = k.indexOf("\u0000")
  return [k.slice(0, i), k.slice(i + 1)]
}

export interface AttrWrite {
  readonly name: string
  readonly key: string
  readonly value: string | null
}

export interface Publish {
  readonly channel: string
  readonly key: string
  readonly value: string
}

export interface Staged {
  readonly attrWrites: Map<string, AttrWrite>
  readonly publishes: Array<Publish>
  readonly deletes: Array<{ readonly channel: string; readonly key: string; readonly id: string }>
}

export const emptyStaged = (): Staged => ({ attrWrites: new Map(), publishes: [], deletes: [] })

export const emptyState = (): FlowState => ({ attrs: new Map(), channels: new Map() })

const count = (v: ReadonlyArray<StoredMessage> | number | undefined) =>
  v === undefined ? 0 : typeof v === "number" ? v : v.length

const declaredChecks = new WeakMap<FlowDef<any, any>, ReturnType<typeof makeDeclared>>()

/** Declared-name checks: reading or writing something the Flow does not declare is a defect. Built once per Flow. */
const declared = (flow: FlowDef<any, any>) => {
  let checks = declaredChecks.get(flow)
  if (checks === undefined) {
    checks = makeDeclared(flow)
    declaredChecks.set(flow, checks)
  }
  return checks
}

const makeDeclared = (flow: FlowDef<any, any>) => {
  const attrs = new Map(flow.attributes.map((a) => [a.name, a]))
  const channels = new Map(flow.channels.map((c) => [c.name, c]))
  return {
    attr: (def: Attribute<any> | AttributeMap<any>) => {
      if (attrs.get(def.name) !== def && attrs.get(def.name)?._tag !== def._tag) {
        throw new Error(`${def._tag} ${def.name} is not declared by Flow ${flow.type}`)
      }
    },
    channel: (def: Channel<any> | ChannelMap<any>) => {
      if (!channels.has(def.name)) throw new Error(`${def._tag} ${def.name} is not declared by Flow ${flow.type}`)
    }
  }
}

/**
 * The sorted keys of attribute maps that never change again (`freezeAttrMap`: the query path's held state of a
 * Flow version), computed on the first `keys` and kept; `null` until then. A map not here is sorted on every call.
 */
const frozenKeys = new WeakMap<ReadonlyMap<string, string>, ReadonlyArray<string> | null>()

/** Marks an attribute map (name → instance key → text) that its owner never changes again. */
export const freezeAttrMap = (m: ReadonlyMap<string, string>): void => {
  if (!frozenKeys.has(m)) frozenKeys.set(m, null)
}

/** The sorted keys of a stored map, as a new array (a frozen map's computed once). */
const sortedKeys = (m: ReadonlyMap<string, string>): Array<string> => {
  const known = frozenKeys.get(m)
  if (known) return known.slice()
  const sorted = [...m.keys()].sort()
  if (known === null) frozenKeys.set(m, sorted.slice())
  return sorted
}

/** A TxView over `state` that stages its writes into `staged`. */
export const makeTxView = (flow: FlowDef<any, any>, state: FlowState, staged: Staged): TxView => {
  const check = declared(flow)
  const read = (name: string, key: string): string | undefined => {
    // most reads come before any write (a query's never write): no staged key to build and look up
    if (staged.attrWrites.size > 0) {
      const w = staged.attrWrites.get(channelKey(name, key))
      if (w !== undefined) return w.value ?? undefined
    }
    return state.attrs.get(name)?.get(key)
  }
  const write = (name: string, key: string, value: string | null) => {
    staged.attrWrites.set(channelKey(name, key), { name, key, value })
  }
  const stagedCount = (channel: string, key: string) =>
    staged.publishes.filter((p) => p.channel === channel && p.key === key).length -
    staged.deletes.filter((d) => d.channel === channel && d.key === key).length
  return {
    get: (attribute) => {
      check.attr(attribute)
      const v = read(attribute.name, "")
      return v === undefined ? Option.none() : Option.some(decodeAttr(attribute.schema, v))
    },
    getAt: (map, key) => {
      check.attr(map)
      const v = read(map.name, key)
      return v === undefined ? Option.none() : Option.some(decodeAttr(map.schema, v))
    },
    keys: (map) => {
      check.attr(map)
      const stored = state.attrs.get(map.name)
      if (staged.attrWrites.size === 0) return stored === undefined ? [] : sortedKeys(stored)
      const keys = new Set(stored?.keys() ?? [])
      for (const w of staged.attrWrites.values()) {
        if (w.name !== map.name) continue
        if (w.value === null) keys.delete(w.key)
        else keys.add(w.key)
      }
      return [...keys].sort()
    },
    // setting null deletes the value (a client read then finds none)
    set: (attribute, value) => {
      check.attr(attribute)
      write(attribute.name, "", value === null ? null : encodeJson(attribute.schema, value))
    },
    setAt: (map, key, value) => {
      check.attr(map)
      write(map.name, key, value === null ? null : encodeJson(map.schema, value))
    },
    delete: (attribute) => {
      check.attr(attribute)
      write(attribute.name, "", null)
    },
    deleteAt: (map, key) => {
      check.attr(map)
      write(map.name, key, null)
    },
    publish: (channel, value) => {
      check.channel(channel)
      staged.publishes.push({ channel: channel.name, key: "", value: encodeJson(channel.schema, value) })
    },
    publishAt: (channel, key, value) => {
      check.channel(channel)
      staged.publishes.push({ channel: channel.name, key, value: encodeJson(channel.schema, value) })
    },
    channelSize: (channel, key = "") => {
      check.channel(channel)
      return count(state.channels.get(channelKey(channel.name, key))) + stagedCount(channel.name, key)
    }
  }
}

/** The RPC context: a TxView plus channel message reads and deletes by ID. */
export const makeRpcView = (
  flow: FlowDef<any, any>,
  state: FlowState,
  staged: Staged,
  ids: { readonly flowId: string; readonly runId: string }
): RpcContext => {
  const tx = makeTxView(flow, state, staged)
  const queued = (name: string, key: string): ReadonlyArray<StoredMessage> => {
    const v = state.channels.get(channelKey(name, key))
    return v === undefined || typeof v === "number" ? [] : v
  }
  return {
    ...tx,
    flowId: ids.flowId,
    runId: ids.runId,
    flowType: flow.type,
    messages: (channel, key = "") => {
      const deleted = new Set(staged.deletes.filter((d) => d.channel === channel.name).map((d) => d.id))
      return queued(channel.name, key)
        .filter((m) => !deleted.has(m.id))
        .map((m) => ({ id: m.id, value: decodeJson(channel.schema, m.value) }))
    },
    deleteMessage: (channel, id, key = "") => {
      staged.deletes.push({ channel: channel.name, key, id })
    },
    channelKeys: (channel) => {
      const keys = new Set<string>()
      for (const [k, v] of state.channels) {
        const [name, key] = splitChannelKey(k)
        if (name === channel.name && count(v) > 0) keys.add(key)
      }
      for (const p of staged.publishes) if (p.channel === channel.name) keys.add(p.key)
      return [...keys].sort()
    }
  }
}

/** The lock names of a Step or RPC (`name` or `name\0key`). */
export const lockNames = (locks: ReadonlyArray<LockRef> | undefined): Array<string> =>
  (locks ?? []).map((l) => ("_tag" in l ? l.name : `${l.map.name}[${l.key}]`))

// ------------------------------------------------------------------------------------------------
// Wait selection
// ------------------------------------------------------------------------------------------------

/** A condition as stored on a waiting Step: timers carry their absolute deadline. */
export type StoredCondition =
  | {
      readonly _tag: "Timer"
      readonly seconds: number
      readonly id?: string | undefined
      readonly deadline: number
      readonly skipped: boolean
    }
  | {
      readonly _tag: "Channel"
      readonly channel: string
      readonly key: string
      readonly min: number
      readonly max: number | null
      readonly id?: string | undefined
    }

export interface StoredWait {
  readonly kind: "AnyOf" | "AllOf"
  readonly conditions: ReadonlyArray<StoredCondition>
  /** Set on the backoff timer of a failed `waitFor`: which evaluation runs when it fires. */
  readonly waitForRetry?: { readonly attempt: number; readonly firstAt: number } | undefined
}

/** The outcome of a satisfied wait: timers that fired (in timer order) and consumed message IDs per channel key. */
export interface WaitResult {
  readonly timers: ReadonlyArray<boolean>
  readonly consumed: Record<string, ReadonlyArray<string>>
}

/** Validates a wait returned by `waitFor`; returns the problem, if any. */
export const validateWait = (flow: FlowDef<any, any>, wait: Wait): string | undefined => {
  if (wait._tag === "Skip") return undefined
  const channels = new Map(flow.channels.map((c) => [c.name, c]))
  for (const c of wait.conditions) {
    if (c._tag === "Timer") {
      if (!Number.isInteger(c.seconds) || c.seconds < 0) {
        return `timer durations must be whole, non-negative seconds (got ${c.seconds} s)`
      }
    } else {
      const def = channels.get(c.channel)
      if (def === undefined) return `channel ${c.channel} is not declared`
      if (!Number.isInteger(c.min) || c.min < 0) return `invalid channel bound: minimum ${c.min}`
      if (c.max !== null && (!Number.isInteger(c.max) || c.max < c.min)) {
        return `invalid channel bound: maximum ${c.max} below minimum ${c.min}`
      }
      if (def._tag === "Channel" && c.key !== "") return `channel ${c.channel} is not a ChannelMap`
    }
  }
  return undefined
}

/** Turns a `waitFor` result into the stored wait: deadlines are rounded up to whole seconds. */
export const storeWait = (wait: Exclude<Wait, { _tag: "Skip" }>, now: number): StoredWait => ({
  kind: wait._tag,
  conditions: wait.conditions.map((c: Condition) =>
    c._tag === "Timer"
      ? {
          _tag: "Timer",
          seconds: c.seconds,
          id: c.id,
          deadline: c.seconds === 0 ? now : Math.ceil((now + c.seconds * 1000) / 1000) * 1000,
          skipped: false
        }
      : c
  )
})

/**
 * Evaluates a stored wait against queued messages. Returns `undefined` while unsatisfied.
 * `anyOf`: Timers first (declaration order), then Channels in declaration order; the first feasible
 * one wins and only it consumes. `allOf`: every timer fired and every channel minimum fits (shared
 * channels reserve minima first, then extras up to each maximum in declaration order).
 */
export const evaluateWait = (
  wait: StoredWait,
  now: number,
  queued: (channel: string, key: string) => ReadonlyArray<string>
): WaitResult | undefined => {
  const timers = wait.conditions.filter((c) => c._tag === "Timer")
  const fired = timers.map((t) => t.skipped || t.deadline <= now)
  if (wait.kind === "AnyOf") {
    const timerIndex = fired.indexOf(true)
    if (timerIndex >= 0) return { timers: fired.map((_, i) => i === timerIndex), consumed: {} }
    for (const c of wait.conditions) {
      if (c._tag !== "Channel") continue
      const available = queued(c.channel, c.key)
      if (available.length >= c.min) {
        const take = c.max === null ? available.length : Math.min(c.max, available.length)
        return {
          timers: fired.map(() => false),
          consumed: { [channelKey(c.channel, c.key)]: available.slice(0, take) }
        }
      }
    }
    return undefined
  }
  if (fired.some((f) => !f)) return undefined
  const channels = wait.conditions.filter((c) => c._tag === "Channel")
  const byKey = new Map<string, { available: ReadonlyArray<string>; reserved: number }>()
  for (const c of channels) {
    const k = channelKey(c.channel, c.key)
    const entry = byKey.get(k) ?? { available: queued(c.channel, c.key), reserved: 0 }
    entry.reserved += c.min
    byKey.set(k, entry)
  }
  for (const entry of byKey.values()) if (entry.reserved > entry.available.length) return undefined
  const take = channels.map((c) => c.min)
  const left = new Map([...byKey].map(([k, e]) => [k, e.available.length - e.reserved]))
  channels.forEach((c, i) => {
    const k = channelKey(c.channel, c.key)
    const room = c.max === null ? Number.POSITIVE_INFINITY : c.max - c.min
    const extra = Math.min(room, left.get(k) ?? 0)
    take[i]! += extra
    left.set(k, (left.get(k) ?? 0) - extra)
  })
  const consumed: Record<string, Array<string>> = {}
  const offset = new Map<string, number>()
  channels.forEach((c, i) => {
    const k = channelKey(c.channel, c.key)
    const start = offset.get(k) ?? 0
    const ids = byKey.get(k)!.available.slice(start, start + take[i]!)
    offset.set(k, start + take[i]!)
    consumed[k] = [...(consumed[k] ?? []), ...ids]
  })
  return { timers: fired, consumed }
}
