// The engine's own SQL tables (SQLite and Postgres) and the queries over them.
import * as Snowflake from "effect/cluster/Snowflake"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { EngineError } from "../Errors.ts"
import { notifyOthers } from "./feed.ts"
import { channelKey, type FlowState, type StoredMessage } from "./state.ts"

export const SCHEMA_VERSION = "3"
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
    if (meta.get("schema_version") === "2") {
      yield* upgradeFrom2(sql)
      return yield* createRetentionMarks(sql)
    }
    if (meta.get("schema_version") !== SCHEMA_VERSION) {
      return yield* new EngineError({
        reason: `the database has engine schema version ${meta.get("schema_version")}; this engine reads version ${SCHEMA_VERSION}`
      })
    }
    // an additive table: a database of this version made before it gets it in place
    return yield* createRetentionMarks(sql)
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
  // `version` is the fence: every transition compare-and-sets it (one writer per Flow)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_flows (
    flow_id TEXT PRIMARY KEY, flow_type TEXT NOT NULL, run_id TEXT NOT NULL, status TEXT NOT NULL,
    input TEXT NOT NULL, output TEXT, outputs TEXT, reason TEXT, error_type TEXT, request_id TEXT,
    counters TEXT NOT NULL, version BIGINT NOT NULL, started_at BIGINT NOT NULL, closed_at BIGINT)`)
  // attribute values by the Flow version that wrote them; `value` NULL is a delete
  yield* run(`CREATE TABLE IF NOT EXISTS dex_attrs (
    flow_id TEXT NOT NULL, name TEXT NOT NULL, key TEXT NOT NULL, version BIGINT NOT NULL, value TEXT,
    PRIMARY KEY (flow_id, name, key, version))`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_messages (
    flow_id TEXT NOT NULL, id BIGINT NOT NULL, channel TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    published_at BIGINT NOT NULL, PRIMARY KEY (flow_id, id))`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_steps (
    flow_id TEXT NOT NULL, step_execution_id TEXT NOT NULL, step_type TEXT NOT NULL, status TEXT NOT NULL,
    input TEXT NOT NULL, options TEXT NOT NULL, from_step_execution_id TEXT, wait TEXT, wait_result TEXT,
    wait_failed INTEGER NOT NULL DEFAULT 0, waiting_since BIGINT, attempt INTEGER NOT NULL DEFAULT 0,
    first_attempt_at BIGINT, retry_at BIGINT, view_version BIGINT, view_channels TEXT, recovery TEXT,
    locks TEXT NOT NULL, created_at BIGINT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (flow_id, step_execution_id))`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_steps_active ON dex_steps (flow_id, status)`)
  // the recovery sweep's lookup of Flows with running Steps
  yield* run(`CREATE INDEX IF NOT EXISTS dex_steps_status ON dex_steps (status, flow_id)`)
  // `runner`/`epoch`: the runner (and its ownership epoch) that started the attempt
  yield* run(`CREATE TABLE IF NOT EXISTS dex_attempts (
    flow_id TEXT NOT NULL, step_execution_id TEXT NOT NULL, attempt INTEGER NOT NULL, started_at BIGINT NOT NULL,
    output_at BIGINT, heartbeat_at BIGINT, checkpoint TEXT, finished_at BIGINT, outcome TEXT,
    error_type TEXT, detail TEXT, runner TEXT, epoch BIGINT, PRIMARY KEY (flow_id, step_execution_id, attempt))`)
  yield* run(`CREATE TABLE IF NOT EXISTS dex_history (
    id ${autoId}, flow_id TEXT NOT NULL, at BIGINT NOT NULL, kind TEXT NOT NULL, step_execution_id TEXT,
    attempt INTEGER, data TEXT NOT NULL, runner TEXT)`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_history_flow ON dex_history (flow_id, id)`)
  // replies of requests from other processes, written with their transition: a redelivered request gets
  // the stored reply instead of running twice
  yield* run(`CREATE TABLE IF NOT EXISTS dex_replies (
    flow_id TEXT NOT NULL, request_id TEXT NOT NULL, reply TEXT NOT NULL, at BIGINT NOT NULL,
    PRIMARY KEY (flow_id, request_id))`)
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
    PRIMARY KEY (flow_type, stream))`)
  yield* createOwners(sql)
  yield* createRetentionMarks(sql)
  yield* orEngineError(
    sql`INSERT INTO dex_meta (key, value) VALUES ('engine', ${ENGINE_NAME}), ('schema_version', ${SCHEMA_VERSION})
        ON CONFLICT (key) DO NOTHING`,
    "cannot write dex_meta"
  )
})

/**
 * The ownership table: one row per Flow, the epoch of its current owner. An activation claims the Flow by
 * incrementing the epoch (`claimOwnership`); every write on the Flow's behalf checks it (`fenceCheck`).
 */
const createOwners = (sql: Sql) =>
  orEngineError(
    sql.unsafe(`CREATE TABLE IF NOT EXISTS dex_owners (
    flow_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL, runner TEXT NOT NULL, claimed_at BIGINT NOT NULL)`),
    "cannot prepare the engine tables"
  )

/** Schema version 2 to 3: runner identity on attempts, history and stream messages, and the ownership table. */
const upgradeFrom2 = Effect.fnUntraced(function* (sql: Sql) {
  const run = (statement: string) => orEngineError(sql.unsafe(statement), "cannot upgrade the engine tables")
  yield* run(`ALTER TABLE dex_attempts ADD COLUMN runner TEXT`)
  yield* run(`ALTER TABLE dex_attempts ADD COLUMN epoch BIGINT`)
  yield* run(`ALTER TABLE dex_history ADD COLUMN runner TEXT`)
  yield* run(`ALTER TABLE dex_stream ADD COLUMN runner TEXT`)
  yield* run(`CREATE INDEX IF NOT EXISTS dex_steps_status ON dex_steps (status, flow_id)`)
  yield* createOwners(sql)
  yield* orEngineError(
    sql`UPDATE dex_meta SET value = ${SCHEMA_VERSION} WHERE key = 'schema_version'`,
    "cannot upgrade the engine tables"
  )
})

