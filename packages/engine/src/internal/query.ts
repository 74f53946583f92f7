// The query path: a read-only RPC handler runs against a Flow's committed state, read from the database in
// one statement. It reaches no owner: no cluster message, no history row, no stored reply, no task slot, and
// it never waits for a running Step. What it returns is what the same RPC would return at that commit, since
// the handler sees the state the RPC would see and its output goes through the same codec.
import * as Effect from "effect/Effect"
import { FlowNotActive, FlowNotFound, InvalidInput, RpcFailed } from "../Errors.ts"
import type { FlowDef, RpcDef } from "../Flow.ts"
import { errorInfo } from "./decision.ts"
import {
  channelKey,
  decodeJson,
  emptyStaged,
  encodeJson,
  type FlowState,
  makeRpcView,
  type StoredMessage
} from "./state.ts"
import type { EngineStoreShape } from "./store/EngineStore.ts"

/** Why a query refuses a handler that staged writes. */
export const READ_ONLY_VIOLATION = "ReadOnlyViolation"

/** A Flow's committed state as a handler reads it. */
export const committedState = Effect.fnUntraced(function* (store: EngineStoreShape, flowId: string) {
  const rows = yield* store.loadCommittedState(flowId)
  const state: FlowState = { attrs: new Map(), channels: new Map() }
  for (const r of rows) {
    if (r.kind === "attr") {
      let m = state.attrs.get(r.name)
      if (m === undefined) {
        m = new Map()
        state.attrs.set(r.name, m)
      }
      m.set(r.key, r.value)
    } else {
      const k = channelKey(r.name, r.key)
      const list = (state.channels.get(k) as Array<StoredMessage> | undefined) ?? []
      list.push({ id: String(r.id), value: r.value })
      state.channels.set(k, list)
    }
  }
  return state
})

/** A database failure of a query, as the RPC's own failure: the read did not happen. */
const database = (flowId: string, rpc: string) => (e: { readonly message?: unknown }) =>
  new RpcFailed({ flowId, rpc, errorType: "DatabaseError", detail: String(e.message ?? e) })

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
  input: I
): Effect.Effect<O, FlowNotFound | FlowNotActive | RpcFailed | InvalidInput> =>
  Effect.gen(function* () {
    const text = yield* Effect.try({
      try: () => encodeJson(rpc.input, input),
      catch: (e) => new InvalidInput({ what: `input of RPC ${rpc.name}`, detail: String(e) })
    })
    const row = yield* Effect.mapError(store.loadFlow(flowId), database(flowId, rpc.name))
    if (row === undefined) return yield* new FlowNotFound({ flowId })
    if (row.status !== "running") return yield* new FlowNotActive({ flowId, status: row.status })
    const state = yield* Effect.mapError(committedState(store, flowId), database(flowId, rpc.name))
    const staged = emptyStaged()
    const ctx = makeRpcView(flow, state, staged, { flowId, runId: row.run_id })
    const exit = yield* Effect.exit(Effect.suspend(() => rpc.handler(ctx, decodeJson(rpc.input, text))))
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
