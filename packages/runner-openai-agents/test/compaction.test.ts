// The OpenAI Agents runner's compaction capability (spec: ContextCompactionRunner): with a small window the
// session compacts at a turn's first model call, each summary call (one SDK run of the summarizer agent) reads
// the previous summary and the messages after it, and the input after a compaction starts with the summary. The
// SDK counts no tokens, so the runner estimates them; the SDK's ScriptedModel stands in for the provider. On both
// engines.
import { AgentSessionClient, AgentSessionFlow, Stepwise, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentInputItem } from "@openai/agents"
import { assistantMessage, modelResponder, ScriptedModel } from "@openai/agents/testing"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { clusterEngine, type EngineFactory, embeddedEngine } from "../../session/test/support.ts"
import { OpenAiAgentsRunner } from "../src/index.ts"

const FLOW_TYPE = "OpenAiAgentsCompactingAgent"
const WINDOW = 1_000
const PAD = "and a few more words so that every message costs some tokens of the small window. ".repeat(2)
const TURNS = 24

/** The text of an input item (a user or assistant message). */
const textOf = (item: AgentInputItem | undefined): string => {
  const content = (item as { readonly content?: unknown } | undefined)?.content
  if (typeof content === "string") return content
  return Array.isArray(content)
    ? content.map((p: { readonly text?: string }) => (typeof p?.text === "string" ? p.text : "")).join("")
    : ""
}

const engines: ReadonlyArray<readonly [string, EngineFactory]> = [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
]

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
                : [assistantMessage(`an answer ${PAD}`)]
            )
          )
        )
        const flow = AgentSessionFlow.make({
          flowType: FLOW_TYPE,
          retryInitialInterval: "100 millis",
          compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: WINDOW })
        })
        const worker = AgentSessionFlow.layerWorker(flow).pipe(
          Layer.provide(
            OpenAiAgentsRunner.layer({
              agent: new Agent({ name: "triage", instructions: "You are a test agent.", model })
            })
          )
        )
        return Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-oa", { initialMessage: `question 1 ${PAD}` })
          for (let n = 2; n <= TURNS; n++) assert.isTrue(yield* client.sendUserMessage("s-oa", `question ${n} ${PAD}`))
          const snapshot = yield* client.getSnapshot("s-oa").pipe(
            Effect.repeat({
              schedule: Schedule.spaced("100 millis"),
              until: (s) => s.state !== null && s.state.turnCount >= TURNS && s.state.activeTurnId === null
            }),
            Effect.timeoutOrElse({
              duration: "120 seconds",
              orElse: () => Effect.die(new Error("the turns did not end"))
            })
          )
          assert.isNull(snapshot.state?.lastTurnError)
          const calls = model.calls.map((c) => ({
            summary: isSummary(c.request.systemInstructions),
            input: typeof c.request.input === "string" ? [] : c.request.input
          }))
          const summaryCalls = calls.filter((c) => c.summary)
          assert.isAtLeast(summaryCalls.length, 2, "the session compacted more than once")
          assert.strictEqual(snapshot.contextSummary?.generation, summaryCalls.length)
          assert.strictEqual(snapshot.contextSummary?.text, `summary ${summaryCalls.length}`)
          // the second summary call starts with the first summary and asks for the summary last
          const second = summaryCalls[1]!
          assert.strictEqual(textOf(second.input[0]), `${Wire.CONTEXT_SUMMARY_PREFIX}\nsummary 1`)
          assert.strictEqual(textOf(second.input.at(-1)), Stepwise.SUMMARY_REQUEST_TEXT)
          // the call after each summary starts with it
          for (const [i, summary] of summaryCalls.entries()) {
            const next = calls[calls.indexOf(summary) + 1]!
            assert.isFalse(next.summary)
            assert.strictEqual(textOf(next.input[0]), `${Wire.CONTEXT_SUMMARY_PREFIX}\nsummary ${i + 1}`)
          }
          for (const call of calls) assert.isAtMost(Math.ceil(JSON.stringify(call.input).length / 4), WINDOW)
        }).pipe(
          Effect.provide(
            Layer.mergeAll(worker, AgentSessionClient.layer(FLOW_TYPE)).pipe(Layer.provideMerge(engine({})))
          ),
          Effect.scoped
        )
      },
      180_000
    )
  })
}
