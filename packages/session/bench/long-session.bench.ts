/**
 * The long-session benchmark (`npm run bench`): one session of 1,000 turns with one tool call per turn on the
 * embedded engine. Cost must stay flat in the session's length: it reports the stored bytes each turn adds
 * near the start (turns 1-10) and at the end, their ratio (target <= 1.3x), the turn latency late in the
 * session against turns 11-20 and the snapshot latency against turn 10 (targets <= 1.3x), the bytes on disk as a user's disk
 * sees them, the SQLite file plus its WAL, measured before any checkpoint the bench forces, against the live
 * data (target <= 2x), with the deleted-value rows (tombstones) the engine left behind.
 *
 * The turn and snapshot figures are recorded against baselines measured in the same minutes, so that a machine
 * whose load changes during the run (other engineers' tests) does not move the ratio: a reference session at
 * turn 10 (created once the long session has 11 turns) whose snapshot is read alternately with the long session's
 * at the end, and a second reference session whose turns 11-20 alternate with 10 more turns of the long session
 * after its last (turns 1,001-1,010 at the default; the bytes per turn are measured before them). The figures in
 * order (turn 10's snapshot read at turn 10, turns 11-20 against turns 991-1,000) are printed and recorded beside
 * them.
 *
 * Environment: `BENCH_LONG_TURNS` (default 1000).
 */
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@durable-agent/engine"
import * as BenchResults from "@durable-agent/engine/testing/BenchResults"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import { SqlClient } from "effect/sql"
import { type Row, renderTable } from "../../engine/bench/report.ts"
import { fmtBytes, fmtMs, fmtRatio, summarize } from "../../engine/bench/stats.ts"
import { AgentSessionClient, AgentSessionFlow, ModelClient, Persistence, Stepwise, ToolSource } from "../src/index.ts"
import { agentDefinition, engineFor } from "./agent.ts"

const TURNS = Number(process.env.BENCH_LONG_TURNS ?? 1000)
const WINDOW = 10
const RATIO_TARGET = 1.3
const FILE_TARGET_BYTES = 20 * 1024 * 1024
const DISK_TARGET_RATIO = 2
const FLOW_TYPE = "LongBenchAgent"
const flow = AgentSessionFlow.make({ flowType: FLOW_TYPE })
const usage = { inputTokens: 120, outputTokens: 12, cachedInputTokens: 0, reasoningTokens: 0 }

/** A user message gets one tool call; tool results get a short answer. */
const model = ModelClient.make((request: ModelClient.ModelRequest) =>
  Effect.sync((): ModelClient.ModelResponse => {
    const last = request.messages[request.messages.length - 1]
    if (last?.role === "user") {
      const turn = request.messages.filter((m) => m.role === "user").length
      return {
        text: null,
        reasoning: null,
        toolCalls: [{ toolCallId: `lookup-${turn}`, toolName: "lookup", arguments: JSON.stringify({ turn }) }],
        usage
      }
    }
    return { text: "Found it: the answer is 42, as every turn.", reasoning: null, toolCalls: [], usage }
  })
)

const lookup = ToolSource.tool({
  name: "lookup",
  description: "Looks a thing up.",
  effect: "read",
  handler: (args) => Effect.succeed({ turn: args.turn ?? null, value: "a result of about this length, every turn" })
})

const storedBytes = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // page_count sees the WAL's committed pages: no checkpoint needed, and none forced (the WAL is measured too)
  const [pages] = yield* sql.unsafe<{ page_count: number }>("PRAGMA page_count")
  const [free] = yield* sql.unsafe<{ freelist_count: number }>("PRAGMA freelist_count")
  const [size] = yield* sql.unsafe<{ page_size: number }>("PRAGMA page_size")
  return {
    file: Number(pages!.page_count) * Number(size!.page_size),
    used: (Number(pages!.page_count) - Number(free!.freelist_count)) * Number(size!.page_size)
  }
})

/** The file and its WAL as they are on disk, without a checkpoint first. */
const onDisk = (file: string) => {
  const size = (f: string) => {
    try {
      return statSync(f).size
    } catch {
      return 0
    }
  }
  return { main: size(file), wal: size(`${file}-wal`) }
}

