// The AI SDK runner's compaction capability (spec: ContextCompactionRunner): with a small window the session
// compacts, each summary call (one streamText call without tools) reads the previous summary and the messages
// after it, and the model input after a compaction starts with the summary. The AI SDK counts no tokens, so the
// runner estimates them from the request's JSON; the scripted model stands in for the provider. On both engines.
import { AgentSessionClient, AgentSessionFlow, Stepwise, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { clusterEngine, type EngineFactory, embeddedEngine } from "../../session/test/support.ts"
import { AiSdkRunner, ScriptedModel } from "../src/index.ts"

const FLOW_TYPE = "AiSdkCompactingAgent"
const WINDOW = 1_000
const PAD = "and a few more words so that every message costs some tokens of the small window. ".repeat(2)
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

const engines: ReadonlyArray<readonly [string, EngineFactory]> = [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
]

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
                : { text: `answer to ${textOf(call.prompt.at(-1)!).slice(0, 12)} ${PAD}` }
          )
        )
        const flow = AgentSessionFlow.make({
          flowType: FLOW_TYPE,
          retryInitialInterval: "100 millis",
          compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: WINDOW })
        })
        const worker = AgentSessionFlow.layerWorker(flow).pipe(
          Layer.provide(
            AiSdkRunner.layer({
              name: "ai-sdk-compacting",
              model,
              instructions: "You are a test agent.",
              maxOutputTokens: 100
            })
          )
        )
        return Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-ai", { initialMessage: `question 1 ${PAD}` })
          for (let n = 2; n <= TURNS; n++) assert.isTrue(yield* client.sendUserMessage("s-ai", `question ${n} ${PAD}`))
          const snapshot = yield* client.getSnapshot("s-ai").pipe(
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
          const calls = model.doStreamCalls
          const summaryCalls = calls.filter(isSummaryCall)
          assert.isAtLeast(summaryCalls.length, 2, "the session compacted more than once")
          assert.strictEqual(snapshot.contextSummary?.generation, summaryCalls.length)
          assert.strictEqual(snapshot.contextSummary?.text, `summary ${summaryCalls.length}`)
          // the second summary call starts with the first summary, and asks for the summary last
          const second = summaryCalls[1]!
          assert.strictEqual(textOf(second.prompt[1]!), `${Wire.CONTEXT_SUMMARY_PREFIX}\nsummary 1`)
          assert.strictEqual(textOf(second.prompt.at(-1)!), Stepwise.SUMMARY_REQUEST_TEXT)
          assert.deepStrictEqual(second.tools ?? [], [])
          // the call after each summary starts with it, and no later call shows the summarized messages
          for (const [i, summary] of summaryCalls.entries()) {
            const next = calls[calls.indexOf(summary) + 1]!
            assert.isFalse(isSummaryCall(next))
            assert.strictEqual(textOf(next.prompt[1]!), `${Wire.CONTEXT_SUMMARY_PREFIX}\nsummary ${i + 1}`)
          }
          // the estimate kept every model input inside the window
          for (const call of calls) assert.isAtMost(Math.ceil(JSON.stringify(call.prompt).length / 4), WINDOW)
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
