// Streams: best-effort messages a running attempt emits, bounded per (Flow type, stream) by bytes.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { EngineConfigShape } from "../EngineConfig.ts"
import type { StreamDef } from "../Flow.ts"
import * as Metrics from "../Metrics.ts"
import { byteLength, encodeJson } from "./state.ts"
import type { Sql } from "./store.ts"

/** Writes one stream message; a full stream or an oversized message drops it, and nothing here fails a Step. */
export const emitStream = <A>(
  sql: Sql,
  config: EngineConfigShape,
  flowType: string,
  stream: StreamDef<A>,
  flowId: string,
  stepExecutionId: string,
  attempt: number,
  value: A,
  counters?: { streamRejectedWrites: number; streamTrims: number; readonly registry?: Metrics.Registry }
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const text = encodeJson(stream.schema, value)
    const size = byteLength(text)
    if (size > config.maxStreamMessageBytes) {
      if (counters) counters.streamRejectedWrites++
      return
    }
    const charge = size + byteLength(flowId) + byteLength(stepExecutionId) + 512
    const now = yield* Clock.currentTimeMillis
    yield* sql.withTransaction(
      Effect.gen(function* () {
        const usage = yield* sql<{ used: unknown }>`SELECT used FROM dex_stream_usage
          WHERE flow_type = ${flowType} AND stream = ${stream.name}`
        let used = usage.length === 0 ? 0 : Number(usage[0]!.used)
        if (usage.length === 0) {
          yield* sql`INSERT INTO dex_stream_usage (flow_type, stream, used, trimmed_through)
            VALUES (${flowType}, ${stream.name}, 0, 0)`
        }
        if (used + charge > stream.capacityBytes) {
          // full: the write is rejected, the Step goes on
          if (counters) counters.streamRejectedWrites++
          return
        }
        yield* sql`INSERT INTO dex_stream (flow_type, stream, flow_id, step_execution_id, attempt, value, bytes, at)
          VALUES (${flowType}, ${stream.name}, ${flowId}, ${stepExecutionId}, ${attempt}, ${text}, ${charge}, ${now})`
        used += charge
        if (counters?.registry)
          Metrics.record(counters.registry, Metrics.streamBytes, size, { flow_type: flowType, stream: stream.name })
        let trimmedThrough: number | undefined
        if (used > stream.capacityBytes * 0.9) {
          const oldest = yield* sql<{ seq: unknown; bytes: unknown }>`SELECT seq, bytes FROM dex_stream
            WHERE flow_type = ${flowType} AND stream = ${stream.name} ORDER BY seq LIMIT 10000`
          for (const row of oldest) {
            if (used <= stream.capacityBytes * 0.8) break
            used -= Number(row.bytes)
            trimmedThrough = Number(row.seq)
          }
          if (trimmedThrough !== undefined) {
            if (counters) counters.streamTrims++
            yield* sql`DELETE FROM dex_stream WHERE flow_type = ${flowType} AND stream = ${stream.name}
              AND seq <= ${trimmedThrough}`
          }
        }
        if (trimmedThrough === undefined) {
          yield* sql`UPDATE dex_stream_usage SET used = ${used} WHERE flow_type = ${flowType} AND stream = ${stream.name}`
        } else {
          yield* sql`UPDATE dex_stream_usage SET used = ${used}, trimmed_through = ${trimmedThrough}
            WHERE flow_type = ${flowType} AND stream = ${stream.name}`
        }
      })
    )
  }).pipe(Effect.ignoreCause)
