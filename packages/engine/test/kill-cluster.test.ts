import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
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
import { spawnNode } from "../src/testing/ChildProcess.ts"
import { sideEffects } from "./fixtures/kill-flow.ts"
import { spawnWorker } from "./support/child.ts"
import { freePort } from "./support/ports.ts"
import { withTestDatabase } from "./support/postgres.ts"

const workerPath = fileURLToPath(new URL("./fixtures/kill-worker.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "das-failover-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("cluster engine: SIGKILL of the runner that owns a Flow's Step", () => {
  it.live(
    "the surviving runner finishes the Flow",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const side = join(dir, "side.log")
        const [portA, portB] = [yield* Effect.promise(freePort), yield* Effect.promise(freePort)]
        const a = yield* spawnWorker("cluster", url, String(portA), "serve", "-")
        const b = yield* spawnWorker("cluster", url, String(portB), "serve", "-")
        yield* a.waitFor("READY")
        yield* b.waitFor("READY")
        const starter = yield* spawnWorker(
          "cluster",
          url,
          String(yield* Effect.promise(freePort)),
          "start",
          "f",
          "failover",
          side
        )
        yield* starter.waitFor("STARTED", 60_000)
        // whichever runner got the Step prints RUNNING; kill that one
        const running = yield* Effect.raceFirst(
          Effect.map(a.waitFor("RUNNING", 60_000), () => a),
          Effect.raceFirst(
            Effect.map(b.waitFor("RUNNING", 60_000), () => b),
            Effect.map(starter.waitFor("RUNNING", 60_000), () => starter)
          )
        )
        const killedAt = Date.now()
        yield* running.kill()
        const flow = yield* Inspect.describeFlow("f").pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (d) => d.status !== "running" }),
          Effect.timeout("90 seconds"),
          Effect.provide(PgClient.layer({ url: Redacted.make(url) }))
        )
        const failoverMs = Date.now() - killedAt
        assert.strictEqual(flow.status, "completed")
        assert.deepStrictEqual(flow.output, { attempt: 2, channel: [] })
        const runs = sideEffects(side).filter((l) => l.startsWith("run "))
        assert.strictEqual(runs.length, 2, runs.join("\n"))
        assert.include(runs[0]!, `pid ${running.pid}`)
        assert.notInclude(runs[1]!, `pid ${running.pid}`)
        console.log(`failover: the Flow completed ${failoverMs} ms after SIGKILL of runner ${running.pid}`)
      }),
    180_000
  )
})

