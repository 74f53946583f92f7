// Stream messages (`dex_stream`) and their trim marks (`dex_stream_usage`).
import * as Effect from "effect/Effect"
import { num, rows, type Sql, type StreamRow, streamRetentionKind } from "./rows.ts"

/** Stores stream messages (one statement). The caller holds the transaction and checked the fence. */
export const insertStreamRows = (sql: Sql, streamRows: ReadonlyArray<StreamRow>) =>
  streamRows.length === 0 ? Effect.void : Effect.asVoid(streamRowsInsert(sql, streamRows))

/** The insert of stream messages (at least one), as a statement to run or to embed in another. */
export const streamRowsInsert = (sql: Sql, streamRows: ReadonlyArray<StreamRow>) =>
  sql`INSERT INTO dex_stream ${sql.insert(rows(streamRows))}`

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
/** The bytes a stream of a Flow type holds (every Flow's messages). */
export const storedBytes = (sql: Sql, flowType: string, stream: string) =>
  Effect.map(
    sql<{ n: unknown }>`SELECT COALESCE(SUM(bytes), 0) AS n FROM dex_stream WHERE flow_type = ${flowType}
      AND stream = ${stream}`,
    (rows) => Number(rows[0]?.n ?? 0)
  )

/** A stream's oldest messages (at most 10,000): what a trim may delete. */
export const oldestMessages = (sql: Sql, flowType: string, stream: string) =>
  Effect.map(
    sql<{ seq: unknown; bytes: unknown }>`SELECT seq, bytes FROM dex_stream
        WHERE flow_type = ${flowType} AND stream = ${stream} ORDER BY seq LIMIT 10000`,
    (rows) => rows.map((r) => ({ seq: num(r.seq), bytes: num(r.bytes) }))
  )

/** Deletes a stream's messages through position `through`; returns the bytes deleted. */
export const deleteThrough = (sql: Sql, flowType: string, stream: string, through: number) =>
  Effect.map(
    sql<{ bytes: unknown }>`DELETE FROM dex_stream WHERE flow_type = ${flowType}
        AND stream = ${stream} AND seq <= ${through} RETURNING bytes`,
    (rows) => rows.reduce((n, r) => n + Number(r.bytes), 0)
  )

/** The trim mark: a resume token before `through` is refused; `used` is informational. */
export const markTrim = (sql: Sql, flowType: string, stream: string, used: number, through: number) =>
  Effect.asVoid(sql`INSERT INTO dex_stream_usage (flow_type, stream, used, trimmed_through)
        VALUES (${flowType}, ${stream}, ${used}, ${through})
        ON CONFLICT (flow_type, stream) DO UPDATE SET used = excluded.used,
        trimmed_through = CASE WHEN excluded.trimmed_through > dex_stream_usage.trimmed_through
          THEN excluded.trimmed_through ELSE dex_stream_usage.trimmed_through END`)

/** How far a stream of a Flow type was trimmed (`undefined` when never). */
export const loadTrimmedThrough = (sql: Sql, flowType: string, stream: string) =>
  Effect.map(
    sql<{ trimmed_through: unknown }>`SELECT trimmed_through FROM dex_stream_usage
              WHERE flow_type = ${flowType} AND stream = ${stream}`,
    (rows) => (rows.length === 0 ? undefined : Number(rows[0]!.trimmed_through))
  )

/** One stream message as a reader reads it. */
export interface StreamMessageRow {
  readonly seq: number
  readonly value: string
  readonly step_execution_id: string
  readonly attempt: number
  readonly at: number
}

/** A page of a Flow's stream: at most 500 messages after position `after`, oldest first. */
export const readStreamPage = (sql: Sql, flowId: string, stream: string, after: number) =>
  Effect.map(
    sql<any>`SELECT seq, value, step_execution_id, attempt, at FROM dex_stream WHERE flow_id = ${flowId}
            AND stream = ${stream} AND seq > ${after} ORDER BY seq LIMIT 500`,
    (rows): Array<StreamMessageRow> =>
      rows.map((r) => ({
        seq: num(r.seq),
        value: r.value,
        step_execution_id: r.step_execution_id,
        attempt: num(r.attempt),
        at: num(r.at)
      }))
  )
