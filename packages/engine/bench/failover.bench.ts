/**
 * The failover benchmark (`npm run bench`): ten times, two cluster runners on a fresh Postgres database, a
 * Flow whose Step heartbeats and hangs on its first attempt, SIGKILL of the runner that runs it, and the time
 * until the surviving runner has completed the Flow (the retry completes at once). Prints all ten, p50 and
 * max against the targets (p50 <= 2 s, max <= 3 s), and records them in `bench-results.json`.
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
const workerPath = fileURLToPath(new URL("../test/fixtures/kill-worker.ts", import.meta.url))

const once = (url: string, side: string) =>
  Effect.gen(function* () {
    const port = () => Effect.promise(freePort)
    const a = yield* spawnNode(workerPath, ["cluster", url, String(yield* port()), "serve", "-"])
    const b = yield* spawnNode(workerPath, ["cluster", url, String(yield* port()), "serve", "-"])
    yield* a.waitFor("READY", 60_000)
    yield* b.waitFor("READY", 60_000)
    const starter = yield* spawnNode(workerPath, [
      "cluster",
      url,
      String(yield* port()),
      "start",
      "f",
      "failover",
      side
    ])
    yield* starter.waitFor("STARTED", 60_000)
    const owner = yield* Effect.raceAll([a, b, starter].map((c) => Effect.as(c.waitFor("RUNNING", 60_000), c)))
    const killedAt = performance.now()
    yield* owner.kill()
    yield* Inspect.describeFlow("f").pipe(
      Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (d) => d.status !== "running" }),
      Effect.timeout("120 seconds"),
      Effect.provide(PgClient.layer({ url: Redacted.make(url) }))
    )
    return performance.now() - killedAt
  }).pipe(Effect.scoped)

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "das-failover-bench-"))
  const times: Array<number> = []
  try {
    for (let i = 0; i < KILLS; i++) {
      const database = await createTestDatabase()
      try {
        const ms = await Effect.runPromise(once(database.url, join(dir, `side-${i}.log`)))
        times.push(ms)
        process.stderr.write(`[failover bench] kill ${i + 1}/${KILLS}: ${fmtMs(ms)}\n`)
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
      metric: `failover after SIGKILL of the owner (${KILLS} kills)`,
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
