// Per-turn overhead of the AI SDK runner in Step mode, measured in one run:
//   (a) direct: streamText with the mock model and tools that execute in-process (the AI SDK's own loop,
//       two model calls per turn), no durability;
//   (b) durable AI SDK runner: the same turn as a session on the embedded engine
//       (RunModel -> 3 parallel CallTool -> ResumeTurn -> RunModel);
//   (c) durable Stepwise with a scripted ModelClient: the same Steps without the AI SDK, i.e. the engine's cost.
//   (d) the AI SDK runner alone in memory: the same turn driven the way the session drives it.
// Target: (d) <= 1.5 x (a), plus the engine's Step cost, (b) - (d). A turn of (a) is about a millisecond, so one
// 40-turn session gives few samples against the machine's noise: (a) and (d) run paired (`Bench.pairedSessions`),
// BENCH_ROUNDS fresh sessions of TURNS turns through each after a warm-up session, turn i through both one right
// after the other; the target is judged on the median of the turns' ratios. Also the framework run state after
// a round of 3 tool calls, beside the AI SDK's own message list at that point (what its loop keeps: the history
// and the turn so far), on the first turn and after TURNS turns of history. The figures are merged into
// bench-results.json at the repository root.
//
//   node --conditions=@durable-agent/source packages/runner-ai-sdk/bench/runner.bench.ts
import { join } from "node:path"
import * as Bench from "@durable-agent/runner-kit/Bench"
import { ModelClient, type Runner, Stepwise, ToolSource } from "@durable-agent/session"
import { tool as aiTool, isStepCount, streamText } from "ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { z } from "zod"
import { AiSdkRunner, aiSdkTool, ScriptedModel } from "../src/index.ts"
import { fromStoredMessages } from "../src/internal/convert.ts"

const TURNS = Bench.benchTurns()
const ROUNDS = Bench.benchRounds()
/** Turns of the durable sessions (b) and (c); 0 leaves them out. */
const DURABLE_TURNS = Number(process.env.BENCH_DURABLE_TURNS ?? String(TURNS))
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
const script = () => Array.from({ length: Math.max(TURNS, DURABLE_TURNS) * 2 + 10 }, () => step)
const readFile = (path: string) => `contents of ${path}`

