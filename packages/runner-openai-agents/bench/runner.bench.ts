// Per-turn overhead of the OpenAI Agents runner in Step mode, measured in one run:
//   (a) direct: the SDK's own loop (`Runner.run`, streamed) with the scripted model and tools that execute
//       in-process: two model calls and three tool runs per turn, no durability;
//   (b) durable: the same turn as a session on the embedded engine
//       (RunModel -> 3 parallel CallTool -> ResumeTurn -> RunModel);
//   (d) the runner alone in memory: the same turn driven the way the session drives it
//       (runModelStep -> 3 x executeDeferredToolCall -> runModelStep).
// Target: (d) <= 1.5 x (a); (a) and (d) alternate turn by turn, so both see the same machine load. Also the framework run state after a round of 3 tool calls, beside the SDK's own
// `RunState.toString()` of the same round, on the first turn and after TURNS turns of history.
// The figures are merged into bench-results.json at the repository root.
import { join } from "node:path"
import * as Bench from "@durable-agent/runner-kit/Bench"
import { Agent, type AgentInputItem, Runner, tool } from "@openai/agents"
import { assistantMessage, functionCall, modelResponder, ScriptedModel } from "@openai/agents/testing"
import * as Effect from "effect/Effect"
import { z } from "zod"
import { OpenAiAgentsRunner, openAiAgentsTool } from "../src/index.ts"
import { fromStoredMessage } from "../src/internal/items.ts"
import * as State from "../src/internal/state.ts"

const TURNS = Bench.benchTurns()
const dir = Bench.scratchDir("das-openai-bench-")

// The scripted model: after tool results it answers; otherwise it asks for three reads.
const respond = (input: string | ReadonlyArray<AgentInputItem>) => {
  const items = typeof input === "string" ? [] : input
  if (items[items.length - 1]?.type === "function_call_result") return [assistantMessage("All three files read.")]
  return ["a", "b", "c"].map((f) => functionCall("read_file", { path: f }, { callId: `read-${f}-${items.length}` }))
}
const scriptedModel = () =>
  new ScriptedModel(Array.from({ length: TURNS * 2 + 10 }, () => modelResponder((call) => respond(call.request.input))))
const readFile = (path: string) => `contents of ${path}`
const parameters = z.object({ path: z.string() })

/** The agent of every Step-mode measurement: the scripted model and one read tool. */
const benchAgent = () =>
  new Agent({
    name: "bench",
    instructions: "Read files.",
    model: scriptedModel(),
    tools: [
      openAiAgentsTool({
        name: "read_file",
        description: "Reads a file.",
        parameters,
        effect: "read",
        execute: ({ path }) => readFile(path)
      })
    ]
  })

/** (a) The SDK alone: its loop runs both model calls and the three tools in one streamed run per turn. */
const makeDirect = () => {
  const agent = new Agent({
    name: "bench",
    instructions: "Read files.",
    model: scriptedModel(),
    tools: [
      tool({ name: "read_file", description: "Reads a file.", parameters, execute: ({ path }) => readFile(path) })
    ]
  })
  const sdk = new Runner({ tracingDisabled: true })
  let history: Array<AgentInputItem> = []
  /** One turn; returns its time. */
  return async (i: number) => {
    const t0 = performance.now()
    const result = await sdk.run(agent, [...history, { role: "user", content: `turn ${i}` }], { stream: true })
    for await (const _ of result) void _
    await result.completed
    history = result.history
    return performance.now() - t0
  }
}

/** (d)'s tool round: the run state, beside the SDK's own RunState of the round (its originalInput holds the whole conversation). */
const measureRound = ({ requested, history }: Bench.ToolRound) => ({
  runStateBytes: Buffer.byteLength(requested.frameworkRunState),
  sdkRunStateBytes: Buffer.byteLength(
    JSON.stringify(State.restore(JSON.parse(requested.frameworkRunState), history.map(fromStoredMessage)))
  )
})

const main = async () => {
  // (a) and (d) alternate turn by turn, so both see the same load of the machine
  const directTurn = makeDirect()
  const memory = Bench.inMemoryTurns(OpenAiAgentsRunner.make({ agent: benchAgent() }), measureRound)
  const a: Array<number> = []
  const d = { times: [] as Array<number>, rounds: [] as Array<ReturnType<typeof measureRound>> }
  for (let i = 0; i < TURNS; i++) {
    a.push(await directTurn(i))
    const turn = await memory.turn(i)
    d.times.push(turn.ms)
    d.rounds.push(turn.round)
  }
  const b = await Effect.runPromise(
    Bench.durableTurns({
      flowType: "BenchOpenAiAgents",
      runner: OpenAiAgentsRunner.layer({ agent: benchAgent() }),
      filename: join(dir.path, "bench.db"),
      turns: TURNS
    })
  )
  const [pa, pb, pd] = [Bench.percentile(a, 50), Bench.percentile(b, 50), Bench.percentile(d.times, 50)]
  const ratio = pd / pa
  const firstRound = d.rounds[0]!
  const lastRound = d.rounds[d.rounds.length - 1]!
  Bench.printTable(`OpenAI Agents runner benchmark (${TURNS} turns each; node ${process.version})`, [
    ["(a) the SDK's own loop, tools in-process (2 model calls, 3 tools)", Bench.p50p99(a), "-"],
    ["(b) durable session, OpenAI Agents runner, embedded engine", Bench.p50p99(b), "-"],
    ["(d) the runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)", Bench.p50p99(d.times), "-"],
    Bench.ratioRow("runner overhead over the SDK: (d) / (a)", ratio, 1.5),
    ["the engine's Step cost per turn: (b) - (d)", Bench.fmtMs(pb - pd), "-"],
    [
      "framework run state after 3 tool calls, first turn",
      `${firstRound.runStateBytes} bytes (SDK RunState.toString(): ${firstRound.sdkRunStateBytes})`,
      "-"
    ],
    [
      `framework run state after 3 tool calls, turn ${TURNS}`,
      `${lastRound.runStateBytes} bytes (SDK RunState.toString(): ${lastRound.sdkRunStateBytes})`,
      "-"
    ]
  ])
  const file = Bench.recordFigures(
    Bench.turnFigures({
      prefix: "runner-openai-agents",
      inMemoryP50: pd,
      durableP50: pb,
      baselineP50: pa,
      baselineName: "the SDK's own loop, tools in-process, p50",
      firstRound: { runStateBytes: firstRound.runStateBytes, frameworkBytes: firstRound.sdkRunStateBytes },
      lastRound: { runStateBytes: lastRound.runStateBytes, frameworkBytes: lastRound.sdkRunStateBytes },
      frameworkStateName: "the SDK's RunState.toString() of the same round",
      turns: TURNS,
      decimals: 2
    })
  )
  process.stdout.write(`\nFigures merged into ${file}\n`)
}

Bench.runMain(main, dir.remove)
