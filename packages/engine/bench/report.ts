/** Turns the measurements into the printed table, with the targets and a PASS/MISS per row. */
import type { Figure } from "../src/testing/BenchResults.ts"
import type { BaselineResult } from "./baseline.ts"
import type { PgCost, SqliteCost } from "./diagnostics.ts"
import type { MemoryResult } from "./memory.ts"
import { fmtBytes, fmtMs, fmtRate, fmtRatio, summarize } from "./stats.ts"
import type { Mode } from "./targets.ts"
import type { ThroughputResult, TimerSample, TransitionSamples } from "./workloads.ts"

export interface ModeResult {
  readonly mode: Mode
  readonly transitions: TransitionSamples
  readonly throughput: ThroughputResult
  /** Publish -> execute, each publish after the previous Flow committed its end (the figure with a target). */
  readonly publish: ReadonlyArray<number>
  /** The same, each publish right after the previous Step's `execute` started, beside its Flow's last commit. */
  readonly publishOverlapped: ReadonlyArray<number>
  readonly timers: ReadonlyArray<TimerSample>
  readonly baseline: BaselineResult
  readonly pgCost: PgCost | undefined
  readonly sqliteCost: SqliteCost | undefined
  readonly durationMs: number
}

export type Verdict = "PASS" | "MISS" | "-"

export interface Row {
  readonly mode: string
  readonly metric: string
  readonly result: string
  readonly target: string
  readonly verdict: Verdict
}

/** Step transition p50 target per mode (ms). */
export const TRANSITION_TARGET_MS: Record<Mode, number> = { embedded: 1.5, cluster: 6 }
/** Publish -> execute p50 target, as a multiple of the transition p50. */
export const PUBLISH_TARGET_RATIO = 2
/** Per-transition statement and commit targets (embedded statement counter). */
export const STATEMENT_TARGET = 10
export const COMMIT_TARGET = 2
/** Engine / baseline overhead target. */
export const OVERHEAD_TARGET = 3
/** 1 s timer lateness target (ms). */
export const TIMER_TARGET_MS = 1500
/**
 * "1,000 waiting Flows hold no worker memory beyond a bounded cache", made measurable: once the idle entities
 * expired, the heap of the worker holding 1,000 waiting Flows is at most this much above the heap of the
 * worker holding 10.
 */
export const IDLE_HEAP_TARGET_BYTES = 4 * 1024 * 1024

const verdict = (ok: boolean): Verdict => (ok ? "PASS" : "MISS")

