// The engine's own SQL tables (SQLite and Postgres) and the queries over them.
import * as Effect from "effect/Effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { EngineError } from "../Errors.ts"
import { channelKey, type FlowState, type StoredMessage } from "./state.ts"

export const SCHEMA_VERSION = "1"
export const ENGINE_NAME = "durable-agent-engine"

export type Sql = SqlClient.SqlClient

export const orEngineError = <A, R>(effect: Effect.Effect<A, SqlError, R>, what: string) =>
  Effect.mapError(
    effect,
    (e) => new EngineError({ reason: `${what}: ${e.message}${e.cause ? ` (${String(e.cause)})` : ""}` })
  )

/**
 * Creates the tables, or checks that an existing database belongs to this engine and version. On
 * Postgres it runs in one transaction under an advisory lock, so runners that start together on a
 * fresh database do not see each other's half-created tables.
 */
export const migrate = Effect.fnUntraced(function* () {
  const sql = yield* SqlClient.SqlClient
  const locked = sql.onDialectOrElse({
    pg: () => (effect: Effect.Effect<void, EngineError>) =>
      sql.withTransaction(
        Effect.andThen(
          orEngineError(sql`SELECT pg_advisory_xact_lock(7264011377)`, "cannot lock the engine tables"),
          effect
        )
      ),
    orElse: () => (effect: Effect.Effect<void, EngineError>) => effect
  })
  yield* Effect.mapError(locked(createOrCheck(sql)), (e) =>
    e._tag === "EngineError" ? e : new EngineError({ reason: `cannot prepare the engine tables: ${e.message}` })
  )
})

const createOrCheck = Effect.fnUntraced(function* (sql: Sql) {
  const autoId = sql.onDialectOrElse({
    pg: () => "BIGSERIAL PRIMARY KEY",
    orElse: () => "INTEGER PRIMARY KEY AUTOINCREMENT"
  })
  const run = (statement: string) => orEngineError(sql.unsafe(statement), "cannot prepare the engine tables")
  const probe = yield* Effect.mapError(
    sql.onDialectOrElse({
      pg: () =>
        sql<{ n: string }>`SELECT table_name AS n FROM information_schema.tables WHERE table_schema = current_schema()`,
      orElse: () => sql<{ n: string }>`SELECT name AS n FROM sqlite_master WHERE type = 'table'`
    }),
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
    if (meta.get("schema_version") !== SCHEMA_VERSION) {
      return yield* new EngineError({
        reason: `the database has engine schema version ${meta.get("schema_version")}; this engine reads version ${SCHEMA_VERSION}`
      })
    }
    return
  }
  const foreign = [...tables].filter(
    (t) => !t.startsWith("cluster_") && !t.startsWith("sqlite_") && !t.startsWith("dex_")
  )
  if (foreign.length > 0) {
    return yield* new EngineError({
      reason: `the database is not an engine database: it holds other tables (${foreign.slice(0, 5).join(", ")})`
    })
  }
  yield* run(`CREATE TABLE IF NOT EXISTS dex_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_flows (
    flow_id TEXT PRIMARY KEY, flow_type TEXT NOT NULL, run_id TEXT NOT NULL, status TEXT NOT NULL,
    input TEXT NOT NULL, output TEXT, reason TEXT, request_id TEXT, counters TEXT NOT NULL,
    started_at BIGINT NOT NULL, closed_at BIGINT)`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_attrs (
    flow_id TEXT NOT NULL, name TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (flow_id, name, key))`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_messages (
    id ${autoId}, flow_id TEXT NOT NULL, channel TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    published_at BIGINT NOT NULL)`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_messages_flow ON dex_messages (flow_id, channel, key, id)`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_steps (
    flow_id TEXT NOT NULL, seid TEXT NOT NULL, step_type TEXT NOT NULL, status TEXT NOT NULL,
    input TEXT NOT NULL, options TEXT NOT NULL, from_seid TEXT, wait TEXT, wait_result TEXT,
    wait_failed INTEGER NOT NULL DEFAULT 0, waiting_since BIGINT, attempt INTEGER NOT NULL DEFAULT 0,
    first_attempt_at BIGINT, snapshot TEXT, recovery TEXT, locks TEXT NOT NULL, created_at BIGINT NOT NULL,
    seq BIGINT NOT NULL, PRIMARY KEY (flow_id, seid))`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_steps_active ON dex_steps (flow_id, status)`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_attempts (
    flow_id TEXT NOT NULL, seid TEXT NOT NULL, attempt INTEGER NOT NULL, started_at BIGINT NOT NULL,
    output_at BIGINT, heartbeat_at BIGINT, checkpoint TEXT, finished_at BIGINT, outcome TEXT,
    error_type TEXT, detail TEXT, PRIMARY KEY (flow_id, seid, attempt))`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_history (
    id ${autoId}, flow_id TEXT NOT NULL, at BIGINT NOT NULL, kind TEXT NOT NULL, seid TEXT,
    attempt INTEGER, data TEXT NOT NULL)`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_history_flow ON dex_history (flow_id, id)`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_stream (
    seq ${autoId}, flow_type TEXT NOT NULL, stream TEXT NOT NULL, flow_id TEXT NOT NULL,
    seid TEXT NOT NULL, attempt INTEGER NOT NULL, value TEXT NOT NULL, bytes INTEGER NOT NULL, at BIGINT NOT NULL)`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_stream_read ON dex_stream (flow_id, stream, seq)`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_stream_trim ON dex_stream (flow_type, stream, seq)`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_stream_usage (
    flow_type TEXT NOT NULL, stream TEXT NOT NULL, used BIGINT NOT NULL, trimmed_through BIGINT NOT NULL,
    PRIMARY KEY (flow_type, stream))`)
  yield* orEngineError(
    sql`INSERT INTO dex_meta (key, value) VALUES ('engine', ${ENGINE_NAME}), ('schema_version', ${SCHEMA_VERSION})
        ON CONFLICT (key) DO NOTHING`,
    "cannot write dex_meta"
  )
})

