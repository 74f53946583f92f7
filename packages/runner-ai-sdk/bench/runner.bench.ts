// Per-turn overhead of the AI SDK runner in Step mode, measured in one run:
//   (a) direct: streamText with the mock model and tools that execute in-process (the AI SDK's own loop,
//       two model calls per turn), no durability;
//   (b) durable AI SDK runner: the same turn as a session on the embedded engine
//       (RunModel -> 3 parallel CallTool -> ResumeTurn -> RunModel);
//   (c) durable Stepwise with a scripted ModelClient: the same Steps without the AI SDK, i.e. the engine's cost.
//   (d) the AI SDK runner alone in memory: the same turn driven the way the session drives it.
// Target: (d) <= 1.5 x (a), plus the engine's Step cost, (b) - (d).
// Also prints the size of the framework run state after each tool round.
import { join } from "node:path"
import * as Bench from "@durable-agent/runner-kit/Bench"
import { ModelClient, type Runner, Stepwise, ToolSource } from "@durable-agent/session"
import { tool as aiTool, isStepCount, streamText } from "ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { z } from "zod"
import { AiSdkRunner, aiSdkTool, ScriptedModel } from "../src/index.ts"

const TURNS = Bench.benchTurns()
const dir = Bench.scratchDir("das-runner-bench-")

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

/** (b) and (c): the same turns as a durable session on the embedded engine, with `runner`. */
const durable = <E>(runner: Layer.Layer<Runner.AgentFrameworkRunner, E>, flowType: string) =>
  Effect.runPromise(Bench.durableTurns({ flowType, runner, filename: join(dir.path, `${flowType}.db`), turns: TURNS }))

const main = async () => {
  const a = await direct()
  const b = await durable(aiSdkRunner, "BenchAiSdk")
  const c = await durable(stepwise, "BenchStepwise")
  // (d), with the run state of each tool round (measured outside the timed part)
  const memory = Bench.inMemoryTurns(AiSdkRunner.make(benchAgent()), ({ requested }) =>
    Buffer.byteLength(requested.frameworkRunState)
  )
  const d: Array<number> = []
  const stateBytes: Array<number> = []
  for (let i = 0; i < TURNS; i++) {
    const turn = await memory.turn(i)
    d.push(turn.ms)
    stateBytes.push(turn.round)
  }
  const pd = Bench.percentile(d, 50)
  const [pa, pb, pc] = [Bench.percentile(a, 50), Bench.percentile(b, 50), Bench.percentile(c, 50)]
  const ratio = pd / pa
  Bench.printTable(`AI SDK runner benchmark (${TURNS} turns each; node ${process.version})`, [
    ["(a) streamText directly, tools in-process (2 model calls, 3 tools)", Bench.p50p99(a), "-"],
    ["(b) durable session, AI SDK runner, embedded engine", Bench.p50p99(b), "-"],
    ["(c) durable session, Stepwise + scripted ModelClient (engine cost)", Bench.p50p99(c), "-"],
    ["(d) the AI SDK runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)", Bench.p50p99(d), "-"],
    Bench.ratioRow("runner overhead over streamText: (d) / (a)", ratio, 1.5),
    ["the engine's Step cost per turn: (b) - (d)", Bench.fmtMs(pb - pd), "-"],
    ["AI SDK runner vs Stepwise on the engine: (b) - (c)", Bench.fmtMs(pb - pc), "-"],
    [
      "framework run state per tool round (3 calls)",
      `${stateBytes[0]} bytes (ModelMessage[] of the turn + pending calls)`,
      "-"
    ]
  ])
}

Bench.runMain(main, dir.remove)
