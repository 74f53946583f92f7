import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Redacted, Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import {
  createTestDatabase,
  databaseExists,
  findPostgresBinDir,
  layerTestDatabase,
  makeDatabaseUrl,
  PostgresUnavailable,
  resolveBaseUrl,
  startPrivateServer,
  withAdminClient,
  withTestDatabase
} from "./support/postgres.ts"

const databaseName = (url: string): string => decodeURIComponent(new URL(url).pathname.slice(1))

/** Runs a query on `url` through a pooled PgClient, the way engine code connects. */
const queryOn = <A extends object>(
  url: string,
  query: (sql: PgClient.PgClient) => Effect.Effect<ReadonlyArray<A>, unknown>
) =>
  PgClient.make({ url: Redacted.make(url), maxConnections: 1 }).pipe(
    Effect.flatMap(query),
    Effect.scoped,
    Effect.provide(Reactivity.layer)
  )

describe("makeDatabaseUrl", () => {
  it("replaces only the database of the base URL", () => {
    assert.strictEqual(
      makeDatabaseUrl("das_test_1", "postgres://user:secret@db.example:6543/postgres?sslmode=disable"),
      "postgres://user:secret@db.example:6543/das_test_1?sslmode=disable"
    )
    assert.strictEqual(
      makeDatabaseUrl("das_test_2", "postgres://postgres@127.0.0.1:5432/postgres"),
      "postgres://postgres@127.0.0.1:5432/das_test_2"
    )
  })
})

describe("withTestDatabase", () => {
  it.effect("creates a fresh database and drops it when the scope closes", () =>
    Effect.gen(function* () {
      const baseUrl = yield* resolveBaseUrl
      const scope = yield* Scope.make()
      const url = yield* Scope.provide(withTestDatabase, scope)
      const name = databaseName(url)
      assert.match(name, /^das_test_[0-9a-f]{16}$/)

      const rows = yield* queryOn<{ readonly one: number; readonly db: string }>(
        url,
        (sql) => sql`SELECT 1 AS one, current_database() AS db`
      )
      assert.deepStrictEqual(
        rows.map((row) => ({ ...row })),
        [{ one: 1, db: name }]
      )
      assert.isTrue(yield* databaseExists(baseUrl, name))

      // Leave a connection open: the drop must not wait for it.
      const lingering = yield* Scope.make()
      const client = yield* PgClient.makeClient({ url: Redacted.make(url) }).pipe(
        Scope.provide(lingering),
        Effect.provide(Reactivity.layer)
      )
      yield* client`SELECT 1`

      yield* Scope.close(scope, Exit.void)
      assert.isFalse(yield* databaseExists(baseUrl, name))
      yield* Scope.close(lingering, Exit.void)
    })
  )

  it.effect("gives every caller its own database", () =>
    Effect.gen(function* () {
      const [a, b] = yield* Effect.all([withTestDatabase, withTestDatabase], { concurrency: 2 })
      assert.notStrictEqual(databaseName(a), databaseName(b))
      yield* queryOn(a, (sql) => sql`CREATE TABLE marker (id int)`)
      const tables = yield* queryOn<{ readonly n: number }>(
        b,
        (sql) => sql`SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'marker'`
      )
      assert.strictEqual(tables[0]?.n, 0)
    })
  )

  it.effect("layerTestDatabase provides a PgClient on a fresh database", () =>
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      yield* sql`CREATE TABLE items (id int PRIMARY KEY, label text NOT NULL)`
      yield* sql`INSERT INTO items ${sql.insert([
        { id: 1, label: "a" },
        { id: 2, label: "b" }
      ])}`
      const rows = yield* sql<{ readonly label: string }>`SELECT label FROM items ORDER BY id`
      assert.deepStrictEqual(
        rows.map((row) => row.label),
        ["a", "b"]
      )
      const db = yield* sql<{ readonly db: string }>`SELECT current_database() AS db`
      assert.match(db[0]?.db ?? "", /^das_test_/)
    }).pipe(Effect.provide(layerTestDatabase))
  )
})

describe("createTestDatabase", () => {
  it.effect("creates a database that drop() removes, once", () =>
    Effect.gen(function* () {
      const baseUrl = yield* resolveBaseUrl
      const db = yield* Effect.promise(() => createTestDatabase())
      const name = databaseName(db.url)
      const rows = yield* queryOn<{ readonly one: number }>(db.url, (sql) => sql`SELECT 1 AS one`)
      assert.strictEqual(rows[0]?.one, 1)

      yield* Effect.promise(() => db.drop())
      yield* Effect.promise(() => db.drop())
      assert.isFalse(yield* databaseExists(baseUrl, name))
    })
  )
})

describe("startPrivateServer", () => {
  it.effect.skipIf(findPostgresBinDir() === undefined)(
    "runs initdb, starts a server, serves queries and removes everything when the scope closes",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const server = yield* Scope.provide(startPrivateServer(), scope)
        assert.isTrue(existsSync(join(server.dir, "data", "PG_VERSION")))
        assert.strictEqual(server.url, `postgres://postgres@127.0.0.1:${server.port}/postgres`)

        const rows = yield* withAdminClient(server.url, (sql) => sql<{ readonly one: number }>`SELECT 1 AS one`)
        assert.strictEqual(rows[0]?.one, 1)

        yield* Scope.close(scope, Exit.void)
        assert.isFalse(existsSync(server.dir))
        const afterStop = yield* Effect.exit(withAdminClient(server.url, (sql) => sql`SELECT 1`))
        assert.isTrue(Exit.isFailure(afterStop))
      }),
    30_000
  )

  it.effect("fails with PostgresUnavailable and an install hint when there are no server binaries", () =>
    Effect.gen(function* () {
      const emptyRoot = mkdtempSync(join(tmpdir(), "das-no-pg-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(emptyRoot, { recursive: true, force: true })))

      const error = yield* Effect.flip(Effect.scoped(startPrivateServer({ installRoot: emptyRoot })))
      assert.instanceOf(error, PostgresUnavailable)
      assert.strictEqual(error._tag, "PostgresUnavailable")
      assert.include(error.message, "apt-get install -y postgresql")
      assert.include(error.message, "DATABASE_URL")
    })
  )
})
