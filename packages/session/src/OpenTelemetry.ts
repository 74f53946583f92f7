/**
 * The session's `Tracer` on the OpenTelemetry SDK, through `@effect/opentelemetry`. The only module of the
 * session that loads OpenTelemetry: import it only where tracing is on. Its packages are optional peers of
 * `@durable-agent/session`: `@effect/opentelemetry` 4.1.0, `@opentelemetry/api`,
 * `@opentelemetry/sdk-trace-base` and `@opentelemetry/resources`.
 *
 * @example
 * ```ts
 * import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
 * const exporter = new InMemorySpanExporter()
 * const tracing = OpenTelemetry.layer({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
 * const worker = AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(tracing))
 * ```
 *
 * @since 0.1.0
 */
import * as OtelTracer from "@effect/opentelemetry/OtelTracer"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { BasicTracerProvider, type SpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { make, SCHEMA_URLS, Tracer, type TracerOptions } from "./Tracer.ts"

/** The instrumentation scope name of the session's spans. */
const SCOPE = "@durable-agent/session"

/**
 * Options of {@link layer}.
 *
 * @category models
 * @since 0.1.0
 */
export interface OpenTelemetryOptions extends Omit<TracerOptions, "tracer"> {
  /** Where the spans go, e.g. a `BatchSpanProcessor` over an OTLP exporter. */
  readonly spanProcessors: ReadonlyArray<SpanProcessor>
  /** `service.name` of the resource; default `durable-agent`. */
  readonly serviceName?: string | undefined
}

/**
 * Tracing on its own OpenTelemetry tracer provider over `spanProcessors`; the provider is flushed and shut
 * down when the layer's scope closes. Errors of a processor or exporter are OpenTelemetry's to log and never
 * reach a Step.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: OpenTelemetryOptions): Layer.Layer<Tracer> =>
  Layer.effect(
    Tracer,
    Effect.gen(function* () {
      const provider = yield* Effect.acquireRelease(
        Effect.sync(
          () =>
            new BasicTracerProvider({
              resource: resourceFromAttributes({ "service.name": options.serviceName ?? "durable-agent" }),
              spanProcessors: [...options.spanProcessors]
            })
        ),
        (p) => Effect.ignore(Effect.tryPromise(() => p.shutdown()))
      )
      return yield* fromOtelTracer(
        provider.getTracer(SCOPE, undefined, { schemaUrl: SCHEMA_URLS[options.conventions ?? "genai-dev"] }),
        options
      )
    })
  )

/**
 * Tracing on the globally registered OpenTelemetry tracer provider (an application that runs the
 * OpenTelemetry Node SDK itself).
 *
 * @category layers
 * @since 0.1.0
 */
export const layerGlobal = (options?: Omit<TracerOptions, "tracer">): Layer.Layer<Tracer> =>
  Layer.effect(
    Tracer,
    Effect.flatMap(Effect.service(OtelTracer.OtelTracerProvider), (provider) =>
      fromOtelTracer(
        provider.getTracer(SCOPE, undefined, { schemaUrl: SCHEMA_URLS[options?.conventions ?? "genai-dev"] }),
        options
      )
    )
  ).pipe(Layer.provide(OtelTracer.layerGlobalProvider))

const fromOtelTracer = (otel: OtelTracer.OtelTracer["Service"], options: Omit<TracerOptions, "tracer"> | undefined) =>
  Effect.map(Effect.provideService(OtelTracer.make, OtelTracer.OtelTracer, otel), (tracer) =>
    make({ ...options, tracer })
  )
