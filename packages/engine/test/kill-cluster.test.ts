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
import { postgresShardLease } from "../src/internal/runner.ts"
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
  // The cluster workers run FailoverFlow, whose Step allows two attempts: an owner that loses a Flow (its
  // runner stalled past the shard lock's expiration, whose lock session the server then ends: the fencing test
  // above) has its attempt failed WorkerLost and the Step's attempt 2 runs on the new owner, a second run
  // the contract allows (each attempt runs once). Here the lock expiration is 20 s, so a runner starved of CPU
  // for a few seconds keeps its locks, and what is tested is the handoff alone: every Step runs once, as
  // attempt 1, and the runner that ran it commits its result, also where the Flow's shard moves to the new
  // runner while the Step runs.
  it.live(
    "shards move to the new runner; the leaving owners let running Steps commit, and each Step runs once",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const sideDir = mkdtempSync(join(dir, "join-"))
        const env = { SHARD_LOCK_EXPIRATION_MS: "20000" }
        const port = () => Effect.promise(freePort)
        const runner = (runnerPort: number, ...command: ReadonlyArray<string>) =>
          spawnNode(workerPath, ["cluster", url, String(runnerPort), ...command], env)
        const a = yield* runner(yield* port(), "serve", "-")
        const b = yield* runner(yield* port(), "serve", "-")
        yield* a.waitFor("READY")
        yield* b.waitFor("READY")
        // each shard moves to the fourth runner with a chance of about 1 in 4: with 36 Flows, some Flow's does
        // (all stay with a chance of about 1 in 30,000)
        const flows = 36
        const starter = yield* runner(yield* port(), "start-many", "j", String(flows), "held", sideDir)
        const started = yield* starter.waitFor("STARTED", 60_000)
        const shards: Record<string, number> = JSON.parse(started.slice(started.indexOf("{")))
        const db = PgClient.layer({ url: Redacted.make(url) })
        const query = <A extends object>(f: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
          Effect.gen(function* () {
            return yield* f(yield* SqlClient.SqlClient)
          }).pipe(Effect.provide(db))
        // every Flow's Step is running (its heartbeat committed) before the new runner joins
        yield* query(
          (sql) => sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM dex_attempts WHERE output_at IS NOT NULL`
        ).pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (rows) => Number(rows[0]!.n) >= flows }),
          Effect.timeout("60 seconds")
        )
        const cPort = yield* port()
        const c = yield* runner(cPort, "serve", "-")
        yield* c.waitFor("READY")
        // the shard locks the new runner holds (its sessions' application_name is its runner ID)
        const locksOfC = query(
          (sql) =>
            sql<{ objid: unknown }>`SELECT l.objid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND a.datname = current_database()
            AND starts_with(a.application_name, ${`127.0.0.1:${cPort} pid `})`
        ).pipe(Effect.map((rows) => new Set(rows.map((r) => Number(r.objid)))))
        // the shards move while the Steps run: the new runner took the shards that had nothing running
        yield* locksOfC.pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (held) => held.size > 0 }),
          Effect.timeout("60 seconds")
        )
        const lockOf = (flowId: string) => postgresShardLease("")("default", shards[flowId]!)!.objId
        const heldByC = yield* locksOfC
        for (let i = 0; i < flows; i++) writeFileSync(join(sideDir, `j-${i}.log.release`), "")
        const closed = yield* Inspect.listFlows().pipe(
          Effect.provide(db),
          Effect.repeat({
            schedule: Schedule.spaced("200 millis"),
            until: (list) => list.length === flows && list.every((f) => f.status !== "running")
          }),
          Effect.timeout("120 seconds")
        )
        for (const f of closed) assert.strictEqual(f.status, "completed", `${f.flowId}: ${f.reason}`)
        const attempts = yield* query(
          (sql) =>
            sql<{ flow_id: string; attempt: unknown; outcome: string | null; runner: string | null }>`SELECT flow_id,
            attempt, outcome, runner FROM dex_attempts ORDER BY flow_id, attempt`
        )
        for (let i = 0; i < flows; i++) {
          const flowId = `j-${i}`
          const lines = sideEffects(join(sideDir, `${flowId}.log`))
          assert.strictEqual(lines.length, 1, `${flowId}: ${lines.join(" | ")}`)
          const pid = /^run Work-1 attempt 1 pid (\d+)$/.exec(lines[0]!)?.[1]
          assert.isDefined(pid, lines[0])
          // the attempt's result was committed by the runner that ran it
          const rows = attempts.filter((r) => r.flow_id === flowId)
          assert.deepStrictEqual(
            rows.map((r) => [Number(r.attempt), r.outcome, r.runner?.endsWith(` pid ${pid}`)]),
            [[1, "success", true]],
            `${flowId}: ${JSON.stringify(rows)}`
          )
        }
        // some Flow's shard went to the new runner after its Step committed on the leaving owner: the handoff
        // waited for the running Step
        const moved = yield* locksOfC.pipe(
          Effect.map((held) => Object.keys(shards).filter((id) => held.has(lockOf(id)) && !heldByC.has(lockOf(id)))),
          Effect.repeat({ schedule: Schedule.spaced("200 millis"), until: (ids) => ids.length > 0 }),
          Effect.timeout("60 seconds")
        )
        assert.isAbove(moved.length, 0)
        console.log(`shard move: ${moved.length} of ${flows} Flows moved to the new runner while their Step ran`)
      }),
    240_000
  )
})
