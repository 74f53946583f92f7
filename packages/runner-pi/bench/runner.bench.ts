// Per-turn overhead of the Pi runner in Step mode, measured in one run, as the other runners' benchmarks
// measure theirs (the runner kit's `Bench`):
//   (a) direct: Pi's own agent loop (`agentLoop` from pi-agent-core) with the scripted pi-ai provider and a
//       read tool that executes in-process: two model calls and three tool runs per turn, no durability;
//   (b) durable: the same turn as a session on the embedded engine
//       (RunModel -> 3 parallel CallTool -> ResumeTurn -> RunModel);
//   (d) the runner alone in memory: the same turn driven the way the session drives it
//       (runModelStep -> 3 x executeDeferredToolCall -> runModelStep), `Bench.inMemoryTurns`.
// Target: (d) <= 1.5 x (a), the ratio of the per-turn wall-clock p50s. (a) and (d) alternate turn by turn, so
// both see the same load of the machine. Pi's loop is light (a turn is a fraction of a millisecond), so one
// 40-turn session gives few samples against the machine's noise: the benchmark runs BENCH_ROUNDS sessions of
// TURNS turns through each (a fresh session of each per round, after one warm-up round that is not counted)
// and takes the p50s over all their turns. Also the framework run state after a round of 3 tool calls, beside
// Pi's whole context at that point, on the first turn and after TURNS turns of history. The figures are
// merged into bench-results.json at the repository root.
//
//   node --conditions=@durable-agent/source packages/runner-pi/bench/runner.bench.ts
import { join } from "node:path"
import * as Bench from "@durable-agent/runner-kit/Bench"
import { type AgentMessage, agentLoop } from "@mariozechner/pi-agent-core"
import { type Context, type Message, Type } from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"
import { PiRunner, type PiTool, ScriptedProvider } from "../src/index.ts"
import { fromStoredMessages } from "../src/internal/messages.ts"

const TURNS = Bench.benchTurns()
/** Counted sessions of TURNS turns through (a) and through (d), after one warm-up session of each. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? "20")
/** Turns of the durable session (b); 0 leaves it out. */
const DURABLE_TURNS = Number(process.env.BENCH_DURABLE_TURNS ?? String(TURNS))
const dir = Bench.scratchDir("das-pi-bench-")

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
const makeDirect = (provider: ScriptedProvider.ScriptedProvider) => {
  // one tool for the whole session, as the runner has (pi-ai compiles a schema's validator once per object)
  const tools = [readTool()]
  let history: Array<AgentMessage> = []
  /** One turn; returns its time. */
  return async (i: number) => {
    const t0 = performance.now()
    const stream = agentLoop(
      [{ role: "user", content: `turn ${i}`, timestamp: Date.now() }],
      { systemPrompt: "Read files.", messages: history, tools },
      { model: provider.model, convertToLlm: llmMessages, maxRetries: 0 }
    )
    for await (const _ of stream) void _
    history = [...history, ...(await stream.result())]
    return performance.now() - t0
  }
}

/** The run state of a turn's tool round, beside Pi's whole context at that point. */
interface Round {
  readonly runStateBytes: number
  readonly piContextBytes: number
}

/** (d)'s tool round, on the first and the last turn only: the run state, beside Pi's whole context (history + the turn so far). */
const measureRound = ({ turnId, requested, history }: Bench.ToolRound): Round | undefined => {
  if (turnId !== "t0" && turnId !== `t${TURNS - 1}`) return undefined
  const turnMessages = (JSON.parse(requested.frameworkRunState) as { messages: ReadonlyArray<unknown> }).messages
  return {
    runStateBytes: Buffer.byteLength(requested.frameworkRunState),
    piContextBytes: Buffer.byteLength(
      JSON.stringify({ systemPrompt: "Read files.", messages: [...fromStoredMessages(history), ...turnMessages] })
    )
  }
}

