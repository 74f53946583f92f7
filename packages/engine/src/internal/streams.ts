// Streams: messages a running attempt emits, bounded per (Flow type, stream) by bytes.
//
// Three ways in, all of them fenced by the owner's epoch:
// - `writeMessages`: best-effort messages written now (a buffer of text deltas), one transaction for a batch,
//   tried again on a database error, up to ten times;
// - `writeMessages` with a heartbeat: what must be visible before the attempt commits (a tool's
//   `tool_call_started`, a model call's first delta), written with the attempt's durable heartbeat in one
//   transaction, with the other heartbeats of the same event-loop turn (`heartbeats.ts`): on SQLite one fenced
//   statement pair in the group commit; on Postgres one statement that commits alone, each attempt fenced in
//   it by its own epoch and shard lease (`store.recordHeartbeatsWithRows`);
// - staged messages (`prepareMessage`), which the attempt hands to its outcome and the owner writes in the
//   transaction of the transition that makes them true (`store.writeTransition`).
//
// The budget (`StreamBudget`) is kept by the runner in memory: no write touches a shared row, so sessions of one
// Flow type never wait on each other. It is reconciled with the table (the sum of the stored bytes) on first
// use, after a share of the capacity has been written here, and by each trim, which runs in its own
// transaction once the stream passes 90 % and deletes the oldest messages back to 80 %.
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { SqlError } from "effect/sql/SqlError"
import type { EngineConfigShape } from "../EngineConfig.ts"
import type { StreamDef } from "../Flow.ts"
import * as Metrics from "../Metrics.ts"
import { errorInfo } from "./decision.ts"
import type { CommitNotices } from "./feed.ts"
import type { HeartbeatBatch } from "./heartbeats.ts"
import { byteLength, encodeJson } from "./state.ts"
import type { EngineStoreShape as Store } from "./store/EngineStore.ts"
import type { Fence, StreamRow } from "./store/rows.ts"

/** The runner counters a stream write moves. */
export interface StreamCounters {
  streamRejectedWrites: number
  streamTrims: number
  streamWriteErrors: number
  /** The runner's metrics registry: each written message adds its bytes to `durable_engine_stream_bytes_total`. */
  readonly registry?: Metrics.Registry | undefined
}

/** How often a stream write is tried before it is dropped (counted and logged). */
const WRITE_TRIES = 10

/** What became of one stream write. */
export type EmitResult = "written" | "dropped" | "fenced"

/** One message ready to be stored: its JSON text and the bytes it charges to the stream's budget. */
export interface PreparedMessage {
  readonly stream: string
  readonly value: string
  readonly bytes: number
}

/**
 * Encodes one message and sizes it; `undefined` (counted as rejected) when it is over the engine's message
 * limit or larger than the stream's whole budget.
 */
export const prepareMessage = <A>(
  config: EngineConfigShape,
  stream: StreamDef<A>,
  flowId: string,
  stepExecutionId: string,
  value: A,
  counters?: StreamCounters
): PreparedMessage | undefined => {
  const text = encodeJson(stream.schema, value)
  const size = byteLength(text)
  const bytes = size + byteLength(flowId) + byteLength(stepExecutionId) + 512
  if (size > config.maxStreamMessageBytes || bytes > stream.capacityBytes) {
    if (counters) counters.streamRejectedWrites++
    return undefined
  }
  return { stream: stream.name, value: text, bytes }
}

// ------------------------------------------------------------------------------------------------
// The budget
// ------------------------------------------------------------------------------------------------

interface Usage {
  /** Bytes stored, as last reconciled, plus what this runner admitted since. */
  used: number
  /** Bytes this runner admitted since the last reconcile. */
  sinceReconcile: number
  /** Set once the first reconcile has read the table. */
  readonly loaded: Deferred.Deferred<void>
  loading: boolean
  /** The trim (or reconcile) of this stream running in this runner, if any. */
  trimming: Deferred.Deferred<void> | undefined
}

