// Group commit: transitions of different Flows that are ready in the same event-loop turn share one
// transaction (one COMMIT, one WAL flush), each inside its own savepoint, so one that fails or is fenced rolls
// back alone. On SQLite every group is one of the file's write transactions. On Postgres a group holds at most
// `PG_GROUP_LIMIT` transitions (its statements run one after another on one pooled connection, so a group that
// is too large waits on round trips instead of fsyncs), and groups run side by side on the pool.
//
// Fencing on Postgres, per transition and unchanged by grouping (the engine README, "Group commit"): a
// transition's first statement share-locks its Flow's owner row (`fenceCheck`) and its last one checks the
// Flow's shard lock (`requireLease`); both are inside its savepoint. The row lock is held until the group's
// COMMIT, so a new owner's claim, which updates that row, waits for the COMMIT and then loads what it
// committed; a lease check that fails rolls its savepoint back, and the other transitions of the group commit.
//
// Lock order (Postgres): a group runs its writes in Flow ID order (byte order, a stable sort: a Flow's
// transitions and stream writes keep the order they arrived in; writes given without a Flow ID first), and each
// transition writes its Flow's attempt rows in key order (`writeTransition`), so the attempt rows a group locks
// come in key order, as those of a batched heartbeat (`recordHeartbeatsWithRows`): a group and a batch that want
// the same attempts wait for each other instead of deadlocking. SQLite has one writer and no row locks: its
// groups keep their arrival order (sorting them reordered a turn's writes and cost it two statements).
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type { SqlError } from "effect/sql/SqlError"
import { EngineStore } from "./store/EngineStore.ts"
import { utf8Order } from "./store/rows.ts"

interface Pending {
  readonly effect: Effect.Effect<unknown, unknown>
  /** The Flow the write is for: the group runs its writes in this order. */
  readonly key: string
  readonly done: Deferred.Deferred<unknown, unknown>
}

/** The most transitions one Postgres group holds. */
export const PG_GROUP_LIMIT = 16

/**
 * Runs one transition's writes in a transaction, possibly shared with other Flows' transitions: on Postgres
 * `flowId`, the Flow they write, orders the group's writes (Flow ID order; without it, before those with one);
 * a SQLite group keeps its arrival order.
 */
export class GroupCommit extends Context.Service<
  GroupCommit,
  {
    readonly run: <A, E>(effect: Effect.Effect<A, E>, flowId?: string) => Effect.Effect<A, E | SqlError>
  }
>()("@durable-agent/engine/GroupCommit") {
  static readonly layer = Layer.effect(
    GroupCommit,
    Effect.gen(function* () {
      const store = yield* EngineStore
      const limit = store.dialect === "sqlite" ? Number.POSITIVE_INFINITY : PG_GROUP_LIMIT
      const ordered = store.dialect !== "sqlite"
      let pending: Array<Pending> = []
      const flush = (group: ReadonlyArray<Pending>) =>
        Effect.gen(function* () {
          // a flush scheduled for a group that already went when it filled up
          if (group.length === 0) return
          // Postgres: in Flow ID order (a stable sort: writes of the same Flow keep theirs), the lock order. SQLite
          // has one writer and no row locks: its group keeps the order the writes arrived in.
          const batch = ordered ? [...group].sort((a, b) => utf8Order(a.key, b.key)) : group
          if (batch.length === 1) {
            const only = batch[0]!
            const exit = yield* Effect.exit(store.withTransaction(only.effect))
            yield* Deferred.done(only.done, exit)
            return
          }
          const outer = yield* Effect.exit(
            store.withTransaction(Effect.forEach(batch, (p) => Effect.exit(store.withTransaction(p.effect))))
          )
          if (Exit.isFailure(outer)) {
            for (const p of batch) yield* Deferred.done(p.done, outer)
            return
          }
          for (let i = 0; i < batch.length; i++) yield* Deferred.done(batch[i]!.done, outer.value[i]!)
        })
      const flushPending = Effect.suspend(() => {
        const batch = pending
        pending = []
        return flush(batch)
      })
      const run = <A, E>(effect: Effect.Effect<A, E>, flowId?: string): Effect.Effect<A, E | SqlError> =>
        Effect.suspend(() => {
          const done = Deferred.makeUnsafe<unknown, unknown>()
          pending.push({ effect, key: flowId ?? "", done })
          let start: Effect.Effect<unknown> = Effect.void
          if (pending.length >= limit) {
            // a full Postgres group goes now; the next transition opens another
            const batch = pending
            pending = []
            start = Effect.forkDetach(flush(batch))
          } else if (pending.length === 1) {
            // the first transition of a group schedules the flush after the others of this turn have joined
            start = Effect.forkDetach(Effect.andThen(Effect.yieldNow, flushPending))
          }
          // the deferred holds exactly what `effect` produced (or the transaction's SqlError)
          return Effect.andThen(start, Deferred.await(done)) as Effect.Effect<A, E | SqlError>
        })
      return { run }
    })
  )
}
