// Tracing (spec "Tracing"), on both engine layers: the session's spans through the OpenTelemetry SDK with an
// in-memory exporter (the span tree of a two-model-call turn with an approval, a RunModel retried twice, a
// throwing exporter and a throwing tracer), and through effect's OTLP/HTTP exporter to a receiver this test
// runs on 127.0.0.1, whose requests it decodes.
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter
} from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as EffectTracer from "effect/Tracer"
import { Persistence } from "../src/index.ts"
import { parseTraceparent } from "../src/internal/tracing.ts"
import * as OpenTelemetry from "../src/OpenTelemetry.ts"
import * as Tracer from "../src/Tracer.ts"
import {
  APPROVED_WRITE_TURN_STEPS,
  awaitTurns,
  clusterEngine,
  type EngineFactory,
  embeddedEngine,
  eventually,
  type Kit,
  sendEmailTool,
  startAndAwait,
  stepShape,
  weatherTool,
  withSession
} from "./support.ts"

const tools = (kit: Kit) => [weatherTool(kit), sendEmailTool(kit)]

/** The model asks for a write that needs approval and a read, then answers. */
const writeAndRead = [
  {
    toolCalls: [
      { id: "w1", name: "send_email", arguments: { to: "ann" } },
      { id: "r1", name: "get_weather", arguments: {} }
    ]
  },
  { text: "Done." }
]

const CLIENT = 2 // OpenTelemetry SpanKind.CLIENT
const INTERNAL = 0
const ERROR = 2 // SpanStatusCode.ERROR

const inMemory = () => {
  const exporter = new InMemorySpanExporter()
  return { exporter, layer: OpenTelemetry.layer({ spanProcessors: [new SimpleSpanProcessor(exporter)] }) }
}

const spansOf = (exporter: InMemorySpanExporter, sessionId: string) =>
  exporter.getFinishedSpans().filter((s) => s.attributes["dex.flow.id"] === sessionId)

const named = (spans: ReadonlyArray<ReadableSpan>, prefix: string) => spans.filter((s) => s.name.startsWith(prefix))
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId
const idOf = (span: ReadableSpan) => span.spanContext().spanId

/** The attributes every span carries (spec "Tracing"). */
const assertCommon = (span: ReadableSpan, sessionId: string, turnId: string) => {
  assert.strictEqual(span.attributes["gen_ai.conversation.id"], sessionId, span.name)
  assert.strictEqual(span.attributes["session.id"], sessionId, span.name)
  assert.strictEqual(span.attributes["dex.flow.id"], sessionId, span.name)
  assert.isString(span.attributes["dex.run.id"], span.name)
  assert.isString(span.attributes["dex.step.type"], span.name)
  assert.isString(span.attributes["dex.step.execution_id"], span.name)
  assert.isNumber(span.attributes["dex.step.attempt"], span.name)
  assert.strictEqual(span.attributes["dex.agent.turn.id"], turnId, span.name)
  assert.isUndefined(span.attributes["gen_ai.input.messages"], "content is by reference by default")
}

const traceparentOf = (span: ReadableSpan) => {
  const c = span.spanContext()
  return `00-${c.traceId}-${c.spanId}-0${c.traceFlags & 1}`
}

