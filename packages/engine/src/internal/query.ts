// The query path: a read-only RPC handler runs against a Flow's committed state, read from the database. It
// reaches no owner: no cluster message, no history row, no stored reply, no task slot, and it never waits for a
// running Step. What it returns is what the same RPC would return at that commit, since the handler sees the
// state the RPC would see and its output goes through the same codec.
//
// A read may name AttributeMaps to read lazily (`readLazily`: a long session's message chunks), so that the
// bytes it reads follow what its handler reads rather than what the Flow stores. A first statement reads the
// Flow's version and every other current value and queued message; a lazy map is read as the handler asks for
// it: a key it reads (`getAt`), or the whole map when it lists the keys. A run of the handler that asked for
// anything not read yet saw it as absent: its result is dropped, one statement reads everything it asked for
// with the stored versions and the Flow's version, and the handler runs again. A value whose stored version is
// at or below the first statement's Flow version is the value of that commit; a newer one, or (when the Flow
// committed in between) a key with no row or a whole map, may not be, and the read starts again. After
// READ_TRIES starts it reads the state whole, in one statement.
//
// The texts a lazy read read are held in this process by their stored rows (`lazyValues.ts`): the first statement
// also reads the newest version of each held key of a lazy map, and a held text of that version (in that run) is
// the key's value at that commit, so a snapshot of a long session reads its chunks' versions, not their bytes, and
// needs no second statement while its chunks stay the same. A value of the first statement whose row is held
// comes as the held text, which the decode cache finds without hashing it again.
//
// The state a read read is held too, by the Flow's run and version (`LazyValues.HeldCommit`): every commit of a run
// moves its version on, so while the Flow's row (read first, to tell a missing or closed Flow) shows the same run
// and version, that state is the committed one and the read needs no other statement (an idle session's snapshot
// reads no message again). What the handler asks for beyond it is read as above, checked against that version.
// After a commit the held state of the older version is the base of the next first statement: a value stored at
// or below the base's version comes without its text, and the base's text stands for it (a stored row never
// changes, and a key deleted since has no row), so a turn that added a few messages re-reads only those.
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import type { SqlError } from "effect/sql/SqlError"
import { FlowNotActive, FlowNotFound, InvalidInput, RpcFailed } from "../Errors.ts"
import type { AttributeMap, FlowDef, RpcDef, RpcResult } from "../Flow.ts"
import { errorInfo } from "./decision.ts"
import * as LazyValues from "./lazyValues.ts"
import {
  channelKey,
  decodeJson,
  emptyStaged,
  encodeJson,
  type FlowState,
  freezeAttrMap,
  makeRpcView,
  type Staged,
  type StoredMessage
} from "./state.ts"
import type { EngineStoreShape } from "./store/EngineStore.ts"
import type { QueryStateRow } from "./store/flows.ts"

/** Why a query refuses a handler that staged writes. */
export const READ_ONLY_VIOLATION = "ReadOnlyViolation"

/** How many times a lazy read starts again after a commit landed between its statements, before it reads whole. */
const READ_TRIES = 3

const addMessage = (state: FlowState, name: string, key: string, id: unknown, value: string) => {
  const k = channelKey(name, key)
  const list = (state.channels.get(k) as Array<StoredMessage> | undefined) ?? []
  list.push({ id: String(id), value })
  state.channels.set(k, list)
}

const addAttr = (state: FlowState, name: string, key: string, value: string) => {
  let m = state.attrs.get(name)
  if (m === undefined) {
    m = new Map()
    state.attrs.set(name, m)
  }
  m.set(key, value)
}

/** A Flow's committed state as a handler reads it, read whole in one statement. */
export const committedState = Effect.fnUntraced(function* (store: EngineStoreShape, flowId: string) {
  const rows = yield* store.loadCommittedState(flowId)
  const state: FlowState = { attrs: new Map(), channels: new Map() }
  for (const r of rows) {
    if (r.kind === "attr") addAttr(state, r.name, r.key, r.value)
    else addMessage(state, r.name, r.key, r.id, r.value)
  }
  return state
})

