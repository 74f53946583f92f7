// Mastra's own spans as framework spans of the session's `chat` span. The runner makes a new Mastra `Agent` per
// RunModel, registered with no `Mastra` instance, so Mastra's configured observability never sees it; the
// agent's `stream` takes a `tracingContext` instead, whose `currentSpan` Mastra asks for child spans (the agent
// run, its execution workflow's steps, the model generation). The parent given here is a recording span: every
// child it hands out records its name, type, times, attributes and error, and `finish` gives the tree to the
// session's `FrameworkSpans`, which emits it under the RunModel attempt's `chat` span. The model generation's
// tracker is `@mastra/observability`'s `ModelSpanTracker` (loaded at the first traced run, never without
// tracing), which makes the generation's `step: <n>` (model_step), `inference` and `chunk: <type>` (model_chunk)
// spans under it, as a Mastra instance's observability would.
import type { SessionTracer } from "@durable-agent/session"
import * as Effect from "effect/Effect"

/** The later of two times (`Math.max` takes no bigint). */
const latest = (a: bigint, b: bigint): bigint => {
  if (b > a) return b
  return a
}

const nowNanos = (): bigint => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))

const hex = (bytes: number): string => {
  const buffer = new Uint8Array(bytes)
  crypto.getRandomValues(buffer)
  return Array.from(buffer, (b) => b.toString(16).padStart(2, "0")).join("")
}

/** OpenTelemetry attribute values: the primitives (and arrays of them) of Mastra's attributes, flattened. */
const flatten = (prefix: string, value: unknown, into: Record<string, unknown>, depth: number): void => {
  if (value === undefined || value === null) return
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
    into[prefix] = value
  } else if (Array.isArray(value)) {
    if (value.every((v) => typeof v === "string")) into[prefix] = value
    else if (value.every((v) => typeof v === "number")) into[prefix] = value
  } else if (typeof value === "object" && depth < 2) {
    for (const [key, v] of Object.entries(value)) flatten(`${prefix}.${key}`, v, into, depth + 1)
  }
}

interface SpanOptions {
  readonly name?: string
  readonly type?: string
  readonly attributes?: Record<string, unknown>
  readonly entityName?: string
  readonly isEvent?: boolean
}

interface EndOptions {
  readonly attributes?: Record<string, unknown>
}

interface ErrorOptions {
  readonly error?: unknown
  readonly endSpan?: boolean
  readonly attributes?: Record<string, unknown>
}

/**
 * A span as Mastra's tracing uses it (the `Span` of `@mastra/core/observability`), recording. Mastra reads
 * only what is here; its optional parts (`observabilityInstance`, `getExportedSpanId`) are left out.
 */
class RecordingSpan {
  readonly id = hex(8)
  readonly name: string
  readonly type: string
  readonly entityName: string | undefined
  readonly isEvent: boolean
  readonly isInternal = false
  readonly startTime = new Date()
  readonly start = nowNanos()
  readonly children: Array<RecordingSpan> = []
  readonly traceId: string
  readonly parent: RecordingSpan | undefined
  attributes: Record<string, unknown>
  endTime: Date | undefined
  end_: bigint | undefined
  errorMessage: string | undefined

  constructor(traceId: string, parent: RecordingSpan | undefined, options: SpanOptions) {
    this.traceId = traceId
    this.parent = parent
    this.name = options.name ?? options.type ?? "mastra"
    this.type = options.type ?? "generic"
    this.entityName = options.entityName
    this.isEvent = options.isEvent === true
    this.attributes = { ...options.attributes }
  }

