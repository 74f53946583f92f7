/**
 * The engine benchmark (`npm run bench`): for the embedded (SQLite) and the cluster (Postgres) engine, in one
 * run, it measures
 *
 * 1. the latency of one Step transition (commit + dispatch of the next Step),
 * 2. throughput with 100 Flows x 20 transitions at once,
 * 3. publish -> execute latency,
 * 4. 1 s timer lateness,
 * 5. a baseline of plain insert transactions on the same database with the same durability, and the ratios,
 * 6. worker memory with 10 and 1,000 Flows waiting on a channel (one child process per reading),
 *
 * prints a table with the targets, and cleans up its files and databases. A missed target is reported as
 * MISS; it does not fail the run. Progress goes to stderr, the report to stdout.
 *
 * Environment: `BENCH_MEMORY_IDLE_MS` (default 130000; 0 skips the after-idle memory reading), `BENCH_MODES`
 * (default `embedded,cluster`), `BENCH_ONLY=latency` (only the transition and publish latencies, printed, not
 * recorded in `bench-results.json`: a quick check of the publish/transition ratio).
 */
import { availableParallelism, loadavg } from "node:os"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import { Worker } from "../src/index.ts"
import * as BenchResults from "../src/testing/BenchResults.ts"
import { postgresBaseline, sqliteBaseline } from "./baseline.ts"
import { type SqliteCost, withPgCost, withSqliteCost } from "./diagnostics.ts"
import { allFlows, nowMs } from "./flows.ts"
import { runBenchmark } from "./main.ts"
import { measureMemory } from "./memory.ts"
import { type ModeResult, memoryRows, modeFigures, modeRows, renderTable } from "./report.ts"
import { fmtMs, percentile } from "./stats.ts"
import { cleanupAll, type Mode, makeStorage, type Storage } from "./targets.ts"
import { publishLatency, throughput, timerLateness, transitionLatency } from "./workloads.ts"

const LATENCY_WARMUP = 20
const LATENCY_TRANSITIONS = 200
const THROUGHPUT_FLOWS = 100
const THROUGHPUT_TRANSITIONS = 20
const PUBLISH_SAMPLES = 50
const TIMER_SAMPLES = 10
/** Transitions of the separate run that counts SQLite statements. */
const COST_TRANSITIONS = 50
const MEMORY_COUNTS = [10, 1000] as const
/**
 * An idle Flow owner is evicted once it has been idle for a minute at one of effect/cluster's checks, which
 * run every minute (`FlowEntityLayer`'s idle time): within two minutes; wait a little longer.
 */
const MEMORY_IDLE_MS = Number(process.env.BENCH_MEMORY_IDLE_MS ?? 130_000)
const MODES: ReadonlyArray<Mode> = (process.env.BENCH_MODES ?? "embedded,cluster")
  .split(",")
  .filter((m): m is Mode => m === "embedded" || m === "cluster")

const LATENCY_ONLY = process.env.BENCH_ONLY === "latency"

const progress = (message: string) => process.stderr.write(`[bench ${fmtMs(nowMs() - startedAt)}] ${message}\n`)
const startedAt = nowMs()

/** The engine workloads of one mode, on a worker in this process. */
const engineWorkloads = (mode: Mode) =>
  Effect.gen(function* () {
    progress(`${mode}: warm-up`)
    yield* transitionLatency(LATENCY_WARMUP)
    progress(`${mode}: transition latency`)
    const [transitions, pgCost] =
      mode === "cluster"
        ? yield* withPgCost(() => LATENCY_TRANSITIONS, transitionLatency(LATENCY_TRANSITIONS))
        : [yield* transitionLatency(LATENCY_TRANSITIONS), undefined]
    progress(`${mode}: throughput`)
    const tp = yield* throughput(THROUGHPUT_FLOWS, THROUGHPUT_TRANSITIONS)
    progress(`${mode}: publish latency`)
    const publish = yield* publishLatency(PUBLISH_SAMPLES, { isolated: true })
    const publishOverlapped = yield* publishLatency(PUBLISH_SAMPLES, { isolated: false })
    progress(`${mode}: timers`)
    const timers = yield* timerLateness(TIMER_SAMPLES)
    let sqliteCost: SqliteCost | undefined
    if (mode === "embedded") {
      progress(`${mode}: statement count (separate ${COST_TRANSITIONS}-transition run)`)
      sqliteCost = (yield* withSqliteCost(() => COST_TRANSITIONS, transitionLatency(COST_TRANSITIONS)))[1]
    }
    return { transitions, pgCost, sqliteCost, throughput: tp, publish, publishOverlapped, timers }
  })

