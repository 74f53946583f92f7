/**
 * The scaffolding every runner's benchmark shares, so a runner's `bench/runner.bench.ts` holds only what is
 * particular to its framework (the framework's own loop, its agent, its run-state baseline):
 *
 * - {@link percentile}, {@link fmtMs}, {@link p50p99}: the timing summary of a measurement;
 * - {@link durableTurns}: (b) the same turns as a durable session on the embedded engine;
 * - {@link inMemoryTurns}: (d) the runner alone, in memory, driven turn by turn as the session drives it
 *   (`runModelStep` -> one `executeDeferredToolCall` per requested call -> `runModelStep`), with a hook that
 *   measures each tool round outside the timed part;
 * - {@link pairedSessions}: (a) and (d) turn by turn, alternately, over several fresh sessions after a warm-up,
 *   with each turn's ratio of the two, and {@link quartiles} to summarize the ratios;
 * - {@link approvedRecord}: a call's record as the session stores it once approved;
 * - {@link printTable}, {@link ratioRow}: the result table;
 * - {@link recordFigures}, {@link turnFigures}: the figures into `bench-results.json` by stable name, each with
 *   its baseline;
 * - {@link scratchDir}, {@link runMain}: a temporary directory and the program's exit.
 *
 * @since 0.1.0
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import * as BenchResults from "@durable-agent/engine/testing/BenchResults"
import {
  AgentSessionClient,
  AgentSessionFlow,
  EventWriter,
  Heartbeat,
  Policy,
  type Runner,
  type Wire
} from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"

/**
 * The number of turns each measurement runs: `BENCH_TURNS`, default 40.
 *
 * @category constants
 * @since 0.1.0
 */
export const benchTurns = (): number => Number(process.env.BENCH_TURNS ?? "40")

/**
 * The `p`th percentile (0..100) of unsorted samples: the sample at rank `floor(p / 100 * n)`.
 *
 * @category timing
 * @since 0.1.0
 */
export const percentile = (samples: ReadonlyArray<number>, p: number): number => {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

/**
 * Milliseconds with two decimals: `12.34 ms`.
 *
 * @category timing
 * @since 0.1.0
 */
export const fmtMs = (ms: number): string => `${ms.toFixed(2)} ms`

/**
 * A measurement's summary cell: `p50 12.34 ms  p99 56.78 ms`.
 *
 * @category timing
 * @since 0.1.0
 */
export const p50p99 = (samples: ReadonlyArray<number>): string =>
  `p50 ${fmtMs(percentile(samples, 50))}  p99 ${fmtMs(percentile(samples, 99))}`

/**
 * A temporary directory for one benchmark run, and its removal.
 *
 * @category running
 * @since 0.1.0
 */
export const scratchDir = (prefix: string): { readonly path: string; readonly remove: () => void } => {
  const path = mkdtempSync(join(tmpdir(), prefix))
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) }
}

/**
 * Options of {@link durableTurns}.
 *
 * @category models
 * @since 0.1.0
 */
export interface DurableTurnsOptions<E> {
  /** The session Flow type (each measurement its own). */
  readonly flowType: string
  /** The runner under test, as the worker gets it. */
  readonly runner: Layer.Layer<Runner.AgentFrameworkRunner, E>
  /** The embedded engine's SQLite file. */
  readonly filename: string
  readonly turns: number
}

/**
 * (b) `turns` turns of one durable session on the embedded engine (64 task slots): each sends a user message
 * and waits until the snapshot shows the turn ended. Returns each turn's time in milliseconds.
 *
 * @category measurements
 * @since 0.1.0
 */
export const durableTurns = <E>(options: DurableTurnsOptions<E>): Effect.Effect<Array<number>, unknown> =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const times: Array<number> = []
    yield* client.startSession("bench")
    for (let i = 0; i < options.turns; i++) {
      const t0 = performance.now()
      yield* client.sendUserMessage("bench", `turn ${i}`)
      yield* client.getSnapshot("bench").pipe(
        Effect.repeat({
          schedule: Schedule.spaced("2 millis"),
          until: (s) => s.state !== null && s.state.turnCount >= i + 1 && s.state.activeTurnId === null
        })
      )
      times.push(performance.now() - t0)
    }
    return times
  }).pipe(
    Effect.provide(
      Layer.mergeAll(
        AgentSessionFlow.layerWorker(AgentSessionFlow.make({ flowType: options.flowType })).pipe(
          Layer.provide(options.runner)
        ),
        AgentSessionClient.layer(options.flowType)
      ).pipe(
        Layer.provideMerge(
          Engine.layerEmbedded({ filename: options.filename, pollInterval: "50 millis", maxConcurrentTasks: 64 })
        )
      )
    ),
    Effect.scoped
  )

