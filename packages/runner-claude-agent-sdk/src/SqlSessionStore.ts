/**
 * A Claude Agent SDK `SessionStore` on the engine's own SQL database (`effect/sql` `SqlClient`: the embedded
 * SQLite file or the cluster's Postgres), so the harness transcript of a session lives beside the session
 * and a worker whose `configDir` never saw the session can resume it. Entries are kept per session ID and
 * subpath (the SDK's `projectKey` is ignored: session IDs come from Flow IDs and are unique); an entry whose
 * `uuid` is already stored is not stored again, so a retried batch appends nothing twice.
 *
 * The harness appends while a RunModel runs, outside the Step's transaction, so the store may hold entries
 * of an attempt that never committed (a killed or failed RunModel). The runner records the store's
 * `lastSeq` in the committed state of each RunModel and calls `truncate` with it when the next attempt
 * starts, so the harness never resumes from entries the committed record does not know. `truncate` also
 * makes its attempt the session's writer: the harness of each attempt appends through `forAttempt(owner)`,
 * and an append of an earlier attempt (a superseded RunModel whose harness still runs) is refused, so it
 * cannot land after the cut.
 *
 * @since 0.1.0
 */
import type { SessionKey, SessionStore, SessionStoreEntry } from "@anthropic-ai/claude-agent-sdk"
import * as Effect from "effect/Effect"
import { SqlClient } from "effect/sql"

/**
 * A `SessionStore` that also says how far a session's main transcript goes and cuts it back to a point: what
 * the runner needs to resume the harness from the committed state only.
 */
export interface ClaudeSessionStore extends SessionStore {
  /** Whether the store holds the session's main transcript. */
  readonly exists: (sessionId: string) => Promise<boolean>
  /** The position of the main transcript's last entry (its number of entries), 0 when there is none. */
  readonly lastSeq: (sessionId: string) => Promise<number>
  /**
   * Removes the main transcript's entries after position `seq` (every entry of the session, subagents' too,
   * when `seq` is 0) and returns the last position left.
   */
  readonly truncate: (sessionId: string, seq: number, owner?: string | undefined) => Promise<number>
  /**
   * The store as the harness of one attempt appends to it: an append to a session whose writer (the `owner`
   * of its last `truncate`) is another attempt's is refused with {@link SupersededAppendError} (the SDK
   * retries it, then reports a `mirror_error`); loads are the store's own.
   */
  readonly forAttempt: (owner: string) => SessionStore
}

/** An append of an attempt that is no longer the session's writer. */
export class SupersededAppendError extends Error {
  readonly sessionId: string
  constructor(sessionId: string) {
    super(`another attempt owns the transcript of session ${sessionId}: this append is refused`)
    this.name = "SupersededAppendError"
    this.sessionId = sessionId
  }
}

const TABLE = "claude_agent_sdk_session_entries"
const WRITERS = "claude_agent_sdk_session_writers"

/** Builds the store on the current `SqlClient`, creating its table when missing. */
export const make: Effect.Effect<ClaudeSessionStore, unknown, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const table = sql(TABLE)
  yield* sql.unsafe(
    `CREATE TABLE IF NOT EXISTS ${TABLE} (session_id TEXT NOT NULL, subpath TEXT NOT NULL, seq INTEGER NOT NULL, uuid TEXT, entry TEXT NOT NULL, PRIMARY KEY (session_id, subpath, seq))`
  )
  yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS ${WRITERS} (session_id TEXT PRIMARY KEY, owner TEXT NOT NULL)`)
  const writers = sql(WRITERS)
  const services = yield* Effect.context<SqlClient.SqlClient>()
  const run = <A>(effect: Effect.Effect<A, unknown, SqlClient.SqlClient>) => Effect.runPromiseWith(services)(effect)
  const subpathOf = (key: SessionKey) => key.subpath ?? ""
  const lastSeq = (sessionId: string) =>
    Effect.map(
      sql<{
        readonly m: number | string | null
      }>`SELECT MAX(seq) AS m FROM ${table} WHERE session_id = ${sessionId} AND subpath = ''`,
      (rows) => Number(rows[0]?.m ?? 0)
    )
  const append = (key: SessionKey, entries: ReadonlyArray<SessionStoreEntry>, owner: string | undefined) =>
    run(
      sql.withTransaction(
        Effect.gen(function* () {
          if (owner !== undefined) {
            // writing the writer's row first takes its lock (a Postgres row lock, SQLite's write lock), so a
            // `truncate` of a later attempt waits for this append and cuts it, or this append sees the new owner
            yield* sql`UPDATE ${writers} SET owner = ${owner} WHERE session_id = ${key.sessionId} AND owner = ${owner}`
            const current = yield* sql<{
              readonly owner: string
            }>`SELECT owner FROM ${writers} WHERE session_id = ${key.sessionId}`
            if (current.length > 0 && current[0]!.owner !== owner) {
              return yield* Effect.fail(new SupersededAppendError(key.sessionId))
            }
          }
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
    )
  const load = (key: SessionKey) =>
    run(
      Effect.map(
        sql<{
          readonly entry: string
        }>`SELECT entry FROM ${table} WHERE session_id = ${key.sessionId} AND subpath = ${subpathOf(key)} ORDER BY seq`,
        (rows): Array<SessionStoreEntry> | null =>
          rows.length === 0 ? null : rows.map((r) => JSON.parse(r.entry) as SessionStoreEntry)
      )
    )
  const listSubkeys = (key: { readonly sessionId: string }) =>
    run(
      Effect.map(
        sql<{
          readonly subpath: string
        }>`SELECT DISTINCT subpath FROM ${table} WHERE session_id = ${key.sessionId} AND subpath <> ''`,
        (rows) => rows.map((r) => r.subpath)
      )
    )
  return {
    append: (key, entries) => append(key, entries, undefined),
    load,
    listSubkeys,
    forAttempt: (owner) => ({ append: (key, entries) => append(key, entries, owner), load, listSubkeys }),
    lastSeq: (sessionId) => run(lastSeq(sessionId)),
    truncate: (sessionId, seq, owner) =>
      run(
        sql.withTransaction(
          Effect.gen(function* () {
            if (owner !== undefined) {
              yield* sql`INSERT INTO ${writers} (session_id, owner) VALUES (${sessionId}, ${owner}) ON CONFLICT (session_id) DO UPDATE SET owner = ${owner}`
            }
            if (seq <= 0) yield* sql`DELETE FROM ${table} WHERE session_id = ${sessionId}`
            else yield* sql`DELETE FROM ${table} WHERE session_id = ${sessionId} AND subpath = '' AND seq > ${seq}`
            return yield* lastSeq(sessionId)
          })
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