/**
 * The values of one AttributeMap in a lazily read state, read as the handler asks for them: a key not read
 * yet, or the keys before the map was read whole, read as absent (empty), and the request is recorded.
 */
class LazyMap extends Map<string, string> {
  /** Every key of the map was read. */
  whole = false
  /** Keys whose value (or absence) was read. */
  readonly known = new Set<string>()
  /** Keys the handler read that were not read yet. */
  readonly asked = new Set<string>()
  /** The handler listed the keys before the map was read whole. */
  askedAll = false
  readonly name: string
  private readonly misses: Set<LazyMap>
  constructor(name: string, misses: Set<LazyMap>) {
    super()
    this.name = name
    this.misses = misses
  }
  override get(key: string): string | undefined {
    if (!this.whole && !this.known.has(key)) {
      this.asked.add(key)
      this.misses.add(this)
    }
    return super.get(key)
  }
  override has(key: string): boolean {
    return this.get(key) !== undefined
  }
  override keys(): MapIterator<string> {
    if (!this.whole) {
      this.askedAll = true
      this.misses.add(this)
    }
    return super.keys()
  }
  /** The values read, without recording a request. */
  valuesRead(): MapIterator<[string, string]> {
    return super.entries()
  }
}

/** A number for each store (an engine layer's database) whose Flows' texts this process holds. */
const storeNumbers = new WeakMap<EngineStoreShape, number>()
let storeCount = 0

/**
 * The key `LazyValues` holds a Flow's texts under: the Flow ID within its store, so that two databases in one
 * process (a copy of a file, a restored backup, another engine layer) never share a held text, whatever their
 * run IDs and versions.
 */
const heldFlow = (store: EngineStoreShape, flowId: string): string => {
  let n = storeNumbers.get(store)
  if (n === undefined) {
    n = ++storeCount
    storeNumbers.set(store, n)
  }
  return `${n}\u0000${flowId}`
}

/**
 * The first statement of a lazy read: the Flow's version, every value outside the lazy maps, the queue, and the
 * newest versions of the lazy keys whose values this process holds (`LazyValues`): a held value of that version
 * is the key's value at this commit, read without another statement. With `base` (the state held at an older
 * version of run `base.runId`), a value stored at or below that version comes as the text held for it, not read
 * again (`Flows.loadCommittedAttributes`, `since`); `undefined` when the statement finds the Flow in another run,
 * at a version below the base's, or a value without its text that the base does not hold: the caller reads
 * without a base.
 */
const lazyState = Effect.fnUntraced(function* (
  store: EngineStoreShape,
  flowId: string,
  lazy: ReadonlyArray<string>,
  base?: { readonly runId: string; readonly commit: LazyValues.HeldCommit }
) {
  const held = heldFlow(store, flowId)
  const rows = yield* store.loadCommittedAttributes(flowId, lazy, LazyValues.heldKeys(held, lazy), base?.commit.version)
  const misses = new Set<LazyMap>()
  const state: FlowState = { attrs: new Map(), channels: new Map() }
  for (const name of lazy) state.attrs.set(name, new LazyMap(name, misses))
  // the statement's rows come in no order
  const flowRow = rows.find((r) => r.kind === "flow")
  const version = flowRow === undefined ? undefined : Number(flowRow.version)
  const runId = flowRow?.value ?? undefined
  // the base must be of this run and at or below the version read (a base of a newer version holds newer texts)
  if (base !== undefined && (runId !== base.runId || version === undefined || version < base.commit.version)) {
    return undefined
  }
  const texts = runId === undefined ? undefined : LazyValues.readRows(held, runId)
  const messages: Array<QueryStateRow> = []
  for (const r of rows) {
    if (r.kind === "attr") {
      // a value at or below the base's version comes without its text: the base's text is that stored row's
      const value = r.value ?? base?.commit.attrs.get(r.name)?.get(r.key)
      if (value === undefined) {
        texts?.done()
        return undefined
      }
      addAttr(state, r.name, r.key, texts === undefined ? value : texts.text(r.name, r.key, Number(r.version), value))
    } else if (r.kind === "held") {
      const text = runId === undefined ? undefined : LazyValues.lookup(held, runId, r.name, r.key, Number(r.version))
      if (text === undefined) continue
      const m = state.attrs.get(r.name) as LazyMap
      m.set(r.key, text)
      m.known.add(r.key)
    } else if (r.kind === "message") messages.push(r)
  }
  texts?.done()
  // the queues oldest first
  messages.sort((a, b) => Number(a.id) - Number(b.id))
  for (const r of messages) addMessage(state, r.name, r.key, r.id, r.value as string)
  return { state, misses, version, runId }
})