// ------------------------------------------------------------------------------------------------
// Rows
// ------------------------------------------------------------------------------------------------

/**
 * The stored outcome of a failed attempt that never reached the Step's code (its definition was missing);
 * the inspection API reports it as `failure`.
 */
export const NOT_RUN = "not_run"

export interface FlowRow {
  readonly flow_id: string
  readonly flow_type: string
  readonly run_id: string
  readonly status: string
  readonly input: string
  readonly output: string | null
  /** Every graceful completion's output, as a JSON array of JSON texts (parallel branches may each complete). */
  readonly outputs: string | null
  readonly reason: string | null
  /** What failed a failed Flow: the failing Step's error type, `ForceFail`, `WaitForFailed` or `Stopped`. */
  readonly error_type: string | null
  readonly request_id: string | null
  readonly counters: string
  readonly version: number
  readonly started_at: number
  readonly closed_at: number | null
}

export interface StepRow {
  readonly flow_id: string
  readonly step_execution_id: string
  readonly step_type: string
  readonly status: StepStatus
  readonly input: string
  readonly options: string
  readonly from_step_execution_id: string | null
  readonly wait: string | null
  readonly wait_result: string | null
  readonly wait_failed: number
  readonly waiting_since: number | null
  readonly attempt: number
  readonly first_attempt_at: number | null
  /** When the current attempt may start (a retry's backoff); null once it has started. */
  readonly retry_at: number | null
  /** The Flow version this execution reads (set when it is dispatched). */
  readonly view_version: number | null
  /** Queued message counts (channel key -> count) as of `view_version`, for `channelSize`. */
  readonly view_channels: string | null
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
  readonly step_execution_id: string
  readonly attempt: number
  readonly started_at: number
  readonly output_at: number | null
  readonly heartbeat_at: number | null
  readonly checkpoint: string | null
  readonly finished_at: number | null
  readonly outcome: string | null
  readonly error_type: string | null
  readonly detail: string | null
  /** The runner that started this attempt (its process identity), null for rows of schema version 2. */
  readonly runner: string | null
  /** The ownership epoch under which the attempt was started. */
  readonly epoch: number | null
}

/** Postgres returns BIGINT columns as strings; every numeric column goes through this. */
const num = (v: unknown): number => Number(v)

export const normalizeFlow = (r: any): FlowRow => ({
  ...r,
  version: num(r.version),
  started_at: num(r.started_at),
  closed_at: r.closed_at === null ? null : num(r.closed_at)
})

export const normalizeStep = (r: any): StepRow => ({
  ...r,
  wait_failed: num(r.wait_failed),
  waiting_since: r.waiting_since === null ? null : num(r.waiting_since),
  attempt: num(r.attempt),
  first_attempt_at: r.first_attempt_at === null ? null : num(r.first_attempt_at),
  retry_at: r.retry_at === null ? null : num(r.retry_at),
  view_version: r.view_version === null ? null : num(r.view_version),
  created_at: num(r.created_at),
  seq: num(r.seq)
})

export const normalizeAttempt = (r: any): AttemptRow => ({
  ...r,
  attempt: num(r.attempt),
  started_at: num(r.started_at),
  output_at: r.output_at === null ? null : num(r.output_at),
  heartbeat_at: r.heartbeat_at === null ? null : num(r.heartbeat_at),
  finished_at: r.finished_at === null ? null : num(r.finished_at),
  runner: r.runner ?? null,
  epoch: r.epoch === null || r.epoch === undefined ? null : num(r.epoch)
})

export const loadFlow = (sql: Sql, flowId: string) =>
  Effect.map(sql`SELECT * FROM dex_flows WHERE flow_id = ${flowId}`, (rows) =>
    rows.length === 0 ? undefined : normalizeFlow(rows[0])
  )

export const loadStep = (sql: Sql, flowId: string, step_execution_id: string) =>
  Effect.map(
    sql`SELECT * FROM dex_steps WHERE flow_id = ${flowId} AND step_execution_id = ${step_execution_id}`,
    (rows) => (rows.length === 0 ? undefined : normalizeStep(rows[0]))
  )

export const loadAttempt = (sql: Sql, flowId: string, step_execution_id: string, attempt: number) =>
  Effect.map(
    sql`SELECT * FROM dex_attempts WHERE flow_id = ${flowId} AND step_execution_id = ${step_execution_id} AND attempt = ${attempt}`,
    (rows) => (rows.length === 0 ? undefined : normalizeAttempt(rows[0]))
  )

/** A Step execution that has not ended (waiting, ready or running), as {@link loadOpenSteps} reads it. */
export interface OpenStepRow {
  readonly step_execution_id: string
  readonly step_type: string
  readonly status: string
}

/**
 * The Step executions of a Flow that have not ended (waiting, ready, running), in scheduling order, through the
 * `(flow_id, status)` index: what a reader waiting for a Flow to settle needs, without the closed executions
 * and their attempts. Writes nothing.
 */
export const loadOpenSteps = (sql: Sql, flowId: string) =>
  sql<OpenStepRow>`SELECT step_execution_id, step_type, status FROM dex_steps
    WHERE flow_id = ${flowId} AND status IN ('waiting', 'ready', 'running') ORDER BY seq`

/** One stored attribute version. */
export interface AttrVersionRow {
  readonly name: string
  readonly key: string
  readonly version: number
  readonly value: string | null
}

/** Every stored attribute version of a Flow (at or below `atMost`, when given), oldest first. */
export const loadAttrVersions = (sql: Sql, flowId: string, atMost?: number) =>
  Effect.map(
    atMost === undefined
      ? sql<any>`SELECT name, key, version, value FROM dex_attrs WHERE flow_id = ${flowId} ORDER BY version`
      : sql<any>`SELECT name, key, version, value FROM dex_attrs WHERE flow_id = ${flowId} AND version <= ${atMost}
          ORDER BY version`,
    (rows): Array<AttrVersionRow> =>
      rows.map((r) => ({ name: r.name, key: r.key, version: num(r.version), value: r.value }))
  )

