// Where SQLite and Postgres differ: each driver (`sqlite.ts`, `pg.ts`) gives the store its own statements and
// fragments, chosen once when the store is made (`EngineStore.make`), never per call.
import type * as Effect from "effect/Effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import type { Fragment } from "effect/sql/Statement"
import type { EngineError } from "../../Errors.ts"
import { make as makePg } from "./pg.ts"
import type { Fence } from "./rows.ts"
import { make as makeSqlite } from "./sqlite.ts"
import type { ValueCodec } from "./values.ts"

/** The SQL differences of one database. */
export interface Driver {
  readonly dialect: "sqlite" | "pg"
  /**
   * Whether a transition of an existing Flow checks its owner in the WHERE of its Flow row's update (SQLite: one
   * writer at a time, no row locks, one statement fewer) instead of a first statement of its own (Postgres: that
   * statement share-locks the owner row, which orders the transition against a claim).
   */
  readonly ownerCheckInFlowUpdate: boolean
  /** The column type of an auto-incremented primary key. */
  readonly autoId: string
  /**
   * The clause that ends a new table's `CREATE TABLE` statement when the table has a primary key of its own (not
   * an integer rowid). On SQLite, `WITHOUT ROWID`: the table is stored as its primary key's B-tree, instead of a
   * rowid B-tree and an index B-tree that repeats the key's columns. That halves the bytes of a table like
   * `dex_replies` (a key and a few bytes per row), and a table takes one page of the file at least instead of two
   * (an embedded engine's file has a page per table and index even when they hold almost nothing). Not for
   * `dex_attrs`, the table of large values (a session's message chunks): a `WITHOUT ROWID` row keeps at most about a
   * quarter of a page on its B-tree page, a rowid row up to the whole page, so rows of 1-4 KiB would take an
   * overflow page each; the other tables' rows are mostly a few hundred bytes (a larger value works the same, in
   * overflow pages). A table made before keeps its layout (the statements are the same). Empty on Postgres.
   */
  readonly keyedTable: string
  /**
   * How attribute values are stored (`values.ts`): on SQLite a large value compressed, as a BLOB; on Postgres as
   * TEXT (TOAST compresses it).
   */
  readonly values: ValueCodec
  /**
   * The schema version this engine writes in `dex_meta` and reads: `SCHEMA_VERSION` on Postgres; on SQLite one
   * more, "4", the version-3 tables with large attribute values compressed (`values`), so that an engine of an
   * earlier release refuses the file at start instead of reading a compressed value as text.
   */
  readonly schemaVersion: string
  /**
   * An earlier schema version whose database this engine reads as it is and upgrades by its version number alone
   * (SQLite: "3", whose values are all TEXT); none on Postgres.
   */
  readonly readsAlso: string | undefined
  /** The names of the database's tables (`n`). */
  readonly tableNames: Effect.Effect<ReadonlyArray<{ readonly n: string }>, SqlError>
  /**
   * Runs the migration: on Postgres in one transaction under an advisory lock, so runners that start together
   * on a fresh database do not see each other's half-created tables.
   */
  readonly lockedMigration: (effect: Effect.Effect<void, EngineError>) => Effect.Effect<void, EngineError | SqlError>
  /** The row lock of the owner check (`FOR SHARE` on Postgres; SQLite has one writer at a time). */
  readonly forShare: Fragment
  /** The first statement of a fenced transaction: a row when `fence` still owns the Flow. */
  readonly fenceCheck: (flowId: string, fence: Fence) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
  /** effect/cluster's `processed` flag as a literal (`TRUE` / `1`). */
  readonly processedTrue: Fragment
  /** Run after a retention pass: SQLite gives free pages back to the file system. */
  readonly afterRetention: Effect.Effect<void, SqlError>
  /** Tells other processes a Flow committed, in a transaction (Postgres NOTIFY, delivered after COMMIT). */
  readonly notifyCommit: (flowId: string) => Effect.Effect<void, SqlError>
  /** Whether this transaction may trim the stream (Postgres: one runner at a time, an advisory lock). */
  readonly mayTrimStream: (flowType: string, stream: string) => Effect.Effect<boolean, SqlError>
}

/** The driver of a client's dialect (Postgres, or SQLite for every other). */
export const driverOf = (sql: SqlClient.SqlClient): Driver =>
  sql.onDialectOrElse({ pg: () => makePg(sql), orElse: () => makeSqlite(sql) })
