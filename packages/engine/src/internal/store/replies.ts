// Stored replies of requests (`dex_replies`): a request sent again gets the reply its first commit stored.
import * as Effect from "effect/Effect"
import type { Sql } from "./rows.ts"

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