/** A state over a held commit: its values and queues (shared, read only), and what it knows of the lazy maps. */
const commitState = (commit: LazyValues.HeldCommit, lazy: ReadonlyArray<string>) => {
  const misses = new Set<LazyMap>()
  const attrs = new Map(commit.attrs) as Map<string, Map<string, string>>
  for (const name of lazy) {
    const m = new LazyMap(name, misses)
    const held = commit.lazy.get(name)
    if (held !== undefined) {
      for (const [key, text] of held.values) m.set(key, text)
      for (const key of held.known) m.known.add(key)
      m.whole = held.whole
    }
    attrs.set(name, m)
  }
  const state: FlowState = { attrs, channels: commit.channels as FlowState["channels"] }
  return { state, misses }
}

/** What a read knows of a lazy map: its values, the keys read, whether it read them all. */
const lazyKnown = (m: LazyMap) => ({ values: new Map(m.valuesRead()), known: new Set(m.known), whole: m.whole })

/** Holds the state a read read at Flow version `version` of run `runId` (`LazyValues.holdCommit`). */
const holdState = (held: string, runId: string, version: number, lazy: ReadonlyArray<string>, state: FlowState) => {
  const attrs = new Map<string, ReadonlyMap<string, string>>()
  const lazyMaps = new Map<string, LazyValues.HeldLazyMap>()
  for (const [name, m] of state.attrs) {
    if (m instanceof LazyMap) lazyMaps.set(name, lazyKnown(m))
    else {
      // shared by the reads of this version, never changed: its sorted keys are kept (a session's window)
      freezeAttrMap(m)
      attrs.set(name, m)
    }
  }
  const channels = state.channels as ReadonlyMap<string, ReadonlyArray<StoredMessage>>
  LazyValues.holdCommit(held, runId, {
    version,
    lazyNames: LazyValues.lazyNamesKey(lazy),
    attrs,
    channels,
    lazy: lazyMaps
  })
}

/**
 * Holds the values of the keys a run asked for by name (not those of a map read whole), each by its stored row:
 * a row of run `runId` read in one statement with it, whatever the read makes of it.
 */
const hold = (held: string, runId: string, misses: Set<LazyMap>, rows: ReadonlyArray<QueryStateRow>) => {
  const asked = new Set<string>()
  for (const m of misses) for (const key of m.asked) asked.add(channelKey(m.name, key))
  for (const r of rows) {
    if (r.kind !== "attr" || r.value === null || !asked.has(channelKey(r.name, r.key))) continue
    LazyValues.remember(held, runId, r.name, r.key, Number(r.version), r.value)
  }
}

/**
 * Reads what the handler's run asked for into the state, in one statement; false when a value may have changed
 * since the first statement (at Flow version `at.version`): the read starts again.
 */
