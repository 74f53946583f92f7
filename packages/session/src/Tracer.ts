/**
 * `Tracer`: OpenTelemetry GenAI spans of a session (the spec's "Tracing" section), through Effect's `Tracer`.
 *
 * A worker adds one line to trace its sessions: `Layer.provide(Tracer.layer())` next to the runner and its
 * services. `Tracer.layer` sends the session's spans to the Effect tracer the worker is built with, so any
 * tracer works: `@durable-agent/session/OpenTelemetry` builds one on an OpenTelemetry SDK span processor
 * (the only module that loads OpenTelemetry), and effect's own `OtlpTracer` exports over OTLP/HTTP without
 * it. Without the service the session emits no span and writes no `AgentTraceContext`.
 *
 * The spans: `invoke_agent {agent}` per activation (the root, linked to the previous root, its traceparent
 * stored in `AgentTraceContext`), `chat` per RunModel attempt (CLIENT with usage when the runner reports one
 * model call, INTERNAL otherwise) and `execute_tool {tool}` per CallTool, CallSingleAttemptTool and
 * PollToolTask attempt under the tool call record's root. Each is created and ended inside its Step attempt,
 * with the attempt's start as its start time. Tracing never fails or retries a Step: a tracer or exporter
 * that throws is logged and the span skipped.
 *
 * @example
 * ```ts
 * const worker = AgentSessionFlow.layerWorker(flow).pipe(
 *   Layer.provide(Stepwise.layer({ name: "triage" })),
 *   Layer.provide(Tracer.layer()), // the one line
 *   Layer.provide(OpenTelemetry.layerTracer({ spanProcessors: [processor] }))
 * )
 * ```
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as HttpClient from "effect/http/HttpClient"
import * as Layer from "effect/Layer"
import * as OtlpExporter from "effect/observability/OtlpExporter"
import * as OtlpSerialization from "effect/observability/OtlpSerialization"
import * as OtlpTracer from "effect/observability/OtlpTracer"
import type * as EffectTracer from "effect/Tracer"

/**
 * The semantic conventions a session's spans follow: `genai-dev` is open-telemetry/semantic-conventions-genai
 * at commit dc3571562603552dc555c667dfa327a638d94ab2 (schema 1.42.0-dev), the default; `1.36.0` is
 * OpenTelemetry semantic conventions 1.36.0, the compatibility value (`gen_ai.system` instead of
 * `gen_ai.provider.name`, no cache token count).
 *
 * @category models
 * @since 0.1.0
 */
export type Conventions = "genai-dev" | "1.36.0"

/**
 * The schema URL of each {@link Conventions} value.
 *
 * @category constants
 * @since 0.1.0
 */
export const SCHEMA_URLS: Readonly<Record<Conventions, string>> = {
  "genai-dev": "https://opentelemetry.io/schemas/1.42.0-dev",
  "1.36.0": "https://opentelemetry.io/schemas/1.36.0"
}

/**
 * The commit of open-telemetry/semantic-conventions-genai that the `genai-dev` conventions pin.
 *
 * @category constants
 * @since 0.1.0
 */
export const GENAI_CONVENTIONS_COMMIT = "dc3571562603552dc555c667dfa327a638d94ab2"

/**
 * Options of {@link layer}.
 *
 * @category models
 * @since 0.1.0
 */
export interface TracerOptions {
  /**
   * Message and tool content on spans (`gen_ai.input.messages`, `gen_ai.output.messages`,
   * `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`). Off by default: spans carry content by
   * reference, as message sequence keys and tool call IDs.
   */
  readonly captureContent?: boolean | undefined
  /** The conventions version; default `genai-dev`. */
  readonly conventions?: Conventions | undefined
  /** The Effect tracer the spans go to; default the tracer the layer is built with. */
  readonly tracer?: EffectTracer.Tracer | undefined
}

/**
 * The service shape of {@link Tracer}.
 *
 * @category models
 * @since 0.1.0
 */
export interface TracerShape {
  /** Where the session's spans go. */
  readonly tracer: EffectTracer.Tracer
  readonly captureContent: boolean
  readonly conventions: Conventions
}

/**
 * The session's tracing: present, the session emits the spec's spans to `tracer`; absent, it emits none
 * and writes no `AgentTraceContext`.
 *
 * @category services
 * @since 0.1.0
 */