/**
 * A requested call's record as the session stores it once the call is approved, with the spec's defaults for
 * the rest (a `read` call that needs no approval).
 *
 * @category constructors
 * @since 0.1.0
 */
export const approvedRecord = (
  turnId: string,
  call: { readonly toolCallId: string; readonly toolName: string; readonly arguments: string },
  deferralOrder = 0
): Wire.AgentToolCall => ({
  toolCallId: call.toolCallId,
  turnId,
  toolName: call.toolName,
  arguments: call.arguments,
  effect: "read",
  requiresApproval: false,
  status: "approved",
  output: null,
  error: null,
  rejectionMessage: null,
  deferralOrder,
  toolSourceReference: null,
  traceContext: null,
  waitUntil: null,
  inputContinuation: null,
  inputAnswers: [],
  inputQuestion: null,
  inputChoices: [],
  inputAllowsFreeText: true,
  cancellationReason: null,
  taskId: null,
  taskPollIntervalSeconds: null,
  taskAnswerPending: false
})

/**
 * A turn's tool round, as {@link inMemoryTurns} hands it to its measuring hook: the first `runModelStep`'s
 * outcome and the session's stored history at that point (the turn's user message included).
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolRound {
  readonly turnId: string
  readonly requested: Runner.ToolCallsRequested
  readonly history: ReadonlyArray<Wire.AgentMessage>
}

/**
 * One turn of {@link inMemoryTurns}: its time (without the hook's) and what the hook measured.
 *
 * @category models
 * @since 0.1.0
 */
export interface DrivenTurn<A> {
  readonly ms: number
  readonly round: A
}

/**
 * (d) The runner alone, in memory: each call of `turn(i)` runs one turn as the session drives it, with the
 * history growing turn by turn: the user message `turn <i>`, `runModelStep` (which must request tool calls),
 * one `executeDeferredToolCall` per call on its approved record, then `runModelStep` with the results (which
 * must complete the turn). `measure` runs on the tool round outside the timed part. Turn by turn, so a
 * benchmark can alternate it with the framework's own loop and both see the same machine load.
 *
 * @category measurements
 * @since 0.1.0
 */
export const inMemoryTurns = <A = undefined>(
  runner: Runner.AgentFrameworkRunnerShape,
  measure: (round: ToolRound) => A = () => undefined as A
): { readonly turn: (i: number) => Promise<DrivenTurn<A>> } => {
  const history: Array<Wire.AgentMessage> = []
  const context = (
    turnId: string,
    frameworkRunState: string | null,
    toolCalls: ReadonlyArray<Wire.AgentToolCall>
  ): Runner.AgentTurnContext => ({
    flowId: "f",
    turnId,
    stepExecutionId: "RunModel",
    attempt: 1,
    messages: [...history],
    frameworkRunState,
    toolCalls,
    sessionSettings: {},
    interactionMode: "chat",
    toolPolicies: {},
    defaultToolEffect: "unclassified",
    resolveToolPolicy: (name, frameworkEffect) => Policy.resolveToolPolicy(name, { frameworkEffect })
  })
  const store = (messages: ReadonlyArray<Runner.FrameworkMessage>, turnId: string) => {
    for (const m of messages) history.push({ ...m, sequence: history.length + 1, turnId, createdAt: "" })
  }
  const turn = (i: number) =>
    Effect.gen(function* () {
      const t0 = performance.now()
      const turnId = `t${i}`
      store([runner.buildUserMessage(`turn ${i}`)], turnId)
      const first = yield* runner.runModelStep(context(turnId, null, []))
      if (first._tag !== "ToolCallsRequested") return yield* Effect.die(new Error("expected tool calls"))
      const t1 = performance.now()
      const round = measure({ turnId, requested: first, history: [...history] })
      const t2 = performance.now()
      const records: Array<Wire.AgentToolCall> = []
      for (const [n, call] of first.toolCalls.entries()) {
        const record = approvedRecord(turnId, call, n)
        const result = yield* runner.executeDeferredToolCall({
          flowId: "f",
          turnId,
          toolCall: record,
          idempotencyKey: `f/${turnId}/${call.toolCallId}`,
          attempt: 1,
          heartbeatCheckpoint: Option.none()
        })
        if (!("output" in result)) return yield* Effect.die(new Error("expected a tool result"))
        records.push({ ...record, status: "succeeded", output: result.output })
      }
      const second = yield* runner.runModelStep(context(turnId, first.frameworkRunState, records))
      if (second._tag !== "TurnCompleted") return yield* Effect.die(new Error("expected the answer"))
      store(second.newMessages, turnId)
      return { ms: performance.now() - t0 - (t2 - t1), round } satisfies DrivenTurn<A>
    }).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))
  return { turn: (i) => Effect.runPromise(turn(i) as Effect.Effect<DrivenTurn<A>>) }
}