const readAsked = (
  store: EngineStoreShape,
  flowId: string,
  at: { readonly version: number | undefined; readonly runId: string },
  misses: Set<LazyMap>
) =>
  Effect.gen(function* () {
    const wanted: Array<{ name: string; key: string | undefined }> = []
    for (const m of misses) {
      if (m.askedAll) wanted.push({ name: m.name, key: undefined })
      else for (const key of m.asked) wanted.push({ name: m.name, key })
    }
    const rows = yield* store.loadCommittedAttributesOf(flowId, wanted)
    const flowRow = rows.find((r) => r.kind === "flow")
    if (flowRow !== undefined) hold(heldFlow(store, flowId), flowRow.value as string, misses, rows)
    if (flowRow === undefined || at.version === undefined || flowRow.value !== at.runId) return false
    const unchanged = Number(flowRow.version) === at.version
    const found = new Set<string>()
    for (const r of rows) {
      if (r.kind !== "attr") continue
      // written after the first statement: not that commit's value
      if (Number(r.version) > at.version) return false
      found.add(channelKey(r.name, r.key))
    }
    if (!unchanged) {
      // a key with no row may have been deleted after the first statement, and a whole map may miss such keys
      for (const m of misses) {
        if (m.askedAll) return false
        for (const key of m.asked) if (!found.has(channelKey(m.name, key))) return false
      }
    }
    const byName = new Map<string, LazyMap>()
    for (const m of misses) byName.set(m.name, m)
    for (const r of rows) {
      const m = r.kind === "attr" ? byName.get(r.name) : undefined
      if (m !== undefined && !m.whole && r.value !== null) m.set(r.key, r.value)
    }
    for (const m of misses) {
      if (m.askedAll) m.whole = true
      for (const key of m.asked) m.known.add(key)
      m.asked.clear()
      m.askedAll = false
    }
    misses.clear()
    return true
  })

/** A database failure of a query, as the RPC's own failure: the read did not happen. */
const database = (flowId: string, rpc: string) => (e: { readonly message?: unknown }) =>
  new RpcFailed({ flowId, rpc, errorType: "DatabaseError", detail: String(e.message ?? e) })

/** What a query reads lazily. */
export interface QueryOptions {
  /**
   * AttributeMaps (declared by the Flow) whose values are read only as the handler asks for them: each key it
   * reads with `getAt`, or the whole map when it lists the keys.
   */
  readonly readLazily?: ReadonlyArray<AttributeMap<any>> | undefined
}

/** The names of the lazy maps, each declared by the Flow as an AttributeMap (InvalidInput otherwise). */
const lazyNames = (flow: FlowDef<any, any>, maps: ReadonlyArray<AttributeMap<any>> | undefined) =>
  Effect.forEach(maps ?? [], (m) =>
    flow.attributes.some((a) => a.name === m.name && a._tag === "AttributeMap")
      ? Effect.succeed(m.name)
      : Effect.fail(
          new InvalidInput({
            what: "readLazily",
            detail: `AttributeMap ${m.name} is not declared by Flow ${flow.type}`
          })
        )
  )

type Run<O> = (state: FlowState, staged: Staged) => Effect.Effect<Exit.Exit<RpcResult<O>, unknown>>

interface Ran<O> {
  readonly exit: Exit.Exit<RpcResult<O>, unknown>
  readonly staged: Staged
}

/**
 * Runs a handler on `state` (Flow version `at.version`), reading what it asks for, until a run asks for nothing
 * that was not read; `undefined` when what it asked for may have changed since that version (the read starts
 * again).
 */
const runToEnd = <O>(
  store: EngineStoreShape,
  flowId: string,
  at: { readonly version: number | undefined; readonly runId: string },
  state: FlowState,
  misses: Set<LazyMap>,
  run: Run<O>
): Effect.Effect<Ran<O> | undefined, SqlError> =>
  Effect.gen(function* () {
    while (true) {
      const staged = emptyStaged()
      const exit = yield* run(state, staged)
      if (misses.size === 0) return { exit, staged }
      if (!(yield* readAsked(store, flowId, at, misses))) return undefined
    }
  })

/**
 * Runs a handler on a lazily read state until a run asks for nothing that was not read (see the top of this
 * module); its exit and what it staged. `flow` is the Flow's row as the query read it: a state held for its run
 * and version serves the read without reading the Flow's values again.
 */
