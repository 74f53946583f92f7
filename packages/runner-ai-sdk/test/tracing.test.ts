// The AI SDK's own telemetry nests under the session's chat span, on both engine layers: the runner hands
// the SDK a telemetry integration when the session traces, and the session emits what it recorded
// (ai.streamText with its model call ai.streamText.doStream) as children of the RunModel attempt's chat span.

import { AgentSessionClient } from "@durable-agent/session"
import * as OpenTelemetry from "@durable-agent/session/OpenTelemetry"
import { assert, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import { awaitTurns, clusterEngine, embeddedEngine, withAiSdkSession } from "./support.ts"

for (const [name, engine] of [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
] as const) {
  describe(`${name} engine: AI SDK runner tracing`, () => {
    it.live(
      "the SDK's ai.streamText and its model call nest under each chat span",
      () => {
        const exporter = new InMemorySpanExporter()
        const services = OpenTelemetry.layer({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
        return withAiSdkSession(
          [
            {
              text: "Checking.",
              toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
              usage: { inputTokens: 10, outputTokens: 3 }
            },
            { text: "21 degrees.", usage: { inputTokens: 20, outputTokens: 7 } }
          ],
          () =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("ai-t", { initialMessage: "Weather in Paris?" })
              yield* awaitTurns("ai-t", 1)
              const spans = exporter.getFinishedSpans()
              const chats = spans.filter((s) => s.name.startsWith("chat"))
              assert.strictEqual(chats.length, 2)
              for (const chat of chats) {
                assert.strictEqual(chat.kind, 2, "CLIENT: one model call with usage")
                const operation = spans.filter((s) => s.parentSpanContext?.spanId === chat.spanContext().spanId)
                assert.deepStrictEqual(
                  operation.map((s) => s.name),
                  ["ai.streamText"]
                )
                const calls = spans.filter((s) => s.parentSpanContext?.spanId === operation[0]!.spanContext().spanId)
                assert.deepStrictEqual(
                  calls.map((s) => [s.name, s.kind]),
                  [["ai.streamText.doStream", 2]]
                )
                assert.strictEqual(operation[0]!.spanContext().traceId, chat.spanContext().traceId)
                assert.isAtLeast(
                  operation[0]!.startTime[0] * 1e9 + operation[0]!.startTime[1],
                  chat.startTime[0] * 1e9 + chat.startTime[1],
                  "inside the chat span"
                )
              }
              assert.strictEqual(chats[0]!.attributes["gen_ai.usage.input_tokens"], 10)
            }),
          { engine, services }
        )
      },
      120_000
    )
  })
}
