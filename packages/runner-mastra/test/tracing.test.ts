// Mastra's own spans nest under the session's chat span, on both engine layers: the runner hands Mastra's
// `stream` a tracing context whose span records the children Mastra makes (its agent run, the execution
// workflow's steps, the model generation with @mastra/observability's step, inference and chunk spans), and the
// session emits them under the RunModel attempt's chat span.

import { AgentSessionClient } from "@durable-agent/session"
import * as OpenTelemetry from "@durable-agent/session/OpenTelemetry"
import { assert, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import { ancestors, nanos } from "../../session/test/support/spans.ts"
import { awaitTurns, clusterEngine, embeddedEngine, withMastraSession } from "./support.ts"

for (const [name, engine] of [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
] as const) {
  describe(`${name} engine: Mastra runner tracing`, () => {
    it.live(
      "Mastra's agent run, model generation and model_step spans nest under each chat span",
      () => {
        const exporter = new InMemorySpanExporter()
        const services = OpenTelemetry.layer({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
        return withMastraSession(
          [
            {
              text: "Checking.",
              toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
              usage: { inputTokens: 10, outputTokens: 3 }
            },
            { text: "21 degrees.", usage: { inputTokens: 20, outputTokens: 7 } }
          ],
          { engine, services },
          () =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("mastra-t", { initialMessage: "Weather in Paris?" })
              yield* awaitTurns("mastra-t", 1)
              const spans = exporter.getFinishedSpans()
              const chats = spans.filter((s) => s.name.startsWith("chat") && s.attributes["dex.flow.id"] === "mastra-t")
              assert.strictEqual(chats.length, 2)
              for (const chat of chats) {
                assert.strictEqual(chat.kind, 2, "CLIENT: one model call with usage")
                const runs = spans.filter((s) => s.parentSpanContext?.spanId === chat.spanContext().spanId)
                assert.deepStrictEqual(
                  runs.map((s) => [s.name, s.attributes["mastra.span.type"]]),
                  [["agent run: 'mastra-test'", "agent_run"]]
                )
                const generations = spans.filter(
                  (s) => s.attributes["mastra.span.type"] === "model_generation" && ancestors(spans, s).includes(chat)
                )
                assert.strictEqual(generations.length, 1, "one model generation under this chat span")
                const generation = generations[0]!
                assert.strictEqual(generation.kind, 2, "the model call is a CLIENT span")
                assert.strictEqual(generation.attributes["mastra.model"], "scripted-model")
                assert.strictEqual(generation.spanContext().traceId, chat.spanContext().traceId)
                // @mastra/observability's tracker: the generation's step, its inference and the inference's chunks
                const steps = spans.filter((s) => s.parentSpanContext?.spanId === generation.spanContext().spanId)
                const step = steps.find((s) => s.attributes["mastra.span.type"] === "model_step")
                assert.strictEqual(step?.name, "step: 0", "one model call: one model_step")
                assert.strictEqual(step?.attributes["mastra.stepIndex"], 0)
                const inferences = spans.filter((s) => s.parentSpanContext?.spanId === step!.spanContext().spanId)
                assert.deepStrictEqual(
                  inferences.map((s) => [s.name, s.attributes["mastra.span.type"]]),
                  [["inference: 0", "model_inference"]]
                )
                const chunks = spans.filter((s) => s.parentSpanContext?.spanId === inferences[0]!.spanContext().spanId)
                assert.include(
                  chunks.map((s) => [s.name, s.attributes["mastra.span.type"]].join(" ")),
                  "chunk: 'text' model_chunk"
                )
                // every Mastra span of the attempt lies within the chat span
                for (const s of [runs[0]!, generation, step!, inferences[0]!, ...chunks]) {
                  assert.isTrue(nanos(s.startTime) >= nanos(chat.startTime), `${s.name} starts inside chat`)
                  assert.isTrue(nanos(s.endTime) <= nanos(chat.endTime), `${s.name} ends inside chat`)
                  assert.isTrue(s.ended)
                }
              }
              const all = spans.filter((s) => s.attributes["mastra.span.type"] !== undefined)
              assert.isTrue(
                all.every((s) => chats.some((chat) => ancestors(spans, s).includes(chat))),
                "every Mastra span lies under a chat span"
              )
              // the tool Step's span is the session's, not Mastra's: Mastra only saw a client tool
              const tools = spans.filter((s) => s.name === "execute_tool get_weather")
              assert.strictEqual(tools.length, 1)
            })
        )
      },
      120_000
    )
  })
}
