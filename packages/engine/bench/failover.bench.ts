/**
 * The failover benchmark (`npm run bench`): ten times, two cluster runners on a fresh Postgres database (the
 * shards settled between them), a Flow (started by a client-only member) whose Step heartbeats and hangs on its
 * first attempt, SIGKILL of the runner that runs it, and the time until the surviving runner has completed the
 * Flow (the retry runs at once and completes). Prints all ten with where the time went (the survivor's claim,
 * its recovery commit, the retry's start, the completion), p50 and max against the targets (p50 <= 2 s,
 * max <= 3 s), and records them in `bench-results.json`.
 *
 * Environment: `BENCH_FAILOVER_KILLS` (default 10).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { PgClient } from "@effect/sql-pg"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { SqlClient } from "effect/sql"
import { Inspect } from "../src/index.ts"
import * as BenchResults from "../src/testing/BenchResults.ts"
import { spawnNode } from "../src/testing/ChildProcess.ts"
import { freePort } from "../test/support/ports.ts"
import { createTestDatabase } from "../test/support/postgres.ts"
import { type Row, renderTable } from "./report.ts"
import { fmtMs, summarize } from "./stats.ts"

const KILLS = Number(process.env.BENCH_FAILOVER_KILLS ?? 10)
const P50_TARGET_MS = 2000
const MAX_TARGET_MS = 3000
/** effect/cluster's default shards per group, which the kill worker's runners use. */
const SHARDS = 300
const workerPath = fileURLToPath(new URL("../test/fixtures/kill-worker.ts", import.meta.url))

const once = (url: string, side: string) =>
  Effect.gen(function* () {
    const port = () => Effect.promise(freePort)
    const a = yield* spawnNode(workerPath, ["cluster", url, String(yield* port()), "serve", "-"])
    const b = yield* spawnNode(workerPath, ["cluster", url, String(yield* port()), "serve", "-"])
    yield* a.waitFor("READY", 60_000)
    yield* b.waitFor("READY", 60_000)
    // the shards settled between the two runners (each holds its share of the locks), so the Flow stays where
    // it starts until the kill
    yield* settled(url)
    // a client-only member starts the Flow: no third runner joins and moves shards meanwhile
    const starter = yield* spawnNode(workerPath, ["cluster", url, "-", "start", "f", "failover", side])
    yield* starter.waitFor("STARTED", 60_000)
    const owner = yield* Effect.raceAll([a, b].map((c) => Effect.as(c.waitFor("RUNNING", 60_000), c)))
    const db = PgClient.layer({ url: Redacted.make(url) })
    // the Flow still runs attempt 1 on that runner (on a starved machine a runner can lose its shards to the
    // other between the marker and the kill: then the sample measures nothing and is taken again)
    if (!(yield* Effect.provide(stillOwns(owner.pid), db))) return undefined
    const killedAt = performance.now()
    const killedAtWall = Date.now()
    yield* owner.kill()
    yield* Inspect.describeFlow("f").pipe(
      Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (d) => d.status !== "running" }),
      Effect.timeout("120 seconds"),
      Effect.provide(db)
    )
    const total = performance.now() - killedAt
    const survivor = owner === a ? b : a
    // a slow takeover: what the survivor logged after the kill (effect/cluster's and the engine's lines)
    const log: Array<string> = []
    if (total > P50_TARGET_MS) {
      let keep = 0
      for (const l of survivor.lines()) {
        const at = /^\[(\d\d):(\d\d):(\d\d)\.(\d{3})\]/.exec(l)
        if (at !== null) {
          const d = new Date(killedAtWall)
          d.setHours(Number(at[1]), Number(at[2]), Number(at[3]), Number(at[4]))
          keep = d.getTime() >= killedAtWall - 500 ? 4 : 0
        }
        if (keep > 0) {
          keep--
          log.push(l.slice(0, 300))
        }
      }
    }
    return { total, phases: yield* Effect.provide(phasesOf(killedAtWall), db), log }
  }).pipe(Effect.scoped)

