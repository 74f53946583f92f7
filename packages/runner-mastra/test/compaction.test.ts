// The Mastra runner's compaction capability (spec: ContextCompactionRunner), on both engines: with a small window
// the session compacts, each summary call (one Mastra agent run without tools) reads the previous summary and the
// messages after it, the model input after a compaction starts with the summary, and a message larger than the
// whole window is left out of the summary call with the spec's note. Tokens are Mastra's own count (its token
// limiter's estimator): every model input must pass Mastra's `TokenLimiterProcessor` at the window untrimmed. The
// scripted model stands in for the provider.
import { ScriptedModel } from "@durable-agent/runner-ai-sdk"
import {
  awaitTurns as awaitTurnsWithin,
  COMPACTION_PAD,
  compactsLongSession,
  withRunnerSession
} from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient, AgentSessionFlow, Stepwise, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { TokenLimiterProcessor } from "@mastra/core/processors"
import * as Effect from "effect/Effect"
import { MastraRunner } from "../src/index.ts"
import { clusterEngine, type EngineFactory, embeddedEngine } from "./support.ts"

const WINDOW = 1_000
const TURNS = 16

/** The text parts of a prompt message (the SDK's provider prompt). */
const textOf = (message: { readonly content: unknown } | undefined): string =>
  message === undefined
    ? ""
    : typeof message.content === "string"
      ? message.content
      : (message.content as ReadonlyArray<{ readonly type: string; readonly text?: string }>)
          .map((p) => (p.type === "text" ? (p.text ?? "") : ""))
          .join("")

const isSummaryCall = (call: ScriptedModel.CallOptions) =>
  call.prompt[0]?.role === "system" && textOf(call.prompt[0]).includes(Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS)

const firstUser = (call: ScriptedModel.CallOptions) => textOf(call.prompt.find((m) => m.role === "user"))

/** Whether Mastra's own token limiter, at the window, sends the prompt as it is (nothing trimmed). */
const fitsByMastra = (call: ScriptedModel.CallOptions) =>
  Effect.promise(async () => {
    const limiter = new TokenLimiterProcessor(WINDOW)
    // the limiter reads the provider prompt the model received
    const trimmed = await limiter.processLLMRequest({ prompt: call.prompt } as never)
    return trimmed === undefined
  })

const withSession = <A, E>(
  engine: EngineFactory,
  model: ReturnType<typeof ScriptedModel.make>,
  body: Effect.Effect<A, E, AgentSessionClient.AgentSessionClient>
) =>
  withRunnerSession(
    {
      flowType: "MastraCompactingAgent",
      runner: MastraRunner.layer({
        name: "mastra-compacting",
        model,
        instructions: "You are a test agent.",
        modelSettings: { maxOutputTokens: 100 }
      }),
      engine: engine({}),
      flow: { compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: WINDOW }) }
    },
    body
  )

const awaitTurns = (id: string, turns: number) => awaitTurnsWithin(id, turns, "120 seconds")

const scripted = () => {
  let summaries = 0
  return ScriptedModel.make(
    Array.from(
      { length: 400 },
      (): ScriptedModel.Step => (call) =>
        isSummaryCall(call)
          ? { text: `summary ${++summaries}` }
          : { text: `answer to ${textOf(call.prompt.at(-1)!).slice(0, 12)} ${COMPACTION_PAD}` }
    )
  )
}

const engines: ReadonlyArray<readonly [string, EngineFactory]> = [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
]

for (const [engineName, engine] of engines) {
  describe(`Mastra runner: context compaction (${engineName} engine)`, () => {
    it.live(
      "compacts a long session; the summary call reads the previous summary, the next call starts with it",
      () => {
        const model = scripted()
        return withSession(
          engine,
          model,
          Effect.gen(function* () {
            const { calls } = yield* compactsLongSession("s-mastra", TURNS, {
              calls: () => model.doStreamCalls,
              isSummary: isSummaryCall,
              firstText: firstUser,
              lastText: (call) => textOf(call.prompt.at(-1)!),
              tools: (call) => call.tools
            })
            // by Mastra's own count, every model input fit the window
            for (const call of calls) assert.isTrue(yield* fitsByMastra(call), "Mastra's limiter would trim")
          })
        )
      },
      180_000
    )

    it.live(
      "a message larger than the whole window is left out of the summary call with the note",
      () => {
        const model = scripted()
        const huge = `question 2 ${"x ".repeat(2 * WINDOW)}`
        return withSession(
          engine,
          model,
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-huge", { initialMessage: "question 1" })
            yield* awaitTurns("s-huge", 1)
            assert.isTrue(yield* client.sendUserMessage("s-huge", huge))
            yield* awaitTurns("s-huge", 2)
            assert.isTrue(yield* client.sendUserMessage("s-huge", "question 3"))
            const snapshot = yield* awaitTurns("s-huge", 3)
            assert.isNull(snapshot.state?.lastTurnError)
            const summaryCalls = model.doStreamCalls.filter(isSummaryCall)
            assert.isAtLeast(summaryCalls.length, 1)
            const noted = summaryCalls.find((c) => firstUser(c).startsWith("[Dex] "))
            assert.isDefined(noted, "a summary call says what it left out")
            const left = Number(/^\[Dex\] (\d+) earlier/.exec(firstUser(noted!))?.[1])
            // exactly as the spec writes it
            assert.strictEqual(firstUser(noted!), Wire.omittedMessagesNote(left))
            assert.notInclude(JSON.stringify(noted!.prompt), "x x x x", "the huge message is not in it")
            for (const call of summaryCalls) assert.isTrue(yield* fitsByMastra(call))
          })
        )
      },
      180_000
    )
  })
}