/** The attribute values visible at a version: the newest stored version of each key, deletes dropped. */
export const attrsAt = (rows: ReadonlyArray<AttrVersionRow>, atMost: number): FlowState["attrs"] => {
  const attrs: FlowState["attrs"] = new Map()
  for (const r of rows) {
    if (r.version > atMost) continue
    let m = attrs.get(r.name)
    if (m === undefined) {
      m = new Map()
      attrs.set(r.name, m)
    }
    if (r.value === null) m.delete(r.key)
    else m.set(r.key, r.value)
  }
  return attrs
}

/** Every queued message of a Flow, by channel key, oldest first. */
export const loadMessages = Effect.fnUntraced(function* (sql: Sql, flowId: string) {
  const messages = yield* sql<{ id: unknown; channel: string; key: string; value: string }>`
    SELECT id, channel, key, value FROM dex_messages WHERE flow_id = ${flowId} ORDER BY id`
  const channels = new Map<string, ReadonlyArray<StoredMessage>>()
  for (const msg of messages) {
    const k = channelKey(msg.channel, msg.key)
    const list = (channels.get(k) as Array<StoredMessage> | undefined) ?? []
    list.push({ id: String(msg.id), value: msg.value })
    channels.set(k, list)
  }
  return channels
})

/** The Flow's active Step executions, in scheduling order. */
export const loadActiveSteps = (sql: Sql, flowId: string) =>
  Effect.map(
    sql`SELECT * FROM dex_steps WHERE flow_id = ${flowId} AND status IN ('waiting', 'ready', 'running') ORDER BY seq`,
    (rows) => rows.map(normalizeStep)
  )

/** One history row as a transition writes it. */
export interface HistoryRow {
  readonly flow_id: string
  readonly at: number
  readonly kind: string
  readonly step_execution_id: string | null
  readonly attempt: number | null
  readonly data: string
}

/** An attempt row as a transition writes it (heartbeat columns are left to `recordHeartbeat`). */
export interface AttemptWrite {
  readonly flow_id: string
  readonly step_execution_id: string
  readonly attempt: number
  readonly started_at: number
  readonly finished_at: number | null
  readonly outcome: string | null
  readonly error_type: string | null
  readonly detail: string | null
}

// effect/sql's `insert` takes records with an index signature; the engine's row interfaces have fixed keys
// (callers check that a batch is not empty)
const row = <T extends object>(value: T) => value as unknown as Record<string, unknown>
const rows = <T extends object>(values: ReadonlyArray<T>) =>
  values as unknown as readonly [Record<string, unknown>, ...Array<Record<string, unknown>>]

/** One `dex_stream` row: a stream message. */
export interface StreamRow {
  readonly flow_type: string
  readonly stream: string
  readonly flow_id: string
  readonly step_execution_id: string
  readonly attempt: number
  readonly value: string
  readonly bytes: number
  readonly at: number
  readonly runner: string
}

/** Stores stream messages (one statement). The caller holds the transaction and checked the fence. */
export const insertStreamRows = (sql: Sql, streamRows: ReadonlyArray<StreamRow>) =>
  streamRows.length === 0 ? Effect.void : Effect.asVoid(sql`INSERT INTO dex_stream ${sql.insert(rows(streamRows))}`)

/** Everything one transition writes; `writeTransition` turns it into one SQL transaction. */
export interface TransitionBatch {
  /** The owner's fence: the transition commits only while this epoch is the Flow's current one. */
  readonly fence: Fence
  readonly flow: FlowRow
  /** The version the owner holds: `null` inserts a new Flow row, otherwise the compare-and-set fence. */
  readonly expectedVersion: number | null
  readonly steps: ReadonlyArray<StepRow>
  readonly attempts: ReadonlyArray<AttemptWrite>
  readonly attrs: ReadonlyArray<AttrVersionRow>
  readonly attrDeletes: ReadonlyArray<Omit<AttrVersionRow, "value">>
  readonly messages: ReadonlyArray<{
    readonly id: number
    readonly channel: string
    readonly key: string
    readonly value: string
    readonly published_at: number
  }>
  readonly messageDeletes: ReadonlyArray<number>
  readonly history: ReadonlyArray<HistoryRow>
  /** When set, history is pruned to this many newest events of the Flow (the history window). */
  readonly pruneHistory?: number | undefined
  readonly reply: { readonly requestId: string; readonly reply: string; readonly at: number } | undefined
  /** Stream messages the committing attempt staged (their budget already admitted them). */
  readonly streams?: ReadonlyArray<StreamRow> | undefined
  /** When set, the running Flow's retention pass runs last in this transaction (`applyRetention`). */
  readonly retention?: RetentionPass | undefined
}

const STEP_COLUMNS = [
  "step_type",
  "status",
  "input",
  "options",
  "from_step_execution_id",
  "wait",
  "wait_result",
  "wait_failed",
  "waiting_since",
  "attempt",
  "first_attempt_at",
  "retry_at",
  "view_version",
  "view_channels",
  "recovery",
  "locks",
  "created_at",
  "seq"
] as const

/**
 * Writes one transition. The statements, in order: the Flow row (insert, or update fenced by its
 * version), Step rows (one upsert), attempt rows (one upsert), attribute versions (one insert),
 * superseded attribute versions (one delete), messages (one insert, one delete), history (one insert),
 * the staged stream messages (one insert), the request's reply. Fails with `false` when the fence finds another version: nothing is written.
 * The caller runs it inside `sql.withTransaction`.
 */