/** Whether the runner with process `pid` owns Flow `f` and its attempt 1 is still open. */
const stillOwns = (pid: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM dex_owners o JOIN dex_attempts t
      ON t.flow_id = o.flow_id AND t.attempt = 1 AND t.finished_at IS NULL
      WHERE o.flow_id = 'f' AND o.runner LIKE ${`% pid ${pid}`}`
    return Number(rows[0]!.n) > 0
  }).pipe(Effect.orDie)

/** Waits until two runners hold shard locks, all of them between them (effect/cluster's advisory locks). */
const settled = (url: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ runners: unknown; locks: unknown }>`SELECT COUNT(DISTINCT a.application_name) AS runners,
      COUNT(*) AS locks FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND a.datname = current_database()`.pipe(
      Effect.repeat({
        schedule: Schedule.spaced("50 millis"),
        until: (rows) => Number(rows[0]!.runners) === 2 && Number(rows[0]!.locks) === SHARDS
      }),
      Effect.timeout("60 seconds")
    )
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url) })), Effect.orDie)

/**
 * Where the failover time went, from the rows the survivor wrote (wall clock of the same machine, ms after the
 * kill): `claimed` the survivor's ownership claim (failure detection, shard acquisition, the keep-alive's
 * redelivery and the entity's activation), `recovered` its recovery commit (attempt 1 failed `WorkerLost`),
 * `retried` the start of attempt 2, `closed` the Flow's completion.
 */
const phasesOf = (killedAt: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const owner = yield* sql<{ claimed_at: unknown }>`SELECT claimed_at FROM dex_owners WHERE flow_id = 'f'`
    const attempts = yield* sql<{
      attempt: unknown
      started_at: unknown
      finished_at: unknown
    }>`SELECT attempt, started_at, finished_at FROM dex_attempts WHERE flow_id = 'f' ORDER BY attempt`
    const flow = yield* sql<{ closed_at: unknown }>`SELECT closed_at FROM dex_flows WHERE flow_id = 'f'`
    const at = (v: unknown) => (v === null || v === undefined ? Number.NaN : Number(v) - killedAt)
    return {
      claimed: at(owner[0]?.claimed_at),
      recovered: at(attempts.find((r) => Number(r.attempt) === 1)?.finished_at),
      retried: at(attempts.find((r) => Number(r.attempt) === 2)?.started_at),
      closed: at(flow[0]?.closed_at)
    }
  }).pipe(Effect.orDie)

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "das-failover-bench-"))
  const times: Array<number> = []
  const phases: Array<{ claimed: number; recovered: number; retried: number; closed: number }> = []
  let moved = 0
  try {
    for (let i = 0; i < KILLS; i++) {
      const database = await createTestDatabase()
      try {
        const r = await Effect.runPromise(once(database.url, join(dir, `side-${i}.log`)))
        if (r === undefined) {
          moved++
          process.stderr.write(`[failover bench] the Flow moved before the kill; taking the sample again\n`)
          if (moved <= KILLS) i--
          continue
        }
        times.push(r.total)
        phases.push(r.phases)
        const p = r.phases
        process.stderr.write(
          `[failover bench] kill ${i + 1}/${KILLS}: ${fmtMs(r.total)} (claimed ${fmtMs(p.claimed)}, recovered ${fmtMs(p.recovered)}, retried ${fmtMs(p.retried)}, closed ${fmtMs(p.closed)})\n`
        )
        for (const l of r.log) process.stderr.write(`  survivor: ${l}\n`)
      } finally {
        await database.drop()
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const s = summarize(times)
  const rows: Array<Row> = [
    {
      mode: "cluster",
      metric: `failover after SIGKILL of the owner (${times.length} kills${moved > 0 ? `, ${moved} retaken` : ""})`,
      result: `p50 ${fmtMs(s.p50)}  max ${fmtMs(s.max)}  all: ${times.map((t) => fmtMs(t)).join(", ")}`,
      target: `p50 <= ${fmtMs(P50_TARGET_MS)}, max <= ${fmtMs(MAX_TARGET_MS)}`,
      verdict: s.p50 <= P50_TARGET_MS && s.max <= MAX_TARGET_MS ? "PASS" : "MISS"
    }
  ]
  process.stdout.write(`\nFailover benchmark\n\n${renderTable(rows)}\n`)
  BenchResults.record({
    "engine.cluster.failover_p50_ms": {
      value: s.p50,
      unit: "ms",
      target: `<= ${P50_TARGET_MS}`,
      met: s.p50 <= P50_TARGET_MS
    },
    "engine.cluster.failover_max_ms": {
      value: s.max,
      unit: "ms",
      target: `<= ${MAX_TARGET_MS}`,
      met: s.max <= MAX_TARGET_MS
    }
  })
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`failover benchmark failed: ${error instanceof Error ? error.stack : String(error)}\n`)
    process.exit(1)
  }
)
