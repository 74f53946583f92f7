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
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import {
  AgentSessionClient,
  AgentSessionFlow,
  EventWriter,
  Heartbeat,
  Policy,
  type Runner as SessionRunner,
  type Wire
} from "@durable-agent/session"
import { Agent, type AgentInputItem, Runner, tool } from "@openai/agents"
import { assistantMessage, functionCall, modelResponder, ScriptedModel } from "@openai/agents/testing"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { z } from "zod"
import { fmtMs as fmt, percentile } from "../../engine/bench/stats.ts"
import { OpenAiAgentsRunner, openAiAgentsTool } from "../src/index.ts"
import { fromStoredMessage } from "../src/internal/items.ts"
import * as State from "../src/internal/state.ts"
import { approvedRecord } from "../test/records.ts"
import { mergeResults } from "./results.ts"

const TURNS = Number(process.env.BENCH_TURNS ?? "40")
const dir = mkdtempSync(join(tmpdir(), "das-openai-bench-"))

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

/** (b) The same turns as a durable session on the embedded engine. */
const durable = Effect.gen(function* () {
  const client = yield* AgentSessionClient.AgentSessionClient
  const times: Array<number> = []
  yield* client.startSession("bench")
  for (let i = 0; i < TURNS; i++) {
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
      AgentSessionFlow.layerWorker(AgentSessionFlow.make({ flowType: "BenchOpenAiAgents" })).pipe(
        Layer.provide(OpenAiAgentsRunner.layer({ agent: benchAgent() }))
      ),
      AgentSessionClient.layer("BenchOpenAiAgents")
    ).pipe(
      Layer.provideMerge(
        Engine.layerEmbedded({ filename: join(dir, "bench.db"), pollInterval: "50 millis", maxConcurrentTasks: 64 })
      )
    )
  ),
  Effect.scoped
)

/** What one turn of the in-memory drive returns. */
interface DrivenTurn {
  readonly ms: number
  readonly runStateBytes: number
  readonly sdkRunStateBytes: number
}

/**
 * (d) The runner alone, in memory: per turn, runModelStep (tool calls) -> 3 x executeDeferredToolCall ->
 * runModelStep (answer), with the history growing turn by turn, as the session drives it.
 */
const makeInMemory = () => {
  const runner = OpenAiAgentsRunner.make({ agent: benchAgent() })
  const history: Array<Wire.AgentMessage> = []
  const context = (
    turnId: string,
    frameworkRunState: string | null,
    toolCalls: ReadonlyArray<Wire.AgentToolCall>
  ): SessionRunner.AgentTurnContext => ({
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
  /** One turn. */
  return (i: number) =>
    Effect.gen(function* () {
      const t0 = performance.now()
      const turnId = `t${i}`
      store([runner.buildUserMessage(`turn ${i}`)], turnId)
      const first = yield* runner.runModelStep(context(turnId, null, []))
      if (first._tag !== "ToolCallsRequested") throw new Error("expected tool calls")
      const t1 = performance.now()
      const runStateBytes = Buffer.byteLength(first.frameworkRunState)
      // the SDK's own RunState of the round: its originalInput holds the whole conversation
      const sdkRunStateBytes = Buffer.byteLength(
        JSON.stringify(State.restore(JSON.parse(first.frameworkRunState), history.map(fromStoredMessage)))
      )
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
        if (!("output" in result)) throw new Error("expected a tool result")
        records.push({ ...record, status: "succeeded", output: result.output })
      }
      const second = yield* runner.runModelStep(context(turnId, first.frameworkRunState, records))
      if (second._tag !== "TurnCompleted") throw new Error("expected the answer")
      store(second.newMessages, turnId)
      // the size measurement is not part of the turn
      return { ms: performance.now() - t0 - (t2 - t1), runStateBytes, sdkRunStateBytes } satisfies DrivenTurn
    }).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))
}

/** Two decimals, for the results file. */
const round = (ms: number) => Math.round(ms * 100) / 100

const main = async () => {
  const started = performance.now()
  // (a) and (d) alternate turn by turn, so both see the same load of the machine
  const directTurn = makeDirect()
  const memoryTurn = makeInMemory()
  const a: Array<number> = []
  const d = { times: [] as Array<number>, turns: [] as Array<DrivenTurn> }
  for (let i = 0; i < TURNS; i++) {
    a.push(await directTurn(i))
    const turn = await Effect.runPromise(memoryTurn(i))
    d.times.push(turn.ms)
    d.turns.push(turn)
  }
  const b = await Effect.runPromise(durable as Effect.Effect<Array<number>>)
  const [pa, pb, pd] = [percentile(a, 50), percentile(b, 50), percentile(d.times, 50)]
  const ratio = pd / pa
  const firstRound = d.turns[0]!
  const lastRound = d.turns[d.turns.length - 1]!
  const rows = [
    [
      "(a) the SDK's own loop, tools in-process (2 model calls, 3 tools)",
      `p50 ${fmt(pa)}  p99 ${fmt(percentile(a, 99))}`,
      "-"
    ],
    [
      "(b) durable session, OpenAI Agents runner, embedded engine",
      `p50 ${fmt(pb)}  p99 ${fmt(percentile(b, 99))}`,
      "-"
    ],
    [
      "(d) the runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)",
      `p50 ${fmt(pd)}  p99 ${fmt(percentile(d.times, 99))}`,
      "-"
    ],
    ["runner overhead over the SDK: (d) / (a)", `${ratio.toFixed(2)}x`, `<= 1.5x: ${ratio <= 1.5 ? "PASS" : "MISS"}`],
    ["the engine's Step cost per turn: (b) - (d)", fmt(pb - pd), "-"],
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
  ]
  process.stdout.write(`\nOpenAI Agents runner benchmark (${TURNS} turns each; node ${process.version})\n\n`)
  process.stdout.write("| Measurement | Result | Target |\n|---|---|---|\n")
  for (const r of rows) process.stdout.write(`| ${r.join(" | ")} |\n`)
  const file = mergeResults({
    "runner-openai-agents.turn_in_memory_p50_ms": {
      value: round(pd),
      unit: "ms",
      baseline: round(pa),
      baseline_name: "the SDK's own loop, tools in-process, p50",
      target: "value <= 1.5 x baseline",
      pass: ratio <= 1.5
    },
    "runner-openai-agents.turn_durable_embedded_p50_ms": {
      value: round(pb),
      unit: "ms",
      baseline: round(pa),
      baseline_name: "the SDK's own loop, tools in-process, p50"
    },
    "runner-openai-agents.run_state_bytes_3_calls_first_turn": {
      value: firstRound.runStateBytes,
      unit: "bytes",
      baseline: firstRound.sdkRunStateBytes,
      baseline_name: "the SDK's RunState.toString() of the same round"
    },
    "runner-openai-agents.run_state_bytes_3_calls_last_turn": {
      value: lastRound.runStateBytes,
      unit: "bytes",
      baseline: lastRound.sdkRunStateBytes,
      baseline_name: "the SDK's RunState.toString() of the same round",
      note: `turn ${TURNS} of the session`
    }
  })
  process.stdout.write(`\nFigures merged into ${file}\nTotal: ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
}

main()
  .catch((e) => {
    process.stderr.write(`${String(e)}\n`)
    process.exitCode = 1
  })
  .finally(() => rmSync(dir, { recursive: true, force: true }))
