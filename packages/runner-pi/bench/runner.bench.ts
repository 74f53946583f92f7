// Per-turn overhead of the Pi runner in Step mode, measured in one run:
//   (a) direct: Pi's own agent loop (`agentLoop` from pi-agent-core) with the scripted pi-ai provider and a
//       read tool that executes in-process: two model calls and three tool runs per turn, no durability;
//   (b) durable: the same turn as a session on the embedded engine
//       (RunModel -> 3 parallel CallTool -> ResumeTurn -> RunModel);
//   (d) the runner alone in memory: the same turn driven the way the session drives it
//       (runModelStep -> 3 x executeDeferredToolCall -> runModelStep).
// Target: (d) <= 1.5 x (a). Also the framework run state after a round of 3 tool calls, beside Pi's whole
// context at the same point (what keeping Pi's own context would store), on the first turn and after TURNS
// turns of history. The figures are merged into bench-results.json at the repository root.
//
//   node packages/runner-pi/bench/runner.bench.ts
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
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
  Wire
} from "@durable-agent/session"
import { type AgentMessage, agentLoop } from "@mariozechner/pi-agent-core"
import { type Context, type Message, Type } from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { PiRunner, type PiTool, ScriptedProvider } from "../src/index.ts"
import { fromStoredMessages } from "../src/internal/messages.ts"

const TURNS = Number(process.env.BENCH_TURNS ?? "40")
/** Counted rounds (a session of TURNS turns through (a) and one through (d)), after one warm-up round. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? "20")
/** Turns of the durable session (b); 0 leaves it out. */
const DURABLE_TURNS = Number(process.env.BENCH_DURABLE_TURNS ?? "40")
const dir = mkdtempSync(join(tmpdir(), "das-pi-bench-"))

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}
const fmt = (ms: number) => `${ms.toFixed(2)} ms`

/** A turn's wall-clock time and the process's CPU time during it (user + system, all threads), in ms. */
interface Timing {
  readonly wall: number
  readonly cpu: number
}
const startTiming = () => {
  const wall = performance.now()
  const cpu = process.cpuUsage()
  return (): Timing => {
    const used = process.cpuUsage(cpu)
    return { wall: performance.now() - wall, cpu: (used.user + used.system) / 1000 }
  }
}

// The scripted provider: after tool results it answers; otherwise it asks for three reads.
const step = (context: Context): ScriptedProvider.Response => {
  const last = context.messages[context.messages.length - 1]
  if (last?.role === "toolResult") return { text: "All three files read.", usage: { inputTokens: 30, outputTokens: 5 } }
  return {
    toolCalls: ["a", "b", "c"].map((f) => ({
      id: `read-${f}-${context.messages.length}`,
      name: "read_file",
      arguments: { path: f }
    })),
    usage: { inputTokens: 20, outputTokens: 10 }
  }
}
// the provider keeps no copy of the calls' contexts (a test's record), in (a) as in (d)
const scripted = () =>
  ScriptedProvider.make(
    Array.from({ length: Math.max(TURNS, DURABLE_TURNS) * 2 + 10 }, () => step),
    { recordCalls: false }
  )

/** The read tool, as a Pi AgentTool that executes. */
const readTool = (): PiTool => ({
  name: "read_file",
  label: "Read file",
  description: "Reads a file.",
  parameters: Type.Object({ path: Type.String() }),
  effect: "read",
  execute: async (_id, params) => ({
    content: [{ type: "text", text: `contents of ${(params as { path: string }).path}` }],
    details: {}
  })
})

const benchAgent = (provider: ScriptedProvider.ScriptedProvider): PiRunner.PiAgent => ({
  name: "bench",
  systemPrompt: "Read files.",
  model: provider.model,
  tools: [readTool()]
})

const llmMessages = (messages: Array<AgentMessage>): Array<Message> => messages as Array<Message>

