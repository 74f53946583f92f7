// Streams: best-effort messages a running attempt emits, bounded per (Flow type, stream) by bytes.
//
// One write is one transaction (tried again on a database error, up to ten times): the owner's fence (refused: nothing is written and the attempt stops), the
// budget charged by one atomic upsert of `dex_stream_usage` (exact under concurrency: the row is created or
// incremented in the same statement, and the increment is refused when it would pass the capacity), the
// message, and at 90 % a trim back to 80 % that gives back exactly the bytes it deleted.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { EngineConfigShape } from "../EngineConfig.ts"
import type { StreamDef } from "../Flow.ts"
import * as Metrics from "../Metrics.ts"
import { errorInfo } from "./decision.ts"
import { byteLength, encodeJson } from "./state.ts"
import { type Fence, fenceCheck, requireLease, type Sql } from "./store.ts"

/** The runner counters a stream write moves. */
export interface StreamCounters {
  streamRejectedWrites: number
  streamTrims: number
  streamWriteErrors: number
  /** The runner's metrics registry: each written message adds its bytes to `durable_engine_stream_bytes_total`. */
  readonly registry?: Metrics.Registry | undefined
}

/** How often a stream write is tried before it is dropped (counted and logged). */
const WRITE_TRIES = 10

/** What became of one stream write. */
export type EmitResult = "written" | "dropped" | "fenced"

/**
 * Writes one stream message. A full stream or an oversized message drops it (counted); a database error drops
 * it too, counted and logged; `fenced` when this owner no longer holds the Flow (the caller stops the attempt).
 * Nothing here fails a Step.
 */
export const emitStream = <A>(
  sql: Sql,
  config: EngineConfigShape,
  fence: Fence,
  flowType: string,
  stream: StreamDef<A>,
  flowId: string,
  stepExecutionId: string,
  attempt: number,
  value: A,
  counters?: StreamCounters
): Effect.Effect<EmitResult> =>
  Effect.gen(function* () {
    const text = encodeJson(stream.schema, value)
    const size = byteLength(text)
    const charge = size + byteLength(flowId) + byteLength(stepExecutionId) + 512
    if (size > config.maxStreamMessageBytes || charge > stream.capacityBytes) {
      if (counters) counters.streamRejectedWrites++
      return "dropped" as const
    }
    const now = yield* Clock.currentTimeMillis
    const write = sql
      .withTransaction(
        Effect.gen(function* () {
          if (!(yield* fenceCheck(sql, flowId, fence))) return "fenced" as const
          const charged = yield* sql<{
            used: unknown
          }>`INSERT INTO dex_stream_usage (flow_type, stream, used, trimmed_through)
          VALUES (${flowType}, ${stream.name}, ${charge}, 0)
          ON CONFLICT (flow_type, stream) DO UPDATE SET used = dex_stream_usage.used + excluded.used
          WHERE dex_stream_usage.used + excluded.used <= ${stream.capacityBytes}
          RETURNING used`
          if (charged.length === 0) {
            // full: the write is rejected, the Step goes on
            if (counters) counters.streamRejectedWrites++
            return "dropped" as const
          }
          yield* sql`INSERT INTO dex_stream (flow_type, stream, flow_id, step_execution_id, attempt, value, bytes, at, runner)
          VALUES (${flowType}, ${stream.name}, ${flowId}, ${stepExecutionId}, ${attempt}, ${text}, ${charge}, ${now},
          ${fence.runner})`
          let used = Number(charged[0]!.used)
          if (counters?.registry)
            Metrics.record(counters.registry, Metrics.streamBytes, size, { flow_type: flowType, stream: stream.name })
          if (used > stream.capacityBytes * 0.9) {
            // the usage row is locked by this transaction: no other write of this stream runs until COMMIT
            const oldest = yield* sql<{ seq: unknown; bytes: unknown }>`SELECT seq, bytes FROM dex_stream
            WHERE flow_type = ${flowType} AND stream = ${stream.name} ORDER BY seq LIMIT 10000`
            let through: number | undefined
            for (const row of oldest) {
              if (used <= stream.capacityBytes * 0.8) break
              used -= Number(row.bytes)
              through = Number(row.seq)
            }
            if (through !== undefined) {
              const deleted = yield* sql<{ bytes: unknown }>`DELETE FROM dex_stream WHERE flow_type = ${flowType}
              AND stream = ${stream.name} AND seq <= ${through} RETURNING bytes`
              const freed = deleted.reduce((n, r) => n + Number(r.bytes), 0)
              if (counters) counters.streamTrims++
              yield* sql`UPDATE dex_stream_usage SET used = used - ${freed}, trimmed_through = ${through}
              WHERE flow_type = ${flowType} AND stream = ${stream.name}`
            }
          }
          // the lease, checked last: a runner that lost the shard lock meanwhile rolls back
          yield* requireLease(sql, flowId, fence)
          return "written" as const
        })
      )
      .pipe(Effect.catchTag("LeaseLost", () => Effect.succeed("fenced" as const)))
    // a transaction that failed (a dropped connection, a transaction the server ended) wrote nothing: try again,
    // on another connection (a stall that ended one transaction may have ended others of the pool too)
    return yield* Effect.retry(write, { times: WRITE_TRIES - 1, schedule: Schedule.spaced("50 millis") })
  }).pipe(
    Effect.catchCause((cause) => {
      if (counters) counters.streamWriteErrors++
      const { errorType, detail } = errorInfo(cause)
      return Effect.as(
        Effect.logWarning(
          `stream ${stream.name} of Flow ${flowId}: a write by ${stepExecutionId}#${attempt} was dropped: ${errorType}: ${detail}`
        ),
        "dropped" as const
      )
    })
  )