/**
 * The number of counted sessions {@link pairedSessions} runs: `BENCH_ROUNDS`, default 20.
 *
 * @category constants
 * @since 0.1.0
 */
export const benchRounds = (): number => Number(process.env.BENCH_ROUNDS ?? "20")

/**
 * Options of {@link pairedSessions}.
 *
 * @category models
 * @since 0.1.0
 */
export interface PairedSessionsOptions<A> {
  /** Counted sessions of each side, after one warm-up session of each that is not counted. */
  readonly sessions: number
  readonly turns: number
  /** A fresh session of the framework's own loop: `turn(i)` runs its turn `i` and returns the time in milliseconds. */
  readonly direct: () => (i: number) => Promise<number>
  /** A fresh session of the runner alone in memory, as {@link inMemoryTurns} makes it. */
  readonly runner: () => { readonly turn: (i: number) => Promise<DrivenTurn<A>> }
}

/**
 * What {@link pairedSessions} measured over its counted sessions.
 *
 * @category models
 * @since 0.1.0
 */
export interface PairedSessions<A> {
  /** Each counted turn's time through the framework's own loop (a), in milliseconds. */
  readonly direct: ReadonlyArray<number>
  /** Each counted turn's time through the runner (d), in milliseconds, in the same order. */
  readonly runner: ReadonlyArray<number>
  /** Each counted turn's runner time over the framework's time of the same turn, measured next to it. */
  readonly ratios: ReadonlyArray<number>
  /** What the runner's measuring hook returned for each turn of the last session. */
  readonly rounds: ReadonlyArray<A>
}

/**
 * (a) against (d), paired: `sessions` fresh sessions of `turns` turns through each, after one warm-up session
 * of each (the JIT's) that is not counted. Turn `i` of a session runs through both, one right after the other
 * (which one goes first alternates turn by turn and session by session), so both see the same load of the
 * machine and the same history length; each turn's ratio is the runner's time over the framework's.
 *
 * @category measurements
 * @since 0.1.0
 */
export const pairedSessions = async <A>(options: PairedSessionsOptions<A>): Promise<PairedSessions<A>> => {
  const direct: Array<number> = []
  const runner: Array<number> = []
  const ratios: Array<number> = []
  let rounds: Array<A> = []
  for (let session = 0; session <= options.sessions; session++) {
    const directTurn = options.direct()
    const memory = options.runner()
    rounds = []
    for (let i = 0; i < options.turns; i++) {
      const directFirst = (session + i) % 2 === 0
      const a = directFirst ? await directTurn(i) : undefined
      const d = await memory.turn(i)
      const paired = a ?? (await directTurn(i))
      rounds.push(d.round)
      // session 0 warms the JIT up
      if (session === 0) continue
      direct.push(paired)
      runner.push(d.ms)
      ratios.push(d.ms / paired)
    }
  }
  return { direct, runner, ratios, rounds }
}

/**
 * The quartiles of unsorted samples ({@link percentile} 25, 50, 75).
 *
 * @category timing
 * @since 0.1.0
 */
export const quartiles = (
  samples: ReadonlyArray<number>
): { readonly q1: number; readonly median: number; readonly q3: number } => ({
  q1: percentile(samples, 25),
  median: percentile(samples, 50),
  q3: percentile(samples, 75)
})

/**
 * The table row of a ratio and its limit: `<label> | 1.23x | <= 1.5x: PASS`.
 *
 * @category output
 * @since 0.1.0
 */
export const ratioRow = (label: string, ratio: number, limit: number): [string, string, string] => [
  label,
  `${ratio.toFixed(2)}x`,
  `<= ${limit}x: ${ratio <= limit ? "PASS" : "MISS"}`
]

/**
 * Prints the benchmark's title line and its `| Measurement | Result | Target |` table.
 *
 * @category output
 * @since 0.1.0
 */
export const printTable = (title: string, rows: ReadonlyArray<readonly [string, string, string]>): void => {
  process.stdout.write(`\n${title}\n\n`)
  process.stdout.write("| Measurement | Result | Target |\n|---|---|---|\n")
  for (const r of rows) process.stdout.write(`| ${r.join(" | ")} |\n`)
}

/**
 * One figure with the baseline it is compared to, measured in the same run.
 *
 * @category models
 * @since 0.1.0
 */