export const writeTransition = Effect.fnUntraced(function* (sql: Sql, b: TransitionBatch) {
  const f = b.flow
  const flowId = f.flow_id
  if (!(yield* fenceCheck(sql, flowId, b.fence))) return false
  if (b.expectedVersion === null) {
    yield* sql`INSERT INTO dex_flows ${sql.insert(row(f))}`
  } else {
    const fenced = yield* sql`UPDATE dex_flows SET version = ${f.version}, status = ${f.status}, output = ${f.output},
      outputs = ${f.outputs}, reason = ${f.reason}, error_type = ${f.error_type}, counters = ${f.counters},
      closed_at = ${f.closed_at}
      WHERE flow_id = ${flowId} AND version = ${b.expectedVersion} RETURNING version`
    if (fenced.length === 0) return false
  }
  if (b.steps.length > 0) {
    yield* sql`INSERT INTO dex_steps ${sql.insert(rows(b.steps))} ON CONFLICT (flow_id, step_execution_id) DO UPDATE SET
      ${sql.csv(STEP_COLUMNS.map((c) => sql`${sql(c)} = excluded.${sql(c)}`))}`
  }
  if (b.attempts.length > 0) {
    // a start (or a start handed out again) stamps the attempt with this owner; a finish keeps who ran it
    const stamped = b.attempts.map((a) => ({ ...a, runner: b.fence.runner, epoch: b.fence.epoch }))
    yield* sql`INSERT INTO dex_attempts ${sql.insert(rows(stamped))} ON CONFLICT (flow_id, step_execution_id, attempt)
      DO UPDATE SET started_at = excluded.started_at, finished_at = excluded.finished_at, outcome = excluded.outcome,
      error_type = excluded.error_type, detail = excluded.detail,
      runner = CASE WHEN excluded.finished_at IS NULL THEN excluded.runner ELSE dex_attempts.runner END,
      epoch = CASE WHEN excluded.finished_at IS NULL THEN excluded.epoch ELSE dex_attempts.epoch END`
  }
  if (b.attrs.length > 0) {
    yield* sql`INSERT INTO dex_attrs ${sql.insert(rows(b.attrs.map((a) => ({ flow_id: flowId, ...a }))))}`
  }
  if (b.attrDeletes.length > 0) {
    yield* sql`DELETE FROM dex_attrs WHERE flow_id = ${flowId} AND (${sql.or(
      b.attrDeletes.map((d) => sql`(name = ${d.name} AND key = ${d.key} AND version = ${d.version})`)
    )})`
  }
  if (b.messageDeletes.length > 0) {
    yield* sql`DELETE FROM dex_messages WHERE flow_id = ${flowId} AND id IN ${sql.in(b.messageDeletes as Array<number>)}`
  }
  if (b.messages.length > 0) {
    yield* sql`INSERT INTO dex_messages ${sql.insert(rows(b.messages.map((m) => ({ flow_id: flowId, ...m }))))}`
  }
  if (b.history.length > 0) {
    yield* sql`INSERT INTO dex_history ${sql.insert(rows(b.history.map((h) => ({ ...h, runner: b.fence.runner }))))}`
  }
  if (b.pruneHistory !== undefined) {
    yield* sql`DELETE FROM dex_history WHERE flow_id = ${flowId} AND id < (SELECT id FROM dex_history
      WHERE flow_id = ${flowId} ORDER BY id DESC LIMIT 1 OFFSET ${b.pruneHistory - 1})`
  }
  if (b.streams !== undefined && b.streams.length > 0) yield* insertStreamRows(sql, b.streams)
  if (b.reply !== undefined) {
    yield* sql`INSERT INTO dex_replies (flow_id, request_id, reply, at)
      VALUES (${flowId}, ${b.reply.requestId}, ${b.reply.reply}, ${b.reply.at})`
  }
  if (b.pruneHistory !== undefined) yield* markHistoryRetention(sql, flowId)
  if (b.retention !== undefined) yield* applyRetention(sql, flowId, b.retention)
  // readers in other processes hear of the commit (Postgres: delivered after COMMIT)
  yield* notifyOthers(sql, flowId)
  return true
})

/**
 * Deletes a closed run's rows before a new run reuses its Flow ID (in the new run's transaction): the Flow row,
 * its Steps, attempts, attribute versions, messages, history and stream messages (the runners' stream budgets
 * see the freed bytes at their next reconcile). Stored replies stay, so a redelivered request of the old run still gets its reply.
 */
export const deleteRun = Effect.fnUntraced(function* (sql: Sql, flowId: string) {
  for (const table of [
    "dex_retention",
    "dex_stream",
    "dex_history",
    "dex_messages",
    "dex_attrs",
    "dex_attempts",
    "dex_steps",
    "dex_flows"
  ]) {
    yield* sql`DELETE FROM ${sql(table)} WHERE flow_id = ${flowId}`
  }
})

/** The stored reply of a request that already committed, if any. */
export const loadReply = (sql: Sql, flowId: string, requestId: string) =>
  Effect.map(
    sql<{ reply: string }>`SELECT reply FROM dex_replies WHERE flow_id = ${flowId} AND request_id = ${requestId}`,
    (rows) => (rows.length === 0 ? undefined : rows[0]!.reply)
  )

/**
 * The request IDs stored under the idempotency key `key` (see `protocol.keyedRequestId`): `idem/`, a
 * 64-digit fingerprint and `/` take the first 70 characters, the key the rest.
 */
export const loadKeyedRequestIds = (sql: Sql, flowId: string, key: string) =>
  Effect.map(
    sql<{ request_id: string }>`SELECT request_id FROM dex_replies WHERE flow_id = ${flowId}
      AND request_id LIKE 'idem/%' AND substr(request_id, 71) = ${key}`,
    (rows) => rows.map((r) => r.request_id)
  )

/**
 * A heartbeat: the attempt's first one marks it as having produced output. Fenced in the same statement:
 * `false` when `fence` is no longer the Flow's owner (nothing is written).
 */
export const recordHeartbeat = (
  sql: Sql,
  fence: Fence,
  flowId: string,
  step_execution_id: string,
  attempt: number,
  at: number,
  checkpoint: string | null
) =>
  Effect.map(
    sql`UPDATE dex_attempts SET heartbeat_at = ${at}, output_at = COALESCE(output_at, ${at}),
    checkpoint = COALESCE(${checkpoint}, checkpoint) WHERE flow_id = ${flowId} AND step_execution_id = ${step_execution_id}
    AND attempt = ${attempt} AND ${ownerHolds(sql, flowId, fence)} RETURNING attempt`,
    (rows) => rows.length > 0
  )

// ------------------------------------------------------------------------------------------------
// Ownership
// ------------------------------------------------------------------------------------------------

