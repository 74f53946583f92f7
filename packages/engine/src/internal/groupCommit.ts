// Group commit: transitions of different Flows that are ready in the same event-loop turn share one
// SQLite transaction (one fsync), each inside its own savepoint, so one that fails or is fenced rolls back
// alone. Postgres commits each transition on its own pooled connection instead.
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"

interface Pending {
  readonly effect: Effect.Effect<unknown, unknown>
  readonly done: Deferred.Deferred<unknown, unknown>
}

/** Runs one transition's writes in a transaction, possibly shared with other Flows' transitions. */
export class GroupCommit extends Context.Service<
  GroupCommit,
  { readonly run: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError> }
>()("@durable-agent/engine/GroupCommit") {
  static readonly layer = Layer.effect(
    GroupCommit,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const grouped = sql.onDialectOrElse({ sqlite: () => true, orElse: () => false })
      if (!grouped) {
        return { run: <A, E>(effect: Effect.Effect<A, E>) => sql.withTransaction(effect) }
      }
      let pending: Array<Pending> = []
      const flush = Effect.gen(function* () {
        const batch = pending
        pending = []
        if (batch.length === 1) {
          const only = batch[0]!
          const exit = yield* Effect.exit(sql.withTransaction(only.effect))
          yield* Deferred.done(only.done, exit)
          return
        }
        const outer = yield* Effect.exit(
          sql.withTransaction(Effect.forEach(batch, (p) => Effect.exit(sql.withTransaction(p.effect))))
        )
        if (Exit.isFailure(outer)) {
          for (const p of batch) yield* Deferred.done(p.done, outer)
          return
        }
        for (let i = 0; i < batch.length; i++) yield* Deferred.done(batch[i]!.done, outer.value[i]!)
      })
      const run = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | SqlError> =>
        Effect.suspend(() => {
          const done = Deferred.makeUnsafe<unknown, unknown>()
          pending.push({ effect, done })
          // the first transition of a group schedules the flush after the others of this turn have joined
          const start = pending.length === 1 ? Effect.forkDetach(Effect.andThen(Effect.yieldNow, flush)) : Effect.void
          // the deferred holds exactly what `effect` produced (or the transaction's SqlError)
          return Effect.andThen(start, Deferred.await(done)) as Effect.Effect<A, E | SqlError>
        })
      return { run }
    })
  )
}
