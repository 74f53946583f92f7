// The engine's tables: created on a new database, upgraded from schema version 2, checked on an existing one.
import * as Effect from "effect/Effect"
import { EngineError } from "../../Errors.ts"
import type { Driver } from "./driver.ts"
import { ENGINE_NAME, orEngineError, type Sql } from "./rows.ts"

/**
 * Creates the tables, or checks that an existing database belongs to this engine and version. On
 * Postgres it runs in one transaction under an advisory lock, so runners that start together on a
 * fresh database do not see each other's half-created tables.
 */
export const migrate = (sql: Sql, d: Driver) =>
  Effect.mapError(d.lockedMigration(createOrCheck(sql, d)), (e) =>
    e._tag === "EngineError" ? e : new EngineError({ reason: `cannot prepare the engine tables: ${e.message}` })
  )

const createOrCheck = Effect.fnUntraced(function* (sql: Sql, d: Driver) {
  const autoId = d.autoId
  const run = (statement: string) => orEngineError(sql.unsafe(statement), "cannot prepare the engine tables")
  const probe = yield* Effect.mapError(
    d.tableNames,
    (e) =>
      new EngineError({
        reason: `cannot read the database (is it a database file, and not corrupt?): ${e.message}${e.cause ? ` (${String(e.cause)})` : ""}`
      })
  )
  const tables = new Set(probe.map((r) => r.n))
  if (tables.has("dex_meta")) {
    const rows = yield* orEngineError(
      sql<{ key: string; value: string }>`SELECT key, value FROM dex_meta`,
      "cannot read dex_meta"
    )
    const meta = new Map(rows.map((r) => [r.key, r.value]))
    if (meta.get("engine") !== ENGINE_NAME) {
      return yield* new EngineError({
        reason: `the database belongs to another program (dex_meta.engine = ${meta.get("engine")})`
      })
    }
    const version = meta.get("schema_version")
    if (version === "2") {
      yield* upgradeFrom2(sql, d)
      return yield* createRetentionMarks(sql, d)
    }
    if (version !== undefined && version === d.readsAlso) {
      // SQLite 3 to 4: the tables stay; values written from now on may be compressed (`values.ts`)
      yield* setVersion(sql, d, "cannot upgrade the engine tables")
      return yield* createRetentionMarks(sql, d)
    }
    if (version !== d.schemaVersion) {
      return yield* new EngineError({
        reason: `the database has engine schema version ${version}; this engine reads version ${d.schemaVersion}`
      })
    }
    // an additive table: a database of this version made before it gets it in place
    return yield* createRetentionMarks(sql, d)
  }
  const foreign = [...tables].filter(
    (t) => !t.startsWith("cluster_") && !t.startsWith("sqlite_") && !t.startsWith("dex_")
  )
  if (foreign.length > 0) {
    return yield* new EngineError({
      reason: `the database is not an engine database: it holds other tables (${foreign.slice(0, 5).join(", ")})`
    })
  }
  // SQLite: a table keyed by its primary key is stored as that key's B-tree (`Driver.keyedTable`)
  const keyed = d.keyedTable
  yield* run(`CREATE TABLE IF NOT EXISTS dex_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)${keyed}`)
  // `version` is the fence: every transition compare-and-sets it (one writer per Flow)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_flows (
    flow_id TEXT PRIMARY KEY, flow_type TEXT NOT NULL, run_id TEXT NOT NULL, status TEXT NOT NULL,
    input TEXT NOT NULL, output TEXT, outputs TEXT, reason TEXT, error_type TEXT, request_id TEXT,
    counters TEXT NOT NULL, version BIGINT NOT NULL, started_at BIGINT NOT NULL, closed_at BIGINT)${keyed}`)
  // attribute values by the Flow version that wrote them; `value` NULL is a delete
  yield* run(`CREATE TABLE IF NOT EXISTS dex_attrs (
    flow_id TEXT NOT NULL, name TEXT NOT NULL, key TEXT NOT NULL, version BIGINT NOT NULL, value TEXT,
    PRIMARY KEY (flow_id, name, key, version))`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_messages (
    flow_id TEXT NOT NULL, id BIGINT NOT NULL, channel TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    published_at BIGINT NOT NULL, PRIMARY KEY (flow_id, id))${keyed}`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_steps (
    flow_id TEXT NOT NULL, step_execution_id TEXT NOT NULL, step_type TEXT NOT NULL, status TEXT NOT NULL,
    input TEXT NOT NULL, options TEXT NOT NULL, from_step_execution_id TEXT, wait TEXT, wait_result TEXT,
    wait_failed INTEGER NOT NULL DEFAULT 0, waiting_since BIGINT, attempt INTEGER NOT NULL DEFAULT 0,
    first_attempt_at BIGINT, retry_at BIGINT, view_version BIGINT, view_channels TEXT, recovery TEXT,
    locks TEXT NOT NULL, created_at BIGINT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (flow_id, step_execution_id))${keyed}`)
  // the recovery sweep's lookup of Flows with running Steps, and a Flow's active Steps (`status IN (...)` and the
  // Flow: one lookup per status); a database made before keeps the index `dex_steps_active (flow_id, status)` too
  yield* run(`CREATE INDEX IF NOT EXISTS dex_steps_status ON dex_steps (status, flow_id)`)
  // `runner`/`epoch`: the runner (and its ownership epoch) that started the attempt
  yield* run(`CREATE TABLE IF NOT EXISTS dex_attempts (
    flow_id TEXT NOT NULL, step_execution_id TEXT NOT NULL, attempt INTEGER NOT NULL, started_at BIGINT NOT NULL,
    output_at BIGINT, heartbeat_at BIGINT, checkpoint TEXT, finished_at BIGINT, outcome TEXT,
    error_type TEXT, detail TEXT, runner TEXT, epoch BIGINT, PRIMARY KEY (flow_id, step_execution_id, attempt))${keyed}`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_history (
    id ${autoId}, flow_id TEXT NOT NULL, at BIGINT NOT NULL, kind TEXT NOT NULL, step_execution_id TEXT,
    attempt INTEGER, data TEXT NOT NULL, runner TEXT)`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_history_flow ON dex_history (flow_id, id)`)
  // replies of requests from other processes, written with their transition: a redelivered request gets
  // the stored reply instead of running twice
  yield* run(`CREATE TABLE IF NOT EXISTS dex_replies (
    flow_id TEXT NOT NULL, request_id TEXT NOT NULL, reply TEXT NOT NULL, at BIGINT NOT NULL,
    PRIMARY KEY (flow_id, request_id))${keyed}`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_stream (
    seq ${autoId}, flow_type TEXT NOT NULL, stream TEXT NOT NULL, flow_id TEXT NOT NULL,
    step_execution_id TEXT NOT NULL, attempt INTEGER NOT NULL, value TEXT NOT NULL, bytes INTEGER NOT NULL, at BIGINT NOT NULL,
    runner TEXT)`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_stream_read ON dex_stream (flow_id, stream, seq)`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_stream_trim ON dex_stream (flow_type, stream, seq)`)
  // one row per trimmed stream: how far it was trimmed (resume tokens before are refused); `used` is the byte
  // count the last trim left, informational (the budget is kept by each runner in memory, see streams.ts)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_stream_usage (
    flow_type TEXT NOT NULL, stream TEXT NOT NULL, used BIGINT NOT NULL, trimmed_through BIGINT NOT NULL,
    PRIMARY KEY (flow_type, stream))${keyed}`)
  yield* createOwners(sql, d)
  yield* createRetentionMarks(sql, d)
  yield* orEngineError(
    sql`INSERT INTO dex_meta (key, value) VALUES ('engine', ${ENGINE_NAME}), ('schema_version', ${d.schemaVersion})
        ON CONFLICT (key) DO NOTHING`,
    "cannot write dex_meta"
  )
})

/**
 * The ownership table: one row per Flow, the epoch of its current owner. An activation claims the Flow by
 * incrementing the epoch (`claimOwnership`); every write on the Flow's behalf checks it (`fenceCheck`).
 */
const createOwners = (sql: Sql, d: Driver) =>
  orEngineError(
    sql.unsafe(`CREATE TABLE IF NOT EXISTS dex_owners (
    flow_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL, runner TEXT NOT NULL, claimed_at BIGINT NOT NULL)${d.keyedTable}`),
    "cannot prepare the engine tables"
  )

/** Sets `dex_meta.schema_version` to the driver's version (the last step of an upgrade). */
const setVersion = (sql: Sql, d: Driver, what: string) =>
  orEngineError(sql`UPDATE dex_meta SET value = ${d.schemaVersion} WHERE key = 'schema_version'`, what)

/**
 * Schema version 2 to 3 (to 4 on SQLite, whose version 4 has the same tables): runner identity on attempts, history
 * and stream messages, and the ownership table.
 */
const upgradeFrom2 = Effect.fnUntraced(function* (sql: Sql, d: Driver) {
  const run = (statement: string) => orEngineError(sql.unsafe(statement), "cannot upgrade the engine tables")
  yield* run(`ALTER TABLE dex_attempts ADD COLUMN runner TEXT`)
  yield* run(`ALTER TABLE dex_attempts ADD COLUMN epoch BIGINT`)
  yield* run(`ALTER TABLE dex_history ADD COLUMN runner TEXT`)
  yield* run(`ALTER TABLE dex_stream ADD COLUMN runner TEXT`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_steps_status ON dex_steps (status, flow_id)`)
  yield* createOwners(sql, d)
  yield* setVersion(sql, d, "cannot upgrade the engine tables")
})

