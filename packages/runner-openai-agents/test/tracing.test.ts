// The OpenAI Agents SDK's own spans nest under the session's chat span, on both engine layers: with the
// session tracing, the runner makes its runs with the SDK's tracing on and a processor of its own on the SDK's
// trace provider, which hands the run's spans (agent, task, turn, ...) to the session; the session emits them
// under the RunModel attempt's chat span. The SDK's default processor (OpenAI's exporter) is removed first and
// the SDK's tracing, off under NODE_ENV=test, is turned on: both are the SDK's global switches.

import { AgentSessionClient } from "@durable-agent/session"
import * as OpenTelemetry from "@durable-agent/session/OpenTelemetry"
import { assert, beforeAll, describe, it } from "@effect/vitest"
import { setTraceProcessors, setTracingDisabled } from "@openai/agents"
import { assistantMessage, functionCall } from "@openai/agents/testing"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import { ancestors, nanos } from "../../session/test/support/spans.ts"
import { awaitTurns, clusterEngine, embeddedEngine, withOpenAiSession } from "./support.ts"

beforeAll(() => {
  setTraceProcessors([])
  setTracingDisabled(false)
})

for (const [name, engine] of [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
] as const) {
  describe(`${name} engine: OpenAI Agents runner tracing`, () => {
    it.live(
      "the SDK's agent, task and turn spans nest under each chat span, without content",
      () => {
        const exporter = new InMemorySpanExporter()
        const services = OpenTelemetry.layer({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
        return withOpenAiSession(
          engine,
          [[functionCall("get_weather", { city: "Paris" }, { callId: "g1" })], [assistantMessage("21 degrees.")]],
          () =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("oa-t", { initialMessage: "Weather in Paris?" })
              yield* awaitTurns("oa-t", 1)
              const spans = exporter.getFinishedSpans()
              const chats = spans.filter((s) => s.name.startsWith("chat") && s.attributes["dex.flow.id"] === "oa-t")
              assert.strictEqual(chats.length, 2)
              for (const chat of chats) {
                const sdk = spans.filter(
                  (s) => s.attributes["openai_agents.span.type"] !== undefined && ancestors(spans, s).includes(chat)
                )
                const types = new Set(sdk.map((s) => s.attributes["openai_agents.span.type"]))
                for (const type of ["agent", "task", "turn"]) assert.isTrue(types.has(type), `an SDK ${type} span`)
                const agent = sdk.find((s) => s.attributes["openai_agents.span.type"] === "agent")!
                assert.strictEqual(agent.name, "openai_agents.agent triage")
                assert.includeMembers(agent.attributes["openai_agents.tools"] as Array<string>, ["get_weather"])
                for (const s of sdk) {
                  assert.strictEqual(s.spanContext().traceId, chat.spanContext().traceId)
                  assert.isTrue(nanos(s.startTime) >= nanos(chat.startTime), `${s.name} starts inside chat`)
                  assert.isTrue(nanos(s.endTime) <= nanos(chat.endTime), `${s.name} ends inside chat`)
                  for (const key of Object.keys(s.attributes)) {
                    assert.notMatch(key, /\.(input|output|_input|_response)$/, "no content on an SDK span")
                  }
                }
              }
              const all = spans.filter((s) => s.attributes["openai_agents.span.type"] !== undefined)
              assert.isTrue(
                all.every((s) => chats.some((chat) => ancestors(spans, s).includes(chat))),
                "every SDK span lies under a chat span"
              )
              // the resumed run answers the gated call from the session's record: the SDK's function span
              assert.isTrue(all.some((s) => s.name === "openai_agents.function get_weather"))
              // the tool ran in its own Step: its span is the session's execute_tool, not the SDK's function
              assert.strictEqual(spans.filter((s) => s.name === "execute_tool get_weather").length, 1)
            }),
          { services }
        )
      },
      120_000
    )
  })
}
