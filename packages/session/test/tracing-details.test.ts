// Tracing details of the spec's "Tracing" section, on the embedded engine: an unsampled root is stored in
// AgentTraceContext too and its activation's spans share its decision; without a Tracer nothing is stored;
// opt-in content and the 1.36.0 compatibility conventions; a CompactContext attempt's chat span, named from the
// summary's model call metadata.
import { Client } from "@durable-agent/engine"
import * as OtelTracer from "@effect/opentelemetry/OtelTracer"
import { assert, describe, it } from "@effect/vitest"
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor
} from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { AgentSessionClient, AgentSessionFlow, ModelClient, Persistence, Stepwise, ToolSource } from "../src/index.ts"
import { parseTraceparent } from "../src/internal/tracing.ts"
import * as OpenTelemetry from "../src/OpenTelemetry.ts"
import * as Tracer from "../src/Tracer.ts"
import { compactionAgent, compactionModel, lookupTool, question, WINDOW } from "./support/compaction.ts"
import {
  awaitTurns,
  embeddedEngine,
  FLOW_TYPE,
  type Kit,
  sendEmailTool,
  startAndAwait,
  weatherTool,
  withSession
} from "./support.ts"

const tools = (kit: Kit) => [weatherTool(kit), sendEmailTool(kit)]

const writeAndRead = [
  {
    toolCalls: [
      { id: "w1", name: "send_email", arguments: { to: "ann" } },
      { id: "r1", name: "get_weather", arguments: { city: "Oslo" } }
    ]
  },
  { text: "Done." }
]

/**
 * Approves w1 once the read ran, and waits for the turn's end; returns AgentTraceContext and w1's record's
 * trace context while the approval waited (the turn's records go with the turn).
 */
const approvalTurn = (sessionId: string) =>
  Effect.gen(function* () {
    const engine = yield* Client.Client
    const { client } = yield* startAndAwait(
      sessionId,
      "email ann",
      (s) =>
        s.pendingInterrupts.length > 0 && s.toolCalls.some((c) => c.toolCallId === "r1" && c.status === "succeeded"),
      "the approval"
    )
    const waiting = {
      root: Option.getOrNull(yield* engine.getAttribute(sessionId, Persistence.AgentTraceContext)),
      record: Option.getOrThrow(yield* engine.getAttribute(sessionId, Persistence.AgentToolCalls, "w1")).traceContext
    }
    assert.isTrue(yield* client.resolveInterrupt(sessionId, { interruptId: "w1", approved: true }))
    const done = yield* awaitTurns(sessionId, 1)
    const root = Option.getOrNull(yield* engine.getAttribute(sessionId, Persistence.AgentTraceContext))
    return { done, waiting, root }
  })