export const modeRows = (r: ModeResult): Array<Row> => {
  const mode = r.mode
  const wall = summarize(r.transitions.wall)
  const history = summarize(r.transitions.history)
  const base = summarize(r.baseline.latency)
  const latencyRatio = wall.p50 / base.p50
  const throughputRatio = r.baseline.perSecond / r.throughput.perSecond
  const publish = summarize(r.publish)
  const overlapped = summarize(r.publishOverlapped)
  const lateness = summarize(r.timers.map((t) => t.lateness))
  const sinceScheduled = summarize(r.timers.map((t) => t.sinceScheduled))
  const tp = r.throughput
  const rows: Array<Row> = [
    {
      mode,
      metric: `1. Step transition latency (${wall.n} transitions, 1 Flow)`,
      result: `p50 ${fmtMs(wall.p50)}  p99 ${fmtMs(wall.p99)}  (history: p50 ${fmtMs(history.p50)} p99 ${fmtMs(history.p99)})`,
      target: `p50 <= ${TRANSITION_TARGET_MS[mode]} ms`,
      verdict: verdict(wall.p50 <= TRANSITION_TARGET_MS[mode])
    },
    {
      mode,
      metric: `2. Throughput (${tp.flows} Flows x ${tp.transitionsPerFlow} transitions, concurrent)`,
      result: `${fmtRate(tp.perSecond)} transitions, wall ${fmtMs(tp.wallMs)} for ${tp.transitions}`,
      target: "-",
      verdict: "-"
    },
    {
      mode,
      metric: `3. Publish -> execute start (${publish.n} samples, sequential)`,
      result: `p50 ${fmtMs(publish.p50)}  p99 ${fmtMs(publish.p99)}  (${fmtRatio(publish.p50 / wall.p50)} the transition p50)`,
      target: `p50 <= ${PUBLISH_TARGET_RATIO}x transition p50`,
      verdict: verdict(publish.p50 <= PUBLISH_TARGET_RATIO * wall.p50)
    },
    {
      mode,
      metric: `3b. Publish -> execute, beside the previous Flow's last commit (${overlapped.n} samples)`,
      result: `p50 ${fmtMs(overlapped.p50)}  p99 ${fmtMs(overlapped.p99)}  (${fmtRatio(overlapped.p50 / wall.p50)} the transition p50)`,
      target: "-",
      verdict: "-"
    },
    {
      mode,
      metric: `4. 1 s timer lateness after deadline (${lateness.n} concurrent)`,
      result: `p50 ${fmtMs(lateness.p50)}  max ${fmtMs(lateness.max)}  (wait accepted -> execute: p50 ${fmtMs(sinceScheduled.p50)} max ${fmtMs(sinceScheduled.max)})`,
      target: `max <= ${fmtMs(TIMER_TARGET_MS)}`,
      verdict: verdict(lateness.max <= TIMER_TARGET_MS)
    },
    {
      mode,
      metric: `5a. Baseline: 1 insert transaction (${base.n}, sequential)`,
      result: `p50 ${fmtMs(base.p50)}  p99 ${fmtMs(base.p99)}`,
      target: "-",
      verdict: "-"
    },
    {
      mode,
      metric: `5b. Baseline throughput (${r.baseline.transitions} insert transactions)`,
      result: `${fmtRate(r.baseline.perSecond)}, wall ${fmtMs(r.baseline.wallMs)}`,
      target: "-",
      verdict: "-"
    },
    {
      mode,
      metric: "5c. Overhead: engine / baseline transition p50",
      result: `${fmtRatio(latencyRatio)}  (${fmtMs(wall.p50)} / ${fmtMs(base.p50)})`,
      target: `<= ${OVERHEAD_TARGET}x`,
      verdict: verdict(latencyRatio <= OVERHEAD_TARGET)
    },
    {
      mode,
      metric: "5d. Overhead: baseline / engine throughput",
      result: `${fmtRatio(throughputRatio)}  (${fmtRate(r.baseline.perSecond)} / ${fmtRate(tp.perSecond)})`,
      target: `<= ${OVERHEAD_TARGET}x`,
      verdict: verdict(throughputRatio <= OVERHEAD_TARGET)
    }
  ]
  if (r.sqliteCost !== undefined) {
    rows.push({
      mode,
      metric: "7. SQL statements / commits per transition",
      result: `${r.sqliteCost.statements.toFixed(1)} statements, ${r.sqliteCost.commits.toFixed(1)} commits`,
      target: `<= ${STATEMENT_TARGET} / <= ${COMMIT_TARGET}`,
      verdict: verdict(r.sqliteCost.statements <= STATEMENT_TARGET && r.sqliteCost.commits <= COMMIT_TARGET)
    })
  }
  return rows
}

/** The figures of one mode by stable names, each with its baseline, for `bench-results.json`. */
export const modeFigures = (r: ModeResult): Record<string, Figure> => {
  const wall = summarize(r.transitions.wall)
  const base = summarize(r.baseline.latency)
  const publish = summarize(r.publish)
  const lateness = summarize(r.timers.map((t) => t.lateness))
  const baseline = { name: "plain insert transaction p50", value: base.p50, unit: "ms" }
  const throughputBaseline = { name: "plain insert transactions per second", value: r.baseline.perSecond, unit: "1/s" }
  const p = `engine.${r.mode}`
  const figures: Record<string, Figure> = {
    [`${p}.transition_p50_ms`]: {
      value: wall.p50,
      unit: "ms",
      baseline,
      target: `<= ${TRANSITION_TARGET_MS[r.mode]} ms`,
      met: wall.p50 <= TRANSITION_TARGET_MS[r.mode]
    },
    [`${p}.transition_p50_vs_baseline`]: {
      value: wall.p50 / base.p50,
      unit: "x",
      baseline,
      target: `<= ${OVERHEAD_TARGET}x`,
      met: wall.p50 / base.p50 <= OVERHEAD_TARGET
    },
    [`${p}.throughput_per_s`]: {
      value: r.throughput.perSecond,
      unit: "1/s",
      baseline: throughputBaseline,
      target: ">= 1/3 of the baseline",
      met: r.throughput.perSecond * OVERHEAD_TARGET >= r.baseline.perSecond
    },
    [`${p}.publish_to_execute_p50_ms`]: {
      value: publish.p50,
      unit: "ms",
      baseline: { name: "transition p50", value: wall.p50, unit: "ms" },
      target: `<= ${PUBLISH_TARGET_RATIO}x transition p50`,
      met: publish.p50 <= PUBLISH_TARGET_RATIO * wall.p50
    },
    [`${p}.publish_to_execute_overlapped_p50_ms`]: {
      value: summarize(r.publishOverlapped).p50,
      unit: "ms",
      baseline: { name: "transition p50", value: wall.p50, unit: "ms" }
    },
    [`${p}.timer_lateness_max_ms`]: {
      value: lateness.max,
      unit: "ms",
      target: `<= ${TIMER_TARGET_MS} ms`,
      met: lateness.max <= TIMER_TARGET_MS
    }
  }
  if (r.sqliteCost !== undefined) {
    figures[`${p}.statements_per_transition`] = {
      value: r.sqliteCost.statements,
      unit: "statements",
      target: `<= ${STATEMENT_TARGET}`,
      met: r.sqliteCost.statements <= STATEMENT_TARGET
    }
    figures[`${p}.commits_per_transition`] = {
      value: r.sqliteCost.commits,
      unit: "commits",
      target: `<= ${COMMIT_TARGET}`,
      met: r.sqliteCost.commits <= COMMIT_TARGET
    }
  }
  if (r.pgCost !== undefined) {
    figures[`${p}.pg_transactions_per_transition`] = { value: r.pgCost.commits, unit: "transactions" }
  }
  return figures
}

