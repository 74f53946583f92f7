// Retention: the purge of closed Flows, the retention pass of a running one, and where kept records start.
import * as Entity from "effect/cluster/Entity"
import * as Snowflake from "effect/cluster/Snowflake"
import * as Effect from "effect/Effect"
import { KEYED_PREFIX } from "../protocol.ts"
import type { Driver } from "./driver.ts"
import {
  num,
  type RetentionKind,
  type RetentionMarkRow,
  type RetentionPass,
  type Sql,
  streamRetentionKind
} from "./rows.ts"

/** effect/cluster's keep-alive message (`Entity.keepAlive`): a fresh request ID each time, never sent again. */
const KEEP_ALIVE_TAG = Entity.KeepAliveRpc._tag

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

const FINAL_STATUSES = ["completed", "failed", "cancelled"]

/** A retention mark, moved forward only. */
const writeMark = (sql: Sql, flowId: string, kind: RetentionKind, keptFrom: number) =>
  sql`INSERT INTO dex_retention (flow_id, kind, kept_from) VALUES (${flowId}, ${kind}, ${keptFrom})
    ON CONFLICT (flow_id, kind) DO UPDATE SET kept_from = CASE WHEN excluded.kept_from > dex_retention.kept_from
      THEN excluded.kept_from ELSE dex_retention.kept_from END`

/** After the history window pruned: the oldest kept history event is where the retained history starts. */
export const markHistoryRetention = Effect.fnUntraced(function* (sql: Sql, flowId: string) {
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
 * - stored replies of keyed requests older than the reply retention (a retry after it runs the request again),
 *   and those of the other requests once no resend of them can arrive (`RESEND_WINDOW_MS`, or the reply
 *   retention when it is shorter);
 * - effect/cluster's processed messages to the Flow's entity sent before the cutoff, and their replies: a
 *   processed message is never delivered again, and a sender that retries after the cutoff gets the engine's
 *   stored reply (`dex_replies`), which outlives it. A processed keep-alive message goes whatever its age: it has
 *   no primary key to deduplicate by and its sender (the entity itself) never sends its request ID again.
 * On SQLite it then gives free pages back (`PRAGMA incremental_vacuum`; the embedded engine opens new files with
 * `auto_vacuum = INCREMENTAL`), so the file follows what is kept instead of its high-water mark.
 */
export const applyRetention = Effect.fnUntraced(function* (sql: Sql, d: Driver, flowId: string, pass: RetentionPass) {
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
  if (pass.resentRepliesBefore > pass.repliesBefore) {
    yield* sql`DELETE FROM dex_replies WHERE flow_id = ${flowId} AND at < ${pass.resentRepliesBefore}
      AND request_id NOT LIKE ${`${KEYED_PREFIX}%`}`
  }
  if (pass.clusterMessages !== undefined) {
    const { entityType, sentBefore } = pass.clusterMessages
    const processed = d.processedTrue
    const done = sql`SELECT id FROM cluster_messages WHERE entity_type = ${entityType} AND entity_id = ${flowId}
      AND kind = 0 AND processed = ${processed} AND (id < ${snowflakeAt(sentBefore)} OR tag = ${KEEP_ALIVE_TAG})`
    yield* sql`DELETE FROM cluster_replies WHERE request_id IN (${done})`
    yield* sql`DELETE FROM cluster_messages WHERE entity_type = ${entityType} AND entity_id = ${flowId}
      AND request_id IN (${done})`
  }
  // SQLite: the file gives back free pages (`sqlite.ts`)
  yield* d.afterRetention
})

/** A Flow's retention marks (none until a retention pass or the history window deleted something). */
export const loadRetentionMarks = (sql: Sql, flowId: string) =>
  Effect.map(
    sql<{ kind: string; kept_from: unknown }>`SELECT kind, kept_from FROM dex_retention WHERE flow_id = ${flowId}`,
    (rows): Array<RetentionMarkRow> => rows.map((r) => ({ kind: r.kind, keptFrom: num(r.kept_from) }))
  )
