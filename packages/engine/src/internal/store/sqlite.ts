// The SQLite driver (the embedded engine, `node:sqlite`): one writer at a time and one process per file, so no
// row or advisory locks; free pages go back to the file after a retention pass; a large attribute value is
// stored compressed (`values.ts`), so the file's schema version is 4.
import * as Effect from "effect/Effect"
import type { Driver } from "./driver.ts"
import { type Fence, SCHEMA_VERSION, type Sql } from "./rows.ts"
import { compressed } from "./values.ts"

/** The free pages one retention pass gives back to the file system (SQLite), 1 MiB at the default page size. */
const VACUUM_PAGES = 256

/** The SQLite driver over `sql`. */
export const make = (sql: Sql): Driver => ({
  dialect: "sqlite",
  ownerCheckInFlowUpdate: true,
  autoId: "INTEGER PRIMARY KEY AUTOINCREMENT",
  keyedTable: " WITHOUT ROWID",
  values: compressed,
  schemaVersion: "4",
  readsAlso: SCHEMA_VERSION,
  tableNames: sql<{ n: string }>`SELECT name AS n FROM sqlite_master WHERE type = 'table'`,
  lockedMigration: (effect) => effect,
  forShare: sql.literal(""),
  fenceCheck: (flowId: string, fence: Fence) =>
    sql`SELECT epoch FROM dex_owners WHERE flow_id = ${flowId} AND epoch = ${fence.epoch}`,
  processedTrue: sql.literal("1"),
  // the file gives back up to this many free pages (a no-op on a file made without auto_vacuum)
  afterRetention: Effect.asVoid(sql.unsafe(`PRAGMA incremental_vacuum(${VACUUM_PAGES})`)),
  notifyCommit: () => Effect.void,
  mayTrimStream: () => Effect.succeed(true)
})