const main = async () => {
  const a: Array<number> = []
  const d: Array<number> = []
  const roundRatios: Array<number> = []
  let rounds: Array<Round> = []
  for (let round = 0; round <= ROUNDS; round++) {
    // a provider of each, as each keeps its own place in the script
    const [directProvider, runnerProvider] = [scripted(), scripted()]
    const directTurn = makeDirect(directProvider)
    const memory = Bench.inMemoryTurns(PiRunner.make(benchAgent(runnerProvider)), measureRound)
    const ra: Array<number> = []
    const rd: Array<number> = []
    rounds = []
    // (a) and (d) alternate turn by turn (which of the two goes first alternates too), so both see the same load
    for (let i = 0; i < TURNS; i++) {
      const directFirst = (round + i) % 2 === 0
      if (directFirst) ra.push(await directTurn(i))
      const turn = await memory.turn(i)
      rd.push(turn.ms)
      if (turn.round !== undefined) rounds.push(turn.round)
      if (!directFirst) ra.push(await directTurn(i))
    }
    directProvider.unregister()
    runnerProvider.unregister()
    // round 0 warms the JIT up
    if (round === 0) continue
    a.push(...ra)
    d.push(...rd)
    roundRatios.push(Bench.percentile(rd, 50) / Bench.percentile(ra, 50))
  }
  const b =
    DURABLE_TURNS > 0
      ? await Effect.runPromise(
          Effect.suspend(() => {
            const provider = scripted()
            return Bench.durableTurns({
              flowType: "BenchPi",
              runner: PiRunner.layer(benchAgent(provider)),
              filename: join(dir.path, "bench.db"),
              turns: DURABLE_TURNS
            }).pipe(Effect.ensuring(Effect.sync(() => provider.unregister())))
          })
        )
      : []
  const [pa, pd] = [Bench.percentile(a, 50), Bench.percentile(d, 50)]
  const pb = b.length > 0 ? Bench.percentile(b, 50) : Number.NaN
  const ratio = pd / pa
  const [r25, r50, r75] = [25, 50, 75].map((p) => Bench.percentile(roundRatios, p))
  const first = rounds[0]!
  const last = rounds[rounds.length - 1]!
  Bench.printTable(
    `Pi runner benchmark (${ROUNDS} sessions of ${TURNS} turns each, after a warm-up session; ` +
      `durable: ${DURABLE_TURNS} turns; node ${process.version})`,
    [
      ["(a) Pi's own agent loop, tools in-process (2 model calls, 3 tools)", Bench.p50p99(a), "-"],
      ...(b.length > 0 ? [["(b) durable session, Pi runner, embedded engine", Bench.p50p99(b), "-"] as const] : []),
      ["(d) the runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)", Bench.p50p99(d), "-"],
      Bench.ratioRow("runner overhead over Pi: (d) / (a)", ratio, 1.5),
      [
        `the same, per session: median of ${roundRatios.length} sessions' ratios`,
        `${r50!.toFixed(2)}x (quartiles ${r25!.toFixed(2)}x-${r75!.toFixed(2)}x)`,
        "-"
      ],
      ...(b.length > 0 ? [["the engine's Step cost per turn: (b) - (d)", Bench.fmtMs(pb - pd), "-"] as const] : []),
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
  )
  const figures = Bench.turnFigures({
    prefix: "runner-pi",
    inMemoryP50: pd,
    durableP50: pb,
    baselineP50: pa,
    baselineName: "Pi's own agent loop (agentLoop), tools in-process, p50",
    firstRound: { runStateBytes: first.runStateBytes, frameworkBytes: first.piContextBytes },
    lastRound: { runStateBytes: last.runStateBytes, frameworkBytes: last.piContextBytes },
    frameworkStateName: "Pi's whole context after the same round",
    turns: TURNS,
    decimals: 3
  })
  if (b.length === 0) delete figures["runner-pi.turn_durable_embedded_p50_ms"]
  const file = Bench.recordFigures({
    ...figures,
    "runner-pi.turn_in_memory_p50_ms": {
      ...figures["runner-pi.turn_in_memory_p50_ms"]!,
      note:
        `p50 over the turns of ${ROUNDS} sessions of ${TURNS} turns each, (a) and (d) alternating turn by turn; ` +
        `median of the sessions' ratios ${r50!.toFixed(2)}x (quartiles ${r25!.toFixed(2)}-${r75!.toFixed(2)})`
    }
  })
  process.stdout.write(`\nFigures merged into ${file}\n`)
}

Bench.runMain(main, dir.remove)