/** `BENCH_ONLY=latency`: the transition latency and both publish latencies of one mode. */
const latencyWorkloads = (mode: Mode) =>
  Effect.gen(function* () {
    progress(`${mode}: warm-up`)
    yield* transitionLatency(LATENCY_WARMUP)
    progress(`${mode}: transition latency`)
    const transitions = yield* transitionLatency(LATENCY_TRANSITIONS)
    progress(`${mode}: publish latency`)
    const publish = yield* publishLatency(PUBLISH_SAMPLES, { isolated: true })
    const overlapped = yield* publishLatency(PUBLISH_SAMPLES, { isolated: false })
    const wall = percentile(transitions.wall, 50)
    const line = (name: string, samples: ReadonlyArray<number>) =>
      `${mode}: ${name} p50 ${fmtMs(percentile(samples, 50))} (${(percentile(samples, 50) / wall).toFixed(2)}x the transition p50)`
    return [
      `${mode}: transition p50 ${fmtMs(wall)} p99 ${fmtMs(percentile(transitions.wall, 99))}`,
      line("publish -> execute", publish),
      line("publish -> execute beside the previous Flow's last commit", overlapped)
    ]
  })

const runLatencyOnly = async () => {
  const load = () =>
    loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")
  const out = [`load average at start ${load()}`]
  for (const mode of MODES) {
    const storage = await makeStorage(mode)
    try {
      const engine = await storage.engine()
      const lines = await Effect.runPromise(
        latencyWorkloads(mode).pipe(
          Effect.provide(Worker.layer(...allFlows).pipe(Layer.provideMerge(engine))),
          Effect.scoped,
          Effect.provideService(References.MinimumLogLevel, "Warn")
        ) as Effect.Effect<ReadonlyArray<string>, unknown>
      )
      out.push(...lines)
    } finally {
      await storage.cleanup()
    }
  }
  out.push(`load average at end ${load()}`, "")
  process.stdout.write(out.join("\n"))
}

const runMode = async (mode: Mode): Promise<ModeResult> => {
  const t0 = nowMs()
  const storage: Storage = await makeStorage(mode)
  try {
    const engine = await storage.engine()
    const measured = await Effect.runPromise(
      engineWorkloads(mode).pipe(
        Effect.provide(Worker.layer(...allFlows).pipe(Layer.provideMerge(engine))),
        Effect.scoped,
        Effect.provideService(References.MinimumLogLevel, "Warn")
      ) as Effect.Effect<Effect.Success<ReturnType<typeof engineWorkloads>>, unknown>
    )
    progress(`${mode}: baseline`)
    const options = {
      latencySamples: LATENCY_TRANSITIONS,
      flows: THROUGHPUT_FLOWS,
      transitionsPerFlow: THROUGHPUT_TRANSITIONS
    }
    const baseline =
      mode === "embedded"
        ? sqliteBaseline(storage.location, options)
        : await Effect.runPromise(postgresBaseline(storage.location, options))
    return { mode, ...measured, baseline, durationMs: nowMs() - t0 }
  } finally {
    await storage.cleanup()
  }
}

const main = async () => {
  if (LATENCY_ONLY) return runLatencyOnly()
  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")
  const results: Array<ModeResult> = []
  for (const mode of MODES) results.push(await runMode(mode))
  progress(
    `memory: ${MODES.length * MEMORY_COUNTS.length} child processes${MEMORY_IDLE_MS > 0 ? `, ${MEMORY_IDLE_MS / 1000} s idle` : ""}`
  )
  const memory = await measureMemory(MODES, MEMORY_COUNTS, MEMORY_IDLE_MS)
  const totalMs = nowMs() - startedAt

  const rows = [...results.flatMap(modeRows), ...memoryRows(memory, MEMORY_IDLE_MS)]
  const out: Array<string> = [
    "",
    "Engine benchmark",
    `node ${process.version}, ${availableParallelism()} CPUs, load average (1/5/15 min) at start ${load}, at end ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
    ...results.map((r) => `${r.mode}: baseline on ${r.baseline.settings}`),
    "",
    renderTable(rows),
    ""
  ]
  for (const r of results) {
    if (r.sqliteCost !== undefined) {
      out.push(
        `${r.mode}: per transition ${r.sqliteCost.statements.toFixed(1)} SQL statements and ${r.sqliteCost.commits.toFixed(1)} commits ` +
          "(explicit COMMITs + writes outside a transaction; each one an fsync with synchronous=FULL), runner polling included"
      )
    }
    if (r.pgCost !== undefined) {
      out.push(
        `${r.mode}: per transition ~${r.pgCost.commits.toFixed(1)} Postgres transactions (autocommitted statements count as one), ` +
          `~${r.pgCost.inserted.toFixed(1)} rows inserted, ~${r.pgCost.updated.toFixed(1)} rows updated (pg_stat_database, idle traffic subtracted)`
      )
    }
  }
  out.push(
    `Phases: ${results.map((r) => `${r.mode} ${fmtMs(r.durationMs)}`).join(", ")}, memory ${fmtMs(totalMs - results.reduce((a, r) => a + r.durationMs, 0))}`,
    `Total run time: ${fmtMs(totalMs)}`,
    ""
  )
  process.stdout.write(out.join("\n"))
  BenchResults.record(Object.assign({}, ...results.map(modeFigures)))
}

runBenchmark("benchmark", main, cleanupAll, progress)
