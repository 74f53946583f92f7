// The `durable-engine inspect` command itself: the bin started as a child process over a real session's
// database, an embedded engine's SQLite file and (`--postgres URL`) a cluster engine's Postgres database this
// test creates, its page and JSON fetched over HTTP on 127.0.0.1, the session's Steps checked. Read-only: the
// SQLite file is byte for byte the same after the inspector served it (no journal, no WAL frame), and the Postgres
// database is switched to read-only transactions before the inspector connects (a write would fail, and the
// test checks that one does), so every answer it gives came from reads alone.
import { createHash } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Engine } from "@durable-agent/engine"
import { spawnNode } from "@durable-agent/engine/testing/ChildProcess"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import { SqlClient } from "effect/sql"
import { freePort } from "../../engine/test/support/ports.ts"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"
import { awaitTurns, type EngineFactory, type Kit, startAndAwait, weatherTool, withSession } from "./support.ts"

const here = dirname(fileURLToPath(import.meta.url))
const bin = join(here, "..", "..", "engine", "src", "bin", "durable-engine.ts")

/** The model reads the weather once, then answers. */
const script = [
  { toolCalls: [{ id: "r1", name: "get_weather", arguments: { city: "Paris" } }] },
  { text: "Sunny in Paris." }
]

/** The session's Step executions, in scheduling order. */
const STEPS = ["StartAgentSession-1", "RunModel-1", "CallTool-1", "ResumeTurn-1", "RunModel-2", "AwaitUserMessage-1"]

/** Runs one turn of session `s-cli` on `engine`, then closes the worker. */
const runSession = (engine: EngineFactory) =>
  withSession({ script, tools: (kit: Kit) => [weatherTool(kit)], engine }, () =>
    Effect.gen(function* () {
      yield* startAndAwait("s-cli", "weather in Paris?", (s) => (s.state?.turnCount ?? 0) >= 1, "the turn")
      yield* awaitTurns("s-cli", 1)
    })
  )

const getText = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(url)
    return { status: response.status, type: response.headers.get("content-type") ?? "", body: await response.text() }
  })

/** Starts `durable-engine inspect <args>`, fetches its page and JSON, and checks the session's Steps. */
const inspectOver = (args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const child = yield* spawnNode(bin, ["inspect", ...args, "--port", "0"])
    const listening = yield* child.waitFor("inspector on", 60_000)
    const url = /^(http:\/\/127\.0\.0\.1:\d+\/)/.exec(listening)?.[1]
    assert.isDefined(url, `the inspector tells its address on 127.0.0.1: ${listening}`)
    const page = yield* getText(url!)
    assert.strictEqual(page.status, 200)
    assert.include(page.type, "text/html")
    assert.include(page.body, "/api/flows", "the page reads the JSON API")
    const list = yield* getText(`${url}api/flows`)
    assert.strictEqual(list.status, 200)
    const flows = JSON.parse(list.body) as Array<{ flowId: string; flowType: string; status: string }>
    assert.deepStrictEqual(
      flows.map((f) => [f.flowId, f.flowType, f.status]),
      [["s-cli", "TestAgent", "running"]]
    )
    const detail = yield* getText(`${url}api/flows/s-cli`)
    assert.strictEqual(detail.status, 200)
    const flow = JSON.parse(detail.body) as {
      steps: Array<{ stepExecutionId: string; stepType: string; attempts: Array<{ outcome: string | null }> }>
    }
    assert.deepStrictEqual(
      flow.steps.map((s) => s.stepExecutionId),
      STEPS
    )
    assert.deepStrictEqual(
      flow.steps.filter((s) => s.stepType !== "AwaitUserMessage").map((s) => s.attempts.map((a) => a.outcome)),
      STEPS.slice(0, -1).map(() => ["success"])
    )
    const missing = yield* getText(`${url}api/flows/no-such-flow`)
    assert.strictEqual(missing.status, 404)
    // the API answers GET only
    const post = yield* Effect.promise(() => fetch(`${url}api/flows/s-cli`, { method: "POST" }))
    assert.strictEqual(post.status, 404)
    assert.notMatch(child.stderr(), /error/i, "the inspector logged no error")
    yield* child.kill()
  }).pipe(Effect.scoped)

const digest = (file: string) =>
  existsSync(file) ? createHash("sha256").update(readFileSync(file)).digest("hex") : null

describe("durable-engine inspect, the command", () => {
  it.live(
    "--db: serves a SQLite session database read-only; the page and its JSON show the session's Steps",
    () =>
      Effect.gen(function* () {
        const dir = mkdtempSync(join(tmpdir(), "das-inspect-cli-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
        const filename = join(dir, "sessions.db")
        yield* runSession(() => Engine.layerEmbedded({ filename, pollInterval: "50 millis" }))
        const wal = `${filename}-wal`
        const before = [digest(filename), digest(wal), digest(`${filename}-journal`)]
        assert.isNotNull(before[0])
        yield* inspectOver(["--db", filename])
        assert.strictEqual(digest(filename), before[0], "the database file is unchanged")
        assert.strictEqual(digest(`${filename}-journal`), before[2], "no rollback journal: no write transaction")
        // a reader of a WAL database may create an empty WAL; a write would have appended frames to it
        if (before[1] === null) assert.isAtMost(existsSync(wal) ? statSync(wal).size : 0, 32, "no WAL frame")
        else assert.strictEqual(digest(wal), before[1], "the WAL is unchanged")
      }).pipe(Effect.scoped),
    180_000
  )

  it.live(
    "--postgres: serves a cluster engine's database with read-only transactions; the page and its JSON show the Steps",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const runnerPort = yield* Effect.promise(freePort)
        yield* runSession(() =>
          Engine.layerCluster({ url, runnerPort, pollInterval: "50 millis", drainTimeout: "1 second" }).pipe(
            Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn"))
          )
        )
        const name = new URL(url).pathname.slice(1)
        // every new session on the database starts read-only: the inspector can only read
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* sql.unsafe(`ALTER DATABASE "${name}" SET default_transaction_read_only = on`)
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url) })))
        // a new connection cannot write now
        const write = yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* Effect.result(sql`CREATE TABLE inspect_cli_probe (id int)`)
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url) })))
        assert.strictEqual(write._tag, "Failure", "a write fails on the read-only database")
        yield* inspectOver(["--postgres", url])
      }).pipe(Effect.scoped),
    180_000
  )
})