/** Above this share of the capacity a trim runs; it deletes the oldest messages back to {@link TRIM_TO}. */
const TRIM_AT = 0.9
const TRIM_TO = 0.8
/** A runner reconciles its count once it has admitted this share of the capacity since the last one. */
const RECONCILE_EVERY = 0.05

/**
 * The per-(Flow type, stream) byte budget of one runner, in memory. Admission is a comparison and an addition:
 * no write reads or updates a shared row. The count starts from the table's sum of stored bytes and is
 * reconciled with it (after {@link RECONCILE_EVERY} of the capacity written here, and by every trim), so
 * writes of other runners and deletes (a reused Flow ID, the retention purge) are caught up. A write that
 * passes 90 % starts a trim in the background; a message that does not fit waits for a trim first, so the
 * newest messages are kept and the oldest go. With one runner the bound is exact; with `n` runners the stored
 * bytes can pass the capacity by at most what the others admitted since their last reconcile (`n - 1` times
 * 5 % of the capacity) until the next trim.
 */
export class StreamBudget {
  private readonly usage = new Map<string, Usage>()

  private entry(flowType: string, stream: string): Usage {
    const key = `${flowType}\u0000${stream}`
    let u = this.usage.get(key)
    if (u === undefined) {
      u = { used: 0, sinceReconcile: 0, loaded: Deferred.makeUnsafe<void>(), loading: false, trimming: undefined }
      this.usage.set(key, u)
    }
    return u
  }

  /** Reads the stored bytes of a stream once, before its first admission in this runner. */
  private ready(store: Store, flowType: string, stream: string, u: Usage): Effect.Effect<void> {
    if (Deferred.isDoneUnsafe(u.loaded)) return Effect.void
    if (u.loading) return Deferred.await(u.loaded)
    u.loading = true
    return store.streamStoredBytes(flowType, stream).pipe(
      Effect.tap((stored) =>
        Effect.sync(() => {
          u.used += stored
        })
      ),
      Effect.catchCause(() => Effect.void),
      Effect.ensuring(Deferred.succeed(u.loaded, undefined))
    )
  }

  /** Trims (and reconciles) a stream, or waits for the trim of it already running here. Never fails. */
  private trimNow(
    store: Store,
    flowType: string,
    stream: StreamDef<any>,
    u: Usage,
    counters?: StreamCounters
  ): Effect.Effect<void> {
    return Effect.suspend(() => this.startTrim(store, flowType, stream, u, counters))
  }

  private startTrim(store: Store, flowType: string, stream: StreamDef<any>, u: Usage, counters?: StreamCounters) {
    if (u.trimming !== undefined) return Deferred.await(u.trimming)
    return this.runTrim(store, flowType, stream, u, this.claimTrim(u), counters)
  }

  /** Marks a trim of the stream as running here, before it starts: the writes meanwhile start none. */
  private claimTrim(u: Usage): Deferred.Deferred<void> {
    const done = Deferred.makeUnsafe<void>()
    u.trimming = done
    return done
  }

  private runTrim(
    store: Store,
    flowType: string,
    stream: StreamDef<any>,
    u: Usage,
    done: Deferred.Deferred<void>,
    counters?: StreamCounters
  ): Effect.Effect<void> {
    const before = u.sinceReconcile
    return trim(store, flowType, stream, counters).pipe(
      Effect.tap((stored) =>
        Effect.sync(() => {
          // what was admitted while the trim ran is not in its sum yet
          u.used = stored + Math.max(0, u.sinceReconcile - before)
          u.sinceReconcile = Math.max(0, u.sinceReconcile - before)
        })
      ),
      Effect.catchCause((cause) => {
        const { errorType, detail } = errorInfo(cause)
        return Effect.logWarning(`stream ${stream.name} of Flow type ${flowType}: trim failed: ${errorType}: ${detail}`)
      }),
      Effect.ensuring(
        Effect.suspend(() => {
          u.trimming = undefined
          return Deferred.succeed(done, undefined)
        })
      ),
      Effect.asVoid
    )
  }

