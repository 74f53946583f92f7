// The exported span tree of a traced worker (spec "Tracing"), for the session's and the runners' tests: one
// OpenTelemetry tracer provider with an in-memory exporter serves both as the session's `Tracer` and as the
// worker's Effect tracer, the way an application that installs OpenTelemetry for the whole process runs. So a
// span any runner, tool source or model client makes with `Effect.fn("Name")` or `Effect.withSpan` is
// exported, and `assertSpanContract` fails on it.
import * as OtelTracer from "@effect/opentelemetry/OtelTracer"
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor
} from "@opentelemetry/sdk-trace-base"
import * as Layer from "effect/Layer"
import * as SessionTracer from "../../src/Tracer.ts"

/**
 * A tracing layer for a worker: the session's `Tracer` over the Effect tracer, which is an OpenTelemetry tracer
 * on `exporter`'s provider (installed for the whole worker, as `@effect/opentelemetry`'s `NodeSdk` would).
 */
export const installedTracing = () => {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const layer = SessionTracer.layer().pipe(
    Layer.provideMerge(OtelTracer.layer),
    Layer.provide(Layer.succeed(OtelTracer.OtelTracerProvider, provider))
  )
  return { exporter, layer }
}

/** The spans effect itself makes for the engine (SQL statements, transactions and migrations, cluster entities, RPCs). */
const INFRASTRUCTURE = [/^sql\./, /^sqlite$/, /^postgres$/, /^Migrator /, /^Entity\//, /^DexFlow\./]

const SPEC = { root: /^invoke_agent .+$/, chat: /^chat( .+)?$/, tool: /^execute_tool .+$/ }

/** The spans of a worker's run, by the spec's roles. */
export interface SpanTree {
  readonly roots: ReadonlyArray<ReadableSpan>
  readonly chats: ReadonlyArray<ReadableSpan>
  readonly tools: ReadonlyArray<ReadableSpan>
  /** The framework's own spans, each under a `chat` span. */
  readonly framework: ReadonlyArray<ReadableSpan>
}

const idOf = (s: ReadableSpan) => s.spanContext().spanId

/**
 * Checks the exported spans of a worker that ran `sessionId` against the contract: the session's traces (those of
 * its `invoke_agent` roots) hold only roots without a parent, `chat` and `execute_tool` spans whose parent is a
 * root, and framework spans under a `chat` span; every other exported span is effect's own engine
 * infrastructure (its own traces, never the session's); no span is a runner's, tool source's or model client's.
 * Returns the tree; `assert` is vitest's.
 */
export const assertSpanContract = (
  spans: ReadonlyArray<ReadableSpan>,
  sessionId: string,
  assert: {
    isTrue: (value: unknown, message?: string) => void
    deepStrictEqual: <T>(actual: T, expected: T, message?: string) => void
  }
): SpanTree => {
  const byId = new Map(spans.map((s) => [idOf(s), s]))
  const roots = spans.filter((s) => SPEC.root.test(s.name) && s.attributes["dex.flow.id"] === sessionId)
  assert.isTrue(roots.length > 0, "an invoke_agent root")
  const traces = new Set(roots.map((r) => r.spanContext().traceId))
  const rootIds = new Set(roots.map(idOf))
  const chats: Array<ReadableSpan> = []
  const tools: Array<ReadableSpan> = []
  const framework: Array<ReadableSpan> = []
  const outside: Array<string> = []
  const underChat = (span: ReadableSpan): boolean => {
    let parent = span.parentSpanContext === undefined ? undefined : byId.get(span.parentSpanContext.spanId)
    while (parent !== undefined) {
      if (chats.includes(parent)) return true
      parent = parent.parentSpanContext === undefined ? undefined : byId.get(parent.parentSpanContext.spanId)
    }
    return false
  }
  const parentIsRoot = (s: ReadableSpan) => s.parentSpanContext !== undefined && rootIds.has(s.parentSpanContext.spanId)
  for (const span of spans) {
    if (!traces.has(span.spanContext().traceId)) continue
    if (SPEC.chat.test(span.name) && parentIsRoot(span)) chats.push(span)
    else if (SPEC.tool.test(span.name) && parentIsRoot(span)) tools.push(span)
  }
  for (const span of spans) {
    if (!traces.has(span.spanContext().traceId)) {
      if (!INFRASTRUCTURE.some((p) => p.test(span.name))) outside.push(span.name)
      continue
    }
    if (rootIds.has(idOf(span))) {
      assert.isTrue(span.parentSpanContext === undefined, `${span.name} is a root`)
    } else if (!chats.includes(span) && !tools.includes(span)) {
      if (underChat(span)) framework.push(span)
      else outside.push(`${span.name} (in the session's trace)`)
    }
  }
  assert.deepStrictEqual(outside, [], "no span besides the spec's, the framework's under chat and the engine's own")
  return { roots, chats, tools, framework }
}

/** The number of attempts of the Step executions of the given types in a history. */
export const countAttempts = (
  steps: ReadonlyArray<{ readonly stepType: string; readonly attempts: ReadonlyArray<unknown> }>,
  types: ReadonlyArray<string>
) => steps.filter((s) => types.includes(s.stepType)).reduce((n, s) => n + s.attempts.length, 0)

/** The Step types whose attempts make an `execute_tool` span. */
export const TOOL_STEPS = ["CallTool", "CallSingleAttemptTool", "PollToolTask"]

/** The ancestors of `span` among `spans`, nearest first. */
export const ancestors = (spans: ReadonlyArray<ReadableSpan>, span: ReadableSpan): Array<ReadableSpan> => {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]))
  const chain: Array<ReadableSpan> = []
  let parent = span.parentSpanContext?.spanId
  while (parent !== undefined && byId.has(parent)) {
    const next = byId.get(parent)!
    chain.push(next)
    parent = next.parentSpanContext?.spanId
  }
  return chain
}

/** A span time (seconds, nanoseconds) in nanoseconds. */
export const nanos = (t: readonly [number, number]) => BigInt(t[0]) * 1_000_000_000n + BigInt(t[1])
