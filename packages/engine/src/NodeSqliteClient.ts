/**
 * An `effect/sql` SqlClient over Node's built-in `node:sqlite` (`DatabaseSync`), used by the
 * embedded engine while no official SQLite driver loads with effect 4.1.0. One connection,
 * serialized by a semaphore (effect's own `SqlClient.makeSqliteAcquirers`), WAL, configurable
 * `synchronous`, and an optional exclusive file lock.
 *
 * @since 0.1.0
 */
import { DatabaseSync, type StatementSync } from "node:sqlite"
import { Context, Effect, Layer, Semaphore, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import type { SqlConnection } from "effect/sql"
import { SqlClient, SqlError, Statement } from "effect/sql"

/** Options of the SQLite client. */
export interface Config {
  /** The database file; `":memory:"` for a throwaway database. */
  readonly filename: string
  /** `PRAGMA synchronous`; default `FULL` (durable on power loss). */
  readonly synchronous?: "OFF" | "NORMAL" | "FULL" | "EXTRA" | undefined
  /** `PRAGMA secure_delete` (default on): deleted rows are zeroed in the file, not left in free space. */
  readonly secureDelete?: boolean | undefined
  /**
   * The page cache the connection may keep, in KiB (`PRAGMA cache_size = -N`); default 65,536 (64 MiB; SQLite's
   * own default is 2 MiB). It grows only with the pages read, so a small file keeps a small cache. A positive
   * integer.
   */
  readonly cacheSizeKiB?: number | undefined
  /** Keep the rollback journal instead of WAL. */
  readonly disableWAL?: boolean | undefined
  /** How long a statement waits for a lock held by another connection; default 5000 ms. */
  readonly busyTimeoutMs?: number | undefined
  /** Prepared statements kept; default 200. */
  readonly prepareCacheSize?: number | undefined
  /** `PRAGMA locking_mode=EXCLUSIVE`, taken at open: one process per file; the lock dies with the process. */
  readonly exclusive?: boolean | undefined
  /** Open read-only (inspection tools); no pragmas that write are issued. */
  readonly readOnly?: boolean | undefined
  /** Debug hook called with every statement. */
  readonly onStatement?: ((sql: string) => void) | undefined
}

/** The raw `DatabaseSync` behind the client, for tools and benchmarks. */
export const NodeSqlite = Context.Service<{ readonly db: DatabaseSync; readonly config: Config }>(
  "@durable-agent/engine/NodeSqlite"
)

const toError = (cause: any, message: string, operation: string) => {
  // node:sqlite puts the SQLite result code on `errcode`; the classifier reads `errno`
  if (cause && typeof cause.errcode === "number" && !("errno" in cause)) cause.errno = cause.errcode
  const detail = cause instanceof Error && !message.includes(cause.message) ? `: ${cause.message}` : ""
  return new SqlError.SqlError({
    reason: SqlError.classifySqliteError(cause, { message: `${message}${detail}`, operation })
  })
}
// node:sqlite rejects undefined and silently binds Date as NULL
const bind = (params: ReadonlyArray<unknown>): Array<any> =>
  params.map((p) => (p === undefined ? null : p instanceof Date ? p.toISOString() : p))

/** The page cache a connection keeps unless told otherwise (KiB). */
export const DEFAULT_CACHE_SIZE_KIB = 64 * 1024

/** Opens the database and builds the SqlClient; the connection closes with the scope. */
export const make = (config: Config) =>
  Effect.gen(function* () {
    const cacheSizeKiB = config.cacheSizeKiB ?? DEFAULT_CACHE_SIZE_KIB
    if (!Number.isSafeInteger(cacheSizeKiB) || cacheSizeKiB <= 0) {
      return yield* Effect.fail(
        toError(
          new Error(`cacheSizeKiB must be a positive integer, got ${String(config.cacheSizeKiB)}`),
          "Invalid SQLite options",
          "open"
        )
      )
    }
    // Opening, the pragmas and the exclusive lock fail here (not later) on a locked, corrupt or foreign file.
    const db = yield* Effect.try({
      try: () => {
        const db = new DatabaseSync(config.filename, config.readOnly ? { readOnly: true } : {})
        if (config.readOnly) {
          db.exec(`PRAGMA busy_timeout = ${config.busyTimeoutMs ?? 5000}`)
          return db
        }
        try {
          if (config.exclusive) db.exec("PRAGMA locking_mode = EXCLUSIVE")
          // with an exclusive lock, another holder means "fail now", not "wait"
          db.exec(`PRAGMA busy_timeout = ${config.exclusive ? 0 : (config.busyTimeoutMs ?? 5000)}`)
          // a new file gives its free pages back (the engine's retention passes run `incremental_vacuum`); on a
          // file that already holds tables this does nothing until a VACUUM
          db.exec("PRAGMA auto_vacuum = INCREMENTAL")
          if (config.disableWAL !== true) db.exec("PRAGMA journal_mode = WAL")
          db.exec(`PRAGMA synchronous = ${config.synchronous ?? "FULL"}`)
          // deleted content is overwritten with zeros, so a deleted (hard-delete) value leaves the file
          if (config.secureDelete !== false) db.exec("PRAGMA secure_delete = ON")
          // SQLite's default is 2 MiB: 100 Flows or sessions at once used 2-4% less CPU a turn with 64 MiB (paired
          // runs; the cause, fewer page reads from the OS, is not measured)
          db.exec(`PRAGMA cache_size = -${cacheSizeKiB}`)
          if (config.exclusive) {
            // take the lock now and fail at once when another process holds the file
            db.exec("BEGIN IMMEDIATE; COMMIT")
            db.exec(`PRAGMA busy_timeout = ${config.busyTimeoutMs ?? 5000}`)
          }
        } catch (e) {
          db.close()
          throw e
        }
        return db
      },
      catch: (cause) => {
        const detail = cause instanceof Error ? cause.message : String(cause)
        const hint = /locked|busy/i.test(detail)
          ? " (another process holds this file; the embedded engine runs one process per file)"
          : /not a database|malformed|corrupt/i.test(detail)
            ? " (the file is not a SQLite database, or it is corrupt)"
            : ""
        return toError(cause, `Cannot open SQLite database ${config.filename}: ${detail}${hint}`, "open")
      }
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => db.isOpen && db.close()))

    // insertion-ordered, least recently used first, approximately: a hit among the newer half of the moves stays
    // where it is, so the statements every transition runs do not each cost a delete and an insert
    const cache = new Map<string, { readonly statement: StatementSync; used: number }>()
    let clock = 0
    const prepare = (sql: string): StatementSync => {
      const hit = cache.get(sql)
      if (hit !== undefined) {
        if (clock - hit.used > cache.size / 2) {
          cache.delete(sql)
          hit.used = ++clock
          cache.set(sql, hit)
        }
        return hit.statement
      }
      const statement = db.prepare(sql)
      cache.set(sql, { statement, used: ++clock })
      if (cache.size > (config.prepareCacheSize ?? 200)) cache.delete(cache.keys().next().value!)
      return statement
    }
    type Mode = "rows" | "values" | "raw"
    const run = (sql: string, params: ReadonlyArray<unknown>, mode: Mode, prepared: boolean) =>
      Effect.withFiber<any, SqlError.SqlError>((fiber) => {
        try {
          config.onStatement?.(sql)
          const s = prepared ? prepare(sql) : db.prepare(sql)
          s.setReadBigInts(fiber.getRef(SqlClient.SafeIntegers))
          s.setReturnArrays(mode === "values")
          if (s.columns().length > 0) return Effect.succeed(s.all(...bind(params)))
          const r = s.run(...bind(params))
          return Effect.succeed(mode === "raw" ? r : [])
        } catch (cause) {
          return Effect.fail(toError(cause, "Failed to execute statement", "execute"))
        }
      })
    type Rows = (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
    const withRows = (e: Effect.Effect<any, SqlError.SqlError>, t: Rows) => (t ? Effect.map(e, t) : e)

    const connection: SqlConnection.Connection = {
      execute: (sql, params, t) => withRows(run(sql, params, "rows", true), t),
      executeUnprepared: (sql, params, t) => withRows(run(sql, params, "rows", false), t),
      executeRaw: (sql, params) => run(sql, params, "raw", true),
      executeValues: (sql, params) => run(sql, params, "values", true),
      executeValuesUnprepared: (sql, params) => run(sql, params, "values", false),
      // Rows come lazily from StatementSync.iterate(); the caller's acquirer holds the connection for the stream's scope.
      executeStream: (sql, params, t) =>
        Stream.suspend(() => {
          try {
            const rows = Stream.fromIteratorSucceed(
              db.prepare(sql).iterate(...bind(params)) as IterableIterator<any>,
              256
            )
            // the row transform is typed for non-empty arrays, and a stream chunk is never empty
            return t ? Stream.mapArray(rows, (chunk) => t(chunk) as any) : rows
          } catch (cause) {
            // errors thrown while iterating stay defects
            return Stream.fail(toError(cause, "Failed to stream statement", "stream"))
          }
        })
    }

    const semaphore = yield* Semaphore.make(1)
    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore,
      isTransaction: () => db.isTransaction
    })
    const client = yield* SqlClient.make({
      ...acquirers,
      compiler: Statement.makeCompilerSqlite(),
      driver: "sqlite-node-builtin",
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      spanAttributes: [["db.system.name", "sqlite"]]
    })
    return { client, db }
  })

/** The SqlClient (and `NodeSqlite`) as a layer. */
export const layer = (config: Config) =>
  Layer.effectContext(
    Effect.map(make(config), ({ client, db }) =>
      Context.make(SqlClient.SqlClient, client).pipe(Context.add(NodeSqlite, { db, config }))
    )
  ).pipe(Layer.provide(Reactivity.layer))