  /**
   * Admits messages of one stream: each one that fits is counted (in order) and kept; one that does not waits
   * for a trim, and is dropped (counted as rejected) if it still does not fit. The caller gives back the bytes
   * of admitted messages that were not written ({@link release}) and calls {@link written} after a write.
   */
  admit<M extends { readonly bytes: number }>(
    store: Store,
    flowType: string,
    stream: StreamDef<any>,
    messages: ReadonlyArray<M>,
    counters?: StreamCounters
  ): Effect.Effect<ReadonlyArray<M>> {
    const u = this.entry(flowType, stream.name)
    const self = this
    return Effect.gen(function* () {
      yield* self.ready(store, flowType, stream.name, u)
      const kept: Array<M> = []
      let trimmed = false
      for (const m of messages) {
        if (u.used + m.bytes > stream.capacityBytes && !trimmed) {
          trimmed = true
          yield* self.trimNow(store, flowType, stream, u, counters)
        }
        if (u.used + m.bytes > stream.capacityBytes) {
          if (counters) counters.streamRejectedWrites++
          continue
        }
        u.used += m.bytes
        u.sinceReconcile += m.bytes
        kept.push(m)
      }
      return kept
    })
  }

  /** Gives back the bytes of admitted messages that were not written. */
  release(flowType: string, stream: string, bytes: number) {
    const u = this.entry(flowType, stream)
    u.used = Math.max(0, u.used - bytes)
    u.sinceReconcile = Math.max(0, u.sinceReconcile - bytes)
  }

  /**
   * After a write: a trim when the stream passed 90 % of its capacity, a reconcile when this runner wrote a
   * share of it since the last one; in the background, one at a time per stream.
   */
  written(store: Store, flowType: string, stream: StreamDef<any>, counters?: StreamCounters): Effect.Effect<void> {
    return Effect.suspend(() => {
      const u = this.entry(flowType, stream.name)
      const due = u.used > stream.capacityBytes * TRIM_AT || u.sinceReconcile > stream.capacityBytes * RECONCILE_EVERY
      if (!due || u.trimming !== undefined) return Effect.void
      // claimed now, not when the forked trim starts: the other writes of this group commit (each calls this
      // before any forked fiber runs) would each fork one, and a SQLite trim runs to its end before the next
      // starts, so each would read the stream's sum again
      const done = this.claimTrim(u)
      return Effect.asVoid(
        Effect.forkDetach(Effect.suspend(() => this.runTrim(store, flowType, stream, u, done, counters)))
      )
    })
  }
}

/**
 * Reconciles a stream's count with the table and, above 90 % of its capacity, deletes its oldest messages back
 * to 80 %, recording how far it trimmed (resume tokens before that are refused). On Postgres one runner trims
 * a stream at a time (a transaction-scoped advisory lock; a runner that does not get it only reads the sum).
 * Returns the bytes stored after it.
 */
const trim = (store: Store, flowType: string, stream: StreamDef<any>, counters?: StreamCounters) =>
  store.withTransaction(
    Effect.gen(function* () {
      const mayTrim = yield* store.mayTrimStream(flowType, stream.name)
      let used = yield* store.streamStoredBytes(flowType, stream.name)
      if (!mayTrim || used <= stream.capacityBytes * TRIM_AT) return used
      const oldest = yield* store.oldestStreamMessages(flowType, stream.name)
      let through: number | undefined
      let left = used
      for (const row of oldest) {
        if (left <= stream.capacityBytes * TRIM_TO) break
        left -= row.bytes
        through = row.seq
      }
      if (through === undefined) return used
      used -= yield* store.deleteStreamThrough(flowType, stream.name, through)
      if (counters) counters.streamTrims++
      // the trim mark: a resume token before it is refused (`Client.readStream`); `used` is informational
      yield* store.markStreamTrim(flowType, stream.name, used, through)
      return used
    })
  )