const runLazily = <O>(
  store: EngineStoreShape,
  lazy: ReadonlyArray<string>,
  flowId: string,
  flow: { readonly runId: string; readonly version: number },
  run: Run<O>
): Effect.Effect<Ran<O>, SqlError> =>
  Effect.gen(function* () {
    const held = heldFlow(store, flowId)
    const commit = LazyValues.commitAt(held, flow.runId, flow.version, LazyValues.lazyNamesKey(lazy))
    if (commit !== undefined) {
      const { state, misses } = commitState(commit, lazy)
      const ran = yield* runToEnd(store, flowId, flow, state, misses, run)
      if (ran !== undefined) {
        for (const m of state.attrs.values())
          if (m instanceof LazyMap) LazyValues.learnLazy(held, commit, m.name, lazyKnown(m))
        return ran
      }
    }
    // the state held at an older version of this run: its values that did not change since are not read again
    const older = LazyValues.heldCommitOf(held, flow.runId, LazyValues.lazyNamesKey(lazy))
    let base = older === undefined ? undefined : { runId: flow.runId, commit: older }
    for (let tries = 0; tries < READ_TRIES; tries++) {
      const read = yield* lazyState(store, flowId, lazy, base)
      if (read === undefined) {
        base = undefined
        continue
      }
      const { state, misses, version, runId } = read
      const ran = yield* runToEnd(store, flowId, { version, runId: flow.runId }, state, misses, run)
      if (ran === undefined) continue
      if (version !== undefined && runId === flow.runId) holdState(held, runId, version, lazy, state)
      return ran
    }
    const staged = emptyStaged()
    return { exit: yield* run(yield* committedState(store, flowId), staged), staged }
  })

/**
 * Runs `rpc`'s handler on the committed state of a running Flow and returns its output, decoded as the RPC's
 * reply is. A missing Flow fails with FlowNotFound and a closed one with FlowNotActive, as the RPC does; a
 * handler that fails or stages a write fails with RpcFailed (errorType ReadOnlyViolation for a write), and so
 * does a read the database refuses (errorType DatabaseError).
 */
export const queryRpc = <I, O>(
  store: EngineStoreShape,
  flow: FlowDef<any, any>,
  rpc: RpcDef<I, O, never>,
  flowId: string,
  input: I,
  options?: QueryOptions
): Effect.Effect<O, FlowNotFound | FlowNotActive | RpcFailed | InvalidInput> =>
  Effect.gen(function* () {
    const text = yield* Effect.try({
      try: () => encodeJson(rpc.input, input),
      catch: (e) => new InvalidInput({ what: `input of RPC ${rpc.name}`, detail: String(e) })
    })
    const row = yield* Effect.mapError(store.loadFlow(flowId), database(flowId, rpc.name))
    if (row === undefined) return yield* new FlowNotFound({ flowId })
    if (row.status !== "running") return yield* new FlowNotActive({ flowId, status: row.status })
    const ids = { flowId, runId: row.run_id }
    const run = (state: FlowState, staged: Staged) =>
      Effect.exit(Effect.suspend(() => rpc.handler(makeRpcView(flow, state, staged, ids), decodeJson(rpc.input, text))))
    const lazy = yield* lazyNames(flow, options?.readLazily)
    const { exit, staged } = yield* Effect.mapError(
      runLazily(store, lazy, flowId, { runId: row.run_id, version: row.version }, run),
      database(flowId, rpc.name)
    )
    if (exit._tag === "Failure") {
      const { errorType, detail } = errorInfo(exit.cause)
      return yield* new RpcFailed({ flowId, rpc: rpc.name, errorType, detail })
    }
    const moves = (exit.value.nextSteps?.length ?? 0) + (exit.value.cancelSteps?.length ?? 0)
    if (staged.attrWrites.size > 0 || staged.publishes.length > 0 || staged.deletes.length > 0 || moves > 0) {
      return yield* new RpcFailed({
        flowId,
        rpc: rpc.name,
        errorType: READ_ONLY_VIOLATION,
        detail: `a query runs read-only RPCs, and ${rpc.name} staged a write`
      })
    }
    return decodeJson(rpc.output, encodeJson(rpc.output, exit.value.output))
  })
