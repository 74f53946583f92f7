/**
 * Diagnostics that explain the latency figures; they are printed under the table.
 *
 * A Postgres-only diagnostic: how many transactions and row writes one Step transition costs, from the
 * database's own counters (`pg_stat_database` of the benchmark's database). Other backends report their
 * counters to the statistics system at most once a second, so each reading waits 1.5 s first; the idle
 * traffic of the runner (storage polling) is measured over a quiet window and subtracted.
 */
import { StatementSync } from "node:sqlite"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { SqlClient } from "effect/sql"
import { NodeSqlite } from "../src/index.ts"
import { nowMs } from "./flows.ts"

interface Counters {
  readonly commits: number
  readonly inserted: number
  readonly updated: number
  readonly at: number
}

const read = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* Effect.sleep("1500 millis")
  yield* sql`SELECT pg_stat_clear_snapshot()`
  const rows = yield* sql<{
    xact_commit: unknown
    tup_inserted: unknown
    tup_updated: unknown
  }>`SELECT xact_commit, tup_inserted, tup_updated FROM pg_stat_database WHERE datname = current_database()`
  const row = rows[0]!
  return {
    commits: Number(row.xact_commit),
    inserted: Number(row.tup_inserted),
    updated: Number(row.tup_updated),
    at: nowMs()
  } satisfies Counters
})

export interface PgCost {
  /** Committed transactions per transition (autocommitted single statements count as one each). */
  readonly commits: number
  readonly inserted: number
  readonly updated: number
}

/** Runs `run` (which performs `transitions` transitions) between counter readings. */
export const withPgCost = <A, E, R>(transitions: (a: A) => number, run: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const a = yield* read
    yield* Effect.sleep("2 seconds")
    const b = yield* read
    const result = yield* run
    const c = yield* read
    const rate = (k: keyof Omit<Counters, "at">) => (b[k] - a[k]) / (b.at - a.at)
    const n = transitions(result)
    const per = (k: keyof Omit<Counters, "at">) => (c[k] - b[k] - rate(k) * (c.at - b.at)) / n
    return [result, { commits: per("commits"), inserted: per("inserted"), updated: per("updated") }] as const
  })

export interface SqliteCost {
  /** SQL statements executed per transition. */
  readonly statements: number
  /** Commits per transition: explicit COMMITs plus writes outside a transaction (each one commits). */
  readonly commits: number
}

const WRITE = /^\s*(INSERT|UPDATE|DELETE|REPLACE)\b/i
const COMMIT = /^\s*(COMMIT|END)\b/i

/**
 * An SQLite-only diagnostic: counts the statements the engine's connection executes during `run` by wrapping
 * `StatementSync`'s execution methods for that run only (a separate run, so the measured ones are unaffected).
 * Needs the `NodeSqlite` service the embedded engine's layer provides alongside its `SqlClient`.
 */
export const withSqliteCost = <A, E, R>(transitions: (a: A) => number, run: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const service = yield* Effect.serviceOption(NodeSqlite.NodeSqlite)
    if (Option.isNone(service)) return [yield* run, undefined] as const
    const db = service.value.db
    const proto = StatementSync.prototype as unknown as Record<string, (...args: Array<unknown>) => unknown>
    const methods = ["run", "all", "get", "iterate"] as const
    const originals = methods.map((m) => proto[m]!)
    let statements = 0
    let commits = 0
    const install = Effect.sync(() =>
      methods.forEach((m, i) => {
        const original = originals[i]!
        proto[m] = function (this: StatementSync, ...args: Array<unknown>) {
          statements++
          const text = this.sourceSQL
          if (COMMIT.test(text) || (WRITE.test(text) && !db.isTransaction)) commits++
          return original.apply(this, args)
        }
      })
    )
    const uninstall = Effect.sync(() =>
      methods.forEach((m, i) => {
        proto[m] = originals[i]!
      })
    )
    const result = yield* Effect.acquireUseRelease(
      install,
      () => run,
      () => uninstall
    )
    const n = transitions(result)
    return [result, { statements: statements / n, commits: commits / n } satisfies SqliteCost] as const
  })