// ------------------------------------------------------------------------------------------------
// Writes
// ------------------------------------------------------------------------------------------------

/** Where a write goes: the attempt it belongs to, under its owner's fence. */
export interface WriteTarget {
  readonly store: Store
  /**
   * Runs a write in a transaction: the owner's group commit, so the writes of attempts that start together
   * (a turn's parallel tool calls announcing themselves) share one SQLite transaction.
   */
  /** Runs a write in a transaction (the owner's group commit); `flowId` keeps it in order with its Flow's other
   * writes of the same group (Postgres orders a group by Flow ID). */
  readonly transact: <A, E>(effect: Effect.Effect<A, E>, flowId?: string) => Effect.Effect<A, E | SqlError>
  readonly fence: Fence
  readonly budget: StreamBudget
  /** This process's commit notices: a written message wakes the Flow's readers. */
  readonly notices: CommitNotices
  readonly flowType: string
  readonly flowId: string
  readonly stepExecutionId: string
  readonly attempt: number
  readonly counters?: StreamCounters | undefined
  /**
   * The runner's heartbeat batches: a heartbeat with messages joins the others of its event-loop turn, each
   * fenced by its own epoch (and, on Postgres, shard lease) (`heartbeats.ts`).
   */
  readonly beats?: HeartbeatBatch | undefined
}

/**
 * Writes messages of one stream now, in one transaction. A full stream or an oversized message drops that
 * message; a database error drops the write, counted and logged; `fenced` when this owner no longer holds the
 * Flow (the caller stops the attempt). Nothing here fails a Step.
 */
export const emitMessages = <A>(
  t: WriteTarget,
  config: EngineConfigShape,
  stream: StreamDef<A>,
  values: ReadonlyArray<A>
): Effect.Effect<EmitResult> =>
  writeMessages(t, config, stream, values, undefined).pipe(
    Effect.catchCause((cause) => {
      if (t.counters) t.counters.streamWriteErrors++
      const { errorType, detail } = errorInfo(cause)
      return Effect.as(
        Effect.logWarning(
          `stream ${stream.name} of Flow ${t.flowId}: a write by ${t.stepExecutionId}#${t.attempt} was dropped: ${errorType}: ${detail}`
        ),
        "dropped" as const
      )
    })
  )

/**
 * The attempt's durable heartbeat with messages of one stream, in one transaction: the messages are visible
 * before the attempt commits. The heartbeat is written even when no message fits the budget (those are
 * dropped, counted); `fenced` when this owner no longer holds the Flow. A database error fails it (after the
 * tries), as a heartbeat's.
 */
export const heartbeatWithMessages = <A>(
  t: WriteTarget,
  config: EngineConfigShape,
  stream: StreamDef<A>,
  values: ReadonlyArray<A>,
  checkpoint: string | null
): Effect.Effect<EmitResult, unknown> => writeMessages(t, config, stream, values, { checkpoint })