/** (a) Pi alone: its agent loop runs both model calls and the three tools in one run per turn. */
const directTurns = () => {
  const provider = scripted()
  // one tool for the whole session, as the runner has (pi-ai compiles a schema's validator once per object)
  const tools = [readTool()]
  let history: Array<AgentMessage> = []
  let i = 0
  return {
    turn: async () => {
      const stop = startTiming()
      const stream = agentLoop(
        [{ role: "user", content: `turn ${i++}`, timestamp: Date.now() }],
        { systemPrompt: "Read files.", messages: history, tools },
        { model: provider.model, convertToLlm: llmMessages, maxRetries: 0 }
      )
      for await (const _ of stream) void _
      history = [...history, ...(await stream.result())]
      return stop()
    },
    close: () => provider.unregister()
  }
}

/** (b) The same turns as a durable session on the embedded engine. */
const durable = Effect.suspend(() => {
  const provider = scripted()
  return Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const times: Array<number> = []
    yield* client.startSession("bench")
    for (let i = 0; i < DURABLE_TURNS; i++) {
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
        AgentSessionFlow.layerWorker(AgentSessionFlow.make({ flowType: "BenchPi" })).pipe(
          Layer.provide(PiRunner.layer(benchAgent(provider)))
        ),
        AgentSessionClient.layer("BenchPi")
      ).pipe(
        Layer.provideMerge(
          Engine.layerEmbedded({ filename: join(dir, "bench.db"), pollInterval: "50 millis", maxConcurrentTasks: 64 })
        )
      )
    ),
    Effect.scoped,
    Effect.ensuring(Effect.sync(() => provider.unregister()))
  )
})

/** The run state of a turn's tool round, beside Pi's whole context at that point. */
interface Round {
  readonly runStateBytes: number
  readonly piContextBytes: number
}

/** A call's record as the session stores it when it is approved (the spec's defaults fill the rest). */
const approvedRecord = Schema.decodeUnknownSync(Wire.AgentToolCall)({
  tool_call_id: "",
  turn_id: "",
  tool_name: "",
  arguments: "{}",
  effect: "read",
  requires_approval: false,
  status: "approved",
  output: null,
  error: null,
  rejection_message: null,
  deferral_order: 0,
  tool_source_reference: null,
  trace_context: null
})
const toolRecord = (
  turnId: string,
  call: { readonly toolCallId: string; readonly toolName: string; readonly arguments: string },
  deferralOrder: number
): Wire.AgentToolCall => ({
  ...approvedRecord,
  toolCallId: call.toolCallId,
  turnId,
  toolName: call.toolName,
  arguments: call.arguments,
  deferralOrder
})

/**
 * (d) The runner alone, in memory: per turn, runModelStep (tool calls) -> 3 x executeDeferredToolCall ->
 * runModelStep (answer), with the history growing turn by turn, as the session drives it.
 */
const inMemoryTurns = () => {
  const provider = scripted()
  const runner = PiRunner.make(benchAgent(provider))
  const history: Array<Wire.AgentMessage> = []
  const rounds: Array<Round> = []
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
  const store = (
    messages: ReadonlyArray<Omit<Wire.AgentMessage, "sequence" | "turnId" | "createdAt">>,
    turnId: string
  ) => {
    for (const m of messages) history.push({ ...m, sequence: history.length + 1, turnId, createdAt: "" })
  }
  let i = 0
  const turn = Effect.gen(function* () {
    // only the runner's calls are timed: the contexts and records, the session's part, are built outside
    const segments: Array<Timing> = []
    const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.suspend(() => {
        const stop = startTiming()
        return Effect.map(effect, (a) => {
          segments.push(stop())
          return a
        })
      })
    const turnId = `t${i++}`
    store([runner.buildUserMessage(`turn ${i}`)], turnId)
    const first = yield* timed(runner.runModelStep(context(turnId, null, [])))
    if (first._tag !== "ToolCallsRequested") throw new Error("expected tool calls")
    const records: Array<Wire.AgentToolCall> = []
    for (const [n, call] of first.toolCalls.entries()) {
      const record = toolRecord(turnId, call, n)
      const result = yield* timed(
        runner.executeDeferredToolCall({
          flowId: "f",
          turnId,
          toolCall: record,
          idempotencyKey: `f/${turnId}/${call.toolCallId}`,
          attempt: 1,
          heartbeatCheckpoint: Option.none()
        })
      )
      records.push({ ...record, status: "succeeded", output: result.output })
    }
    const second = yield* timed(runner.runModelStep(context(turnId, first.frameworkRunState, records)))
    if (second._tag !== "TurnCompleted") throw new Error("expected the answer")
    const timing: Timing = {
      wall: segments.reduce((sum, t) => sum + t.wall, 0),
      cpu: segments.reduce((sum, t) => sum + t.cpu, 0)
    }
    // outside the timed part, on the first and the last turn: Pi's whole context at the same point (history +
    // the turn so far)
    if (i === 1 || i === TURNS) {
      const turnMessages = (JSON.parse(first.frameworkRunState) as { messages: ReadonlyArray<unknown> }).messages
      rounds.push({
        runStateBytes: Buffer.byteLength(first.frameworkRunState),
        piContextBytes: Buffer.byteLength(
          JSON.stringify({ systemPrompt: "Read files.", messages: [...fromStoredMessages(history), ...turnMessages] })
        )
      })
    }
    store(second.newMessages, turnId)
    return timing
  }).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))
  return {
    turn: () => Effect.runPromise(turn as Effect.Effect<Timing>),
    rounds,
    close: () => provider.unregister()
  }
}

