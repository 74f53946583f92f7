// Per-turn overhead of the Mastra runner in Step mode, measured in one run:
//   (a) direct: Mastra's own loop (`agent.stream` with `maxSteps: 2`) with the scripted model and tools that
//       execute in-process: two model calls and three tool runs per turn, no durability;
//   (b) durable: the same turn as a session on the embedded engine
//       (RunModel -> 3 parallel CallTool -> ResumeTurn -> RunModel);
//   (d) the runner alone in memory: the same turn driven the way the session drives it
//       (runModelStep -> 3 x executeDeferredToolCall -> runModelStep).
// Target: (d) <= 1.5 x (a). Also the framework run state after a round of 3 tool calls, beside Mastra's whole
// message list at the same point (what keeping Mastra's own `messages` would store), on the first turn and
// after TURNS turns of history. The figures are merged into bench-results.json at the repository root.
import { join } from "node:path"
import { ScriptedModel } from "@durable-agent/runner-ai-sdk"
import * as Bench from "@durable-agent/runner-kit/Bench"
import { Agent } from "@mastra/core/agent"
import type { MastraModelConfig } from "@mastra/core/llm"
import { noopLogger } from "@mastra/core/logger"
import { createTool } from "@mastra/core/tools"
import * as Effect from "effect/Effect"
import { z } from "zod"
import { MastraRunner } from "../src/index.ts"
import { fromStoredMessages } from "../src/internal/messages.ts"

const TURNS = Bench.benchTurns()
const dir = Bench.scratchDir("das-mastra-bench-")

// The scripted model: after tool results it answers; otherwise it asks for three reads.
const step = (call: ScriptedModel.CallOptions): ScriptedModel.Response => {
  const prompt = call.prompt as ReadonlyArray<{ role: string }>
  if (prompt[prompt.length - 1]?.role === "tool") {
    return { text: "All three files read.", usage: { inputTokens: 30, outputTokens: 5 } }
  }
  return {
    toolCalls: ["a", "b", "c"].map((f) => ({
      id: `read-${f}-${prompt.length}`,
      name: "read_file",
      arguments: { path: f }
    })),
    usage: { inputTokens: 20, outputTokens: 10 }
  }
}
const scriptedModel = () => ScriptedModel.make(Array.from({ length: TURNS * 2 + 10 }, () => step))
const readFile = (path: string) => `contents of ${path}`

/** The read tool, as a Mastra tool that executes. */
const readTool = () =>
  createTool({
    id: "read_file",
    description: "Reads a file.",
    inputSchema: z.object({ path: z.string() }),
    mcp: { annotations: { readOnlyHint: true } },
    execute: async ({ path }) => readFile(path)
  })

/** The runner's agent of every Step-mode measurement: the scripted model and the read tool. */
const benchAgent = (): MastraRunner.MastraAgent => ({
  name: "bench",
  instructions: "Read files.",
  model: scriptedModel(),
  tools: { read_file: readTool() }
})

/** (a) Mastra alone: its loop runs both model calls and the three tools in one streamed run per turn. */
const direct = async () => {
  const agent = new Agent({
    id: "bench",
    name: "bench",
    instructions: "Read files.",
    model: scriptedModel() as unknown as MastraModelConfig,
    tools: { read_file: readTool() }
  })
  agent.__setLogger(noopLogger)
  const times: Array<number> = []
  let history: Array<unknown> = []
  for (let i = 0; i < TURNS; i++) {
    const t0 = performance.now()
    const output = await agent.stream([...history, { role: "user", content: `turn ${i}` }] as never, {
      maxSteps: 2,
      modelSettings: { maxRetries: 0 }
    })
    for await (const _ of output.fullStream) void _
    history = (await output.getFullOutput()).messages
    times.push(performance.now() - t0)
  }
  return times
}

/** (d)'s tool round: the run state, beside Mastra's whole message list at that point (history + the turn so far). */
const measureRound = ({ requested, history }: Bench.ToolRound) => {
  const turnMessages = (JSON.parse(requested.frameworkRunState) as { messages: ReadonlyArray<unknown> }).messages
  return {
    runStateBytes: Buffer.byteLength(requested.frameworkRunState),
    mastraMessagesBytes: Buffer.byteLength(JSON.stringify([...fromStoredMessages(history), ...turnMessages]))
  }
}

const main = async () => {
  const a = await direct()
  const b = await Effect.runPromise(
    Bench.durableTurns({
      flowType: "BenchMastra",
      runner: MastraRunner.layer(benchAgent()),
      filename: join(dir.path, "bench.db"),
      turns: TURNS
    })
  )
  const memory = Bench.inMemoryTurns(MastraRunner.make(benchAgent()), measureRound)
  const d = { times: [] as Array<number>, rounds: [] as Array<ReturnType<typeof measureRound>> }
  for (let i = 0; i < TURNS; i++) {
    const turn = await memory.turn(i)
    d.times.push(turn.ms)
    d.rounds.push(turn.round)
  }
  const [pa, pb, pd] = [Bench.percentile(a, 50), Bench.percentile(b, 50), Bench.percentile(d.times, 50)]
  const ratio = pd / pa
  const first = d.rounds[0]!
  const last = d.rounds[d.rounds.length - 1]!
  Bench.printTable(`Mastra runner benchmark (${TURNS} turns each; node ${process.version})`, [
    ["(a) Mastra's own loop, tools in-process (2 model calls, 3 tools)", Bench.p50p99(a), "-"],
    ["(b) durable session, Mastra runner, embedded engine", Bench.p50p99(b), "-"],
    ["(d) the runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)", Bench.p50p99(d.times), "-"],
    Bench.ratioRow("runner overhead over Mastra: (d) / (a)", ratio, 1.5),
    ["the engine's Step cost per turn: (b) - (d)", Bench.fmtMs(pb - pd), "-"],
    [
      "framework run state after 3 tool calls, first turn",
      `${first.runStateBytes} bytes (Mastra's whole message list: ${first.mastraMessagesBytes})`,
      "-"
    ],
    [
      `framework run state after 3 tool calls, turn ${TURNS}`,
      `${last.runStateBytes} bytes (Mastra's whole message list: ${last.mastraMessagesBytes})`,
      "-"
    ]
  ])
  const file = Bench.recordFigures(
    Bench.turnFigures({
      prefix: "runner-mastra",
      inMemoryP50: pd,
      durableP50: pb,
      baselineP50: pa,
      baselineName: "Mastra's own loop (agent.stream, maxSteps 2), tools in-process, p50",
      firstRound: { runStateBytes: first.runStateBytes, frameworkBytes: first.mastraMessagesBytes },
      lastRound: { runStateBytes: last.runStateBytes, frameworkBytes: last.mastraMessagesBytes },
      frameworkStateName: "Mastra's whole message list after the same round",
      turns: TURNS
    })
  )
  process.stdout.write(`\nFigures merged into ${file}\n`)
}

Bench.runMain(main, dir.remove)
