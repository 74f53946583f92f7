// Per-turn overhead of the AI SDK runner in Step mode, measured in one run:
//   (a) direct: streamText with the mock model and tools that execute in-process (the AI SDK's own loop,
//       two model calls per turn), no durability;
//   (b) durable AI SDK runner: the same turn as a session on the embedded engine
//       (RunModel -> 3 parallel CallTool -> ResumeTurn -> RunModel);
//   (c) durable Stepwise with a scripted ModelClient: the same Steps without the AI SDK, i.e. the engine's cost.
//   (d) the AI SDK runner alone in memory: the same turn driven the way the session drives it.
// Target: (d) <= 1.5 x (a), plus the engine's Step cost, (b) - (d).
// Also prints the size of the framework run state after each tool round.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import {
  AgentSessionClient,
  AgentSessionFlow,
  EventWriter,
  Heartbeat,
  ModelClient,
  Policy,
  Stepwise,
  ToolSource
} from "@durable-agent/session"
import { tool as aiTool, isStepCount, streamText } from "ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { z } from "zod"
import { AiSdkRunner, aiSdkTool, ScriptedModel } from "../src/index.ts"

const TURNS = Number(process.env.BENCH_TURNS ?? "40")
const dir = mkdtempSync(join(tmpdir(), "das-runner-bench-"))

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}
const fmt = (ms: number) => `${ms.toFixed(2)} ms`

// The scripted model: after tool results it answers; otherwise it asks for three reads.
const step = (call: ScriptedModel.CallOptions) => {
  const prompt = call.prompt as Array<any>
  const last = prompt[prompt.length - 1]
  if (last?.role === "tool") return { text: "All three files read.", usage: { inputTokens: 30, outputTokens: 5 } }
  return {
    toolCalls: ["a", "b", "c"].map((f) => ({
      id: `read-${f}-${prompt.length}`,
      name: "read_file",
      arguments: { path: f }
    })),
    usage: { inputTokens: 20, outputTokens: 10 }
  }
}
const script = () => Array.from({ length: TURNS * 2 + 10 }, () => step)
const readFile = (path: string) => `contents of ${path}`

const direct = async () => {
  const model = ScriptedModel.make(script())
  const tools = {
    read_file: aiTool({ inputSchema: z.object({ path: z.string() }), execute: async ({ path }) => readFile(path) })
  }
  const times: Array<number> = []
  let messages: Array<any> = []
  for (let i = 0; i < TURNS; i++) {
    const t0 = performance.now()
    messages.push({ role: "user", content: `turn ${i}` })
    const result = streamText({ model, messages, tools, stopWhen: isStepCount(2), maxRetries: 0 })
    for await (const _ of result.stream) void _
    messages = [...messages, ...(await result.responseMessages)]
    times.push(performance.now() - t0)
  }
  return times
}

const durable = (runnerLayer: Layer.Layer<any, any, any>, flowType: string) =>
  Effect.gen(function* () {
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
        AgentSessionFlow.layerWorker(AgentSessionFlow.make({ flowType })).pipe(Layer.provide(runnerLayer)),
        AgentSessionClient.layer(flowType)
      ).pipe(
        Layer.provideMerge(
          Engine.layerEmbedded({
            filename: join(dir, `${flowType}.db`),
            pollInterval: "50 millis",
            maxConcurrentTasks: 64
          })
        )
      )
    ),
    Effect.scoped
  )

/** The agent every AI SDK measurement uses: the scripted model and one read tool. */
const benchAgent = () => ({
  name: "bench",
  model: ScriptedModel.make(script()),
  tools: {
    read_file: aiSdkTool({
      inputSchema: z.object({ path: z.string() }),
      effect: "read" as const,
      execute: ({ path }: { path: string }) => readFile(path)
    })
  }
})

const aiSdkRunner = AiSdkRunner.layer(benchAgent())

const stepwise = Stepwise.layer({ name: "bench", instructions: "" }).pipe(
  Layer.provide(
    Layer.mergeAll(
      ModelClient.layer((request: ModelClient.ModelRequest) =>
        Effect.gen(function* () {
          const answer = request.messages[request.messages.length - 1]?.role === "tool"
          // the same text_delta event the AI SDK runner writes, so both sides pay for it
          if (answer) yield* request.onTextDelta?.("All three files read.") ?? Effect.void
          return answer
            ? {
                text: "All three files read.",
                reasoning: null,
                toolCalls: [],
                usage: { inputTokens: 30, outputTokens: 5, cachedInputTokens: 0, reasoningTokens: 0 }
              }
            : {
                text: null,
                reasoning: null,
                toolCalls: ["a", "b", "c"].map((f) => ({
                  toolCallId: `read-${f}-${request.messages.length}`,
                  toolName: "read_file",
                  arguments: JSON.stringify({ path: f })
                })),
                usage: { inputTokens: 20, outputTokens: 10, cachedInputTokens: 0, reasoningTokens: 0 }
              }
        })
      ),
      ToolSource.layer([
        ToolSource.tool({
          name: "read_file",
          description: "read",
          effect: "read",
          handler: (args) => Effect.succeed(readFile(String(args.path)))
        })
      ])
    )
  )
)

/**
 * (d) the runner alone, in memory: per turn, runModelStep (tool calls) -> 3 x executeDeferredToolCall ->
 * runModelStep (answer), with the history growing turn by turn, as the session drives it.
 */