/** Whether a checkpoint can run now: SQLite's busy flag, WAL frames, frames checkpointed (PASSIVE). */
const checkpointState = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql.unsafe<{ busy: number; log: number; checkpointed: number }>("PRAGMA wal_checkpoint(PASSIVE)")
  return { busy: Number(row!.busy), log: Number(row!.log), checkpointed: Number(row!.checkpointed) }
})

/** Attribute rows that hold a delete (no value): what deleted values leave behind. */
const tombstones = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql.unsafe<{ n: number }>("SELECT COUNT(*) AS n FROM dex_attrs WHERE value IS NULL")
  return Number(row!.n)
})

const snapshotLatency = (id: string) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const samples: Array<number> = []
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now()
      yield* client.getSnapshot(id)
      samples.push(performance.now() - t0)
    }
    return summarize(samples).p50
  })

/** The snapshot p50 of two sessions, read alternately (20 reads each, after 5 each to warm up). */
const snapshotLatencies = (a: string, b: string) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const samples: [Array<number>, Array<number>] = [[], []]
    for (let i = 0; i < 25; i++) {
      for (const [j, id] of [a, b].entries()) {
        const t0 = performance.now()
        yield* client.getSnapshot(id)
        if (i >= 5) samples[j]!.push(performance.now() - t0)
      }
    }
    return [summarize(samples[0]).p50, summarize(samples[1]).p50] as const
  })

/** Runs turn `turn` of session `id` (the first starts it) and waits until it ended; its wall time. */
const runTurn = (id: string, turn: number) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const engine = yield* Client.Client
    const t0 = performance.now()
    if (turn === 1) yield* client.startSession(id, { initialMessage: `turn ${turn}` })
    else yield* client.sendUserMessage(id, `turn ${turn}`)
    while (true) {
      const state = yield* engine.getAttribute(id, Persistence.AgentState)
      if (state._tag === "Some" && state.value.turnCount >= turn && state.value.activeTurnId === null) break
      yield* Effect.sleep("1 millis")
    }
    return performance.now() - t0
  })