  get isValid(): boolean {
    return true
  }
  get isRootSpan(): boolean {
    return this.parent === undefined
  }
  get externalTraceId(): string {
    return this.traceId
  }
  end(options?: EndOptions): void {
    if (options?.attributes !== undefined) this.attributes = { ...this.attributes, ...options.attributes }
    if (this.end_ !== undefined) return
    this.end_ = nowNanos()
    this.endTime = new Date()
  }
  endTree(options?: EndOptions): void {
    for (const child of this.children) child.endTree(options)
    this.end(options)
  }
  error(options: ErrorOptions): void {
    const e = options.error
    this.errorMessage = e instanceof Error ? e.message : typeof e === "string" ? e : "error"
    if (options.endSpan !== false) this.end(options)
    else if (options.attributes !== undefined) this.attributes = { ...this.attributes, ...options.attributes }
  }
  update(options: EndOptions): void {
    if (options.attributes !== undefined) this.attributes = { ...this.attributes, ...options.attributes }
  }
  createChildSpan(options: SpanOptions): RecordingSpan {
    const child = new RecordingSpan(this.traceId, this, options)
    this.children.push(child)
    return child
  }
  createEventSpan(options: SpanOptions): RecordingSpan {
    const child = this.createChildSpan({ ...options, isEvent: true })
    child.end()
    return child
  }
  getParentSpanId(): string | undefined {
    return this.parent?.id
  }
  findParent(type: string): RecordingSpan | undefined {
    let p = this.parent
    while (p !== undefined && p.type !== type) p = p.parent
    return p
  }
  exportSpan(): undefined {
    return undefined
  }
  /**
   * The model generation's tracker: Mastra ends and fails the generation through it, and it makes the
   * generation's step, inference and chunk spans. `@mastra/observability`'s when it loaded, else one that only
   * ends the generation.
   */
  createTracker() {
    if (ModelSpanTracker !== undefined) return new ModelSpanTracker(this as never)
    return {
      getTracingContext: () => ({ currentSpan: this }),
      reportGenerationError: (options: ErrorOptions) => this.error(options),
      endGeneration: (options?: EndOptions) => this.end(options),
      updateGeneration: (options: EndOptions) => this.update(options),
      wrapStream: <T>(stream: T): T => stream,
      startStep: () => undefined,
      updateStep: () => undefined,
      startInference: () => undefined,
      setInferenceContext: () => undefined,
      setDeferStepClose: () => undefined,
      setStepIndex: () => undefined,
      exportCurrentStep: () => undefined,
      getPendingStepFinishPayload: () => undefined
    }
  }
  executeInContext<T>(fn: () => Promise<T>): Promise<T> {
    return fn()
  }
  executeInContextSync<T>(fn: () => T): T {
    return fn()
  }

  /** The recorded span; one still open ends at `end`. */
  toRecorded(end: bigint): SessionTracer.RecordedSpan {
    const attributes: Record<string, unknown> = { "mastra.span.type": this.type }
    if (this.entityName !== undefined) attributes["mastra.entity.name"] = this.entityName
    for (const [key, value] of Object.entries(this.attributes)) flatten(`mastra.${key}`, value, attributes, 0)
    const endTime = this.end_ ?? end
    return {
      name: this.name,
      startTime: this.start,
      endTime: latest(this.start, endTime),
      kind: this.type === "model_generation" ? "client" : "internal",
      attributes,
      error: this.errorMessage,
      children: this.children.map((c) => c.toRecorded(endTime))
    }
  }
}

type Tracker = typeof import("@mastra/observability").ModelSpanTracker

/** `@mastra/observability`'s tracker class once loaded; undefined before, or when it could not load. */
let ModelSpanTracker: Tracker | undefined
let loaded = false

/** Loads `ModelSpanTracker` at the first traced run; a failure is logged and leaves the plain tracker. */
const loadTracker: Effect.Effect<void> = Effect.suspend(() =>
  loaded
    ? Effect.void
    : Effect.tryPromise(() => import("@mastra/observability")).pipe(
        Effect.match({
          onFailure: (error) =>
            Effect.logWarning("tracing: @mastra/observability did not load; no model_step spans", error),
          onSuccess: (module) => {
            ModelSpanTracker = module.ModelSpanTracker
            return Effect.void
          }
        }),
        Effect.flatten,
        Effect.ensuring(
          Effect.sync(() => {
            loaded = true
          })
        )
      )
)

/**
 * A `tracingContext` for one Mastra run, and `finish`, which records the spans Mastra made under it (once). The
 * context's own span is not recorded: its children (Mastra's `agent run`) become children of `chat`.
 */
export const recordSpans = (spans: SessionTracer.FrameworkSpansShape) => Effect.map(loadTracker, () => recording(spans))

const recording = (spans: SessionTracer.FrameworkSpansShape) => {
  const root = new RecordingSpan(hex(16), undefined, { name: "chat", type: "generic" })
  let done = false
  return {
    // Mastra's `TracingContext` type names its own `Span` class; the recording span has the members it uses
    tracingContext: { currentSpan: root as never },
    finish: () => {
      if (done) return
      done = true
      const end = nowNanos()
      for (const child of root.children) spans.record(child.toRecorded(end))
    }
  }
}