const inMemoryRunner = Effect.gen(function* () {
  const runner = AiSdkRunner.make(benchAgent())
  const history: Array<any> = []
  const times: Array<number> = []
  const turnContext = (turnId: string, frameworkRunState: string | null, toolCalls: Array<any>): any => ({
    flowId: "f",
    turnId,
    stepExecutionId: "RunModel",
    attempt: 1,
    messages: history,
    frameworkRunState,
    toolCalls,
    sessionSettings: {},
    interactionMode: "chat",
    toolPolicies: {},
    defaultToolEffect: "unclassified",
    resolveToolPolicy: (name: string, frameworkEffect: any) => Policy.resolveToolPolicy(name, { frameworkEffect })
  })
  const store = (messages: ReadonlyArray<any>, turnId: string) => {
    for (const m of messages) history.push({ ...m, sequence: history.length + 1, turnId, createdAt: "" })
  }
  for (let i = 0; i < TURNS; i++) {
    const t0 = performance.now()
    const turnId = `t${i}`
    store([runner.buildUserMessage(`turn ${i}`)], turnId)
    const first = yield* runner.runModelStep(turnContext(turnId, null, []))
    if (first._tag !== "ToolCallsRequested") throw new Error("expected tool calls")
    const records: Array<any> = []
    for (const call of first.toolCalls) {
      const result = yield* runner.executeDeferredToolCall({
        flowId: "f",
        turnId,
        toolCall: { toolCallId: call.toolCallId, toolName: call.toolName, arguments: call.arguments } as any,
        idempotencyKey: `f/${turnId}/${call.toolCallId}`,
        attempt: 1,
        heartbeatCheckpoint: undefined as any
      })
      records.push({ ...call, status: "succeeded", output: result.output, error: null, rejectionMessage: null })
    }
    const second = yield* runner.runModelStep(turnContext(turnId, first.frameworkRunState, records))
    if (second._tag !== "TurnCompleted") throw new Error("expected the answer")
    store(second.newMessages, turnId)
    times.push(performance.now() - t0)
  }
  return times
}).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))

/** The run state the runner returns after one tool round (one user message, three parallel calls). */
const runStateSize = Effect.gen(function* () {
  const runner = AiSdkRunner.make(benchAgent())
  const user = runner.buildUserMessage("read a, b and c")
  const outcome = yield* runner.runModelStep({
    flowId: "f",
    turnId: "t",
    stepExecutionId: "RunModel-1",
    attempt: 1,
    messages: [
      {
        ...user,
        sequence: 1,
        turnId: "t",
        createdAt: new Date().toISOString()
      } as any
    ],
    frameworkRunState: null,
    toolCalls: [],
    sessionSettings: {},
    interactionMode: "chat",
    toolPolicies: {},
    defaultToolEffect: "unclassified",
    resolveToolPolicy: (name, frameworkEffect) => Policy.resolveToolPolicy(name, { frameworkEffect })
  })
  return outcome._tag === "ToolCallsRequested" ? Buffer.byteLength(outcome.frameworkRunState) : -1
}).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))

const main = async () => {
  const started = performance.now()
  const a = await direct()
  const b = await Effect.runPromise(durable(aiSdkRunner, "BenchAiSdk") as Effect.Effect<Array<number>>)
  const c = await Effect.runPromise(durable(stepwise, "BenchStepwise") as Effect.Effect<Array<number>>)
  const stateBytes = await Effect.runPromise(runStateSize)
  const d = await Effect.runPromise(inMemoryRunner)
  const pd = percentile(d, 50)
  const [pa, pb, pc] = [percentile(a, 50), percentile(b, 50), percentile(c, 50)]
  const ratio = pd / pa
  const rows = [
    [
      "(a) streamText directly, tools in-process (2 model calls, 3 tools)",
      `p50 ${fmt(pa)}  p99 ${fmt(percentile(a, 99))}`,
      "-"
    ],
    ["(b) durable session, AI SDK runner, embedded engine", `p50 ${fmt(pb)}  p99 ${fmt(percentile(b, 99))}`, "-"],
    [
      "(c) durable session, Stepwise + scripted ModelClient (engine cost)",
      `p50 ${fmt(pc)}  p99 ${fmt(percentile(c, 99))}`,
      "-"
    ],
    [
      "(d) the AI SDK runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)",
      `p50 ${fmt(pd)}  p99 ${fmt(percentile(d, 99))}`,
      "-"
    ],
    [
      "runner overhead over streamText: (d) / (a)",
      `${ratio.toFixed(2)}x`,
      `<= 1.5x: ${ratio <= 1.5 ? "PASS" : "MISS"}`
    ],
    ["the engine's Step cost per turn: (b) - (d)", fmt(pb - pd), "-"],
    ["AI SDK runner vs Stepwise on the engine: (b) - (c)", fmt(pb - pc), "-"],
    [
      "framework run state per tool round (3 calls)",
      `${stateBytes} bytes (ModelMessage[] of the turn + pending calls)`,
      "-"
    ]
  ]
  process.stdout.write(`\nAI SDK runner benchmark (${TURNS} turns each; node ${process.version})\n\n`)
  process.stdout.write("| Measurement | Result | Target |\n|---|---|---|\n")
  for (const r of rows) process.stdout.write(`| ${r.join(" | ")} |\n`)
  process.stdout.write(`\nTotal: ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
}

main()
  .catch((e) => {
    process.stderr.write(`${String(e)}\n`)
    process.exitCode = 1
  })
  .finally(() => rmSync(dir, { recursive: true, force: true }))