/** (a) The AI SDK alone: one streamText call per turn runs both model calls and the three tools. */
const makeDirect = () => {
  const model = ScriptedModel.make(script())
  const tools = {
    read_file: aiTool({ inputSchema: z.object({ path: z.string() }), execute: async ({ path }) => readFile(path) })
  }
  let messages: Array<any> = []
  return async (i: number) => {
    const t0 = performance.now()
    messages.push({ role: "user", content: `turn ${i}` })
    const result = streamText({ model, messages, tools, stopWhen: isStepCount(2), maxRetries: 0 })
    for await (const _ of result.stream) void _
    messages = [...messages, ...(await result.responseMessages)]
    return performance.now() - t0
  }
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
  DURABLE_TURNS > 0
    ? Effect.runPromise(
        Bench.durableTurns({ flowType, runner, filename: join(dir.path, `${flowType}.db`), turns: DURABLE_TURNS })
      )
    : Promise.resolve([])

/** (d)'s tool round, on the first and the last turn only: the run state, beside the AI SDK's whole message list. */
const measureRound = ({ turnId, requested, history }: Bench.ToolRound) => {
  if (turnId !== "t0" && turnId !== `t${TURNS - 1}`) return undefined
  const turnMessages = (JSON.parse(requested.frameworkRunState) as { messages: ReadonlyArray<unknown> }).messages
  return {
    runStateBytes: Buffer.byteLength(requested.frameworkRunState),
    sdkMessagesBytes: Buffer.byteLength(JSON.stringify([...fromStoredMessages(history), ...turnMessages]))
  }
}

/** The rows of (b) and (c), when they ran. */
const durableRows = (rows: () => ReadonlyArray<[string, string, string]>) => (DURABLE_TURNS > 0 ? rows() : [])

const main = async () => {
  const paired = await Bench.pairedSessions({
    sessions: ROUNDS,
    turns: TURNS,
    direct: makeDirect,
    runner: () => Bench.inMemoryTurns(AiSdkRunner.make(benchAgent()), measureRound)
  })
  const b = await durable(aiSdkRunner, "BenchAiSdk")
  const c = await durable(stepwise, "BenchStepwise")
  const [a, d] = [paired.direct, paired.runner]
  const [pa, pd] = [Bench.percentile(a, 50), Bench.percentile(d, 50)]
  const [pb, pc] = DURABLE_TURNS > 0 ? [Bench.percentile(b, 50), Bench.percentile(c, 50)] : [Number.NaN, Number.NaN]
  const ratio = Bench.quartiles(paired.ratios)
  const rounds = paired.rounds.filter((r) => r !== undefined)
  const first = rounds[0]!
  const last = rounds[rounds.length - 1]!
  Bench.printTable(
    `AI SDK runner benchmark ((a), (d): ${ROUNDS} sessions of ${TURNS} turns each, paired turn by turn, after a ` +
      `warm-up session; (b), (c): ${DURABLE_TURNS} turns; node ${process.version})`,
    [
      ["(a) streamText directly, tools in-process (2 model calls, 3 tools)", Bench.p50p99(a), "-"],
      ...durableRows(() => [
        ["(b) durable session, AI SDK runner, embedded engine", Bench.p50p99(b), "-"],
        ["(c) durable session, Stepwise + scripted ModelClient (engine cost)", Bench.p50p99(c), "-"]
      ]),
      ["(d) the AI SDK runner alone, in memory (2 x runModelStep, 3 x executeDeferredToolCall)", Bench.p50p99(d), "-"],
      Bench.ratioRow(
        `runner overhead over streamText: (d) / (a), median of ${paired.ratios.length} turns' ratios`,
        ratio.median,
        1.5
      ),
      [
        "the same: quartiles of the turns' ratios; ratio of the p50s",
        `${ratio.q1.toFixed(2)}x-${ratio.q3.toFixed(2)}x; ${(pd / pa).toFixed(2)}x`,
        "-"
      ],
      ...durableRows(() => [
        ["the engine's Step cost per turn: (b) - (d)", Bench.fmtMs(pb - pd), "-"],
        ["AI SDK runner vs Stepwise on the engine: (b) - (c)", Bench.fmtMs(pb - pc), "-"]
      ]),
      [
        "framework run state after 3 tool calls, first turn",
        `${first.runStateBytes} bytes (the AI SDK's whole message list: ${first.sdkMessagesBytes})`,
        "-"
      ],
      [
        `framework run state after 3 tool calls, turn ${TURNS}`,
        `${last.runStateBytes} bytes (the AI SDK's whole message list: ${last.sdkMessagesBytes})`,
        "-"
      ]
    ]
  )
  const figures = Bench.turnFigures({
    prefix: "runner-ai-sdk",
    inMemoryP50: pd,
    durableP50: pb,
    baselineP50: pa,
    baselineName: "streamText directly (2 model calls, 3 tools in-process), p50",
    inMemoryRatio: ratio.median,
    inMemoryNote:
      `p50s over the turns of ${ROUNDS} sessions of ${TURNS} turns each, (a) and (d) paired turn by turn; ` +
      `median of the turns' ratios ${ratio.median.toFixed(2)}x (quartiles ${ratio.q1.toFixed(2)}-${ratio.q3.toFixed(2)})`,
    firstRound: { runStateBytes: first.runStateBytes, frameworkBytes: first.sdkMessagesBytes },
    lastRound: { runStateBytes: last.runStateBytes, frameworkBytes: last.sdkMessagesBytes },
    frameworkStateName: "the AI SDK's whole ModelMessage[] after the same round (history and the turn so far)",
    turns: TURNS,
    decimals: 3
  })
  if (DURABLE_TURNS === 0) delete figures["runner-ai-sdk.turn_durable_embedded_p50_ms"]
  const file = Bench.recordFigures(figures)
  process.stdout.write(`\nFigures merged into ${file}\n`)
}

Bench.runMain(main, dir.remove)