// ------------------------------------------------------------------------------------------------
// Rows
// ------------------------------------------------------------------------------------------------

export interface FlowRow {
  readonly flow_id: string
  readonly flow_type: string
  readonly run_id: string
  readonly status: string
  readonly input: string
  readonly output: string | null
  readonly reason: string | null
  readonly request_id: string | null
  readonly counters: string
  readonly started_at: number
  readonly closed_at: number | null
}

export interface StepRow {
  readonly flow_id: string
  readonly seid: string
  readonly step_type: string
  readonly status: StepStatus
  readonly input: string
  readonly options: string
  readonly from_seid: string | null
  readonly wait: string | null
  readonly wait_result: string | null
  readonly wait_failed: number
  readonly waiting_since: number | null
  readonly attempt: number
  readonly first_attempt_at: number | null
  readonly snapshot: string | null
  readonly recovery: string | null
  readonly locks: string
  readonly created_at: number
  readonly seq: number
}

/**
 * `waiting` (wait pending), `ready` (satisfied, waiting for locks), `running` (dispatched; the
 * current attempt is `attempt`), and the final `completed`, `failed`, `cancelled`.
 */
export type StepStatus = "waiting" | "ready" | "running" | "completed" | "failed" | "cancelled"
export const ACTIVE_STEP_STATUSES: ReadonlyArray<StepStatus> = ["waiting", "ready", "running"]

export interface AttemptRow {
  readonly flow_id: string
  readonly seid: string
  readonly attempt: number
  readonly started_at: number
  readonly output_at: number | null
  readonly heartbeat_at: number | null
  readonly checkpoint: string | null
  readonly finished_at: number | null
  readonly outcome: string | null
  readonly error_type: string | null
  readonly detail: string | null
}