/** The owner that writes on a Flow's behalf: its epoch (from `claimOwnership`) and runner identity. */
export interface Fence {
  readonly epoch: number
  readonly runner: string
  /**
   * Postgres: how long a fenced transaction may sit idle (its process paused between statements) before the
   * server ends it, set for the transaction by its first statement. It bounds how long a new owner's claim waits
   * on the owner row a paused transaction holds; the lease check before COMMIT (`requireLease`) keeps the
   * transaction from committing after the shard lock was lost, whatever this limit is.
   */
  readonly idleTimeoutMs?: number | undefined
  /** Postgres cluster runners: the shard lock under which the owner claimed the Flow, checked before COMMIT. */
  readonly lease?: ShardLease | undefined
}

/** A fenced transaction found, just before COMMIT, that another runner holds the Flow's shard lock. */
export class LeaseLost extends Data.TaggedError("LeaseLost")<{ readonly flowId: string }> {}

/**
 * Where a runner's shard lock lives (Postgres advisory locks of effect/cluster's `SqlRunnerStorage`): a claim
 * commits only while the runner's lock session (found by its `application_name`) holds the shard's lock.
 */
export interface ShardLease {
  readonly applicationName: string
  /** The advisory lock's two keys: the storage's namespace and the shard's lock number. */
  readonly classId: number
  readonly objId: number
}

/**
 * The row lock of the owner check: on Postgres `FOR SHARE`, so a claim (which updates the row) waits for
 * every open fenced write and a fenced write that waits for a claim sees the new epoch and is refused. SQLite
 * has one writer at a time and one process per file.
 */
const forShare = (sql: Sql) =>
  sql.onDialectOrElse({ pg: () => sql.literal("FOR SHARE"), orElse: () => sql.literal("") })

/** The condition "`fence` is the Flow's current owner", for the WHERE of a fenced statement. */
export const ownerHolds = (sql: Sql, flowId: string, fence: Fence) =>
  sql`EXISTS (SELECT 1 FROM dex_owners WHERE flow_id = ${flowId} AND epoch = ${fence.epoch} ${forShare(sql)})`

/**
 * The first statement of a fenced transaction: whether `fence` still owns the Flow (on Postgres its row stays
 * share-locked until COMMIT, and the transaction's `idle_in_transaction_session_timeout` is set, so a
 * transaction left idle by a paused process ends before the shard lock it was opened under can expire).
 */
export const fenceCheck = (sql: Sql, flowId: string, fence: Fence) =>
  Effect.map(
    sql.onDialectOrElse({
      pg: () =>
        fence.idleTimeoutMs === undefined
          ? sql`SELECT epoch FROM dex_owners WHERE flow_id = ${flowId} AND epoch = ${fence.epoch} FOR SHARE`
          : sql`SELECT epoch, set_config('idle_in_transaction_session_timeout', ${String(fence.idleTimeoutMs)}, true)
              AS idle FROM dex_owners WHERE flow_id = ${flowId} AND epoch = ${fence.epoch} FOR SHARE`,
      orElse: () => sql`SELECT epoch FROM dex_owners WHERE flow_id = ${flowId} AND epoch = ${fence.epoch}`
    }),
    (rows) => rows.length > 0
  )

/** The condition "the runner whose sessions carry `lease.applicationName` holds the shard lock `lease`". */
const leaseHeld = (sql: Sql, lease: ShardLease) =>
  sql`EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.classid = ${lease.classId} AND l.objid = ${lease.objId}
    AND l.objsubid = 2 AND a.datname = current_database() AND a.application_name = ${lease.applicationName})`

/**
 * The last statement of a fenced transaction on a cluster runner: fails with `LeaseLost` (the caller rolls the
 * transaction back) when another runner holds the shard lock the Flow was claimed under. Only the holder of
 * that lock can claim the Flow, so while no other runner holds it nobody can have taken the Flow over, and a
 * runner that merely lost its lock session for a moment (a stall under load; it takes the lock again) goes on
 * committing. A runner paused inside the transaction past the lock's expiry finds the survivor holding it when
 * it wakes, and commits nothing; one paused between this check and COMMIT still holds the owner row
 * (`FOR SHARE`, taken by the first statement), so a new owner's claim, which updates that row, waits for the
 * COMMIT and loads what it committed. A no-op without a lease.
 */
export const requireLease = (sql: Sql, flowId: string, fence: Fence): Effect.Effect<void, LeaseLost | SqlError> =>
  fence.lease === undefined
    ? Effect.void
    : Effect.flatMap(
        sql<{ taken: unknown }>`SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.granted AND l.classid = ${fence.lease.classId}
          AND l.objid = ${fence.lease.objId} AND l.objsubid = 2 AND a.datname = current_database()
          AND a.application_name IS DISTINCT FROM ${fence.lease.applicationName}) AS taken`,
        (rows) => (rows[0]?.taken === false ? Effect.void : Effect.fail(new LeaseLost({ flowId })))
      )

/**
 * Takes ownership of a Flow: a new epoch, which refuses every later write of an earlier owner. With a shard
 * lease (Postgres) the claim commits only while this runner holds the Flow's shard lock, so a runner that lost
 * its shard (paused past the lock's expiry) cannot take the Flow back before it notices. `undefined` when the
 * lease is not held.
 */
export const claimOwnership = (sql: Sql, flowId: string, runner: string, now: number, lease: ShardLease | undefined) =>
  Effect.map(
    sql<{ epoch: unknown }>`INSERT INTO dex_owners (flow_id, epoch, runner, claimed_at)
      SELECT ${flowId}, 1, ${runner}, ${now} WHERE ${lease === undefined ? sql`1 = 1` : leaseHeld(sql, lease)}
      ON CONFLICT (flow_id) DO UPDATE SET epoch = dex_owners.epoch + 1, runner = excluded.runner,
      claimed_at = excluded.claimed_at
      RETURNING epoch`,
    (rows) => (rows.length === 0 ? undefined : num(rows[0]!.epoch))
  )

