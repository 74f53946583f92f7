// The Postgres driver (the cluster engine): row locks on the owner check, an idle limit on fenced transactions,
// advisory locks for the migration and for stream trims, NOTIFY of commits to other processes.
import * as Effect from "effect/Effect"
import { COMMIT_CHANNEL } from "../feed.ts"
import type { Driver } from "./driver.ts"
import { type Fence, orEngineError, SCHEMA_VERSION, type Sql } from "./rows.ts"
import { plain } from "./values.ts"

/** The Postgres driver over `sql`. */
export const make = (sql: Sql): Driver => ({
  dialect: "pg",
  ownerCheckInFlowUpdate: false,
  autoId: "BIGSERIAL PRIMARY KEY",
  keyedTable: "",
  values: plain,
  schemaVersion: SCHEMA_VERSION,
  readsAlso: undefined,
  tableNames: sql<{
    n: string
  }>`SELECT table_name AS n FROM information_schema.tables WHERE table_schema = current_schema()`,
  lockedMigration: (effect) =>
    sql.withTransaction(
      Effect.andThen(
        orEngineError(sql`SELECT pg_advisory_xact_lock(7264011377)`, "cannot lock the engine tables"),
        effect
      )
    ),
  // a claim (which updates the row) waits for every open fenced write, and a fenced write that waits for a
  // claim sees the new epoch and is refused
  forShare: sql.literal("FOR SHARE"),
  // the owner row stays share-locked until COMMIT, and the transaction's `idle_in_transaction_session_timeout`
  // is set, so a transaction left idle by a paused process ends before the shard lock it was opened under can
  // expire
  fenceCheck: (flowId: string, fence: Fence) =>
    fence.idleTimeoutMs === undefined
      ? sql`SELECT epoch FROM dex_owners WHERE flow_id = ${flowId} AND epoch = ${fence.epoch} FOR SHARE`
      : sql`SELECT epoch, set_config('idle_in_transaction_session_timeout', ${String(fence.idleTimeoutMs)}, true)
              AS idle FROM dex_owners WHERE flow_id = ${flowId} AND epoch = ${fence.epoch} FOR SHARE`,
  processedTrue: sql.literal("TRUE"),
  afterRetention: Effect.void,
  // repeats within one transaction are folded by the server
  notifyCommit: (flowId) => Effect.asVoid(sql`SELECT pg_notify(${COMMIT_CHANNEL}, ${flowId})`),
  mayTrimStream: (flowType, stream) =>
    Effect.map(
      sql<{ ok: boolean }>`SELECT pg_try_advisory_xact_lock(hashtextextended(${`${flowType}\u0001${stream}`},
              7264011378)) AS ok`,
      (rows) => rows[0]?.ok === true
    )
})
