// The exported span tree of a runner's turn (spec "Tracing"), for any runner harness: a worker whose Effect
// tracer is the OpenTelemetry tracer the session's `Tracer` uses too (an in-memory exporter), a turn with two
// model calls, a READ tool and a write that waits for approval. The exported spans are the spec's
// (`invoke_agent`, `chat`, `execute_tool`), the framework's own under `chat`, and effect's engine spans in
// traces of their own: no span of the runner itself.

import { Client } from "@durable-agent/engine"
import * as Conformance from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import {
  assertSpanContract,
  countAttempts,
  installedTracing,
  type SpanTree,
  TOOL_STEPS
} from "../../../session/test/support/spans.ts"
import { embeddedEngine } from "../../../session/test/support.ts"

/** Options of {@link spanSuite}. */
export interface SpanSuiteOptions {
  /** How long the turn may take (a runner that runs a real binary needs longer); default 60 s. */
  readonly timeout?: number | undefined
  /** More checks of the runner's own on the tree (its framework spans, its attributes). */
  readonly check?: ((tree: SpanTree) => void) | undefined
}

/** Registers the span-tree test for one runner harness, on the embedded engine. */
export const spanSuite = (harness: Conformance.RunnerHarness, options?: SpanSuiteOptions) =>
  describe(`${harness.name}: the exported span tree`, () => {
    it.live(
      "an approval turn exports the spec's spans and the framework's under chat, no span of the runner",
      () => {
        const { exporter, layer } = installedTracing()
        const counts = new Map<string, number>()
        const player = Conformance.player([
          {
            toolCalls: [
              { id: "w1", name: "send_email", arguments: { to: "ann" } },
              { id: "r1", name: "get_weather", arguments: { city: "Oslo" } }
            ]
          },
          { text: "Sent." }
        ])
        const tools = Conformance.suiteTools((tool) => void counts.set(tool, (counts.get(tool) ?? 0) + 1))
        return Conformance.withRunnerSession(
          {
            flowType: "SpanTreeAgent",
            runner: harness.make({ player, tools }),
            engine: embeddedEngine({ maxConcurrentTasks: 64 }),
            services: layer
          },
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("spans", { initialMessage: "email ann" })
            yield* Conformance.awaitSnapshot("spans", (s) => s.pendingInterrupts.length === 1, "the approval")
            assert.isTrue(yield* client.resolveInterrupt("spans", { interruptId: "w1", approved: true }))
            yield* Conformance.awaitTurns("spans", 1)
            assert.strictEqual(counts.get("send_email"), 1)
            const steps = yield* Effect.flatMap(Client.Client, (c) => c.stepExecutions("spans"))
            const spans = exporter.getFinishedSpans()
            const tree = assertSpanContract(spans, "spans", assert)
            assert.deepStrictEqual(
              tree.roots.map((r) => r.attributes["dex.step.type"]),
              ["StartAgentSession", "AwaitToolApproval"]
            )
            assert.strictEqual(
              tree.chats.length,
              countAttempts(steps, ["RunModel"]),
              "a chat span per RunModel attempt"
            )
            assert.strictEqual(tree.tools.length, countAttempts(steps, TOOL_STEPS), "an execute_tool per tool attempt")
            // the approved write runs under the approval's root
            const write = tree.tools.find((t) => t.name === "execute_tool send_email")
            assert.strictEqual(write?.parentSpanContext?.spanId, tree.roots[1]!.spanContext().spanId)
            // the worker's Effect tracer is the exporter's: effect's engine spans were exported too
            assert.isTrue(
              spans.some((s) => s.name.startsWith("sql.")),
              "the engine's own spans reached the exporter"
            )
          })
        )
      },
      options?.timeout ?? 60_000
    )
  })
