// A request whose answer is lost after its transition committed (issue 20, item 5): start, RPC and publish
// requests are volatile cluster messages, and the client sends one whose answer it lost again with the same
// request ID; the owner answers it from the reply its transition stored. On real cluster runner processes over
// Postgres, the owner's runner stops at the engine's `reply` fault point (after COMMIT, before the answer) and
// the test SIGKILLs it there: the client's call returns what the first run committed, and the handler ran once
// (every real run appends to a ledger file outside the runners, before the runner prints the marker).
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { SqlClient } from "effect/sql"
import { Inspect } from "../src/index.ts"
import { type Child, fileLines, spawnNode } from "../src/testing/ChildProcess.ts"
import { freePort } from "./support/ports.ts"
import { withTestDatabase } from "./support/postgres.ts"

const workerPath = fileURLToPath(new URL("./fixtures/request-worker.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "das-request-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A cluster runner; `paused` arms the `reply` fault point, whose release file is never written. */
const runner = (url: string, paused: boolean) =>
  Effect.gen(function* () {
    const port = yield* Effect.promise(freePort)
    const env: Record<string, string> = paused
      ? { DURABLE_ENGINE_PAUSE_AT: "reply", DURABLE_ENGINE_PAUSE_RELEASE: join(dir, "never") }
      : {}
    const child = yield* spawnNode(workerPath, [url, String(port), "serve"], env)
    yield* child.waitFor("READY", 60_000)
    return child
  })

/**
 * A client-only member that sends one request and prints its answer; `skewMs` sets its wall clock ahead of the
 * host's while it sends (a client on a host whose clock runs fast).
 */
const request = (url: string, args: ReadonlyArray<string>, skewMs = 0) =>
  spawnNode(workerPath, [url, "-", ...args], skewMs === 0 ? {} : { REQUEST_CLOCK_SKEW_MS: String(skewMs) })

/** The runner among `runners` that stopped at the `reply` point (its transition committed, no answer sent). */
const pausedOne = (runners: ReadonlyArray<Child>) =>
  Effect.raceAll(runners.map((r) => Effect.as(r.waitFor("PAUSED reply", 90_000), r)))

const query = <A>(url: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.gen(function* () {
    return yield* f(yield* SqlClient.SqlClient)
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url) })))

const historyKinds = (url: string, flowId: string) =>
  query(url, (sql) =>
    Effect.map(sql<{ kind: string }>`SELECT kind FROM dex_history WHERE flow_id = ${flowId} ORDER BY id`, (rows) =>
      rows.map((r) => r.kind)
    )
  )

describe("cluster engine: a request's answer lost between its commit and its reply", () => {
  it.live(
    "SIGKILL of the owner after the commit of a start, an RPC (from a client whose clock runs an hour fast) and a publish: the retried call returns the stored reply; each ran once",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const ledger = join(dir, "ledger.log")
        const armed = yield* Effect.all([runner(url, true), runner(url, true), runner(url, true)], {
          concurrency: "unbounded"
        })

        // start: the owner commits the new run, stops before answering, and is killed
        const starter = yield* request(url, ["start", "f", ledger])
        const first = yield* pausedOne(armed)
        yield* first.kill()
        const runId = yield* starter.waitFor("STARTED ", 90_000)
        const flow = yield* query(
          url,
          (sql) => sql<{ run_id: string }>`SELECT run_id FROM dex_flows WHERE flow_id = 'f'`
        )
        assert.strictEqual(runId, flow[0]!.run_id)
        assert.deepStrictEqual(
          (yield* historyKinds(url, "f")).filter((k) => k === "FlowStarted"),
          ["FlowStarted"]
        )

        // RPC from a client whose clock runs an hour fast: the new owner commits the call, stops before
        // answering, and is killed; the owner after it answers the resend from the stored reply, whatever the
        // client's clock says (no clock decides whether the owner reads it)
        const survivors = armed.filter((r) => r !== first)
        const caller = yield* request(url, ["rpc", "f", "once"], 60 * 60 * 1000)
        const second = yield* pausedOne(survivors)
        const rpcs = fileLines(ledger).filter((l) => l.startsWith("rpc "))
        assert.deepStrictEqual(rpcs, [`rpc once 1 pid ${second.pid}`])
        yield* second.kill()
        assert.strictEqual(yield* caller.waitFor("RPC ", 90_000), "1")
        assert.deepStrictEqual(
          fileLines(ledger).filter((l) => l.startsWith("rpc ")),
          rpcs
        )
        const calls = yield* query(
          url,
          (sql) => sql<{ value: string }>`SELECT value FROM dex_attrs WHERE flow_id = 'f' AND name = 'calls'`
        )
        assert.deepStrictEqual(
          calls.map((r) => r.value),
          ["1"]
        )

        // publish: the last armed runner commits it and stops; a new runner joins, the stopped one is killed
        const last = survivors.find((r) => r !== second)!
        const publisher = yield* request(url, ["publish", "f", "go"])
        yield* last.waitFor("PAUSED reply", 90_000)
        yield* runner(url, false)
        yield* last.kill()
        yield* publisher.waitFor("PUBLISHED", 90_000)
        const closed = yield* Inspect.describeFlow("f").pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (d) => d.status !== "running" }),
          Effect.timeout("90 seconds"),
          Effect.provide(PgClient.layer({ url: Redacted.make(url) }))
        )
        assert.strictEqual(closed.status, "completed")
        assert.deepStrictEqual(closed.output, { go: ["go"] })
        const kinds = yield* historyKinds(url, "f")
        assert.deepStrictEqual(
          kinds.filter((k) => k === "FlowStarted" || k === "RpcCompleted" || k === "Published"),
          ["FlowStarted", "RpcCompleted", "Published"]
        )
        // the message was published once (the Step read one); the Step it made ready may have started on the
        // killed runner too: an attempt lost before any output runs again with its number (the Step's own rule)
        const steps = fileLines(ledger).filter((l) => l.startsWith("step "))
        assert.isAbove(steps.length, 0)
        for (const line of steps) assert.match(line, /^step Idle-\d+ attempt 1 pid \d+$/)
      }),
    240_000
  )
})
