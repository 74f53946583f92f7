// Heartbeats with messages, batched: the durable heartbeats (and the stream rows they make visible) of attempts
// that ask in the same event-loop turn, such as a turn's parallel tool calls announcing themselves, are written
// together, each attempt fenced by its own owner epoch (and, on a cluster runner, its own shard lease), and each
// caller waits for the COMMIT of its heartbeat, so its heartbeat is durable before its user code goes on; an
// attempt whose fence refused it gets `false` (its caller stops it) and leaves no row.
//
// - SQLite (`submit`): one fenced statement pair in one write of the owner's group commit: one `UPDATE ... FROM`
//   of every attempt's heartbeat, each fenced by its epoch in the WHERE and returned when written, and one
//   multi-row INSERT of the rows of the attempts it wrote. A database error fails every caller of the batch, and
//   each tries again.
// - Postgres (`submitFenced`): one statement that commits alone (`store.recordHeartbeatsWithRows`), as the single
//   heartbeat's (`store.recordHeartbeatWithRows`): each attempt's heartbeat fenced by its owner row (share-locked)
//   and by its shard lock, the rows of the attempts written, and the commit notices. A second heartbeat of the
//   same attempt goes in the next statement. The statement locks its rows in key order, as the transitions do,
//   so it does not deadlock with them or with another batch; should Postgres still end it as a deadlock victim
//   (40P01: the statement rolled back whole, nothing of it written), it runs again, up to `DEADLOCK_TRIES`
//   times. Any other database error fails the callers of that statement and of the ones after it, and each tries
//   again.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { SqlError } from "effect/sql/SqlError"
import type { EngineStoreShape as Store } from "./store/EngineStore.ts"
import type { HeartbeatRow } from "./store/flows.ts"
import { num, type ShardLease, type StreamRow } from "./store/rows.ts"

/** Runs a write in a transaction (the owner's group commit). */
type Transact = <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError>

interface Pending {
  readonly beat: HeartbeatRow
  readonly rows: ReadonlyArray<StreamRow>
  readonly flowId: string
  /** Postgres: the shard lease of the attempt's fence. */
  readonly lease?: ShardLease | undefined
  readonly done: Deferred.Deferred<boolean, SqlError>
}

interface Batch {
  readonly store: Store
  pending: Array<Pending>
}

/** Heartbeats per statement (six parameters each), and stream rows per INSERT (nine each). */
const BEATS_PER_STATEMENT = 100
const ROWS_PER_STATEMENT = 500

/** How many times a Postgres batch statement runs when Postgres ends it as a deadlock victim (40P01). */
const DEADLOCK_TRIES = 5

/** Postgres ended the statement to break a deadlock (SQLSTATE 40P01): it rolled back, nothing of it was written. */
const isDeadlock = (error: SqlError): boolean => error.reason._tag === "DeadlockError"

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
 * The writes of one Postgres batch, one statement per round and chunk, each committing alone: resolves the
 * callers of each statement when it returns; a statement ended as a deadlock victim runs again; a failed
 * statement fails its callers and those of the statements after it (nothing of theirs was written).
 */
const writeFencedBatch = (store: Store, pending: ReadonlyArray<Pending>): Effect.Effect<void> =>
  Effect.gen(function* () {
    const recordHeartbeatsWithRows = store.recordHeartbeatsWithRows!
    const statements = rounds(pending).flatMap((round) => chunks(round, BEATS_PER_STATEMENT))
    for (let s = 0; s < statements.length; s++) {
      const chunk = statements[s]!
      const exit = yield* Effect.exit(
        recordHeartbeatsWithRows(chunk.map((p) => ({ beat: p.beat, lease: p.lease, rows: p.rows }))).pipe(
          // the statement commits alone, so a deadlock victim wrote nothing: running it again writes it once
          Effect.retry({ while: isDeadlock, times: DEADLOCK_TRIES - 1 })
        )
      )
      if (Exit.isFailure(exit)) {
        const failed = exit as Exit.Exit<never, SqlError>
        for (const later of statements.slice(s)) for (const p of later) Deferred.doneUnsafe(p.done, failed)
        return
      }
      const keys = new Set(exit.value.map((r) => keyOf(r.flow_id, r.step_execution_id, num(r.attempt))))
      for (const p of chunk) {
        Deferred.doneUnsafe(
          p.done,
          Exit.succeed(keys.has(keyOf(p.beat.flow_id, p.beat.step_execution_id, p.beat.attempt)))
        )
      }
    }
  })

/**
 * The runner's heartbeat batches: on SQLite one per group commit (an embedded runner has one), for stores with
 * `recordHeartbeats` and fences without a shard lease; on Postgres one per store (`recordHeartbeatsWithRows`),
 * shared by the runner's owners, each heartbeat under its own fence and lease.
 */
export class HeartbeatBatch {
  private readonly batches = new Map<Transact, Batch>()
  private readonly fenced = new Map<Store, Array<Pending>>()

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

  /**
   * Postgres: writes one attempt's heartbeat and its stream rows with the other heartbeats asked for in this turn
   * in one statement that commits alone, fenced by the attempt's owner epoch and by `lease` (when set), and waits
   * for it: `true` when written, `false` when the fence or the lease refused it (nothing of it is written).
   * Fails with the statement's error.
   */
  submitFenced(
    store: Store,
    beat: HeartbeatRow,
    lease: ShardLease | undefined,
    rows: ReadonlyArray<StreamRow>
  ): Effect.Effect<boolean, SqlError> {
    return Effect.suspend(() => {
      let pending = this.fenced.get(store)
      if (pending === undefined) {
        pending = []
        this.fenced.set(store, pending)
      }
      const done = Deferred.makeUnsafe<boolean, SqlError>()
      pending.push({ beat, rows, flowId: beat.flow_id, lease, done })
      const start =
        pending.length === 1
          ? // the first heartbeat of a batch schedules its write after the others of this turn have joined
            Effect.forkDetach(
              Effect.andThen(
                Effect.yieldNow,
                Effect.suspend(() => {
                  const batch = this.fenced.get(store) ?? []
                  this.fenced.delete(store)
                  return writeFencedBatch(store, batch)
                })
              )
            )
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