/** The current owner of a Flow: the runner that last claimed it, its epoch and when. */
export const loadOwner = (sql: Sql, flowId: string) =>
  Effect.map(
    sql<{ runner: string; epoch: unknown; claimed_at: unknown }>`SELECT runner, epoch, claimed_at FROM dex_owners
      WHERE flow_id = ${flowId}`,
    (rows) =>
      rows.length === 0
        ? undefined
        : { runner: rows[0]!.runner, epoch: num(rows[0]!.epoch), claimedAt: num(rows[0]!.claimed_at) }
  )

/** Flows with a running Step execution (at most `limit`): the candidates of the recovery sweep. */
export const flowsWithRunningSteps = (sql: Sql, limit: number) =>
  Effect.map(
    sql<{ flow_id: string }>`SELECT DISTINCT flow_id FROM dex_steps WHERE status = 'running' LIMIT ${limit}`,
    (rows) => rows.map((r) => r.flow_id)
  )

/** The newest heartbeat checkpoint of a Step execution's attempts. */
export const loadCheckpoint = (sql: Sql, flowId: string, step_execution_id: string) =>
  Effect.map(
    sql<{
      checkpoint: string | null
    }>`SELECT checkpoint FROM dex_attempts WHERE flow_id = ${flowId} AND step_execution_id = ${step_execution_id}
      AND checkpoint IS NOT NULL ORDER BY attempt DESC LIMIT 1`,
    (rows) => rows[0]?.checkpoint ?? undefined
  )

/** The current attribute value (the newest stored version), or undefined when unset or deleted. */
export const loadAttribute = (sql: Sql, flowId: string, name: string, key: string) =>
  Effect.map(
    sql<{ value: string | null }>`SELECT value FROM dex_attrs WHERE flow_id = ${flowId} AND name = ${name}
      AND key = ${key} ORDER BY version DESC LIMIT 1`,
    (rows) => rows[0]?.value ?? undefined
  )

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

/** Every table that holds rows of a Flow, by its `flow_id` column. */
// (not `dex_owners`: a Flow's ownership row stays, so its epochs never repeat for a Flow ID used again)
const FLOW_TABLES = [
  "dex_attrs",
  "dex_messages",
  "dex_steps",
  "dex_attempts",
  "dex_history",
  "dex_replies",
  "dex_stream",
  "dex_retention",
  "dex_flows"
] as const

/**
 * Purges closed Flows whose retention ended (`closed_at` before `cutoff`), at most `limit` per call, every
 * row of each in one transaction. Returns the purged Flow IDs.
 */
export const purgeClosedFlows = (sql: Sql, cutoff: number, limit: number) =>
  sql.withTransaction(
    Effect.gen(function* () {
      const due = yield* sql<{ flow_id: string }>`SELECT flow_id FROM dex_flows
        WHERE status <> 'running' AND closed_at IS NOT NULL AND closed_at < ${cutoff} ORDER BY closed_at LIMIT ${limit}`
      const ids = due.map((r) => r.flow_id)
      if (ids.length === 0) return ids
      // (the purged stream messages leave the runners' stream budgets at their next reconcile)
      for (const table of FLOW_TABLES) {
        yield* sql`DELETE FROM ${sql(table)} WHERE flow_id IN ${sql.in(ids)}`
      }
      return ids
    })
  )

// ------------------------------------------------------------------------------------------------
// Committed-state reads (the query path: internal/query.ts)
// ------------------------------------------------------------------------------------------------

/** One row of a Flow's committed state: a current attribute value or a queued channel message. */
export interface CommittedStateRow {
  readonly kind: "attr" | "message"
  /** The attribute or channel name. */
  readonly name: string
  readonly key: string
  readonly value: string
  /** The message ID; `null` for an attribute. */
  readonly id: unknown
}

/**
 * A Flow's committed state in one statement (one consistent snapshot on both databases): the newest stored
 * version of each attribute key that holds a value, and every queued message, oldest first. Writes nothing.
 */
export const loadCommittedState = (sql: Sql, flowId: string) =>
  sql<CommittedStateRow>`
    SELECT 'attr' AS kind, a.name AS name, a.key AS key, a.value AS value, NULL AS id FROM dex_attrs a
      WHERE a.flow_id = ${flowId} AND a.value IS NOT NULL AND a.version = (
        SELECT MAX(b.version) FROM dex_attrs b WHERE b.flow_id = a.flow_id AND b.name = a.name AND b.key = a.key)
    UNION ALL
    SELECT 'message' AS kind, m.channel AS name, m.key AS key, m.value AS value, m.id AS id FROM dex_messages m
      WHERE m.flow_id = ${flowId}
    ORDER BY kind, id`

/** One row of {@link loadCommittedAttributes} or {@link loadCommittedAttributesOf}. */
export interface QueryStateRow {
  /** `flow`: the Flow's row (`value` its `run_id`, `version` its version); `attr`; `message` (queued). */
  readonly kind: "flow" | "attr" | "message"
  readonly name: string
  readonly key: string
  /** `null` only from {@link loadCommittedAttributesOf}: the key's newest version deletes it. */
  readonly value: string | null
  /** The message ID; `null` for the other kinds. */
  readonly id: unknown
  /** The Flow's version for `flow`, the value's stored version for `attr`; `null` for a message. */
  readonly version: unknown
}

/**
 * What a query reads first, in one statement (one consistent snapshot): the Flow's version and run, the current
 * value of every attribute key except those of the attributes named in `lazy`, and every queued message, oldest
 * first. The values of the `lazy` attributes (a long session's message chunks) are read as the handler asks for
 * them ({@link loadCommittedAttributesOf}). Writes nothing.
 */
export const loadCommittedAttributes = (sql: Sql, flowId: string, lazy: ReadonlyArray<string>) =>
  sql<QueryStateRow>`
    SELECT 'flow' AS kind, '' AS name, '' AS key, f.run_id AS value, CAST(NULL AS BIGINT) AS id,
      f.version AS version
      FROM dex_flows f WHERE f.flow_id = ${flowId}
    UNION ALL
    SELECT 'attr' AS kind, a.name AS name, a.key AS key, a.value AS value, CAST(NULL AS BIGINT) AS id,
      a.version AS version
      FROM dex_attrs a
      WHERE a.flow_id = ${flowId} AND ${lazy.length === 0 ? sql`1 = 1` : sql`a.name NOT IN ${sql.in(lazy as Array<string>)}`}
        AND a.value IS NOT NULL AND a.version = (
        SELECT MAX(b.version) FROM dex_attrs b WHERE b.flow_id = a.flow_id AND b.name = a.name AND b.key = a.key)
    UNION ALL
    SELECT 'message' AS kind, m.channel AS name, m.key AS key, m.value AS value, m.id AS id, NULL AS version
      FROM dex_messages m WHERE m.flow_id = ${flowId}
    ORDER BY kind, id`