const writeMessages = <A>(
  t: WriteTarget,
  config: EngineConfigShape,
  stream: StreamDef<A>,
  values: ReadonlyArray<A>,
  heartbeat: { readonly checkpoint: string | null } | undefined
): Effect.Effect<EmitResult, unknown> =>
  Effect.gen(function* () {
    const { store, fence } = t
    const prepared = values.flatMap((v) => {
      const m = prepareMessage(config, stream, t.flowId, t.stepExecutionId, v, t.counters)
      return m === undefined ? [] : [m]
    })
    const admitted = yield* t.budget.admit(store, t.flowType, stream, prepared, t.counters)
    if (admitted.length === 0 && heartbeat === undefined) return "dropped" as const
    const admittedBytes = admitted.reduce((n, m) => n + m.bytes, 0)
    const now = yield* Clock.currentTimeMillis
    const rows: Array<StreamRow> = admitted.map((m) => ({
      flow_type: t.flowType,
      stream: stream.name,
      flow_id: t.flowId,
      step_execution_id: t.stepExecutionId,
      attempt: t.attempt,
      value: m.value,
      bytes: m.bytes,
      at: now,
      runner: fence.runner
    }))
    const writeInTransaction = t
      .transact(
        Effect.gen(function* () {
          if (heartbeat === undefined) {
            if (!(yield* store.fenceCheck(t.flowId, fence))) return "fenced" as const
          } else {
            // the heartbeat's own statement checks the fence
            const beat = yield* store.recordHeartbeat(
              fence,
              t.flowId,
              t.stepExecutionId,
              t.attempt,
              now,
              heartbeat.checkpoint
            )
            if (!beat) return "fenced" as const
          }
          yield* store.insertStreamRows(rows)
          // the lease, checked last: a runner that lost the shard lock meanwhile rolls back (with the commit
          // notice, when messages were written, in the same statement)
          if (rows.length > 0) yield* store.requireLeaseAndNotify(t.flowId, fence)
          else yield* store.requireLease(t.flowId, fence)
          return "written" as const
        }),
        t.flowId
      )
      .pipe(Effect.catchTag("LeaseLost", () => Effect.succeed("fenced" as const)))
    const oneStatement = store.recordHeartbeatWithRows
    const beatRow = {
      flow_id: t.flowId,
      step_execution_id: t.stepExecutionId,
      attempt: t.attempt,
      epoch: fence.epoch,
      at: now,
      checkpoint: heartbeat?.checkpoint ?? null
    }
    const write =
      heartbeat !== undefined && t.beats !== undefined && store.recordHeartbeatsWithRows !== undefined
        ? // Postgres: with the other heartbeats of this turn, one statement that commits alone, each attempt
          // fenced in it by its own epoch and shard lease
          Effect.map(t.beats.submitFenced(store, beatRow, fence.lease, rows), (beat) =>
            beat ? ("written" as const) : ("fenced" as const)
          )
        : heartbeat !== undefined && oneStatement !== undefined
          ? // Postgres: the heartbeat and its messages in one statement that commits alone, fenced in itself
            Effect.map(
              oneStatement(rows, fence, t.flowId, t.stepExecutionId, t.attempt, now, heartbeat.checkpoint),
              (beat) => (beat ? ("written" as const) : ("fenced" as const))
            )
          : heartbeat !== undefined &&
              t.beats !== undefined &&
              store.recordHeartbeats !== undefined &&
              fence.lease === undefined
            ? // SQLite: with the other heartbeats of this turn, one fenced statement pair in the group commit
              Effect.map(t.beats.submit(store, t.transact, beatRow, rows), (beat) =>
                beat ? ("written" as const) : ("fenced" as const)
              )
            : writeInTransaction
    // a transaction that failed (a dropped connection, a transaction the server ended) wrote nothing: try again,
    // on another connection (a stall that ended one transaction may have ended others of the pool too)
    const result = yield* Effect.retry(write, { times: WRITE_TRIES - 1, schedule: Schedule.spaced("50 millis") }).pipe(
      Effect.onExit((exit) =>
        exit._tag === "Success" && exit.value === "written"
          ? Effect.void
          : Effect.sync(() => t.budget.release(t.flowType, stream.name, admittedBytes))
      )
    )
    if (result === "written" && rows.length > 0) {
      t.notices.notify(t.flowId)
      if (t.counters?.registry) {
        for (const m of admitted)
          Metrics.record(t.counters.registry, Metrics.streamBytes, byteLength(m.value), {
            flow_type: t.flowType,
            stream: stream.name
          })
      }
      yield* t.budget.written(store, t.flowType, stream, t.counters)
    }
    return result === "written" && rows.length === 0 && heartbeat === undefined ? ("dropped" as const) : result
  })
