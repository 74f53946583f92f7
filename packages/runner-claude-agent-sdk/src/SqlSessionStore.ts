/**
 * A Claude Agent SDK `SessionStore` on the engine's own SQL database (`effect/sql` `SqlClient`: the embedded
 * SQLite file or the cluster's Postgres), so the harness transcript of a session lives beside the session
 * and a worker whose `configDir` never saw the session can resume it. Entries are kept per session ID and
 * subpath (the SDK's `projectKey` is ignored: session IDs come from Flow IDs and are unique); an entry whose
 * `uuid` is already stored is not stored again, so a retried batch appends nothing twice.
 *
 * @since 0.1.0
 */
import type { SessionKey, SessionStore, SessionStoreEntry } from "@anthropic-ai/claude-agent-sdk"
import * as Effect from "effect/Effect"
import { SqlClient } from "effect/sql"

/** A `SessionStore` that also says whether it holds a session's main transcript. */
export interface ClaudeSessionStore extends SessionStore {
  readonly exists: (sessionId: string) => Promise<boolean>
}

const TABLE = "claude_agent_sdk_session_entries"

/** Builds the store on the current `SqlClient`, creating its table when missing. */
export const make: Effect.Effect<ClaudeSessionStore, unknown, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const table = sql(TABLE)
  yield* sql.unsafe(
    `CREATE TABLE IF NOT EXISTS ${TABLE} (session_id TEXT NOT NULL, subpath TEXT NOT NULL, seq INTEGER NOT NULL, uuid TEXT, entry TEXT NOT NULL, PRIMARY KEY (session_id, subpath, seq))`
  )
  const services = yield* Effect.context<SqlClient.SqlClient>()
  const run = <A>(effect: Effect.Effect<A, unknown, SqlClient.SqlClient>) => Effect.runPromiseWith(services)(effect)
  const subpathOf = (key: SessionKey) => key.subpath ?? ""
  return {
    append: (key, entries) =>
      run(
        sql.withTransaction(
          Effect.gen(function* () {
            const sub = subpathOf(key)
            const rows = yield* sql<{
              readonly m: number | string | null
            }>`SELECT MAX(seq) AS m FROM ${table} WHERE session_id = ${key.sessionId} AND subpath = ${sub}`
            let seq = Number(rows[0]?.m ?? 0)
            for (const entry of entries) {
              if (typeof entry.uuid === "string") {
                const seen =
                  yield* sql`SELECT 1 FROM ${table} WHERE session_id = ${key.sessionId} AND subpath = ${sub} AND uuid = ${entry.uuid}`
                if (seen.length > 0) continue
              }
              seq += 1
              const uuid = typeof entry.uuid === "string" ? entry.uuid : null
              yield* sql`INSERT INTO ${table} (session_id, subpath, seq, uuid, entry) VALUES (${key.sessionId}, ${sub}, ${seq}, ${uuid}, ${JSON.stringify(entry)})`
            }
          })
        )
      ),
    load: (key) =>
      run(
        Effect.map(
          sql<{
            readonly entry: string
          }>`SELECT entry FROM ${table} WHERE session_id = ${key.sessionId} AND subpath = ${subpathOf(key)} ORDER BY seq`,
          (rows): Array<SessionStoreEntry> | null =>
            rows.length === 0 ? null : rows.map((r) => JSON.parse(r.entry) as SessionStoreEntry)
        )
      ),
    listSubkeys: (key) =>
      run(
        Effect.map(
          sql<{
            readonly subpath: string
          }>`SELECT DISTINCT subpath FROM ${table} WHERE session_id = ${key.sessionId} AND subpath <> ''`,
          (rows) => rows.map((r) => r.subpath)
        )
      ),
    exists: (sessionId) =>
      run(
        Effect.map(
          sql`SELECT 1 FROM ${table} WHERE session_id = ${sessionId} AND subpath = '' LIMIT 1`,
          (rows) => rows.length > 0
        )
      )
  }
})
