// Metrics over OTLP, on both engine layers: a worker with `Health.layerOtlpMetrics` exports the runner's
// registry (the engine's `durable_engine_*`, effect/cluster's `effect_cluster_*` and the session's
// `durable_agent_*` metrics) over OTLP/HTTP JSON to a receiver this test runs on 127.0.0.1. The test decodes
// what arrived (sums, gauges and histograms with their attributes) and checks the counts of one turn with a
// tool call.
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Health } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as Layer from "effect/Layer"
import {
  awaitTurns,
  clusterEngine,
  type EngineFactory,
  embeddedEngine,
  eventually,
  type Kit,
  startAndAwait,
  weatherTool,
  withSession
} from "./support.ts"

/** One data point as it arrived: the metric's name and kind, its attributes, and its value or count. */
interface Point {
  readonly name: string
  readonly kind: "sum" | "gauge" | "histogram"
  readonly attributes: Record<string, unknown>
  readonly value: number
  readonly sum?: number
}

const attributeValue = (v: Record<string, unknown>): unknown =>
  v.stringValue ?? (v.intValue === undefined ? (v.doubleValue ?? v.boolValue) : Number(v.intValue))

/** The data points of one OTLP/HTTP JSON `ExportMetricsServiceRequest`. */
const decode = (body: any): Array<Point> =>
  body.resourceMetrics.flatMap((r: any) =>
    r.scopeMetrics.flatMap((s: any) =>
      s.metrics.flatMap((m: any) => {
        const kind = m.sum !== undefined ? "sum" : m.gauge !== undefined ? "gauge" : "histogram"
        const points = (m.sum ?? m.gauge ?? m.histogram)?.dataPoints ?? []
        return points.map((p: any) => ({
          name: m.name,
          kind,
          attributes: Object.fromEntries((p.attributes ?? []).map((a: any) => [a.key, attributeValue(a.value)])),
          value: kind === "histogram" ? Number(p.count) : Number(p.asInt ?? p.asDouble ?? 0),
          ...(kind === "histogram" ? { sum: Number(p.sum) } : {})
        }))
      })
    )
  )

const total = (points: ReadonlyArray<Point>, name: string, attributes: Record<string, unknown> = {}) =>
  points
    .filter((p) => p.name === name && Object.entries(attributes).every(([k, v]) => p.attributes[k] === v))
    .reduce((sum, p) => sum + p.value, 0)

const script = [
  {
    toolCalls: [{ id: "r1", name: "get_weather", arguments: { city: "Paris" } }],
    usage: { inputTokens: 11, outputTokens: 2 }
  },
  { text: "Sunny.", usage: { inputTokens: 17, outputTokens: 3 } }
]

const suite = (engineName: string, engine: EngineFactory) =>
  describe(`${engineName} engine: metrics over OTLP`, () => {
    it.live(
      "the runner's metrics arrive at an OTLP/HTTP receiver on 127.0.0.1",
      () =>
        Effect.gen(function* () {
          const bodies: Array<{ readonly service: unknown; readonly points: Array<Point> }> = []
          const server = createServer((req, res) => {
            const chunks: Array<Buffer> = []
            req.on("data", (c: Buffer) => chunks.push(c))
            req.on("end", () => {
              if (req.url === "/v1/metrics" && req.headers["content-type"]?.includes("json")) {
                const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
                const service = body.resourceMetrics[0]?.resource.attributes.find((a: any) => a.key === "service.name")
                bodies.push({ service: service?.value.stringValue, points: decode(body) })
              }
              res.writeHead(200, { "content-type": "application/json" }).end("{}")
            })
          })
          yield* Effect.acquireRelease(
            Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))),
            () => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
          )
          const { port } = server.address() as AddressInfo
          const otlp = Health.layerOtlpMetrics({
            url: `http://127.0.0.1:${port}/v1/metrics`,
            serviceName: "metrics-test",
            exportInterval: "100 millis"
          }).pipe(Layer.provide(FetchHttpClient.layer)) as Layer.Layer<any>
          // (the cast: `withSession` types its services without requirements; the engine under the worker
          // provides the RunnerState this one reads)
          yield* withSession({ script, tools: (kit: Kit) => [weatherTool(kit)], engine, services: otlp }, () =>
            Effect.gen(function* () {
              yield* startAndAwait("s-metrics", "weather?", (s) => (s.state?.turnCount ?? 0) >= 1, "the turn")
              yield* awaitTurns("s-metrics", 1)
              // cumulative sums: a later export holds the whole turn
              yield* eventually(
                Effect.sync(() => bodies[bodies.length - 1]?.points ?? []),
                (points) =>
                  total(points, "durable_agent_model_calls_total", { outcome: "succeeded" }) === 2 &&
                  total(points, "durable_agent_tool_calls_total") === 1,
                "an export with the turn's model and tool calls"
              )
            })
          )
          const last = bodies[bodies.length - 1]!
          assert.strictEqual(last.service, "metrics-test")
          const points = last.points
          // the session's metrics
          assert.strictEqual(total(points, "durable_agent_turns_started_total"), 1)
          assert.strictEqual(total(points, "durable_agent_model_calls_total", { outcome: "succeeded" }), 2)
          assert.strictEqual(total(points, "durable_agent_model_call_seconds", { outcome: "succeeded" }), 2)
          assert.strictEqual(
            total(points, "durable_agent_tool_calls_total", { effect: "read", status: "succeeded" }),
            1
          )
          assert.strictEqual(total(points, "durable_agent_tokens_total", { type: "input" }), 28)
          assert.strictEqual(total(points, "durable_agent_tokens_total", { type: "output" }), 5)
          // the engine's: Step attempts by type and outcome, their latency, the transitions, the task slots
          assert.strictEqual(
            total(points, "durable_engine_step_attempts_total", { step_type: "RunModel", outcome: "succeeded" }),
            2
          )
          assert.strictEqual(
            total(points, "durable_engine_step_attempts_total", { step_type: "CallTool", outcome: "succeeded" }),
            1
          )
          assert.isAtLeast(total(points, "durable_engine_steps_started_total"), 5)
          const attemptSeconds = points.filter((p) => p.name === "durable_engine_step_attempt_seconds")
          assert.isAbove(attemptSeconds.length, 0)
          assert.isTrue(attemptSeconds.every((p) => p.kind === "histogram" && (p.sum ?? -1) >= 0))
          assert.isAbove(total(points, "durable_engine_transition_seconds"), 0)
          assert.isAbove(total(points, "durable_engine_stream_bytes_total"), 0)
          const slots = points.find((p) => p.name === "durable_engine_task_slots")
          assert.strictEqual(slots?.kind, "gauge")
          assert.isAbove(slots!.value, 0, "the gauges are sampled for the export")
          // effect/cluster's own
          assert.isTrue(
            points.some((p) => p.name.startsWith("effect_cluster_")),
            "effect/cluster's metrics are in the export"
          )
          // the kinds are OTLP's: monotonic counters as sums, histograms with counts
          assert.strictEqual(points.find((p) => p.name === "durable_agent_turns_started_total")?.kind, "sum")
        }).pipe(Effect.scoped),
      120_000
    )
  })

suite("embedded", embeddedEngine)
suite("cluster", clusterEngine)
