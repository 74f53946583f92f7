// The stored texts the query path read, held in this process by the stored row they came from (a Flow's run, an
// attribute key and the version that wrote it). A stored attribute row never changes: a new value of a key is a
// new row at the Flow's new version, a delete too, and a Flow ID reused by a new run starts its versions again
// under a new run ID. So a held text is the key's current value exactly when a query's first statement finds the
// key's newest row at the held version, in the held run. Nothing here is shared between processes or written to
// the database: another process's commits show as new versions (or a new run), and a held text of an older
// version is dropped. The `flowId` here is the query path's key of a Flow within its store (`query.ts`,
// `heldFlow`), so two databases in one process (a copy of a file, a restored backup) never share a held text.
//
// Two uses, each cutting what a read costs with the length of a session:
// - The values of the lazily read maps (a long session's message chunks): the first statement reads the newest
//   version of each held key of the Flow (a few, not the whole map), not its value, and a held text of that
//   version stands for the value without a statement of its own.
// - The values the first statement reads (a session's window of messages): each comes with its version, and the
//   text held for that row replaces the one just read (the same characters), so the decode cache (`decodeAttr`)
//   finds it by identity instead of hashing every text again.
import { channelKey } from "./state.ts"

/** A key of an AttributeMap. */
export interface HeldKey {
  readonly name: string
  readonly key: string
}

interface Held extends HeldKey {
  readonly version: number
  readonly text: string
  /** The read that last found it (`FlowValues.reads`); lazily read values: 0. */
  seen: number
}

/** The held texts of one Flow, of one run. */
interface FlowValues {
  readonly runId: string
  /** Values of the lazy maps, least recently used first. */
  readonly lazy: Map<string, Held>
  /** The values the last first statements read (outside the lazy maps). */
  readonly read: Map<string, Held>
  /** Counts the first statements whose texts `read` holds. */
  reads: number
  /** The characters of the texts held in both maps. */
  chars: number
}

/**
 * The most lazily read keys held per Flow: each costs the first statement of every query of the Flow one index
 * lookup, and a snapshot of a long session pages through about six chunks (200 messages of 32).
 */
const MAX_LAZY_KEYS_PER_FLOW = 16
/** The most text (in UTF-16 code units) held in all. */
const MAX_CHARS = 16 * 1024 * 1024
/**
 * Texts shorter than this are not held in place of the one read: the decode cache decodes them on every read
 * (`state.ts`, DECODE_CACHE_MIN_CHARS), so the held one saves nothing.
 */
const MIN_READ_CHARS = 64

/** The Flows' held texts, least recently used first. */
const flows = new Map<string, FlowValues>()
let chars = 0

const drop = (flowId: string) => {
  const flow = flows.get(flowId)
  if (flow === undefined) return
  chars -= flow.chars
  flows.delete(flowId)
}

/** The Flow's held texts, most recently used now; a held run other than `runId` is dropped first. */
const flowOf = (flowId: string, runId: string): FlowValues => {
  let flow = flows.get(flowId)
  if (flow !== undefined && flow.runId !== runId) {
    drop(flowId)
    flow = undefined
  }
  if (flow === undefined) flow = { runId, lazy: new Map(), read: new Map(), reads: 0, chars: 0 }
  flows.delete(flowId)
  flows.set(flowId, flow)
  return flow
}

/** Drops the least recently used Flows' texts while more than MAX_CHARS are held. */
const evict = () => {
  for (const [flowId] of flows) {
    if (chars <= MAX_CHARS) return
    drop(flowId)
  }
}

const forgetLazy = (flow: FlowValues, k: string) => {
  const held = flow.lazy.get(k)
  if (held === undefined) return
  flow.lazy.delete(k)
  flow.chars -= held.text.length
  chars -= held.text.length
}

/** The keys of the lazy maps named in `names` that this process holds a text of for `flowId`. */
export const heldKeys = (flowId: string, names: ReadonlyArray<string>): ReadonlyArray<HeldKey> => {
  const flow = flows.get(flowId)
  if (flow === undefined) return []
  const out: Array<HeldKey> = []
  for (const held of flow.lazy.values()) if (names.includes(held.name)) out.push(held)
  return out
}

/**
 * The held text of a lazily read key whose newest stored row, in run `runId`, has version `version`;
 * `undefined` when none is held for that row (a held text of another version or run is dropped).
 */
export const lookup = (flowId: string, runId: string, name: string, key: string, version: number) => {
  const flow = flows.get(flowId)
  if (flow === undefined) return undefined
  if (flow.runId !== runId) {
    drop(flowId)
    return undefined
  }
  const k = channelKey(name, key)
  const held = flow.lazy.get(k)
  if (held === undefined) return undefined
  if (held.version !== version) {
    forgetLazy(flow, k)
    return undefined
  }
  // the most recently used last, in the Flow and among the Flows
  flow.lazy.delete(k)
  flow.lazy.set(k, held)
  flowOf(flowId, runId)
  return held.text
}

/** Holds the text of a lazily read stored row: key `name`/`key` at version `version` of run `runId`. */
export const remember = (flowId: string, runId: string, name: string, key: string, version: number, text: string) => {
  if (text.length > MAX_CHARS / 4) return
  const flow = flowOf(flowId, runId)
  const k = channelKey(name, key)
  forgetLazy(flow, k)
  flow.lazy.set(k, { name, key, version, text, seen: 0 })
  flow.chars += text.length
  chars += text.length
  for (const oldest of flow.lazy.keys()) {
    if (flow.lazy.size <= MAX_LAZY_KEYS_PER_FLOW) break
    forgetLazy(flow, oldest)
  }
  evict()
}

/**
 * The texts of one first statement's rows of run `runId`: `text` gives, for each row read, the text held for
 * the same row or the one read, and holds it; `done` drops the held values of keys this statement did not read.
 */
export const readRows = (flowId: string, runId: string) => {
  const flow = flowOf(flowId, runId)
  const read = flow.read
  const gen = ++flow.reads
  let seen = 0
  return {
    text: (name: string, key: string, version: number, text: string): string => {
      if (text.length < MIN_READ_CHARS || text.length > MAX_CHARS / 4) return text
      const k = channelKey(name, key)
      const held = read.get(k)
      seen++
      if (held !== undefined && held.version === version) {
        held.seen = gen
        return held.text
      }
      if (held !== undefined) {
        flow.chars -= held.text.length
        chars -= held.text.length
      }
      read.set(k, { name, key, version, text, seen: gen })
      flow.chars += text.length
      chars += text.length
      return text
    },
    done: () => {
      if (read.size > seen) {
        for (const [k, held] of read) {
          if (held.seen === gen) continue
          read.delete(k)
          flow.chars -= held.text.length
          chars -= held.text.length
        }
      }
      evict()
    }
  }
}
