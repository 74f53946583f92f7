// A Flow's state and its transitions: the owner's loads, the transition's one write, heartbeats.
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"
import type { Fragment } from "effect/sql/Statement"
import { COMMIT_CHANNEL } from "../feed.ts"
import { channelKey, type StoredMessage } from "../state.ts"
import type { Driver } from "./driver.ts"
import { fenceCheck, leaseTaken, ownerHolds } from "./ownership.ts"
import { applyRetention, markHistoryRetention } from "./retention.ts"
import {
  AlreadyAnswered,
  type AttrVersionRow,
  type CommittedStateRow,
  type Fence,
  NOT_RUN,
  normalizeAttempt,
  normalizeFlow,
  normalizeStep,
  num,
  row,
  rows,
  type ShardLease,
  type Sql,
  type StreamRow,
  type TransitionBatch,
  utf8Order
} from "./rows.ts"
import { streamRowsInsert } from "./streams.ts"
import type { StoredValue } from "./values.ts"

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

/** Every stored attribute version of a Flow (at or below `atMost`, when given), oldest first. */
export const loadAttrVersions = (sql: Sql, d: Driver, flowId: string, atMost?: number) =>
  Effect.map(
    d.values.decodeRows(
      atMost === undefined
        ? sql<StoredAttrRow>`SELECT name, key, version, value FROM dex_attrs WHERE flow_id = ${flowId} ORDER BY version`
        : sql<StoredAttrRow>`SELECT name, key, version, value FROM dex_attrs WHERE flow_id = ${flowId}
            AND version <= ${atMost} ORDER BY version`
    ),
    (rows): Array<AttrVersionRow> =>
      rows.map((r) => ({ name: r.name, key: r.key, version: num(r.version), value: r.value }))
  )

