// The embedded engine's SQLite connection as it opens it: WAL, synchronous FULL, secure delete, an exclusive lock,
// and a page cache of 64 MiB unless `cacheSizeKiB` says otherwise; a cache size that is not a positive integer
// fails the layer with a typed EngineError that names the option, before any file is opened. The client's
// prepared-statement cache (approximately least recently used) gives the right rows with four times its capacity
// of distinct statements among hot ones.
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { SqlClient } from "effect/sql"
import { Engine, EngineError, NodeSqlite } from "../src/index.ts"

const dir = mkdtempSync(join(tmpdir(), "das-pragmas-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const pragmas = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const one = (name: string) =>
    Effect.map(sql.unsafe<Record<string, unknown>>(`PRAGMA ${name}`), (rows) => Object.values(rows[0]!)[0])
  return {
    cacheSize: yield* one("cache_size"),
    journalMode: yield* one("journal_mode"),
    synchronous: yield* one("synchronous"),
    secureDelete: yield* one("secure_delete"),
    lockingMode: yield* one("locking_mode")
  }
})

describe("the embedded engine's SQLite connection", () => {
  it.effect("opens with WAL, FULL, secure delete, an exclusive lock and a 64 MiB page cache", () =>
    Effect.gen(function* () {
      const read = yield* pragmas.pipe(Effect.provide(Engine.layerEmbedded({ filename: join(dir, "default.db") })))
      assert.deepStrictEqual(read, {
        cacheSize: -65536,
        journalMode: "wal",
        synchronous: 2,
        secureDelete: 1,
        lockingMode: "exclusive"
      })
    })
  )

  it.effect("takes another page cache size in KiB", () =>
    Effect.gen(function* () {
      const read = yield* pragmas.pipe(
        Effect.provide(Engine.layerEmbedded({ filename: join(dir, "small.db"), cacheSizeKiB: 1024 }))
      )
      assert.strictEqual(read.cacheSize, -1024)
    })
  )

  it.effect("refuses a cache size that is not a positive integer with an EngineError, opening no file", () =>
    Effect.gen(function* () {
      for (const cacheSizeKiB of [0, -5, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        const filename = join(dir, `bad-${String(cacheSizeKiB)}.db`)
        const exit = yield* Effect.exit(
          Layer.build(Engine.layerEmbedded({ filename, cacheSizeKiB })).pipe(Effect.scoped)
        )
        assert.isTrue(Exit.isFailure(exit), String(cacheSizeKiB))
        if (Exit.isFailure(exit)) {
          const error = exit.cause.reasons.find((r) => r._tag === "Fail")
          assert.isDefined(error, String(exit.cause))
          const failure = (error as { readonly error: unknown }).error
          assert.instanceOf(failure, EngineError)
          assert.include((failure as EngineError).reason, "cacheSizeKiB must be a positive integer")
        }
        assert.isFalse(existsSync(filename), filename)
      }
    })
  )

  it.effect("the prepared-statement cache: hot statements stay, new ones evict the oldest, results stay right", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`
      // three hot statements run on every round among 40 that each run once: four times the cache's capacity of 10
      for (let round = 0; round < 40; round++) {
        yield* sql`INSERT INTO t (k, v) VALUES (${round}, ${`v${round}`})`
        const rows = yield* sql<{ v: string }>`SELECT v FROM t WHERE k = ${round}`
        assert.deepStrictEqual(rows, [{ v: `v${round}` }])
        const count = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM t`
        assert.strictEqual(count[0]!.n, round + 1)
        const once = yield* sql.unsafe<{ x: number }>(`SELECT ${round} + k AS x FROM t WHERE k = 0`)
        assert.deepStrictEqual(once, [{ x: round }])
      }
    }).pipe(Effect.provide(NodeSqlite.layer({ filename: join(dir, "prepared.db"), prepareCacheSize: 10 })))
  )
})