export const memoryRows = (results: ReadonlyArray<MemoryResult>, idleMs: number): Array<Row> => {
  const rows: Array<Row> = []
  const modes = [...new Set(results.map((r) => r.mode))]
  for (const mode of modes) {
    const byCount = results.filter((r) => r.mode === mode).sort((a, b) => a.flows - b.flows)
    for (const r of byCount) {
      rows.push({
        mode,
        metric: `6. RSS, ${r.flows.toLocaleString("en-US")} Flows waiting on a channel`,
        result: `rss ${fmtBytes(r.waiting.rss)}  heap ${fmtBytes(r.waiting.heapUsed)}${r.waiting.gcExposed ? "" : " (no gc)"}`,
        target: "-",
        verdict: "-"
      })
    }
    const small = byCount[0]
    const large = byCount.at(-1)
    if (small === undefined || large === undefined || small === large) continue
    const extra = large.flows - small.flows
    rows.push({
      mode,
      metric: `6. Growth ${small.flows} -> ${large.flows.toLocaleString("en-US")} waiting Flows (entities live)`,
      result: `rss +${fmtBytes(large.waiting.rss - small.waiting.rss)}  heap +${fmtBytes(large.waiting.heapUsed - small.waiting.heapUsed)} (${fmtBytes((large.waiting.heapUsed - small.waiting.heapUsed) / extra)}/Flow)`,
      target: "-",
      verdict: "-"
    })
    if (small.idle !== undefined && large.idle !== undefined) {
      const heapDelta = large.idle.heapUsed - small.idle.heapUsed
      rows.push({
        mode,
        metric: `6. After ${(idleMs / 1000).toFixed(0)} s idle (entities expired): ${small.flows} vs ${large.flows.toLocaleString("en-US")}`,
        result: `rss ${fmtBytes(small.idle.rss)} vs ${fmtBytes(large.idle.rss)}  heap ${fmtBytes(small.idle.heapUsed)} vs ${fmtBytes(large.idle.heapUsed)} (+${fmtBytes(heapDelta)})`,
        target: `bounded: heap +<= ${fmtBytes(IDLE_HEAP_TARGET_BYTES)}`,
        verdict: verdict(heapDelta <= IDLE_HEAP_TARGET_BYTES)
      })
    }
  }
  return rows
}

/** A plain-text table; columns padded to their widest cell. */
export const renderTable = (rows: ReadonlyArray<Row>): string => {
  const header: Row = { mode: "Mode", metric: "Measurement", result: "Result", target: "Target", verdict: "-" }
  const cells = (r: Row, isHeader: boolean) => [
    r.mode,
    r.metric,
    r.result,
    r.target,
    isHeader ? "PASS/MISS" : r.verdict
  ]
  const all = [cells(header, true), ...rows.map((r) => cells(r, false))]
  const widths = all[0]!.map((_, i) => Math.max(...all.map((c) => c[i]!.length)))
  const line = (c: ReadonlyArray<string>) => `| ${c.map((cell, i) => cell.padEnd(widths[i]!)).join(" | ")} |`
  const rule = `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`
  return [line(all[0]!), rule, ...all.slice(1).map(line)].join("\n")
}