/** A `dex_attrs` row as the driver returns it (`values.ts`: a value may be stored compressed). */
interface StoredAttrRow {
  readonly name: string
  readonly key: string
  readonly version: unknown
  readonly value: StoredValue
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

/** The Flow's attempts that have not finished (the owner's load: what it recovers). */
export const loadOpenAttempts = (sql: Sql, flowId: string) =>
  Effect.map(sql`SELECT * FROM dex_attempts WHERE flow_id = ${flowId} AND finished_at IS NULL`, (rows) =>
    rows.map(normalizeAttempt)
  )

/** Running Step executions an earlier attempt of which reached the Step's code (their attempt progress). */
export const loadReachedSteps = (sql: Sql, flowId: string) =>
  Effect.map(
    sql<{ readonly step_execution_id: string }>`SELECT DISTINCT a.step_execution_id
        FROM dex_attempts a JOIN dex_steps s ON s.flow_id = a.flow_id AND s.step_execution_id = a.step_execution_id
        WHERE a.flow_id = ${flowId} AND s.status = 'running' AND a.attempt < s.attempt
          AND (a.outcome IS NULL OR a.outcome <> ${NOT_RUN})`,
    (rows) => rows.map((r) => r.step_execution_id)
  )

/** The data of the Flow's latest `FlowStarted` history record, if it is still stored. */
export const loadFlowStarted = (sql: Sql, flowId: string) =>
  Effect.map(
    sql<{
      readonly data: string
    }>`SELECT data FROM dex_history WHERE flow_id = ${flowId} AND kind = 'FlowStarted' ORDER BY id DESC LIMIT 1`,
    (rows) => rows[0]?.data
  )

/**
 * Writes one transition. The statements, in order: the owner check (`fenceCheck`; on SQLite, of a Flow that
 * exists, in the WHERE of its row's update), the Flow row (insert, or update fenced by its version), Step rows (one upsert), attempt rows (one upsert), attribute versions (one insert),
 * superseded attribute versions (one delete), messages (one insert, one delete), history, the staged stream
 * messages and the request's reply (one insert each; on Postgres the three in one statement).
 * Fails with `false` when the fence finds another owner or another version: nothing is written. Fails with `AlreadyAnswered`
 * when the request's reply is stored already: the caller's transaction rolls back what it wrote.
 * The caller runs it inside `sql.withTransaction` and ends it with `requireLeaseAndNotify` (the lease check and
 * the commit notice to other processes).
 */
export const writeTransition = Effect.fnUntraced(function* (sql: Sql, d: Driver, b: TransitionBatch) {
  const f = b.flow
  const flowId = f.flow_id
  // SQLite (one writer, no row locks): the owner check goes in the WHERE of the Flow row's update, one statement
  // fewer a transition; Postgres share-locks the owner row in a first statement of its own (`fenceCheck`)
  const ownerInUpdate = d.ownerCheckInFlowUpdate && b.expectedVersion !== null
  if (!ownerInUpdate && !(yield* fenceCheck(d, flowId, b.fence))) return false
  if (b.expectedVersion === null) {
    yield* sql`INSERT INTO dex_flows ${sql.insert(row(f))}`
  } else {
    const fenced = yield* sql`UPDATE dex_flows SET version = ${f.version}, status = ${f.status}, output = ${f.output},
      outputs = ${f.outputs}, reason = ${f.reason}, error_type = ${f.error_type}, counters = ${f.counters},
      closed_at = ${f.closed_at}
      WHERE flow_id = ${flowId} AND version = ${b.expectedVersion}
      ${ownerInUpdate ? sql`AND ${ownerHolds(sql, d, flowId, b.fence)}` : sql``} RETURNING version`
    if (fenced.length === 0) return false
  }
  if (b.steps.length > 0) {
    yield* sql`INSERT INTO dex_steps ${sql.insert(rows(b.steps))} ON CONFLICT (flow_id, step_execution_id) DO UPDATE SET
      ${sql.csv(STEP_COLUMNS.map((c) => sql`${sql(c)} = excluded.${sql(c)}`))}`
  }
  if (b.attempts.length > 0) {
    // a start (or a start handed out again) stamps the attempt with this owner; a finish keeps who ran it. In key
    // order (the rows are locked in the VALUES' order): the lock order of the batched heartbeats
    // (`recordHeartbeatsWithRows`), so this transaction and a batch that want the same attempts do not deadlock
    const stamped = [...b.attempts]
      .sort((x, y) => utf8Order(x.step_execution_id, y.step_execution_id) || x.attempt - y.attempt)
      .map((a) => ({ ...a, runner: b.fence.runner, epoch: b.fence.epoch }))
    yield* sql`INSERT INTO dex_attempts ${sql.insert(rows(stamped))} ON CONFLICT (flow_id, step_execution_id, attempt)
      DO UPDATE SET started_at = excluded.started_at, finished_at = excluded.finished_at, outcome = excluded.outcome,
      error_type = excluded.error_type, detail = excluded.detail,
      runner = CASE WHEN excluded.finished_at IS NULL THEN excluded.runner ELSE dex_attempts.runner END,
      epoch = CASE WHEN excluded.finished_at IS NULL THEN excluded.epoch ELSE dex_attempts.epoch END`
  }
  if (b.attrs.length > 0) {
    // a large value is stored compressed on SQLite (`values.ts`)
    const encode = d.values.encode
    yield* sql`INSERT INTO dex_attrs ${sql.insert(
      rows(
        b.attrs.map((a) => ({
          flow_id: flowId,
          name: a.name,
          key: a.key,
          version: a.version,
          value: a.value === null ? null : encode(a.value)
        }))
      )
    )}`
  }
  if (b.attrDeletes.length > 0) {
    // each row by its whole key: SQLite looks up each term of an OR that names the whole primary key (a
    // MULTI-INDEX OR), where `flow_id = ? AND (... OR ...)` reads every attribute row of the Flow (a session
    // holds a hundred) to test the terms; Postgres makes either a BitmapOr of key lookups
    yield* sql`DELETE FROM dex_attrs WHERE ${sql.or(
      b.attrDeletes.map(
        (d) => sql`(flow_id = ${flowId} AND name = ${d.name} AND key = ${d.key} AND version = ${d.version})`
      )
    )}`
  }
  if (b.messageDeletes.length > 0) {
    yield* sql`DELETE FROM dex_messages WHERE flow_id = ${flowId} AND id IN ${sql.in(b.messageDeletes as Array<number>)}`
  }
  if (b.messages.length > 0) {
    yield* sql`INSERT INTO dex_messages ${sql.insert(rows(b.messages.map((m) => ({ flow_id: flowId, ...m }))))}`
  }
  // the history rows, the staged stream messages and the request's reply: on Postgres in one statement
  const inserts: Array<Fragment> = []
  if (b.history.length > 0) {
    inserts.push(
      sql`INSERT INTO dex_history ${sql.insert(rows(b.history.map((h) => ({ ...h, runner: b.fence.runner }))))}`
    )
  }
  if (b.streams !== undefined && b.streams.length > 0) inserts.push(streamRowsInsert(sql, b.streams))
  // the request's reply, unless one is stored already (the request was sent again after its answer was lost: the
  // transition rolls back and the request is answered from the stored reply)
  const reply =
    b.reply === undefined
      ? undefined
      : sql`INSERT INTO dex_replies (flow_id, request_id, reply, at)
          VALUES (${flowId}, ${b.reply.requestId}, ${b.reply.reply}, ${b.reply.at})
          ON CONFLICT (flow_id, request_id) DO NOTHING RETURNING request_id`
  const stored = yield* insertAll(sql, d, inserts, reply)
  if (b.reply !== undefined && stored.length === 0) return yield* new AlreadyAnswered({ requestId: b.reply.requestId })
  if (b.pruneHistory !== undefined) {
    yield* sql`DELETE FROM dex_history WHERE flow_id = ${flowId} AND id < (SELECT id FROM dex_history
      WHERE flow_id = ${flowId} ORDER BY id DESC LIMIT 1 OFFSET ${b.pruneHistory - 1})`
  }
  if (b.pruneHistory !== undefined) yield* markHistoryRetention(sql, flowId)
  if (b.retention !== undefined) yield* applyRetention(sql, d, flowId, b.retention)
  // readers in other processes hear of the commit from the caller's last statement, with the lease check
  // (`requireLeaseAndNotify`)
  return true
})

/**
 * Runs independent inserts of one transaction and `returning` (an insert with `RETURNING`), giving the rows
 * `returning` returned: on Postgres in one statement (data-modifying CTEs, one round trip), on SQLite one each.
 */
const insertAll = (
  sql: Sql,
  d: Driver,
  inserts: ReadonlyArray<Fragment>,
  returning: Fragment | undefined
): Effect.Effect<ReadonlyArray<unknown>, SqlError> => {
  const all = returning === undefined ? inserts : [...inserts, returning]
  if (all.length === 0) return Effect.succeed([])
  if (d.dialect === "pg" && all.length > 1) {
    const ctes = sql.csv(all.map((f, i) => sql`${sql(`insert_${i}`)} AS (${f})`))
    return returning === undefined
      ? sql`WITH ${ctes} SELECT 1 AS one`.pipe(Effect.as([]))
      : sql`WITH ${ctes} SELECT * FROM ${sql(`insert_${all.length - 1}`)}`
  }
  return Effect.andThen(
    Effect.forEach(inserts, (f) => sql`${f}`, { discard: true }),
    returning === undefined ? Effect.succeed([]) : sql`${returning}`
  )
}

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

/** Which attempt a heartbeat is for, under which fence, when, and the checkpoint it saves (or `null`). */
type HeartbeatOf = [
  fence: Fence,
  flowId: string,
  step_execution_id: string,
  attempt: number,
  at: number,
  checkpoint: string | null
]

/** The fenced heartbeat UPDATE (`RETURNING attempt`), with `more` added to its WHERE. */
const heartbeatUpdate = (
  sql: Sql,
  d: Driver,
  more: Fragment,
  ...[fence, flowId, step_execution_id, attempt, at, checkpoint]: HeartbeatOf
) =>
  sql`UPDATE dex_attempts SET heartbeat_at = ${at}, output_at = COALESCE(output_at, ${at}),
    checkpoint = COALESCE(${checkpoint}, checkpoint) WHERE flow_id = ${flowId} AND step_execution_id = ${step_execution_id}
    AND attempt = ${attempt} AND ${ownerHolds(sql, d, flowId, fence)} ${more} RETURNING attempt`

/**
 * A heartbeat: the attempt's first one marks it as having produced output. Fenced in the same statement:
 * `false` when `fence` is no longer the Flow's owner (nothing is written).
 */
export const recordHeartbeat = (sql: Sql, d: Driver, ...beat: HeartbeatOf) =>
  Effect.map(sql`${heartbeatUpdate(sql, d, sql``, ...beat)}`, (rows) => rows.length > 0)

/**
 * Postgres: a heartbeat with stream messages as one statement, outside any transaction (it commits alone): the
 * fenced heartbeat, the messages, inserted only when it was written, and the commit notice. The fence is the
 * statement's: the owner row is share-locked (`FOR SHARE`) and the Flow's shard lock must not be another
 * runner's (as `requireLease` checks before a transition's COMMIT), both in the heartbeat's WHERE, so a
 * statement of an owner that lost the Flow, or a runner that lost the shard, writes nothing; a process paused
 * during it pauses nothing on the server, which runs it whole. `false` when the fence refused it.
 */
export const recordHeartbeatWithRows = (
  sql: Sql,
  d: Driver,
  streamRows: ReadonlyArray<StreamRow>,
  ...heartbeat: HeartbeatOf
) => {
  const [fence, flowId] = heartbeat
  const lease = fence.lease === undefined ? sql`` : sql`AND NOT ${leaseTaken(sql, fence.lease)}`
  const beat = heartbeatUpdate(sql, d, lease, ...heartbeat)
  return Effect.map(
    streamRows.length === 0
      ? sql<{ beat: unknown }>`WITH beat AS (${beat}) SELECT COUNT(*) AS beat FROM beat`
      : sql<{ beat: unknown }>`WITH beat AS (${beat}), written AS (
          INSERT INTO dex_stream (flow_type, stream, flow_id, step_execution_id, attempt, value, bytes, at, runner)
          SELECT r.flow_type, r.stream, r.flow_id, r.step_execution_id, r.attempt, r.value, r.bytes, r.at, r.runner
          FROM json_populate_recordset(NULL::dex_stream, ${JSON.stringify(streamRows)}::json) r
          WHERE EXISTS (SELECT 1 FROM beat) RETURNING 1)
        SELECT (SELECT COUNT(*) FROM beat) AS beat,
          (SELECT pg_notify(${COMMIT_CHANNEL}, ${flowId}) FROM written LIMIT 1) AS notified`,
    (rows) => num(rows[0]?.beat ?? 0) > 0
  )
}

/** One heartbeat of {@link recordHeartbeats}: which attempt, under which owner epoch, when, and its checkpoint. */
export interface HeartbeatRow {
  readonly flow_id: string
  readonly step_execution_id: string
  readonly attempt: number
  readonly epoch: number
  readonly at: number
  readonly checkpoint: string | null
}

/**
 * SQLite: the heartbeats of several attempts in one statement (an `UPDATE ... FROM` over their values), each
 * fenced by its own owner epoch in the WHERE, as {@link recordHeartbeat}'s; each attempt at most once. Returns
 * the attempts it wrote (`flow_id`, `step_execution_id`, `attempt`): one it left out was refused by its fence.
 * The caller holds the transaction.
 */
export const recordHeartbeats = (sql: Sql, beats: ReadonlyArray<HeartbeatRow>) =>
  sql<{ flow_id: string; step_execution_id: string; attempt: unknown }>`WITH
    b(flow_id, step_execution_id, attempt, epoch, at, checkpoint) AS (VALUES ${sql.csv(
      beats.map((b) => sql`(${b.flow_id}, ${b.step_execution_id}, ${b.attempt}, ${b.epoch}, ${b.at}, ${b.checkpoint})`)
    )})
    UPDATE dex_attempts SET heartbeat_at = b.at, output_at = COALESCE(dex_attempts.output_at, b.at),
      checkpoint = COALESCE(b.checkpoint, dex_attempts.checkpoint)
    FROM b WHERE dex_attempts.flow_id = b.flow_id AND dex_attempts.step_execution_id = b.step_execution_id
      AND dex_attempts.attempt = b.attempt
      AND EXISTS (SELECT 1 FROM dex_owners o WHERE o.flow_id = b.flow_id AND o.epoch = b.epoch)
    RETURNING flow_id, step_execution_id, attempt`

/** One heartbeat of {@link recordHeartbeatsWithRows}: the attempt's heartbeat, its fence's shard lease, its rows. */
export interface FencedHeartbeat {
  readonly beat: HeartbeatRow
  /** The shard lock the attempt's owner claimed the Flow under (cluster runners), checked as the single path's. */
  readonly lease: ShardLease | undefined
  /** The stream messages written with the heartbeat, only when the heartbeat is (in their order). */
  readonly rows: ReadonlyArray<StreamRow>
}

/**
 * Postgres: the heartbeats with stream messages of several attempts as one statement, outside any transaction
 * (it commits alone), as {@link recordHeartbeatWithRows} is for one: each attempt's heartbeat is fenced by its
 * own owner row, share-locked (`FOR SHARE`) at its own epoch, and by its own shard lock, which must not be
 * another runner's (attempts of different shards each check theirs); the messages of the attempts written are
 * inserted in their order, the others' never; and one commit notice goes out per Flow with a message written
 * (`pg_notify` is transactional: with the statement's commit). Each attempt at most once.
 * Returns the attempts it wrote (`flow_id`, `step_execution_id`, `attempt`): one it left out was refused.
 *
 * Lock order: the owner rows first, share-locked in `flow_id` order (`owners`), then the attempt rows, locked
 * in key order, `(flow_id, step_execution_id, attempt)`, byte order (`locked`, `ORDER BY ... FOR NO KEY
 * UPDATE`: Postgres sorts, then locks), before the UPDATE writes them (it then waits for no row). The
 * transitions lock the same way (the group commit runs them in `flow_id` order, and `writeTransition` writes a
 * Flow's attempts in key order), so two batches, or a batch and a group commit, that want the same attempt
 * rows wait for each other instead of deadlocking. A share lock on an owner row waits only for a claim, which
 * updates that one row in a statement of its own and waits for nothing while it holds it.
 */
export const recordHeartbeatsWithRows = (sql: Sql, beats: ReadonlyArray<FencedHeartbeat>) => {
  const values = beats.map(({ beat, lease }) => ({
    ...beat,
    lease_app: lease?.applicationName ?? null,
    lease_class: lease?.classId ?? null,
    lease_obj: lease?.objId ?? null
  }))
  const streamRows = beats.flatMap((b) => b.rows)
  return sql<{ flow_id: string; step_execution_id: string; attempt: unknown }>`WITH b AS (
      SELECT * FROM json_to_recordset(${JSON.stringify(values)}::json) AS x(flow_id text, step_execution_id text,
        attempt integer, epoch bigint, at bigint, checkpoint text, lease_app text, lease_class oid, lease_obj oid)),
    owners AS MATERIALIZED (
      SELECT o.flow_id, o.epoch FROM dex_owners o JOIN (SELECT DISTINCT flow_id, epoch FROM b) k
        ON o.flow_id = k.flow_id AND o.epoch = k.epoch
      ORDER BY o.flow_id COLLATE "C"
      FOR SHARE OF o),
    locked AS MATERIALIZED (
      SELECT a.flow_id, a.step_execution_id, a.attempt FROM dex_attempts a
      JOIN b ON a.flow_id = b.flow_id AND a.step_execution_id = b.step_execution_id AND a.attempt = b.attempt
      WHERE EXISTS (SELECT 1 FROM owners WHERE owners.flow_id = b.flow_id AND owners.epoch = b.epoch)
        AND (b.lease_app IS NULL OR NOT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.granted AND l.classid = b.lease_class AND l.objid = b.lease_obj
          AND l.objsubid = 2 AND s.datname = current_database() AND s.application_name IS DISTINCT FROM b.lease_app))
      ORDER BY a.flow_id COLLATE "C", a.step_execution_id COLLATE "C", a.attempt
      FOR NO KEY UPDATE OF a),
    beat AS (
      UPDATE dex_attempts a SET heartbeat_at = b.at, output_at = COALESCE(a.output_at, b.at),
        checkpoint = COALESCE(b.checkpoint, a.checkpoint)
      FROM locked JOIN b ON b.flow_id = locked.flow_id AND b.step_execution_id = locked.step_execution_id
        AND b.attempt = locked.attempt
      WHERE a.flow_id = locked.flow_id AND a.step_execution_id = locked.step_execution_id
        AND a.attempt = locked.attempt
      RETURNING a.flow_id, a.step_execution_id, a.attempt),
    written AS (
      INSERT INTO dex_stream (flow_type, stream, flow_id, step_execution_id, attempt, value, bytes, at, runner)
      SELECT r.flow_type, r.stream, r.flow_id, r.step_execution_id, r.attempt, r.value, r.bytes, r.at, r.runner
      FROM json_populate_recordset(NULL::dex_stream, ${JSON.stringify(streamRows)}::json) WITH ORDINALITY r
      WHERE EXISTS (SELECT 1 FROM beat WHERE beat.flow_id = r.flow_id
        AND beat.step_execution_id = r.step_execution_id AND beat.attempt = r.attempt)
      ORDER BY r.ordinality
      RETURNING flow_id)
    SELECT beat.flow_id, beat.step_execution_id, beat.attempt,
      (SELECT COUNT(*) FROM (SELECT pg_notify(${COMMIT_CHANNEL}, w.flow_id)
        FROM (SELECT DISTINCT flow_id FROM written) w) n) AS notices
    FROM beat`
}

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
export const loadAttribute = (sql: Sql, d: Driver, flowId: string, name: string, key: string) =>
  Effect.map(
    d.values.decodeRows(sql<{ value: StoredValue }>`SELECT value FROM dex_attrs WHERE flow_id = ${flowId}
      AND name = ${name} AND key = ${key} ORDER BY version DESC LIMIT 1`),
    (rows) => rows[0]?.value ?? undefined
  )

/**
 * A Flow's committed state in one statement (one consistent snapshot on both databases): the newest stored
 * version of each attribute key that holds a value, and every queued message, oldest first. Writes nothing.
 */
export const loadCommittedState = (
  sql: Sql,
  d: Driver,
  flowId: string
): Effect.Effect<ReadonlyArray<CommittedStateRow>, SqlError> =>
  d.values.decodeRows(sql<StoredRow<CommittedStateRow>>`
    SELECT 'attr' AS kind, a.name AS name, a.key AS key, a.value AS value, NULL AS id FROM dex_attrs a
      WHERE a.flow_id = ${flowId} AND a.value IS NOT NULL AND a.version = (
        SELECT MAX(b.version) FROM dex_attrs b WHERE b.flow_id = a.flow_id AND b.name = a.name AND b.key = a.key)
    UNION ALL
    SELECT 'message' AS kind, m.channel AS name, m.key AS key, m.value AS value, m.id AS id FROM dex_messages m
      WHERE m.flow_id = ${flowId}
    ORDER BY kind, id`)

/** A row of a read as the driver returns it: its `value` as stored (`values.ts`). */
type StoredRow<R extends { readonly value: string | null }> = Omit<R, "value"> & {
  readonly value: R["value"] | Uint8Array
}

/** One row of {@link loadCommittedAttributes} or {@link loadCommittedAttributesOf}. */
export interface QueryStateRow {
  /**
   * `flow`: the Flow's row (`value` its `run_id`, `version` its version); `attr`; `held`: the newest stored
   * version of a key the caller holds a value of (`value` `null`); `message` (queued).
   */
  readonly kind: "flow" | "attr" | "held" | "message"
  readonly name: string
  readonly key: string
  /** `null` for `held`, and from {@link loadCommittedAttributesOf} when the key's newest version deletes it. */
  readonly value: string | null
  /** The message ID; `null` for the other kinds. */
  readonly id: unknown
  /** The Flow's version for `flow`, the stored version for `attr` and `held`; `null` for a message. */
  readonly version: unknown
}

/**
 * What a query reads first, in one statement (one consistent snapshot): the Flow's version and run, the current
 * value of every attribute key except those of the attributes named in `lazy`, the newest stored version (not
 * the value) of each `held` key, and every queued message. The values of the `lazy` attributes (a
 * long session's message chunks) are read as the handler asks for them ({@link loadCommittedAttributesOf}),
 * unless the caller holds the value of the version read here. The rows come in no order (an `ORDER BY` would
 * sort every value the statement reads): the caller puts the messages in ID order. Writes nothing.
 *
 * With `since` (a Flow version of the same run whose values the caller holds), a current value stored at or
 * below `since` comes without its text (`value` `null`; a delete never comes): a stored row never changes, so it
 * is the value the caller holds for that key (a session's window of messages is not read again after a commit
 * that added a few).
 */
export const loadCommittedAttributes = (
  sql: Sql,
  d: Driver,
  flowId: string,
  lazy: ReadonlyArray<string>,
  held: ReadonlyArray<{ readonly name: string; readonly key: string }> = [],
  since?: number
): Effect.Effect<ReadonlyArray<QueryStateRow>, SqlError> =>
  d.values.decodeRows(sql<StoredRow<QueryStateRow>>`
    ${flowVersionRow(sql, flowId)}
    UNION ALL
    ${currentAttrRows(
      sql,
      flowId,
      sql`${lazy.length === 0 ? sql`1 = 1` : sql`a.name NOT IN ${sql.in(lazy as Array<string>)}`} AND a.value IS NOT NULL`,
      since
    )}
    ${held.length === 0 ? sql`` : sql`UNION ALL ${newestVersionRows(sql, flowId, held)}`}
    UNION ALL
    SELECT 'message' AS kind, m.channel AS name, m.key AS key, m.value AS value, m.id AS id, NULL AS version
      FROM dex_messages m WHERE m.flow_id = ${flowId}`)

/** The Flow's row of a query read: its run (`value`) and version. */
const flowVersionRow = (sql: Sql, flowId: string) =>
  sql`SELECT 'flow' AS kind, '' AS name, '' AS key, f.run_id AS value, CAST(NULL AS BIGINT) AS id,
      f.version AS version
      FROM dex_flows f WHERE f.flow_id = ${flowId}`

/**
 * The newest stored version of each attribute key of the Flow that `where` selects, with that version; with
 * `since`, the value only of a version after it (`null` otherwise).
 */
const currentAttrRows = (sql: Sql, flowId: string, where: Fragment, since?: number) =>
  sql`SELECT 'attr' AS kind, a.name AS name, a.key AS key,
      ${since === undefined ? sql`a.value` : sql`CASE WHEN a.version > ${since} THEN a.value END`} AS value,
      CAST(NULL AS BIGINT) AS id, a.version AS version
      FROM dex_attrs a
      WHERE a.flow_id = ${flowId} AND ${where} AND a.version = (
        SELECT MAX(b.version) FROM dex_attrs b WHERE b.flow_id = a.flow_id AND b.name = a.name AND b.key = a.key)`

/**
 * The newest stored version of each of `keys` that has a row (a delete too), without its value. The keys go by
 * name into `key IN (...)` lists, each an index lookup per key (an `OR` of name-and-key pairs is a scan of the
 * Flow's rows).
 */
const newestVersionRows = (
  sql: Sql,
  flowId: string,
  keys: ReadonlyArray<{ readonly name: string; readonly key: string }>
) => {
  const byName = new Map<string, Array<string>>()
  for (const k of keys) {
    const list = byName.get(k.name)
    if (list === undefined) byName.set(k.name, [k.key])
    else list.push(k.key)
  }
  return sql`SELECT 'held' AS kind, a.name AS name, a.key AS key, NULL AS value, CAST(NULL AS BIGINT) AS id,
      a.version AS version
      FROM dex_attrs a
      WHERE a.flow_id = ${flowId} AND (${sql.or([...byName].map(([name, list]) => sql`(a.name = ${name} AND a.key IN ${sql.in(list)})`))})
      AND a.version = (
        SELECT MAX(b.version) FROM dex_attrs b WHERE b.flow_id = a.flow_id AND b.name = a.name AND b.key = a.key)`
}

/**
 * The current values of some attribute keys (`key` given) and of whole attributes (`key` undefined: every key
 * of the AttributeMap), with the Flow's version and run, in one statement: what a query's handler asked for
 * after {@link loadCommittedAttributes}. Each value comes with its stored version, and the Flow with its
 * current version, so a caller tells whether a value changed after its first statement. Writes nothing.
 */
export const loadCommittedAttributesOf = (
  sql: Sql,
  d: Driver,
  flowId: string,
  wanted: ReadonlyArray<{ readonly name: string; readonly key: string | undefined }>
): Effect.Effect<ReadonlyArray<QueryStateRow>, SqlError> =>
  d.values.decodeRows(sql<StoredRow<QueryStateRow>>`
    ${flowVersionRow(sql, flowId)}
    UNION ALL
    ${currentAttrRows(
      sql,
      flowId,
      sql`(${sql.or(
        wanted.map((w) =>
          w.key === undefined ? sql`(a.name = ${w.name})` : sql`(a.name = ${w.name} AND a.key = ${w.key})`
        )
      )})`
    )}`)
