// Heartbeats with messages, batched (SQLite): the durable heartbeats (and the stream rows they make visible) of
// attempts that ask in the same event-loop turn, such as a turn's parallel tool calls announcing themselves,
// are written by one fenced statement pair in one write of the owner's group commit: one `UPDATE ... FROM` of
// every attempt's heartbeat, each fenced by its own owner epoch in the WHERE and returned when written, and one
// multi-row INSERT of the rows of the attempts it wrote. Each caller waits for that transaction's COMMIT, so its
// heartbeat is durable before its user code goes on; an attempt whose fence refused it gets `false` (its caller
// stops it) and leaves no row; a database error fails every caller of the batch, and each tries again.
//
// Postgres keeps its own path: a heartbeat with its rows is one statement that commits alone
// (`store.recordHeartbeatWithRows`), fenced by the shard lease too, which a batch would share between Flows.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { SqlError } from "effect/sql/SqlError"
import type { EngineStoreShape as Store } from "./store/EngineStore.ts"
import type { HeartbeatRow } from "./store/flows.ts"
import { num, type StreamRow } from "./store/rows.ts"

/** Runs a write in a transaction (the owner's group commit). */
type Transact = <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError>

interface Pending {
  readonly beat: HeartbeatRow
  readonly rows: ReadonlyArray<StreamRow>
  readonly flowId: string
  readonly done: Deferred.Deferred<boolean, SqlError>
}

interface Batch {
  readonly store: Store
  pending: Array<Pending>
}

/** Heartbeats per statement (six parameters each), and stream rows per INSERT (nine each). */
const BEATS_PER_STATEMENT = 100
const ROWS_PER_STATEMENT = 500

const keyOf = (flowId: string, stepExecutionId: string, attempt: number) =>
  `${flowId}\u0000${stepExecutionId}\u0000${attempt}`

const chunks = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/**
 * Splits a batch into rounds in which each attempt appears once (a second heartbeat of the same attempt in the
 * same turn goes in the next round, after the first): one `UPDATE ... FROM` row per attempt and statement.
 */
const rounds = (pending: ReadonlyArray<Pending>): Array<Array<Pending>> => {
  const out: Array<Array<Pending>> = []
  const seen: Array<Set<string>> = []
  for (const p of pending) {
    const key = keyOf(p.beat.flow_id, p.beat.step_execution_id, p.beat.attempt)
    let i = 0
    while (i < out.length && seen[i]!.has(key)) i++
    if (i === out.length) {
      out.push([])
      seen.push(new Set())
    }
    out[i]!.push(p)
    seen[i]!.add(key)
  }
  return out
}

/** The writes of one batch, in the caller's transaction: which heartbeats the fences let through. */
const writeBatch = (store: Store, pending: ReadonlyArray<Pending>) =>
  Effect.gen(function* () {
    const recordHeartbeats = store.recordHeartbeats!
    const written = new Array<boolean>(pending.length).fill(false)
    const index = new Map(pending.map((p, i) => [p, i] as const))
    for (const round of rounds(pending)) {
      for (const chunk of chunks(round, BEATS_PER_STATEMENT)) {
        const beaten = yield* recordHeartbeats(chunk.map((p) => p.beat))
        const keys = new Set(beaten.map((r) => keyOf(r.flow_id, r.step_execution_id, num(r.attempt))))
        for (const p of chunk) {
          if (keys.has(keyOf(p.beat.flow_id, p.beat.step_execution_id, p.beat.attempt))) written[index.get(p)!] = true
        }
      }
    }
    const rows = pending.flatMap((p, i) => (written[i] ? p.rows : []))
    for (const chunk of chunks(rows, ROWS_PER_STATEMENT)) yield* store.insertStreamRows(chunk)
    const notified = new Set<string>()
    for (let i = 0; i < pending.length; i++) {
      const p = pending[i]!
      if (!written[i] || p.rows.length === 0 || notified.has(p.flowId)) continue
      notified.add(p.flowId)
      yield* store.notifyCommit(p.flowId)
    }
    return written
  })

/**
 * The runner's heartbeat batches, one per group commit (an embedded runner has one). Only for stores with
 * `recordHeartbeats` (SQLite) and fences without a shard lease.
 */
export class HeartbeatBatch {
  private readonly batches = new Map<Transact, Batch>()

  /**
   * Writes one attempt's heartbeat and its stream rows with the other heartbeats asked for in this turn, and
   * waits for the COMMIT: `true` when written, `false` when the attempt's fence refused it (nothing of it is
   * written). Fails with the transaction's error.
   */
  submit(
    store: Store,
    transact: Transact,
    beat: HeartbeatRow,
    rows: ReadonlyArray<StreamRow>
  ): Effect.Effect<boolean, SqlError> {
    return Effect.suspend(() => {
      let batch = this.batches.get(transact)
      if (batch === undefined) {
        batch = { store, pending: [] }
        this.batches.set(transact, batch)
      }
      const done = Deferred.makeUnsafe<boolean, SqlError>()
      batch.pending.push({ beat, rows, flowId: beat.flow_id, done })
      const start =
        batch.pending.length === 1
          ? // the first heartbeat of a batch schedules its write after the others of this turn have joined
            Effect.forkDetach(Effect.andThen(Effect.yieldNow, this.flush(transact, batch)))
          : Effect.void
      return Effect.andThen(start, Deferred.await(done))
    })
  }

  private flush(transact: Transact, batch: Batch): Effect.Effect<void> {
    return Effect.suspend(() => {
      const pending = batch.pending
      batch.pending = []
      if (pending.length === 0) return Effect.void
      return Effect.flatMap(Effect.exit(transact(writeBatch(batch.store, pending))), (exit) =>
        Effect.sync(() => {
          for (let i = 0; i < pending.length; i++) {
            const p = pending[i]!
            if (Exit.isSuccess(exit)) Deferred.doneUnsafe(p.done, Exit.succeed(exit.value[i]!))
            else Deferred.doneUnsafe(p.done, exit as Exit.Exit<never, SqlError>)
          }
        })
      )
    })
  }
}