export interface BenchFigure {
  readonly value: number
  readonly unit: string
  readonly baseline: number
  readonly baseline_name: string
  readonly target?: string | undefined
  readonly pass?: boolean | undefined
  readonly note?: string | undefined
}

/**
 * Records `figures` into `bench-results.json` (the engine's `BenchResults`), over the entries of the same
 * names; returns the file's path.
 *
 * @category output
 * @since 0.1.0
 */
export const recordFigures = (figures: Readonly<Record<string, BenchFigure>>): string => {
  BenchResults.record(
    Object.fromEntries(
      Object.entries(figures).map(([name, f]) => [
        name,
        {
          value: f.value,
          unit: f.unit,
          baseline: { name: f.baseline_name, value: f.baseline, unit: f.unit },
          target: f.target,
          met: f.pass,
          note: f.note
        }
      ])
    )
  )
  return BenchResults.file()
}

/**
 * What a runner's benchmark measured, for {@link turnFigures}.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnMeasurements {
  /** The figures' prefix: the runner's package name (`runner-mastra`). */
  readonly prefix: string
  /** (d)'s p50 and (b)'s p50, in milliseconds. */
  readonly inMemoryP50: number
  readonly durableP50: number
  /** (a), the framework's own loop: its p50 and its name. */
  readonly baselineP50: number
  readonly baselineName: string
  /** The run state after the first and the last turn's tool round, each beside the framework's own state. */
  readonly firstRound: { readonly runStateBytes: number; readonly frameworkBytes: number }
  readonly lastRound: { readonly runStateBytes: number; readonly frameworkBytes: number }
  /** What the framework's own state of a round is (the run-state figures' baseline name). */
  readonly frameworkStateName: string
  readonly turns: number
  /**
   * The ratio of (d) to (a) the target is judged on, when it is not `inMemoryP50 / baselineP50` (the median of
   * paired ratios, {@link pairedSessions}).
   */
  readonly inMemoryRatio?: number | undefined
  /** What the in-memory figure measures, where its name does not say it all. */
  readonly inMemoryNote?: string | undefined
  /** Rounds the millisecond figures to this many decimals; unrounded when omitted. */
  readonly decimals?: number | undefined
}

/**
 * The four figures every runner's benchmark records, by their stable names: `<prefix>.turn_in_memory_p50_ms`
 * (target: at most 1.5 x the framework's own loop), `<prefix>.turn_durable_embedded_p50_ms`, and
 * `<prefix>.run_state_bytes_3_calls_first_turn` / `_last_turn` beside the framework's own state.
 *
 * @category output
 * @since 0.1.0
 */
export const turnFigures = (m: TurnMeasurements): Record<string, BenchFigure> => {
  const ms = (value: number) => (m.decimals === undefined ? value : Number(value.toFixed(m.decimals)))
  const ratio = m.inMemoryRatio ?? m.inMemoryP50 / m.baselineP50
  return {
    [`${m.prefix}.turn_in_memory_p50_ms`]: {
      value: ms(m.inMemoryP50),
      unit: "ms",
      baseline: ms(m.baselineP50),
      baseline_name: m.baselineName,
      target: m.inMemoryRatio === undefined ? "value <= 1.5 x baseline" : "median of the turns' paired ratios <= 1.5",
      pass: ratio <= 1.5,
      note: m.inMemoryNote
    },
    [`${m.prefix}.turn_durable_embedded_p50_ms`]: {
      value: ms(m.durableP50),
      unit: "ms",
      baseline: ms(m.baselineP50),
      baseline_name: m.baselineName
    },
    [`${m.prefix}.run_state_bytes_3_calls_first_turn`]: {
      value: m.firstRound.runStateBytes,
      unit: "bytes",
      baseline: m.firstRound.frameworkBytes,
      baseline_name: m.frameworkStateName
    },
    [`${m.prefix}.run_state_bytes_3_calls_last_turn`]: {
      value: m.lastRound.runStateBytes,
      unit: "bytes",
      baseline: m.lastRound.frameworkBytes,
      baseline_name: m.frameworkStateName,
      note: `turn ${m.turns} of the session`
    }
  }
}

/**
 * Runs a benchmark's `main`, prints its total time, sets exit code 1 when it fails and always runs `cleanup`
 * (a scratch directory's removal).
 *
 * @category running
 * @since 0.1.0
 */
export const runMain = (main: () => Promise<void>, cleanup: () => void = () => {}): void => {
  const started = performance.now()
  main()
    .then(() => process.stdout.write(`Total: ${((performance.now() - started) / 1000).toFixed(1)} s\n`))
    .catch((e) => {
      process.stderr.write(`${String(e)}\n`)
      process.exitCode = 1
    })
    .finally(cleanup)
}
