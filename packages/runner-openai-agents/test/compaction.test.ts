// The OpenAI Agents runner's compaction capability (spec: ContextCompactionRunner): with a small window the
// session compacts at a turn's first model call, each summary call (one SDK run of the summarizer agent) reads
// the previous summary and the messages after it, and the input after a compaction starts with the summary (the
// runner kit's compactsLongSession). The SDK counts no tokens, so the runner estimates them; the SDK's
// ScriptedModel stands in for the provider. On both engines.
import { COMPACTION_PAD, compactsLongSession, withRunnerSession } from "@durable-agent/runner-kit/Conformance"
import { AgentSessionFlow, Stepwise } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentInputItem } from "@openai/agents"
import { assistantMessage, modelResponder, ScriptedModel } from "@openai/agents/testing"
import * as Effect from "effect/Effect"
import { clusterEngine, type EngineFactory, embeddedEngine } from "../../session/test/support.ts"
import { OpenAiAgentsRunner } from "../src/index.ts"

const engines: ReadonlyArray<readonly [string, EngineFactory]> = [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
]

const WINDOW = 1_000
const TURNS = 24

/** The text of an input item (a user or assistant message). */
const textOf = (item: AgentInputItem | undefined): string => {
  const content = (item as { readonly content?: unknown } | undefined)?.content
  if (typeof content === "string") return content
  return Array.isArray(content)
    ? content.map((p: { readonly text?: string }) => (typeof p?.text === "string" ? p.text : "")).join("")
    : ""
}

for (const [engineName, engine] of engines) {
  describe(`OpenAI Agents runner: context compaction (${engineName} engine)`, () => {
    it.live(
      "compacts a long session; the summary call reads the previous summary, the next call starts with it",
      () => {
        let summaries = 0
        const isSummary = (instructions: string | undefined) => instructions === Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS
        const model = new ScriptedModel(
          Array.from({ length: 400 }, () =>
            modelResponder((call) =>
              isSummary(call.request.systemInstructions)
                ? [assistantMessage(`summary ${++summaries}`)]
                : [assistantMessage(`an answer ${COMPACTION_PAD}`)]
            )
          )
        )
        return withRunnerSession(
          {
            flowType: "OpenAiAgentsCompactingAgent",
            runner: OpenAiAgentsRunner.layer({
              agent: new Agent({ name: "triage", instructions: "You are a test agent.", model })
            }),
            engine: engine({}),
            flow: { compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: WINDOW }) }
          },
          Effect.gen(function* () {
            const { calls } = yield* compactsLongSession("s-oa", TURNS, {
              calls: () =>
                model.calls.map((c) => ({
                  summary: isSummary(c.request.systemInstructions),
                  input: typeof c.request.input === "string" ? [] : c.request.input
                })),
              isSummary: (call) => call.summary,
              firstText: (call) => textOf(call.input[0]),
              lastText: (call) => textOf(call.input.at(-1))
            })
            for (const call of calls) assert.isAtMost(Math.ceil(JSON.stringify(call.input).length / 4), WINDOW)
          })
        )
      },
      180_000
    )
  })
}