/**
 * Checks, without writing, that the database holds this engine's tables at this schema version (or at one it
 * reads as it is: a SQLite file of version 3).
 */
export const verify = Effect.fnUntraced(function* (sql: Sql, d: Driver) {
  const rows = yield* Effect.mapError(
    sql<{ key: string; value: string }>`SELECT key, value FROM dex_meta`,
    (e) =>
      new EngineError({
        reason: `not an engine database (no readable dex_meta table): ${e.message}${e.cause ? ` (${String(e.cause)})` : ""}`
      })
  )
  const meta = new Map(rows.map((r) => [r.key, r.value]))
  if (meta.get("engine") !== ENGINE_NAME) {
    return yield* new EngineError({
      reason: `the database belongs to another program (dex_meta.engine = ${meta.get("engine")})`
    })
  }
  const version = meta.get("schema_version")
  if (version !== d.schemaVersion && (version === undefined || version !== d.readsAlso)) {
    return yield* new EngineError({
      reason: `the database has engine schema version ${version}; this engine reads version ${d.schemaVersion}`
    })
  }
})

/**
 * Where the retained part of a Flow's records starts, one row per kind (`RetentionKind`): `kept_from` is the
 * position from which the kind's records are complete. Written by the owner's fenced transition that deleted what lies before it; read by
 * `Inspect.retention` and by `Client.readStream` (a resume token before a stream's mark is refused).
 */
const createRetentionMarks = (sql: Sql, d: Driver) =>
  orEngineError(
    sql.unsafe(`CREATE TABLE IF NOT EXISTS dex_retention (
    flow_id TEXT NOT NULL, kind TEXT NOT NULL, kept_from BIGINT NOT NULL, PRIMARY KEY (flow_id, kind))${d.keyedTable}`),
    "cannot prepare the engine tables"
  )
