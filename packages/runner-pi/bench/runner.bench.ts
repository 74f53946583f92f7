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
const dir = mkdtempSync(join(tmpdir(), "das-pi-bench-"))

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}
const fmt = (ms: number) => `${ms.toFixed(2)} ms`

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
  return Effect.gen(function* () {
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
const toolRecord = (
  turnId: string,
  call: { readonly toolCallId: string; readonly toolName: string; readonly arguments: string },
  deferralOrder: number
): Wire.AgentToolCall =>
  Schema.decodeUnknownSync(Wire.AgentToolCall)({
    tool_call_id: call.toolCallId,
    turn_id: turnId,
    tool_name: call.toolName,
    arguments: call.arguments,
    effect: "read",
    requires_approval: false,
    status: "approved",
    output: null,
    error: null,
    rejection_message: null,
    deferral_order: deferralOrder,
    tool_source_reference: null,
    trace_context: null
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
    const t0 = performance.now()
    const turnId = `t${i++}`
    store([runner.buildUserMessage(`turn ${i}`)], turnId)
    const first = yield* runner.runModelStep(context(turnId, null, []))
    if (first._tag !== "ToolCallsRequested") throw new Error("expected tool calls")
    const records: Array<Wire.AgentToolCall> = []
    for (const [n, call] of first.toolCalls.entries()) {
      const record = toolRecord(turnId, call, n)
      const result = yield* runner.executeDeferredToolCall({
        flowId: "f",
        turnId,
        toolCall: record,
        idempotencyKey: `f/${turnId}/${call.toolCallId}`,
        attempt: 1,
        heartbeatCheckpoint: Option.none()
      })
      records.push({ ...record, status: "succeeded", output: result.output })
    }
    const second = yield* runner.runModelStep(context(turnId, first.frameworkRunState, records))
    if (second._tag !== "TurnCompleted") throw new Error("expected the answer")
    const ms = performance.now() - t0
    // outside the timed part: Pi's whole context at the same point (history + the turn so far)
    const turnMessages = (JSON.parse(first.frameworkRunState) as { messages: ReadonlyArray<unknown> }).messages
    rounds.push({
      runStateBytes: Buffer.byteLength(first.frameworkRunState),
      piContextBytes: Buffer.byteLength(
        JSON.stringify({ systemPrompt: "Read files.", messages: [...fromStoredMessages(history), ...turnMessages] })
      )
    })
    store(second.newMessages, turnId)
    return ms
  }).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))
  return {
    turn: () => Effect.runPromise(turn as Effect.Effect<number>),
    rounds,
    close: () => provider.unregister()
  }
}

const main = async () => {
  const started = performance.now()
  // (a) and (d) run turn by turn in lockstep, so a loaded machine slows both alike
  const directRun = directTurns()
  const memoryRun = inMemoryTurns()
  const a: Array<number> = []
  const dTimes: Array<number> = []
  for (let i = 0; i < TURNS; i++) {
    a.push(await directRun.turn())
    dTimes.push(await memoryRun.turn())
  }
  directRun.close()
  memoryRun.close()
  const d = { times: dTimes, rounds: memoryRun.rounds }
  const b = await Effect.runPromise(durable as Effect.Effect<Array<number>>)
  const [pa, pb, pd] = [percentile(a, 50), percentile(b, 50), percentile(d.times, 50)]
  const ratio = pd / pa
  const first = d.rounds[0]!
  const last = d.rounds[d.rounds.length - 1]!
  const rows = [
    [
      "(a) Pi's own agent loop, tools in-process (2 model calls, 3 tools)",
      `p50 ${fmt(pa)}  p99 ${fmt(percentile(a, 99))}`,
      "-"
    ],
    ["(b) durable session, Pi runner, embedded engine", `p50 ${fmt(pb)}  p99 ${fmt(percentile(b, 99))}`, "-"],
    [
      "(d) the runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)",
      `p50 ${fmt(pd)}  p99 ${fmt(percentile(d.times, 99))}`,
      "-"
    ],
    ["runner overhead over Pi: (d) / (a)", `${ratio.toFixed(2)}x`, `<= 1.5x: ${ratio <= 1.5 ? "PASS" : "MISS"}`],
    ["the engine's Step cost per turn: (b) - (d)", fmt(pb - pd), "-"],
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
  process.stdout.write(`\nPi runner benchmark (${TURNS} turns each; node ${process.version})\n\n`)
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
      value: pd,
      unit: "ms",
      baseline,
      target: "value <= 1.5 x baseline",
      met: ratio <= 1.5
    },
    "runner-pi.turn_durable_embedded_p50_ms": { value: pb, unit: "ms", baseline },
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