/**
 * The current values of some attribute keys (`key` given) and of whole attributes (`key` undefined: every key
 * of the AttributeMap), with the Flow's version and run, in one statement: what a query's handler asked for
 * after {@link loadCommittedAttributes}. Each value comes with its stored version, and the Flow with its
 * current version, so a caller tells whether a value changed after its first statement. Writes nothing.
 */
export const loadCommittedAttributesOf = (
  sql: Sql,
  flowId: string,
  wanted: ReadonlyArray<{ readonly name: string; readonly key: string | undefined }>
) =>
  sql<QueryStateRow>`
    SELECT 'flow' AS kind, '' AS name, '' AS key, f.run_id AS value, CAST(NULL AS BIGINT) AS id,
      f.version AS version
      FROM dex_flows f WHERE f.flow_id = ${flowId}
    UNION ALL
    SELECT 'attr' AS kind, a.name AS name, a.key AS key, a.value AS value, CAST(NULL AS BIGINT) AS id,
      a.version AS version
      FROM dex_attrs a
      WHERE a.flow_id = ${flowId} AND (${sql.or(
        wanted.map((w) =>
          w.key === undefined ? sql`(a.name = ${w.name})` : sql`(a.name = ${w.name} AND a.key = ${w.key})`
        )
      )}) AND a.version = (
        SELECT MAX(b.version) FROM dex_attrs b WHERE b.flow_id = a.flow_id AND b.name = a.name AND b.key = a.key)`

// ------------------------------------------------------------------------------------------------
// Retention of a running Flow (bounded storage for a long-lived Flow)
// ------------------------------------------------------------------------------------------------

/**
 * Where the retained part of a Flow's records starts, one row per kind (`RetentionKind`): `kept_from` is the
 * position from which the kind's records are complete. Written by the owner's fenced transition that deleted what lies before it; read by
 * `Inspect.retention` and by `Client.readStream` (a resume token before a stream's mark is refused).
 */
const createRetentionMarks = (sql: Sql) =>
  orEngineError(
    sql.unsafe(`CREATE TABLE IF NOT EXISTS dex_retention (
    flow_id TEXT NOT NULL, kind TEXT NOT NULL, kept_from BIGINT NOT NULL, PRIMARY KEY (flow_id, kind))`),
    "cannot prepare the engine tables"
  )

/**
 * A retention mark's kind: `steps` (closed Step executions scheduled before sequence `kept_from` were deleted,
 * with their attempts), `history` (history events before ID `kept_from` were pruned by the history window),
 * `stream:<name>` (the Flow's messages of that stream at or before stream position `kept_from` were deleted: a
 * resume token at `kept_from` or later reads on, an earlier one is refused).
 */
export type RetentionKind = "steps" | "history" | `stream:${string}`

/** The kind of a stream's retention mark. */
export const streamRetentionKind = (stream: string): RetentionKind => `stream:${stream}`

/** One retention pass over a running Flow, computed by its owner's transition (`Transition.batch`). */
export interface RetentionPass {
  /** Closed Step executions scheduled before this sequence go, with their attempts (none when undefined). */
  readonly stepsBeforeSeq: number | undefined
  /** The Flow's streams, each trimmed to its newest `streamMessages` messages. */
  readonly streams: ReadonlyArray<string>
  readonly streamMessages: number
  /** Stored request replies written before this time (epoch ms) go. */
  readonly repliesBefore: number
  /**
   * effect/cluster's messages to the Flow's entity that were processed (their reply stored) and were sent before
   * this time (epoch ms) go, with their replies.
   */
  readonly clusterMessages: { readonly entityType: string; readonly sentBefore: number } | undefined
}

const FINAL_STATUSES = ["completed", "failed", "cancelled"]

/** A retention mark, moved forward only. */
const writeMark = (sql: Sql, flowId: string, kind: RetentionKind, keptFrom: number) =>
  sql`INSERT INTO dex_retention (flow_id, kind, kept_from) VALUES (${flowId}, ${kind}, ${keptFrom})
    ON CONFLICT (flow_id, kind) DO UPDATE SET kept_from = CASE WHEN excluded.kept_from > dex_retention.kept_from
      THEN excluded.kept_from ELSE dex_retention.kept_from END`

/** After the history window pruned: the oldest kept history event is where the retained history starts. */
const markHistoryRetention = Effect.fnUntraced(function* (sql: Sql, flowId: string) {
  const oldest = yield* sql<{ id: unknown }>`SELECT MIN(id) AS id FROM dex_history WHERE flow_id = ${flowId}`
  const id = oldest[0]?.id
  if (id !== null && id !== undefined) yield* writeMark(sql, flowId, "history", num(id))
})

/** The first snowflake ID effect/cluster may give a message sent at `ms` (its timestamp is the top bits). */
const snowflakeAt = (ms: number): string => String(BigInt(Math.max(0, ms - Snowflake.constEpochMillis)) << 22n)