const suite = (engineName: string, engine: EngineFactory) =>
  describe(`${engineName} engine: tracing`, () => {
    it.live(
      "the span tree of a two-model-call turn with an approval",
      () => {
        const { exporter, layer } = inMemory()
        return withSession({ script: writeAndRead, tools, engine, services: layer }, () =>
          Effect.gen(function* () {
            const engineClient = yield* Client.Client
            const { client } = yield* startAndAwait(
              "s-tree",
              "email ann",
              (s) => s.toolCalls.some((c) => c.toolCallId === "r1" && c.status === "succeeded"),
              "the read call"
            )
            // RunModel copied the activation's root onto each record
            const stored = yield* engineClient.getAttribute("s-tree", Persistence.AgentTraceContext)
            const w1 = yield* engineClient.getAttribute("s-tree", Persistence.AgentToolCalls, "w1")
            assert.isTrue(Option.isSome(stored))
            assert.strictEqual(Option.getOrThrow(w1).traceContext, Option.getOrThrow(stored))
            assert.isTrue(yield* client.resolveInterrupt("s-tree", { interruptId: "w1", approved: true }))
            yield* awaitTurns("s-tree", 1)
            assert.deepStrictEqual(yield* stepShape("s-tree"), APPROVED_WRITE_TURN_STEPS)

            const spans = spansOf(exporter, "s-tree")
            const roots = named(spans, "invoke_agent")
            assert.deepStrictEqual(
              roots.map((r) => [r.name, r.attributes["dex.step.type"]]),
              [
                ["invoke_agent test-agent", "StartAgentSession"],
                ["invoke_agent test-agent", "AwaitToolApproval"]
              ]
            )
            const [start, approval] = roots as [ReadableSpan, ReadableSpan]
            assert.isUndefined(start.parentSpanContext, "a root")
            assert.isUndefined(approval.parentSpanContext, "a root")
            assert.deepStrictEqual(start.links, [])
            assert.deepStrictEqual(
              approval.links.map((l) => l.context.spanId),
              [idOf(start)],
              "linked to the previous root"
            )
            const chats = named(spans, "chat")
            assert.deepStrictEqual(
              chats.map((c) => [c.attributes["dex.step.execution_id"], c.kind, parentOf(c)]),
              [
                ["RunModel-1", CLIENT, idOf(start)],
                ["RunModel-2", CLIENT, idOf(approval)]
              ]
            )
            assert.strictEqual(chats[0]!.attributes["gen_ai.operation.name"], "chat")
            assert.isNumber(chats[0]!.attributes["gen_ai.usage.input_tokens"])
            assert.deepStrictEqual(chats[0]!.attributes["dex.agent.tool_call.ids"], ["w1", "r1"])
            const toolSpans = named(spans, "execute_tool")
            assert.deepStrictEqual(
              toolSpans.map((t) => [
                t.name,
                t.attributes["dex.step.type"],
                t.attributes["dex.tool.status"],
                parentOf(t)
              ]),
              [
                ["execute_tool get_weather", "CallTool", "succeeded", idOf(start)],
                ["execute_tool send_email", "CallSingleAttemptTool", "succeeded", idOf(approval)]
              ],
              "each tool span under its record's root: the approval replaced it"
            )
            assert.strictEqual(toolSpans[0]!.attributes["gen_ai.tool.call.id"], "r1")
            assert.strictEqual(spans.length, 6, "no other span")
            for (const span of spans) {
              assertCommon(span, "s-tree", "turn-1")
              assert.isTrue(span.ended)
              assert.strictEqual(span.instrumentationScope.schemaUrl, Tracer.SCHEMA_URLS["genai-dev"])
            }
            // AgentTraceContext holds the current activation's root
            const current = yield* engineClient.getAttribute("s-tree", Persistence.AgentTraceContext)
            assert.strictEqual(Option.getOrThrow(current), traceparentOf(approval))
          })
        )
      },
      120_000
    )

    it.live(
      "a RunModel that fails twice then succeeds: three chat spans under one invoke_agent root",
      () => {
        const { exporter, layer } = inMemory()
        const script = [{ fail: "provider down" }, { fail: "provider down again" }, { text: "Hello." }]
        return withSession({ script, engine, services: layer }, () =>
          Effect.gen(function* () {
            yield* startAndAwait("s-retry", "hi", (s) => (s.state?.turnCount ?? 0) >= 1, "the turn")
            const spans = spansOf(exporter, "s-retry")
            const roots = named(spans, "invoke_agent")
            assert.strictEqual(roots.length, 1, "no duplicated root after the retries")
            const chats = named(spans, "chat")
            assert.deepStrictEqual(
              chats.map((c) => [
                c.attributes["dex.step.execution_id"],
                c.attributes["dex.step.attempt"],
                c.kind,
                c.status.code === ERROR,
                c.attributes["error.type"] ?? null,
                parentOf(c)
              ]),
              [
                ["RunModel-1", 1, INTERNAL, true, "ModelCallError", idOf(roots[0]!)],
                ["RunModel-1", 2, INTERNAL, true, "ModelCallError", idOf(roots[0]!)],
                ["RunModel-1", 3, CLIENT, false, null, idOf(roots[0]!)]
              ]
            )
            assert.isUndefined(chats[0]!.attributes["gen_ai.usage.input_tokens"], "no usage without a model call")
            assert.strictEqual(spans.length, 4)
          })
        )
      },
      120_000
    )

    it.live(
      "an exporter that throws, or a tracer that throws, changes no Step's outcome",
      () => {
        const throwing: SpanExporter = {
          export: () => {
            throw new Error("exporter down")
          },
          shutdown: () => Promise.resolve()
        }
        const exporterDown = OpenTelemetry.layer({ spanProcessors: [new SimpleSpanProcessor(throwing)] })
        const tracerDown = Tracer.layer({
          tracer: EffectTracer.make({
            span: () => {
              throw new Error("tracer down")
            }
          })
        })
        const run = (services: Layer.Layer<Tracer.Tracer>, sessionId: string) =>
          withSession({ script: writeAndRead, tools, engine, services }, () =>
            Effect.gen(function* () {
              const { client } = yield* startAndAwait(
                sessionId,
                "email ann",
                (s) => s.pendingInterrupts.length > 0 && s.toolCalls.some((c) => c.status === "succeeded"),
                "the approval"
              )
              assert.isTrue(yield* client.resolveInterrupt(sessionId, { interruptId: "w1", approved: true }))
              const done = yield* awaitTurns(sessionId, 1)
              assert.strictEqual(done.state?.lastTurnError, null)
              assert.strictEqual(done.messages[done.messages.length - 1]?.text, "Done.")
              assert.deepStrictEqual(yield* stepShape(sessionId), APPROVED_WRITE_TURN_STEPS)
              const engineClient = yield* Client.Client
              return yield* engineClient.getAttribute(sessionId, Persistence.AgentTraceContext)
            })
          )
        return Effect.gen(function* () {
          const exported = yield* run(exporterDown, "s-exporter-down")
          assert.isTrue(Option.isSome(exported), "the spans were made; only their export failed")
          const traced = yield* run(tracerDown, "s-tracer-down")
          assert.isTrue(Option.isNone(traced), "a root that could not be made leaves no AgentTraceContext")
        })
      },
      180_000
    )

    it.live(
      "exports over OTLP/HTTP to a receiver on 127.0.0.1",
      () =>
        Effect.gen(function* () {
          const bodies: Array<any> = []
          const server = createServer((req, res) => {
            const chunks: Array<Buffer> = []
            req.on("data", (c: Buffer) => chunks.push(c))
            req.on("end", () => {
              if (req.url === "/v1/traces") bodies.push(JSON.parse(Buffer.concat(chunks).toString("utf8")))
              res.writeHead(200, { "content-type": "application/json" }).end("{}")
            })
          })
          yield* Effect.acquireRelease(
            Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))),
            () => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
          )
          const { port } = server.address() as AddressInfo
          const otlp = Tracer.layerOtlp({
            url: `http://127.0.0.1:${port}/v1/traces`,
            serviceName: "otlp-test",
            exportInterval: "100 millis"
          }).pipe(Layer.provide(FetchHttpClient.layer))
          yield* withSession({ script: [{ text: "Hello." }], engine, services: otlp }, () =>
            startAndAwait("s-otlp", "hi", (s) => (s.state?.turnCount ?? 0) >= 1, "the turn")
          )
          // decode what arrived: resource, scope, spans with their attributes
          const spans = yield* eventually(
            Effect.sync(() =>
              bodies.flatMap((b) =>
                b.resourceSpans.flatMap((r: any) =>
                  r.scopeSpans.flatMap((s: any) =>
                    s.spans.map((span: any) => ({
                      service: r.resource.attributes.find((a: any) => a.key === "service.name")?.value.stringValue,
                      ...span,
                      attrs: Object.fromEntries(
                        span.attributes.map((a: any) => [a.key, a.value.stringValue ?? a.value.intValue])
                      )
                    }))
                  )
                )
              )
            ),
            (spans) => spans.filter((s) => s.attrs["dex.flow.id"] === "s-otlp").length >= 2,
            "the exported spans"
          )
          const mine = spans.filter((s) => s.attrs["dex.flow.id"] === "s-otlp")
          const root = mine.find((s) => s.name === "invoke_agent test-agent")
          const chat = mine.find((s) => s.name.startsWith("chat"))
          assert.isDefined(root)
          assert.isDefined(chat)
          assert.strictEqual(root.service, "otlp-test")
          assert.strictEqual(chat.parentSpanId, root.spanId)
          assert.strictEqual(chat.traceId, root.traceId)
          assert.strictEqual(chat.kind, 3, "SPAN_KIND_CLIENT")
          assert.strictEqual(chat.name, "chat scripted", "named from the request model")
          assert.strictEqual(chat.attrs["gen_ai.conversation.id"], "s-otlp")
          assert.strictEqual(chat.attrs["dex.step.type"], "RunModel")
          assert.isDefined(parseTraceparent(`00-${root.traceId}-${root.spanId}-01`))
        }).pipe(Effect.scoped),
      120_000
    )
  })

suite("embedded", embeddedEngine)
suite("cluster", clusterEngine)