/** The middle value of `xs` and its quartiles. */
const quartiles = (xs: ReadonlyArray<number>) => [percentile(xs, 25), percentile(xs, 50), percentile(xs, 75)] as const

const main = async () => {
  const started = performance.now()
  // A round is a fresh session of TURNS turns through (a), then through (d), or the other way round (the order
  // alternates); round 0 warms the JIT up and is not counted. The figure is the median over the rounds of the
  // ratio of the two sessions' CPU time (the process's, garbage collection included): CPU time does not count
  // the time the shared machine ran other processes. Wall-clock ratios are reported beside it, and the per-turn
  // p50s.
  const a: Array<Timing> = []
  const d: Array<Timing> = []
  const cpuRatios: Array<number> = []
  const wallRatios: Array<number> = []
  let lastRounds: ReadonlyArray<Round> = []
  // a session's time is the sum of its turns' (in (d) only the runner's calls are timed, see inMemoryTurns)
  const session = async (turn: () => Promise<Timing>, into: Array<Timing>, counted: boolean): Promise<Timing> => {
    const turns: Array<Timing> = []
    for (let i = 0; i < TURNS; i++) turns.push(await turn())
    if (counted) into.push(...turns)
    return {
      wall: turns.reduce((sum, t) => sum + t.wall, 0),
      cpu: turns.reduce((sum, t) => sum + t.cpu, 0)
    }
  }
  for (let round = 0; round <= ROUNDS; round++) {
    const directRun = directTurns()
    const memoryRun = inMemoryTurns()
    const counted = round > 0
    let ta: Timing
    let td: Timing
    if (round % 2 === 0) {
      ta = await session(directRun.turn, a, counted)
      td = await session(memoryRun.turn, d, counted)
    } else {
      td = await session(memoryRun.turn, d, counted)
      ta = await session(directRun.turn, a, counted)
    }
    directRun.close()
    memoryRun.close()
    lastRounds = memoryRun.rounds
    if (!counted) continue
    cpuRatios.push(td.cpu / ta.cpu)
    wallRatios.push(td.wall / ta.wall)
  }
  const b = DURABLE_TURNS > 0 ? await Effect.runPromise(durable as Effect.Effect<Array<number>>) : []
  const wall = (ts: ReadonlyArray<Timing>) => ts.map((t) => t.wall)
  const cpu = (ts: ReadonlyArray<Timing>) => ts.map((t) => t.cpu)
  const [pa, pd] = [percentile(wall(a), 50), percentile(wall(d), 50)]
  const [ca, cd] = [percentile(cpu(a), 50), percentile(cpu(d), 50)]
  const pb = b.length > 0 ? percentile(b, 50) : Number.NaN
  const [r25, ratio, r75] = quartiles(cpuRatios)
  const [w25, wallRatio, w75] = quartiles(wallRatios)
  const first = lastRounds[0]!
  const last = lastRounds[lastRounds.length - 1]!
  const rows = [
    [
      "(a) Pi's own agent loop, tools in-process (2 model calls, 3 tools)",
      `CPU p50 ${fmt(ca)}; wall p50 ${fmt(pa)}  p99 ${fmt(percentile(wall(a), 99))}`,
      "-"
    ],
    ...(b.length > 0
      ? [["(b) durable session, Pi runner, embedded engine", `p50 ${fmt(pb)}  p99 ${fmt(percentile(b, 99))}`, "-"]]
      : []),
    [
      "(d) the runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)",
      `CPU p50 ${fmt(cd)}; wall p50 ${fmt(pd)}  p99 ${fmt(percentile(wall(d), 99))}`,
      "-"
    ],
    [
      `runner overhead over Pi: median over ${ROUNDS} sessions of ${TURNS} turns of (d) / (a), CPU time`,
      `${ratio.toFixed(2)}x (quartiles ${r25.toFixed(2)}x-${r75.toFixed(2)}x)`,
      `<= 1.5x: ${ratio <= 1.5 ? "PASS" : "MISS"}`
    ],
    ["the same, wall-clock time", `${wallRatio.toFixed(2)}x (quartiles ${w25.toFixed(2)}x-${w75.toFixed(2)}x)`, "-"],
    ...(b.length > 0 ? [["the engine's Step cost per turn: (b) - (d)", fmt(pb - pd), "-"]] : []),
    [
      "framework run state after 3 tool calls, first turn",
      `${first.runStateBytes} bytes (Pi's whole context: ${first.piContextBytes})`,
      "-"
    ],
    [
      `framework run state after 3 tool calls, turn ${TURNS}`,
      `${last.runStateBytes} bytes (Pi's whole context: ${last.piContextBytes})`,
      "-"
    ]
  ]
  process.stdout.write(
    `\nPi runner benchmark (${ROUNDS} rounds of ${TURNS} turns after a warm-up round; ` +
      `durable: ${DURABLE_TURNS} turns; node ${process.version}; load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")})\n\n`
  )
  process.stdout.write("| Measurement | Result | Target |\n|---|---|---|\n")
  for (const r of rows) process.stdout.write(`| ${r.join(" | ")} |\n`)
  const baseline = { name: "Pi's own agent loop (agentLoop), tools in-process, p50", value: pa, unit: "ms" }
  const contextBaseline = (bytes: number) => ({
    name: "Pi's whole context after the same round",
    value: bytes,
    unit: "bytes"
  })
  BenchResults.record({
    "runner-pi.turn_in_memory_p50_ms": {
      // CPU time, as the target's ratio
      value: cd,
      unit: "ms",
      baseline: { name: "Pi's own agent loop (agentLoop), tools in-process, CPU time p50", value: ca, unit: "ms" },
      target: "median of the per-session CPU-time ratios <= 1.5",
      met: ratio <= 1.5,
      note:
        `CPU time per turn; wall-clock p50 ${pd.toFixed(2)} ms against ${pa.toFixed(2)} ms; median of ${cpuRatios.length} per-session ` +
        `CPU-time ratios ${ratio.toFixed(2)}x (quartiles ${r25.toFixed(2)}-${r75.toFixed(2)}), wall-clock ` +
        `${wallRatio.toFixed(2)}x (quartiles ${w25.toFixed(2)}-${w75.toFixed(2)})`
    },
    ...(b.length > 0 ? { "runner-pi.turn_durable_embedded_p50_ms": { value: pb, unit: "ms", baseline } } : {}),
    "runner-pi.run_state_bytes_3_calls_first_turn": {
      value: first.runStateBytes,
      unit: "bytes",
      baseline: contextBaseline(first.piContextBytes)
    },
    "runner-pi.run_state_bytes_3_calls_last_turn": {
      value: last.runStateBytes,
      unit: "bytes",
      baseline: contextBaseline(last.piContextBytes),
      note: `turn ${TURNS} of the session`
    }
  })
  process.stdout.write(
    `\nFigures merged into ${BenchResults.file()}\nTotal: ${((performance.now() - started) / 1000).toFixed(1)} s\n`
  )
}

main()
  .catch((e) => {
    process.stderr.write(`${String(e)}\n`)
    process.exitCode = 1
  })
  .finally(() => rmSync(dir, { recursive: true, force: true }))
