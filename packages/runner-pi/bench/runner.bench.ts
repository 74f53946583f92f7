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
import { join } from "node:path"
import * as Bench from "@durable-agent/runner-kit/Bench"
import { type AgentMessage, agentLoop } from "@mariozechner/pi-agent-core"
import { type Context, type Message, Type } from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"
import { PiRunner, type PiTool, ScriptedProvider } from "../src/index.ts"
import { fromStoredMessages } from "../src/internal/messages.ts"

const TURNS = Bench.benchTurns()
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
const scripted = () => ScriptedProvider.make(Array.from({ length: TURNS * 2 + 10 }, () => step))

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
  let history: Array<AgentMessage> = []
  let i = 0
  return {
    turn: async () => {
      const t0 = performance.now()
      const stream = agentLoop(
        [{ role: "user", content: `turn ${i++}`, timestamp: Date.now() }],
        { systemPrompt: "Read files.", messages: history, tools: [readTool()] },
        { model: provider.model, convertToLlm: llmMessages, maxRetries: 0 }
      )
      for await (const _ of stream) void _
      history = [...history, ...(await stream.result())]
      return performance.now() - t0
    },
    close: () => provider.unregister()
  }
}

/** (b) The same turns as a durable session on the embedded engine. */
const durable = Effect.suspend(() => {
  const provider = scripted()
  return Bench.durableTurns({
    flowType: "BenchPi",
    runner: PiRunner.layer(benchAgent(provider)),
    filename: join(dir.path, "bench.db"),
    turns: TURNS
  }).pipe(Effect.ensuring(Effect.sync(() => provider.unregister())))
})

/** (d)'s tool round: the run state, beside Pi's whole context at that point (history + the turn so far). */
const measureRound = ({ requested, history }: Bench.ToolRound) => {
  const turnMessages = (JSON.parse(requested.frameworkRunState) as { messages: ReadonlyArray<unknown> }).messages
  return {
    runStateBytes: Buffer.byteLength(requested.frameworkRunState),
    piContextBytes: Buffer.byteLength(
      JSON.stringify({ systemPrompt: "Read files.", messages: [...fromStoredMessages(history), ...turnMessages] })
    )
  }
}

const main = async () => {
  // (a) and (d) run turn by turn in lockstep, so a loaded machine slows both alike
  const directRun = directTurns()
  const provider = scripted()
  const memory = Bench.inMemoryTurns(PiRunner.make(benchAgent(provider)), measureRound)
  const a: Array<number> = []
  const d = { times: [] as Array<number>, rounds: [] as Array<ReturnType<typeof measureRound>> }
  for (let i = 0; i < TURNS; i++) {
    a.push(await directRun.turn())
    const turn = await memory.turn(i)
    d.times.push(turn.ms)
    d.rounds.push(turn.round)
  }
  directRun.close()
  provider.unregister()
  const b = await Effect.runPromise(durable)
  const [pa, pb, pd] = [Bench.percentile(a, 50), Bench.percentile(b, 50), Bench.percentile(d.times, 50)]
  const ratio = pd / pa
  const first = d.rounds[0]!
  const last = d.rounds[d.rounds.length - 1]!
  Bench.printTable(`Pi runner benchmark (${TURNS} turns each; node ${process.version})`, [
    ["(a) Pi's own agent loop, tools in-process (2 model calls, 3 tools)", Bench.p50p99(a), "-"],
    ["(b) durable session, Pi runner, embedded engine", Bench.p50p99(b), "-"],
    ["(d) the runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)", Bench.p50p99(d.times), "-"],
    Bench.ratioRow("runner overhead over Pi: (d) / (a)", ratio, 1.5),
    ["the engine's Step cost per turn: (b) - (d)", Bench.fmtMs(pb - pd), "-"],
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
  ])
  const file = Bench.recordFigures(
    Bench.turnFigures({
      prefix: "runner-pi",
      inMemoryP50: pd,
      durableP50: pb,
      baselineP50: pa,
      baselineName: "Pi's own agent loop (agentLoop), tools in-process, p50",
      firstRound: { runStateBytes: first.runStateBytes, frameworkBytes: first.piContextBytes },
      lastRound: { runStateBytes: last.runStateBytes, frameworkBytes: last.piContextBytes },
      frameworkStateName: "Pi's whole context after the same round",
      turns: TURNS
    })
  )
  process.stdout.write(`\nFigures merged into ${file}\n`)
}

Bench.runMain(main, dir.remove)