export class Tracer extends Context.Service<Tracer, TracerShape>()("@durable-agent/session/Tracer") {}

/**
 * Tracing with the given options, to `options.tracer` or else the Effect tracer the layer is built with
 * (provide an OpenTelemetry or OTLP tracer layer below it).
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options?: TracerOptions): Layer.Layer<Tracer> =>
  Layer.effect(
    Tracer,
    Effect.map(Effect.tracer, (current) => make({ ...options, tracer: options?.tracer ?? current }))
  )

/**
 * Options of {@link layerOtlp}.
 *
 * @category models
 * @since 0.1.0
 */
export interface OtlpOptions extends Omit<TracerOptions, "tracer"> {
  /** The OTLP/HTTP traces endpoint, e.g. `http://127.0.0.1:4318/v1/traces`. */
  readonly url: string
  /** `service.name` of the resource; default `durable-agent`. */
  readonly serviceName?: string | undefined
  /** How often spans are sent; default effect's (5 seconds). */
  readonly exportInterval?: Duration.Input | undefined
  /** OTLP/HTTP JSON (the default) or protobuf. */
  readonly serialization?: "json" | "protobuf" | undefined
}

/**
 * Tracing exported over OTLP/HTTP by effect's own `OtlpTracer`, without OpenTelemetry packages. Export errors
 * are logged by the exporter and never reach a Step. Needs an `HttpClient` (e.g. `FetchHttpClient.layer`);
 * spans still buffered are sent when the layer's scope closes.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerOtlp = (options: OtlpOptions): Layer.Layer<Tracer, never, HttpClient.HttpClient> =>
  Layer.effect(
    Tracer,
    Effect.map(
      OtlpTracer.make({
        url: options.url,
        resource: { serviceName: options.serviceName ?? "durable-agent" },
        exportInterval: options.exportInterval
      }),
      (tracer) => make({ ...options, tracer })
    )
  ).pipe(
    Layer.provide(options.serialization === "protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson),
    Layer.provide(OtlpExporter.layerFlusher)
  )

/**
 * A {@link TracerShape} from options; `tracer` is required here.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options: TracerOptions & { readonly tracer: EffectTracer.Tracer }): TracerShape => ({
  tracer: options.tracer,
  captureContent: options.captureContent === true,
  conventions: options.conventions ?? "genai-dev"
})

/**
 * A span a framework recorded during a model call (AI SDK telemetry, OpenAI Agents tracing), with its times
 * in nanoseconds since the epoch. The session emits it as a child of the attempt's `chat` span.
 *
 * @category models
 * @since 0.1.0
 */
export interface RecordedSpan {
  readonly name: string
  readonly startTime: bigint
  readonly endTime: bigint
  readonly kind?: EffectTracer.SpanKind | undefined
  readonly attributes?: Readonly<Record<string, unknown>> | undefined
  /** The error message when the framework's operation failed. */
  readonly error?: string | undefined
  /** Nested spans. */
  readonly children?: ReadonlyArray<RecordedSpan> | undefined
}

/**
 * The service shape of {@link FrameworkSpans}.
 *
 * @category models
 * @since 0.1.0
 */
export interface FrameworkSpansShape {
  /** Whether the session traces this attempt; runners skip their framework's telemetry when it is false. */
  readonly enabled: boolean
  /** Records a framework span to emit under the attempt's `chat` span. */
  readonly record: (span: RecordedSpan) => void
  /**
   * Adds attributes of the runner's own to the attempt's `chat` span (such as a cost the framework reports);
   * the session's attributes win over one of the same name.
   */
  readonly annotate: (attributes: Readonly<Record<string, unknown>>) => void
}

/**
 * Where a runner puts its framework's own spans during `runModelStep`: the session provides it to every
 * RunModel attempt and emits what was recorded as children of that attempt's `chat` span (the `chat` span is
 * created when the attempt ends, as the spec says, so its children are recorded first).
 *
 * @category services
 * @since 0.1.0
 */
export const FrameworkSpans: Context.Reference<FrameworkSpansShape> = Context.Reference<FrameworkSpansShape>(
  "@durable-agent/session/FrameworkSpans",
  { defaultValue: () => ({ enabled: false, record: () => undefined, annotate: () => undefined }) }
)
