// The stored texts the query path read, held in this process by the stored row they came from (a Flow's run, an
// attribute key and the version that wrote it). A stored attribute row never changes: a new value of a key is a
// new row at the Flow's new version, a delete too, and a Flow ID reused by a new run starts its versions again
// under a new run ID. So a held text is the key's current value exactly when a query's first statement finds the
// key's newest row at the held version, in the held run. Nothing here is shared between processes or written to
// the database: another process's commits show as new versions (or a new run), and a held text of an older
// version is dropped. The `flowId` here is the query path's key of a Flow within its store (`query.ts`,
// `heldFlow`), so two databases in one process (a copy of a file, a restored backup) never share a held text.
//
// Three uses, each cutting what a read costs with the length of a session:
// - The values of the lazily read maps (a long session's message chunks): the first statement reads the newest
//   version of each held key of the Flow (a few, not the whole map), not its value, and a held text of that
//   version stands for the value without a statement of its own.
// - The values the first statement reads (a session's window of messages): each comes with its version, and the
//   text held for that row replaces the one just read (the same characters), so the decode cache (`decodeAttr`)
//   finds it by identity instead of hashing every text again.
// - The committed state of the Flow's last read version (`HeldCommit`): every transition of a run moves the Flow's
//   version on (the fence of `writeTransition`, the only writer of a running Flow's values and queued messages),
//   so the state a query read at one version of one run is that version's state for good. A query that finds the
//   Flow still at that version (in the statement that reads the Flow's row) reads no value at all: the window of a
//   long session is not read again while the session is idle.
import { channelKey, type StoredMessage } from "./state.ts"

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

/** What a query knows of one lazily read map at a held commit. */
export interface HeldLazyMap {
  /** The values read, by key. */
  readonly values: Map<string, string>
  /** The keys whose value or absence was read. */
  readonly known: Set<string>
  /** Every key of the map was read. */
  whole: boolean
}

/**
 * The committed state of one version of a Flow's run, as a query read it. Its maps are shared by every read of
 * that version and never change after `holdCommit`, except that what later reads learn of the lazy maps (at the
 * same version) is added (`learnLazy`).
 */
export interface HeldCommit {
  readonly version: number
  /** The lazy maps' names the commit was read with, joined: a query with others reads the Flow again. */
  readonly lazyNames: string
  /** Every value outside the lazy maps, by name and key. */
  readonly attrs: ReadonlyMap<string, ReadonlyMap<string, string>>
  /** The queued messages by channel key, oldest first. */
  readonly channels: ReadonlyMap<string, ReadonlyArray<StoredMessage>>
  /** What the reads at this version know of each lazy map. */
  readonly lazy: ReadonlyMap<string, HeldLazyMap>
  /** The characters of its texts, counted apart from the held rows (mostly the same strings). */
  chars: number
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
  /** The state of the last version a query read whole (outside the lazy maps). */
  commit: HeldCommit | undefined
  /** The characters of the texts held in both maps and in the commit. */
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
  if (flow === undefined) flow = { runId, lazy: new Map(), read: new Map(), reads: 0, commit: undefined, chars: 0 }
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

/** The names of lazy maps as a held commit records them. */
export const lazyNamesKey = (names: ReadonlyArray<string>): string => [...names].sort().join("\u0000")

/**
 * The held committed state of run `runId` at Flow version `version`, read with the lazy maps `lazyNames`
 * (`lazyNamesKey`); `undefined` when none is held for that run, version and maps. A held state of another run is
 * dropped with the run's texts.
 */
export const commitAt = (flowId: string, runId: string, version: number, lazyNames: string) => {
  const flow = flows.get(flowId)
  if (flow === undefined) return undefined
  if (flow.runId !== runId) {
    drop(flowId)
    return undefined
  }
  const commit = flow.commit
  if (commit === undefined || commit.version !== version || commit.lazyNames !== lazyNames) return undefined
  flowOf(flowId, runId)
  return commit
}

/**
 * The held committed state of run `runId` read with the lazy maps `lazyNames`, at whichever version it was read;
 * `undefined` when none is held for that run and maps. Its values stored at or below its version that are still
 * current are those values (a stored row never changes), which a read at a newer version need not read again.
 */
export const heldCommitOf = (flowId: string, runId: string, lazyNames: string) => {
  const flow = flows.get(flowId)
  if (flow === undefined || flow.runId !== runId) return undefined
  const commit = flow.commit
  return commit === undefined || commit.lazyNames !== lazyNames ? undefined : commit
}

const lazyChars = (m: HeldLazyMap) => {
  let n = 0
  for (const text of m.values.values()) n += text.length
  return n
}

/**
 * Holds the committed state a query read of run `runId` at Flow version `commit.version`, in place of the one held
 * before (which goes even when this one is too large to hold). Its maps must not change after this call
 * (`learnLazy` adds to the lazy maps).
 */
export const holdCommit = (flowId: string, runId: string, commit: Omit<HeldCommit, "chars">) => {
  const flow = flowOf(flowId, runId)
  let n = 0
  for (const m of commit.attrs.values()) for (const text of m.values()) n += text.length
  for (const list of commit.channels.values()) for (const m of list) n += m.value.length
  for (const m of commit.lazy.values()) n += lazyChars(m)
  if (flow.commit !== undefined) {
    flow.chars -= flow.commit.chars
    chars -= flow.commit.chars
    flow.commit = undefined
  }
  // a state too large to hold is not held, and the older version's goes all the same: no read can use it again
  if (n > MAX_CHARS / 4) return
  flow.commit = { ...commit, chars: n }
  flow.chars += n
  chars += n
  evict()
}

/** Adds what a read of a held commit's version learnt of a lazy map (values, known keys, read whole). */
export const learnLazy = (
  flowId: string,
  commit: HeldCommit,
  name: string,
  learnt: { readonly values: ReadonlyMap<string, string>; readonly known: ReadonlySet<string>; readonly whole: boolean }
) => {
  const flow = flows.get(flowId)
  const held = commit.lazy.get(name)
  if (flow === undefined || flow.commit !== commit || held === undefined) return
  let added = 0
  for (const [key, text] of learnt.values) {
    if (held.values.has(key)) continue
    held.values.set(key, text)
    added += text.length
  }
  for (const key of learnt.known) held.known.add(key)
  if (learnt.whole) held.whole = true
  commit.chars += added
  flow.chars += added
  chars += added
  evict()
}