const run = (file: string) =>
  Effect.gen(function* () {
    const id = "long"
    const used: Array<number> = []
    const turnMs: Array<number> = []
    const refTurnMs: Array<number> = []
    const pairedTurnMs: Array<number> = []
    let walMax = 0
    let snapshotAt10 = 0
    used.push((yield* storedBytes).used)
    for (let turn = 1; turn <= TURNS; turn++) {
      turnMs.push(yield* runTurn(id, turn))
      walMax = Math.max(walMax, onDisk(file).wal)
      if (turn <= WINDOW + 1 || turn >= TURNS - WINDOW) used.push((yield* storedBytes).used)
      if (turn === WINDOW) snapshotAt10 = yield* snapshotLatency(id)
      if (turn === WINDOW + 1) {
        // the reference sessions' first 10 turns, after the long session's early bytes were measured
        for (let t = 1; t <= WINDOW; t++) yield* runTurn("ref-10", t)
        for (let t = 1; t <= WINDOW; t++) yield* runTurn("ref-20", t)
      }
      if (turn % 50 === 0) process.stderr.write(`[long session bench] turn ${turn}\n`)
    }
    const [snapshotAtEnd, snapshotRef10] = yield* snapshotLatencies(id, "ref-10")
    // 10 more turns of the long session, each after a turn 11-20 of a reference session, in the same minutes
    for (let t = 1; t <= WINDOW; t++) {
      refTurnMs.push(yield* runTurn("ref-20", WINDOW + t))
      pairedTurnMs.push(yield* runTurn(id, TURNS + t))
    }
    // The disk as a user sees it, then what a checkpoint can do now, then the live data after one.
    const disk = onDisk(file)
    const checkpoint = yield* checkpointState
    const deleted = yield* tombstones
    yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe("PRAGMA wal_checkpoint(TRUNCATE)"))
    const end = yield* storedBytes
    const early = (used[WINDOW]! - used[0]!) / WINDOW
    const late = (used[used.length - 1]! - used[used.length - 1 - WINDOW]!) / WINDOW
    const turnEarly = summarize(turnMs.slice(WINDOW, 2 * WINDOW)).p50
    const turnLate = summarize(turnMs.slice(-WINDOW)).p50
    const turnPaired = summarize(pairedTurnMs).p50
    const turnRef = summarize(refTurnMs).p50
    return {
      early,
      late,
      file: end.file,
      live: end.used,
      disk,
      walMax,
      checkpoint,
      deleted,
      snapshotAt10,
      snapshotAtEnd,
      snapshotRef10,
      turnEarly,
      turnLate,
      turnPaired,
      turnRef
    }
  })

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "das-long-bench-"))
  try {
    const file = join(dir, "long.db")
    const engine = await engineFor("embedded", file)
    const worker = Layer.mergeAll(
      AgentSessionFlow.layerWorker(flow).pipe(
        Layer.provide(Stepwise.layer(agentDefinition)),
        Layer.provide(Layer.mergeAll(ModelClient.layer(model.generate), ToolSource.layer([lookup])))
      ),
      AgentSessionClient.layer(FLOW_TYPE)
    ).pipe(Layer.provideMerge(engine))
    const r = await Effect.runPromise(
      run(file).pipe(
        Effect.provide(worker),
        Effect.scoped,
        Effect.provideService(References.MinimumLogLevel, "Warn")
      ) as Effect.Effect<Effect.Success<ReturnType<typeof run>>, unknown>
    )
    const ratio = r.late / r.early
    const diskBytes = r.disk.main + r.disk.wal
    const rows: Array<Row> = [
      {
        mode: "embedded",
        metric: `stored bytes per turn, turns 1-${WINDOW} vs ${TURNS - WINDOW + 1}-${TURNS}`,
        result: `${fmtBytes(r.early)} vs ${fmtBytes(r.late)} (${fmtRatio(ratio)})`,
        target: `<= ${RATIO_TARGET}x`,
        verdict: ratio <= RATIO_TARGET ? "PASS" : "MISS"
      },
      {
        mode: "embedded",
        metric: `database file after ${TURNS} turns`,
        result: fmtBytes(r.file),
        target: `<= ${fmtBytes(FILE_TARGET_BYTES)}`,
        verdict: r.file <= FILE_TARGET_BYTES ? "PASS" : "MISS"
      },
      {
        mode: "embedded",
        metric: `snapshot p50, a session at turn ${WINDOW} vs turn ${TURNS}, read alternately`,
        result: `${fmtMs(r.snapshotRef10)} vs ${fmtMs(r.snapshotAtEnd)} (${fmtRatio(r.snapshotAtEnd / r.snapshotRef10)})`,
        target: `<= ${RATIO_TARGET}x`,
        verdict: r.snapshotAtEnd / r.snapshotRef10 <= RATIO_TARGET ? "PASS" : "MISS"
      },
      {
        mode: "embedded",
        metric: `snapshot p50 at turn ${WINDOW} (read then) vs turn ${TURNS}`,
        result: `${fmtMs(r.snapshotAt10)} vs ${fmtMs(r.snapshotAtEnd)} (${fmtRatio(r.snapshotAtEnd / r.snapshotAt10)})`,
        target: `<= ${RATIO_TARGET}x`,
        verdict: r.snapshotAtEnd / r.snapshotAt10 <= RATIO_TARGET ? "PASS" : "MISS"
      },
      {
        mode: "embedded",
        metric: `turn p50, a session's turns ${WINDOW + 1}-${2 * WINDOW} vs turns ${TURNS + 1}-${TURNS + WINDOW}, alternately`,
        result: `${fmtMs(r.turnRef)} vs ${fmtMs(r.turnPaired)} (${fmtRatio(r.turnPaired / r.turnRef)})`,
        target: `<= ${RATIO_TARGET}x`,
        verdict: r.turnPaired / r.turnRef <= RATIO_TARGET ? "PASS" : "MISS"
      },
      {
        mode: "embedded",
        metric: `turn p50, turns ${WINDOW + 1}-${2 * WINDOW} (run then) vs ${TURNS - WINDOW + 1}-${TURNS}`,
        result: `${fmtMs(r.turnEarly)} vs ${fmtMs(r.turnLate)} (${fmtRatio(r.turnLate / r.turnEarly)})`,
        target: `<= ${RATIO_TARGET}x`,
        verdict: r.turnLate / r.turnEarly <= RATIO_TARGET ? "PASS" : "MISS"
      },
      {
        mode: "embedded",
        metric: "file + WAL on disk vs live data",
        result: `${fmtBytes(diskBytes)} (file ${fmtBytes(r.disk.main)}, WAL ${fmtBytes(r.disk.wal)}, largest WAL ${fmtBytes(r.walMax)}) vs ${fmtBytes(r.live)} (${fmtRatio(diskBytes / r.live)})`,
        target: `<= ${DISK_TARGET_RATIO}x`,
        verdict: diskBytes / r.live <= DISK_TARGET_RATIO ? "PASS" : "MISS"
      },
      {
        mode: "embedded",
        metric: "checkpoint at the end (PASSIVE): busy, WAL frames, checkpointed",
        result: `${r.checkpoint.busy}, ${r.checkpoint.log}, ${r.checkpoint.checkpointed}; tombstone rows ${r.deleted}`,
        target: "-",
        verdict: "-"
      }
    ]
    process.stdout.write(`\nLong session benchmark (${TURNS} turns, one read tool per turn)\n\n${renderTable(rows)}\n`)
    BenchResults.record({
      "session.long.bytes_per_turn_late": {
        value: r.late,
        unit: "bytes",
        baseline: { name: `bytes per turn, turns 1-${WINDOW}`, value: r.early, unit: "bytes" },
        target: `<= ${RATIO_TARGET}x the baseline`,
        met: ratio <= RATIO_TARGET
      },
      "session.long.database_file_bytes": {
        value: r.file,
        unit: "bytes",
        target: `<= ${FILE_TARGET_BYTES}`,
        met: r.file <= FILE_TARGET_BYTES
      },
      "session.long.snapshot_p50_ms_late": {
        value: r.snapshotAtEnd,
        unit: "ms",
        baseline: {
          name: `snapshot p50 of a session at turn ${WINDOW}, read alternately`,
          value: r.snapshotRef10,
          unit: "ms"
        },
        target: `<= ${RATIO_TARGET}x the baseline`,
        met: r.snapshotAtEnd / r.snapshotRef10 <= RATIO_TARGET
      },
      "session.long.snapshot_p50_ms_turn_10": {
        value: r.snapshotAt10,
        unit: "ms",
        note: `the long session's snapshot p50 read at its turn ${WINDOW} (${fmtRatio(r.snapshotAtEnd / r.snapshotAt10)} at turn ${TURNS})`
      },
      "session.long.turn_p50_ms_late": {
        value: r.turnPaired,
        unit: "ms",
        baseline: {
          name: `turn p50 of a session's turns ${WINDOW + 1}-${2 * WINDOW}, alternately`,
          value: r.turnRef,
          unit: "ms"
        },
        target: `<= ${RATIO_TARGET}x the baseline`,
        met: r.turnPaired / r.turnRef <= RATIO_TARGET,
        note: `the long session's turns ${TURNS + 1}-${TURNS + WINDOW}, each after one of the baseline's`
      },
      "session.long.turn_p50_ms_turns_11_20": {
        value: r.turnEarly,
        unit: "ms",
        note: `the long session's turns ${WINDOW + 1}-${2 * WINDOW} (${fmtRatio(r.turnLate / r.turnEarly)} for its turns ${TURNS - WINDOW + 1}-${TURNS}: ${fmtMs(r.turnLate)})`
      },
      "session.long.database_bytes_with_wal": {
        value: diskBytes,
        unit: "bytes",
        baseline: { name: "live data (used pages after a checkpoint)", value: r.live, unit: "bytes" },
        target: `<= ${DISK_TARGET_RATIO}x the baseline`,
        met: diskBytes / r.live <= DISK_TARGET_RATIO
      },
      "session.long.tombstone_rows": { value: r.deleted, unit: "rows" }
    })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`long session benchmark failed: ${error instanceof Error ? error.stack : String(error)}\n`)
    process.exit(1)
  }
)
