/**
 * Liveness, readiness and metrics of a runner over HTTP (`effect/http`), in the Prometheus text format.
 *
 * - `GET /healthz`: 200 while the process answers (liveness).
 * - `GET /readyz`: 200 once the worker registered its Flows and while it is not draining; 503 otherwise.
 * - `GET /metrics`: the runner's metrics (names and meanings in the engine README, "Health and metrics").
 *
 * The same metrics go over OTLP/HTTP with {@link layerOtlpMetrics} (effect's `OtlpMetrics` exporter).
 *
 * @since 0.1.0
 */
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { HttpClient, HttpServerError } from "effect/http"
import { HttpRouter, HttpServerResponse } from "effect/http"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as OtlpExporter from "effect/observability/OtlpExporter"
import * as OtlpMetrics from "effect/observability/OtlpMetrics"
import * as OtlpSerialization from "effect/observability/OtlpSerialization"
import * as Schedule from "effect/Schedule"
import type { EngineConfig } from "./EngineConfig.ts"
import { RunnerState, type RunnerStateShape } from "./internal/runner.ts"
import * as Metrics from "./Metrics.ts"
import { drain } from "./Worker.ts"

/** Where the health server listens. */
export interface HealthOptions {
  /** The TCP port (`0` picks a free one). */
  readonly port: number
  /** The interface; default `0.0.0.0`. */
  readonly host?: string | undefined
}

/** The Prometheus text content type. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

/**
 * The runner's metrics in the Prometheus text format, by effect's `PrometheusMetrics`: the engine's (see
 * `Metrics`), effect/cluster's and the Flows' own, from the runner's registry. The gauges are sampled here.
 */
export const renderMetrics = (runner: RunnerStateShape): string => {
  sampleGauges(runner)
  return Metrics.prometheus(runner.metrics)
}

/** Sets the gauges (and the reserve declines counter) from the runner's state. */
const sampleGauges = (runner: RunnerStateShape): void => {
  const r = runner.metrics
  Metrics.record(r, Metrics.taskSlots, runner.slots.total)
  Metrics.record(r, Metrics.taskSlotsReserved, runner.slots.reserve)
  Metrics.record(r, Metrics.taskSlotsInUse, runner.slots.inUse)
  Metrics.record(r, Metrics.taskSlotWaiters, runner.slots.waiting)
  Metrics.record(r, Metrics.flowsCached, runner.counters.flowsCached)
  Metrics.record(r, Metrics.draining, runner.draining() ? 1 : 0)
  const declines = runner.slots.reserveDeclines - Metrics.count(r, Metrics.rpcReserveDeclines)
  if (declines > 0) Metrics.record(r, Metrics.rpcReserveDeclines, declines)
}

/**
 * Options of {@link layerOtlpMetrics}.
 *
 * @category models
 * @since 0.1.0
 */
export interface OtlpMetricsOptions {
  /** The OTLP/HTTP metrics endpoint, e.g. `http://127.0.0.1:4318/v1/metrics`. */
  readonly url: string
  /** `service.name` of the resource; default `durable-engine`. */
  readonly serviceName?: string | undefined
  /** How often the metrics are sampled and sent; default 10 seconds. */
  readonly exportInterval?: Duration.Input | undefined
  /** OTLP/HTTP JSON (the default) or protobuf. */
  readonly serialization?: "json" | "protobuf" | undefined
  /** Cumulative (the default) or delta sums and histograms. */
  readonly temporality?: "cumulative" | "delta" | undefined
}

/**
 * Exports the runner's metrics (the same as `/metrics`: the engine's, effect/cluster's and the Flows' own) over
 * OTLP/HTTP with effect's `OtlpMetrics`, every `exportInterval` and once more when the layer's scope closes.
 * The gauges are sampled at each interval. Build it with the worker, under the engine layer (it reads the
 * runner's registry); it needs an `HttpClient` (e.g. `FetchHttpClient.layer`). Export errors are logged by the
 * exporter and never reach a Step.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerOtlpMetrics = (
  options: OtlpMetricsOptions
): Layer.Layer<never, never, RunnerState | HttpClient.HttpClient> =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const runner = yield* RunnerState
      const interval = options.exportInterval ?? "10 seconds"
      sampleGauges(runner)
      yield* Effect.forkScoped(
        Effect.repeat(
          Effect.sync(() => sampleGauges(runner)),
          Schedule.spaced(interval)
        )
      )
      yield* OtlpMetrics.make({
        url: options.url,
        resource: { serviceName: options.serviceName ?? "durable-engine" },
        exportInterval: interval,
        temporality: options.temporality
      }).pipe(Effect.provideService(Metric.MetricRegistry, Context.get(runner.metrics.context, Metric.MetricRegistry)))
    })
  ).pipe(
    Layer.provide(options.serialization === "protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson),
    Layer.provide(OtlpExporter.layerFlusher)
  )

/** The routes: `/healthz`, `/readyz`, `/metrics`. */
export const routes: Layer.Layer<never, never, HttpRouter.HttpRouter | RunnerState | EngineConfig> = Layer.unwrap(
  Effect.gen(function* () {
    const runner = yield* RunnerState
    return Layer.mergeAll(
      HttpRouter.add("GET", "/healthz", HttpServerResponse.text("ok\n")),
      HttpRouter.add(
        "GET",
        "/readyz",
        Effect.sync(() =>
          runner.ready()
            ? HttpServerResponse.text("ready\n")
            : HttpServerResponse.text(runner.draining() ? "draining\n" : "starting\n", { status: 503 })
        )
      ),
      HttpRouter.add(
        "GET",
        "/metrics",
        Effect.sync(() => HttpServerResponse.text(renderMetrics(runner), { contentType: CONTENT_TYPE }))
      )
    )
  })
)

/**
 * Serves the routes on `options.port`. Needs the engine's services (give it the engine layer); add it to the
 * runner's layer next to the worker. When its scope closes it drains the runner (see `Worker.drain`) before
 * the server stops, so `/readyz` answers 503 for the whole drain whichever of the two layers closes first.
 */
export const layer = (
  options: HealthOptions
): Layer.Layer<never, HttpServerError.ServeError, RunnerState | EngineConfig> =>
  Layer.effectDiscard(Effect.addFinalizer(() => drain)).pipe(
    Layer.provide(
      HttpRouter.serve(routes, { disableListenLog: true, disableLogger: true }).pipe(
        Layer.provide(NodeHttpServer.layer(createServer, { port: options.port, host: options.host ?? "0.0.0.0" }))
      )
    )
  )