/**
 * The retention pass of a running Flow, run last in its owner's fenced transaction (`writeTransition`, after the
 * fence check; the cluster's lease check follows before COMMIT), so a runner that lost the Flow deletes nothing.
 * It deletes only what no reader or recovery needs any more:
 * - closed Step executions scheduled before `stepsBeforeSeq` whose attempts all finished, with their attempts
 *   (an active execution, or one whose attempt is still winding down, stays whatever its age);
 * - each stream's messages of this Flow before its newest `streamMessages` (the stream's own byte budget per Flow
 *   type still applies); the mark refuses resume tokens before the kept tail (`InvalidResumeToken`), so a reader
 *   never misses a message silently, and every token inside the tail reads on;
 * - stored replies older than the reply retention (a retry after it runs the request again);
 * - effect/cluster's processed messages to the Flow's entity sent before the cutoff, and their replies: a
 *   processed message is never delivered again, and a sender that retries after the cutoff gets the engine's
 *   stored reply (`dex_replies`), which outlives it.
 * On SQLite it then gives free pages back (`PRAGMA incremental_vacuum`; the embedded engine opens new files with
 * `auto_vacuum = INCREMENTAL`), so the file follows what is kept instead of its high-water mark.
 */
export const applyRetention = Effect.fnUntraced(function* (sql: Sql, flowId: string, pass: RetentionPass) {
  if (pass.stepsBeforeSeq !== undefined && pass.stepsBeforeSeq > 1) {
    const before = pass.stepsBeforeSeq
    const gone = sql`SELECT s.step_execution_id FROM dex_steps s WHERE s.flow_id = ${flowId} AND s.seq < ${before}
      AND s.status IN ${sql.in(FINAL_STATUSES)} AND NOT EXISTS (SELECT 1 FROM dex_attempts u WHERE u.flow_id = ${flowId}
      AND u.step_execution_id = s.step_execution_id AND u.finished_at IS NULL)`
    yield* sql`DELETE FROM dex_attempts WHERE flow_id = ${flowId} AND step_execution_id IN (${gone})`
    yield* sql`DELETE FROM dex_steps WHERE flow_id = ${flowId} AND seq < ${before}
      AND status IN ${sql.in(FINAL_STATUSES)} AND NOT EXISTS (SELECT 1 FROM dex_attempts u WHERE u.flow_id = ${flowId}
      AND u.step_execution_id = dex_steps.step_execution_id AND u.finished_at IS NULL)`
    yield* writeMark(sql, flowId, "steps", before)
  }
  for (const stream of pass.streams) {
    const edge = yield* sql<{ seq: unknown }>`SELECT seq FROM dex_stream WHERE flow_id = ${flowId}
      AND stream = ${stream} ORDER BY seq DESC LIMIT 1 OFFSET ${pass.streamMessages}`
    if (edge.length === 0) continue
    const through = num(edge[0]!.seq)
    yield* sql`DELETE FROM dex_stream WHERE flow_id = ${flowId} AND stream = ${stream} AND seq <= ${through}`
    // a token at `through` or later reads on; one before it is refused
    yield* writeMark(sql, flowId, streamRetentionKind(stream), through)
  }
  yield* sql`DELETE FROM dex_replies WHERE flow_id = ${flowId} AND at < ${pass.repliesBefore}`
  if (pass.clusterMessages !== undefined) {
    const { entityType, sentBefore } = pass.clusterMessages
    const processed = sql.onDialectOrElse({ pg: () => sql.literal("TRUE"), orElse: () => sql.literal("1") })
    const done = sql`SELECT id FROM cluster_messages WHERE entity_type = ${entityType} AND entity_id = ${flowId}
      AND kind = 0 AND processed = ${processed} AND id < ${snowflakeAt(sentBefore)}`
    yield* sql`DELETE FROM cluster_replies WHERE request_id IN (${done})`
    yield* sql`DELETE FROM cluster_messages WHERE entity_type = ${entityType} AND entity_id = ${flowId}
      AND request_id IN (${done})`
  }
  // SQLite: the file gives back up to this many free pages (a no-op on a file made without auto_vacuum)
  yield* sql.onDialectOrElse({
    sqlite: () => Effect.asVoid(sql.unsafe(`PRAGMA incremental_vacuum(${VACUUM_PAGES})`)),
    orElse: () => Effect.void
  })
})

/** The free pages one retention pass gives back to the file system (SQLite), 1 MiB at the default page size. */
const VACUUM_PAGES = 256

/** One retention mark of a Flow. */
export interface RetentionMarkRow {
  readonly kind: string
  readonly keptFrom: number
}

/** A Flow's retention marks (none until a retention pass or the history window deleted something). */
export const loadRetentionMarks = (sql: Sql, flowId: string) =>
  Effect.map(
    sql<{ kind: string; kept_from: unknown }>`SELECT kind, kept_from FROM dex_retention WHERE flow_id = ${flowId}`,
    (rows): Array<RetentionMarkRow> => rows.map((r) => ({ kind: r.kind, keptFrom: num(r.kept_from) }))
  )

/**
 * What a stream read checks before it reads, in one statement: that the Flow exists (`undefined` when not),
 * how far the stream's byte budget of the Flow type trimmed it (`dex_stream_usage.trimmed_through`) and where the
 * Flow's own retention keeps it from (its `stream:<name>` mark). Writes nothing.
 */
export const loadStreamStart = (sql: Sql, flowId: string, stream: string) =>
  Effect.map(
    sql<{ trimmed_through: unknown; kept_from: unknown }>`SELECT
      (SELECT u.trimmed_through FROM dex_stream_usage u WHERE u.flow_type = f.flow_type AND u.stream = ${stream})
        AS trimmed_through,
      (SELECT r.kept_from FROM dex_retention r WHERE r.flow_id = f.flow_id AND r.kind = ${streamRetentionKind(stream)})
        AS kept_from
      FROM dex_flows f WHERE f.flow_id = ${flowId}`,
    (rows) =>
      rows.length === 0
        ? undefined
        : {
            trimmedThrough: rows[0]!.trimmed_through == null ? undefined : num(rows[0]!.trimmed_through),
            keptFrom: rows[0]!.kept_from == null ? undefined : num(rows[0]!.kept_from)
          }
  )

/** The Flow's stream retention mark: the stream position before which its messages were deleted, if any. */
export const loadStreamRetention = (sql: Sql, flowId: string, stream: string) =>
  Effect.map(
    sql<{ kept_from: unknown }>`SELECT kept_from FROM dex_retention WHERE flow_id = ${flowId}
      AND kind = ${streamRetentionKind(stream)}`,
    (rows) => (rows.length === 0 ? undefined : num(rows[0]!.kept_from))
  )
