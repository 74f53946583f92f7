// The AI SDK runner's compaction capability (spec: ContextCompactionRunner): with a small window the session
// compacts, each summary call (one streamText call without tools) reads the previous summary and the messages
// after it, and the model input after a compaction starts with the summary (the runner kit's
// compactsLongSession). The AI SDK counts no tokens, so the runner estimates them from the request's JSON; the
// scripted model stands in for the provider. On both engines.
import { COMPACTION_PAD, compactsLongSession, withRunnerSession } from "@durable-agent/runner-kit/Conformance"
import { AgentSessionFlow, Stepwise } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { clusterEngine, type EngineFactory, embeddedEngine } from "../../session/test/support.ts"
import { AiSdkRunner, ScriptedModel } from "../src/index.ts"

const engines: ReadonlyArray<readonly [string, EngineFactory]> = [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
]
const WINDOW = 1_000
const TURNS = 24

/** The text parts of a prompt message (the SDK's provider prompt). */
const textOf = (message: { readonly content: unknown }): string =>
  typeof message.content === "string"
    ? message.content
    : (message.content as ReadonlyArray<{ readonly type: string; readonly text?: string }>)
        .map((p) => (p.type === "text" ? (p.text ?? "") : ""))
        .join("")

const isSummaryCall = (call: ScriptedModel.CallOptions) =>
  call.prompt[0]?.role === "system" && textOf(call.prompt[0]) === Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS

for (const [engineName, engine] of engines) {
  describe(`AI SDK runner: context compaction (${engineName} engine)`, () => {
    it.live(
      "compacts a long session; the summary call reads the previous summary, the next call starts with it",
      () => {
        let summaries = 0
        const model = ScriptedModel.make(
          Array.from(
            { length: 400 },
            (): ScriptedModel.Step => (call) =>
              isSummaryCall(call)
                ? { text: `summary ${++summaries}` }
                : { text: `answer to ${textOf(call.prompt.at(-1)!).slice(0, 12)} ${COMPACTION_PAD}` }
          )
        )
        return withRunnerSession(
          {
            flowType: "AiSdkCompactingAgent",
            runner: AiSdkRunner.layer({
              name: "ai-sdk-compacting",
              model,
              instructions: "You are a test agent.",
              maxOutputTokens: 100
            }),
            engine: engine({}),
            flow: { compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: WINDOW }) }
          },
          Effect.gen(function* () {
            const { calls } = yield* compactsLongSession("s-ai", TURNS, {
              calls: () => model.doStreamCalls,
              isSummary: isSummaryCall,
              // the prompt's first message is the instructions
              firstText: (call) => textOf(call.prompt[1]!),
              lastText: (call) => textOf(call.prompt.at(-1)!),
              tools: (call) => call.tools
            })
            // the estimate kept every model input inside the window
            for (const call of calls) assert.isAtMost(Math.ceil(JSON.stringify(call.prompt).length / 4), WINDOW)
          })
        )
      },
      180_000
    )
  })
}