describe("cluster engine: fencing a stale owner", () => {
  it.live(
    "a runner paused past its shard lock's expiry commits nothing after it resumes; the Flow's state stays whole",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const side = join(dir, "fence.log")
        const env = { SHARD_LOCK_EXPIRATION_MS: "3000" }
        const ports = [
          yield* Effect.promise(freePort),
          yield* Effect.promise(freePort),
          yield* Effect.promise(freePort)
        ]
        const a = yield* spawnNode(workerPath, ["cluster", url, String(ports[0]), "serve", "-"], env)
        const b = yield* spawnNode(workerPath, ["cluster", url, String(ports[1]), "serve", "-"], env)
        yield* a.waitFor("READY")
        yield* b.waitFor("READY")
        const starter = yield* spawnNode(
          workerPath,
          ["cluster", url, String(ports[2]), "start", "f", "fence", side],
          env
        )
        yield* starter.waitFor("STARTED", 60_000)
        const owner = yield* Effect.raceFirst(
          Effect.map(a.waitFor("RUNNING", 60_000), () => a),
          Effect.raceFirst(
            Effect.map(b.waitFor("RUNNING", 60_000), () => b),
            Effect.map(starter.waitFor("RUNNING", 60_000), () => starter)
          )
        )
        process.kill(owner.pid, "SIGSTOP")
        const db = PgClient.layer({ url: Redacted.make(url) })
        // another runner takes the Flow over: the paused attempt had output, so it failed WorkerLost and the
        // retry completed the Flow
        const flow = yield* Inspect.describeFlow("f").pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (d) => d.status !== "running" }),
          Effect.timeout("90 seconds"),
          Effect.provide(db)
        )
        assert.strictEqual(flow.status, "completed")
        assert.deepStrictEqual(flow.output, { attempt: 2, channel: [] })
        const before = yield* Inspect.history("f").pipe(Effect.provide(db))
        // the paused runner resumes and its attempt finishes with a result of its own
        writeFileSync(`${side}.release`, "")
        process.kill(owner.pid, "SIGCONT")
        yield* owner.waitFor(`COMMITTING ${owner.pid}`, 60_000)
        yield* Effect.sync(() => owner.lines().some((l) => l.includes("commit refused"))).pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (refused) => refused }),
          Effect.timeout("30 seconds")
        )
        const after = yield* Inspect.history("f").pipe(Effect.provide(db))
        const described = yield* Inspect.describeFlow("f").pipe(Effect.provide(db))
        assert.deepStrictEqual(after, before)
        assert.strictEqual(described.status, "completed")
        assert.deepStrictEqual(described.output, { attempt: 2, channel: [] })
        const result = yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ value: string }>`SELECT value FROM dex_attrs WHERE flow_id = 'f' AND name = 'result'
            ORDER BY version DESC LIMIT 1`
        }).pipe(Effect.provide(db))
        assert.notInclude(result[0]!.value, "stale")
        const lines = sideEffects(side)
        assert.strictEqual(lines.filter((l) => l.startsWith("run ")).length, 2, lines.join("\n"))
        assert.include(lines.find((l) => l.startsWith("resumed "))!, `pid ${owner.pid}`)
      }),
    240_000
  )
})

describe("cluster engine: a runner joins while Steps run", () => {
  it.live(
    "shards move to the new runner; the leaving owners let running Steps commit, and no single-attempt Step runs twice",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const sideDir = mkdtempSync(join(dir, "join-"))
        const port = () => Effect.promise(freePort)
        const a = yield* spawnNode(workerPath, ["cluster", url, String(yield* port()), "serve", "-"])
        const b = yield* spawnNode(workerPath, ["cluster", url, String(yield* port()), "serve", "-"])
        yield* a.waitFor("READY")
        yield* b.waitFor("READY")
        const flows = 12
        const starter = yield* spawnNode(workerPath, [
          "cluster",
          url,
          String(yield* port()),
          "start-many",
          "j",
          String(flows),
          "long",
          sideDir
        ])
        yield* starter.waitFor("STARTED", 60_000)
        // every Flow's Step is running somewhere before the new runner joins
        const db = PgClient.layer({ url: Redacted.make(url) })
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM dex_attempts WHERE output_at IS NOT NULL`
        }).pipe(
          Effect.provide(db),
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (rows) => Number(rows[0]!.n) >= flows }),
          Effect.timeout("60 seconds")
        )
        const c = yield* spawnNode(workerPath, ["cluster", url, String(yield* port()), "serve", "-"])
        yield* c.waitFor("READY")
        const closed = yield* Inspect.listFlows().pipe(
          Effect.provide(db),
          Effect.repeat({
            schedule: Schedule.spaced("200 millis"),
            until: (list) => list.length === flows && list.every((f) => f.status !== "running")
          }),
          Effect.timeout("120 seconds")
        )
        for (const f of closed) assert.strictEqual(f.status, "completed", `${f.flowId}: ${f.reason}`)
        for (let i = 0; i < flows; i++) {
          const lines = sideEffects(join(sideDir, `j-${i}.log`))
          assert.deepStrictEqual(
            lines.filter((l) => !l.startsWith("run ")),
            [],
            `j-${i} went through its failure route: ${lines.join(" | ")}`
          )
          assert.strictEqual(lines.filter((l) => l.startsWith("run ")).length, 1, `j-${i}: ${lines.join(" | ")}`)
        }
      }),
    240_000
  )
})