const num = (v: unknown): number => (v === null || v === undefined ? (v as any) : Number(v))

export const normalizeFlow = (r: any): FlowRow => ({
  ...r,
  started_at: num(r.started_at),
  closed_at: r.closed_at === null ? null : num(r.closed_at)
})

export const normalizeStep = (r: any): StepRow => ({
  ...r,
  wait_failed: num(r.wait_failed),
  waiting_since: r.waiting_since === null ? null : num(r.waiting_since),
  attempt: num(r.attempt),
  first_attempt_at: r.first_attempt_at === null ? null : num(r.first_attempt_at),
  created_at: num(r.created_at),
  seq: num(r.seq)
})

export const normalizeAttempt = (r: any): AttemptRow => ({
  ...r,
  attempt: num(r.attempt),
  started_at: num(r.started_at),
  output_at: r.output_at === null ? null : num(r.output_at),
  heartbeat_at: r.heartbeat_at === null ? null : num(r.heartbeat_at),
  finished_at: r.finished_at === null ? null : num(r.finished_at)
})

export const loadFlow = (sql: Sql, flowId: string) =>
  Effect.map(sql`SELECT * FROM dex_flows WHERE flow_id = ${flowId}`, (rows) =>
    rows.length === 0 ? undefined : normalizeFlow(rows[0])
  )

export const loadStep = (sql: Sql, flowId: string, seid: string) =>
  Effect.map(sql`SELECT * FROM dex_steps WHERE flow_id = ${flowId} AND seid = ${seid}`, (rows) =>
    rows.length === 0 ? undefined : normalizeStep(rows[0])
  )

export const loadAttempt = (sql: Sql, flowId: string, seid: string, attempt: number) =>
  Effect.map(
    sql`SELECT * FROM dex_attempts WHERE flow_id = ${flowId} AND seid = ${seid} AND attempt = ${attempt}`,
    (rows) => (rows.length === 0 ? undefined : normalizeAttempt(rows[0]))
  )

/** Loads every attribute and every queued message of a Flow. */
export const loadState = Effect.fnUntraced(function* (sql: Sql, flowId: string) {
  const attrs = yield* sql<{ name: string; key: string; value: string }>`
    SELECT name, key, value FROM dex_attrs WHERE flow_id = ${flowId}`
  const messages = yield* sql<{ id: unknown; channel: string; key: string; value: string }>`
    SELECT id, channel, key, value FROM dex_messages WHERE flow_id = ${flowId} ORDER BY id`
  const state: FlowState = { attrs: new Map(), channels: new Map() }
  for (const a of attrs) {
    let m = state.attrs.get(a.name)
    if (m === undefined) {
      m = new Map()
      state.attrs.set(a.name, m)
    }
    m.set(a.key, a.value)
  }
  for (const msg of messages) {
    const k = channelKey(msg.channel, msg.key)
    const list = (state.channels.get(k) as Array<StoredMessage> | undefined) ?? []
    list.push({ id: String(msg.id), value: msg.value })
    state.channels.set(k, list)
  }
  return state
})

export const appendHistory = (
  sql: Sql,
  flowId: string,
  at: number,
  kind: string,
  seid: string | null,
  attempt: number | null,
  data: unknown
) =>
  sql`INSERT INTO dex_history (flow_id, at, kind, seid, attempt, data)
      VALUES (${flowId}, ${at}, ${kind}, ${seid}, ${attempt}, ${JSON.stringify(data ?? {})})`

/** Checks, without writing, that the database holds this engine's tables at this schema version. */
export const verify = Effect.fnUntraced(function* () {
  const sql = yield* SqlClient.SqlClient
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
  if (meta.get("schema_version") !== SCHEMA_VERSION) {
    return yield* new EngineError({
      reason: `the database has engine schema version ${meta.get("schema_version")}; this engine reads version ${SCHEMA_VERSION}`
    })
  }
})