describe("tracing details", () => {
  it.live(
    "an unsampled root is stored in AgentTraceContext; the activation's spans share its decision",
    () => {
      const exporter = new InMemorySpanExporter()
      const provider = new BasicTracerProvider({
        sampler: new ParentBasedSampler({ root: new AlwaysOffSampler() }),
        spanProcessors: [new SimpleSpanProcessor(exporter)]
      })
      const services = Tracer.layer().pipe(
        Layer.provide(OtelTracer.layerWithoutOtelTracer),
        Layer.provide(Layer.succeed(OtelTracer.OtelTracer, provider.getTracer("test")))
      )
      return withSession({ script: writeAndRead, tools, engine: embeddedEngine, services }, () =>
        Effect.gen(function* () {
          const { done, waiting, root } = yield* approvalTurn("s-unsampled")
          assert.strictEqual(done.state?.lastTurnError, null)
          const start = parseTraceparent(waiting.root)
          const approval = parseTraceparent(root)
          assert.isDefined(start, "the start's root: a valid traceparent")
          assert.isDefined(approval, "the approval's root: a valid traceparent")
          assert.isFalse(start!.sampled, "stored although not sampled")
          assert.isFalse(approval!.sampled, "stored although not sampled")
          assert.notStrictEqual(root, waiting.root, "the approval's activation stored its own root")
          assert.strictEqual(waiting.record, waiting.root, "RunModel copied the unsampled root onto the record")
          assert.deepStrictEqual(exporter.getFinishedSpans(), [], "no span of an unsampled activation is sampled")
        })
      )
    },
    60_000
  )

  it.live("without a Tracer the session writes no AgentTraceContext", () =>
    withSession({ script: writeAndRead, tools, engine: embeddedEngine }, () =>
      Effect.gen(function* () {
        const { waiting, root } = yield* approvalTurn("s-untraced")
        assert.deepStrictEqual(waiting, { root: null, record: null })
        assert.isNull(root)
      })
    )
  )

  it.live(
    "opt-in content and the 1.36.0 conventions: message and tool content, gen_ai.system, the 1.36.0 schema",
    () => {
      const exporter = new InMemorySpanExporter()
      const services = OpenTelemetry.layer({
        spanProcessors: [new SimpleSpanProcessor(exporter)],
        captureContent: true,
        conventions: "1.36.0"
      })
      return withSession({ script: writeAndRead, tools, engine: embeddedEngine, services }, () =>
        Effect.gen(function* () {
          yield* approvalTurn("s-content")
          const spans = exporter.getFinishedSpans().filter((s) => s.attributes["dex.flow.id"] === "s-content")
          for (const span of spans) {
            assert.strictEqual(span.instrumentationScope.schemaUrl, "https://opentelemetry.io/schemas/1.36.0")
          }
          const chats = spans.filter((s) => s.name.startsWith("chat"))
          assert.strictEqual(chats.length, 2)
          for (const chat of chats) {
            assert.strictEqual(chat.attributes["gen_ai.system"], "scripted")
            assert.isUndefined(chat.attributes["gen_ai.provider.name"], "not in 1.36.0")
            assert.isUndefined(chat.attributes["gen_ai.usage.cache_read.input_tokens"], "not in 1.36.0")
            assert.isString(chat.attributes["gen_ai.input.messages"])
            assert.isString(chat.attributes["gen_ai.output.messages"])
          }
          assert.include(String(chats[0]!.attributes["gen_ai.input.messages"]), "email ann")
          assert.include(String(chats[1]!.attributes["gen_ai.output.messages"]), "Done.")
          const read = spans.find((s) => s.name === "execute_tool get_weather")!
          assert.deepStrictEqual(JSON.parse(String(read.attributes["gen_ai.tool.call.arguments"])), { city: "Oslo" })
          assert.strictEqual(read.attributes["gen_ai.tool.call.result"], "sunny")
        })
      )
    },
    60_000
  )

  it.live(
    "a CompactContext attempt emits a chat span for its summary call, named from its model call metadata",
    () => {
      const exporter = new InMemorySpanExporter()
      const tracing = OpenTelemetry.layer({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
      const scripted = compactionModel()
      // the summary call reports its model; the others report none
      const model: ModelClient.ModelClientShape = {
        ...scripted,
        generate: (request) =>
          Effect.map(scripted.generate(request), (response) =>
            request.instructions === Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS
              ? { ...response, metadata: { requestModel: "summarizer", providerName: "scripted" } }
              : response
          )
      }
      const flow = AgentSessionFlow.make({
        flowType: FLOW_TYPE,
        retryInitialInterval: "100 millis",
        compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: WINDOW })
      })
      const worker = AgentSessionFlow.layerWorker(flow).pipe(
        Layer.provide(Stepwise.layer(compactionAgent)),
        Layer.provide(
          Layer.mergeAll(Layer.succeed(ModelClient.ModelClient, model), ToolSource.layer([lookupTool]), tracing)
        )
      )
      return Effect.gen(function* () {
        const client = yield* AgentSessionClient.AgentSessionClient
        const engine = yield* Client.Client
        yield* client.startSession("s-compact", { initialMessage: question(1) })
        // one turn at a time until a CompactContext ran (the window fills after about a dozen turns)
        let turns = 1
        const compacted = () =>
          Effect.map(engine.stepExecutions("s-compact"), (steps) => steps.some((s) => s.stepType === "CompactContext"))
        for (;;) {
          yield* client.getSnapshot("s-compact").pipe(
            Effect.repeat({
              schedule: Schedule.spaced("30 millis"),
              until: (s) => s.state !== null && s.state.turnCount >= turns && s.state.activeTurnId === null
            }),
            Effect.timeoutOrElse({ duration: "30 seconds", orElse: () => Effect.die(new Error(`turn ${turns}`)) })
          )
          if (yield* compacted()) break
          assert.isBelow(turns, 40, "a compaction within 40 turns")
          turns++
          assert.isTrue(yield* client.sendUserMessage("s-compact", question(turns)))
        }
        const steps = yield* engine.stepExecutions("s-compact")
        const compaction = steps.find((s) => s.stepType === "CompactContext")!
        const spans = exporter.getFinishedSpans().filter((s) => s.attributes["dex.flow.id"] === "s-compact")
        const summary = spans.filter((s) => s.attributes["dex.step.type"] === "CompactContext")
        assert.deepStrictEqual(
          summary.map((s) => [
            s.name,
            s.kind,
            s.attributes["dex.step.execution_id"],
            s.attributes["gen_ai.operation.name"]
          ]),
          [["chat summarizer", 2, compaction.stepExecutionId, "chat"]],
          "one CLIENT chat span per CompactContext attempt"
        )
        assert.isNumber(summary[0]!.attributes["gen_ai.usage.input_tokens"])
        assert.strictEqual(summary[0]!.attributes["gen_ai.request.model"], "summarizer")
        // under the root of the turn it compacts for
        const turnId = summary[0]!.attributes["dex.agent.turn.id"]
        const root = spans.find(
          (s) => s.name.startsWith("invoke_agent") && s.attributes["dex.agent.turn.id"] === turnId
        )
        assert.strictEqual(summary[0]!.parentSpanContext?.spanId, root?.spanContext().spanId)
      }).pipe(
        Effect.provide(
          Layer.mergeAll(worker, AgentSessionClient.layer(FLOW_TYPE)).pipe(Layer.provideMerge(embeddedEngine({})))
        ),
        Effect.scoped
      )
    },
    120_000
  )
})
