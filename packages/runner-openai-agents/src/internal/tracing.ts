// The OpenAI Agents SDK's own spans as framework spans of the session's `chat` span. The SDK's tracing goes
// through the processors of its global trace provider; the runner adds one processor (once, at its first
// traced run) that passes the spans of the runner's own traced runs to a collector, found by the run's async
// context (and, for a span the SDK starts elsewhere, by its trace id). `finish` rebuilds the tree from the
// spans' parent ids and gives it to the session's `FrameworkSpans`, which emits it under the RunModel
// attempt's `chat` span. Content (model input and output, tool arguments and results) is left out: the SDK
// run is made with `traceIncludeSensitiveData: false` and the collector drops the content fields.
import { AsyncLocalStorage } from "node:async_hooks"
import type { SessionTracer } from "@durable-agent/session"
import { addTraceProcessor, type Span, type Trace, type TracingProcessor } from "@openai/agents"

/** The later of two times (`Math.max` takes no bigint). */
const latest = (a: bigint, b: bigint): bigint => {
  if (b > a) return b
  return a
}

const nowNanos = (): bigint => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))

const isoNanos = (iso: string | null): bigint | undefined => {
  const ms = iso === null ? Number.NaN : Date.parse(iso)
  return Number.isNaN(ms) ? undefined : BigInt(ms) * 1_000_000n
}

interface Entry {
  readonly span: Span<any>
  readonly start: bigint
  end: bigint | undefined
}

interface Collector {
  readonly started: bigint
  readonly spans: Map<string, Entry>
  readonly traceIds: Set<string>
}

const storage = new AsyncLocalStorage<Collector>()
const byTrace = new Map<string, Collector>()
const bySpan = new Map<string, Collector>()

const collectorOf = (traceId: string): Collector | undefined => storage.getStore() ?? byTrace.get(traceId)

const processor: TracingProcessor = {
  onTraceStart: async (trace: Trace) => {
    const c = storage.getStore()
    if (c === undefined) return
    c.traceIds.add(trace.traceId)
    byTrace.set(trace.traceId, c)
  },
  onTraceEnd: async () => {},
  onSpanStart: async (span: Span<any>) => {
    const c = collectorOf(span.traceId)
    if (c === undefined) return
    c.spans.set(span.spanId, { span, start: nowNanos(), end: undefined })
    bySpan.set(span.spanId, c)
  },
  onSpanEnd: async (span: Span<any>) => {
    const entry = bySpan.get(span.spanId)?.spans.get(span.spanId)
    if (entry !== undefined) entry.end = nowNanos()
  },
  shutdown: async () => {},
  forceFlush: async () => {}
}

let registered = false

/** Adds the runner's processor to the SDK's global trace provider, once. */
const register = () => {
  if (registered) return
  registered = true
  addTraceProcessor(processor)
}

/** Fields of the SDK's span data that carry content: never on a span. */
const CONTENT = new Set(["input", "output", "_input", "_response", "mcp_data", "data", "model_config"])

const attribute = (value: unknown): unknown =>
  typeof value === "string" || typeof value === "number" || typeof value === "boolean"
    ? value
    : Array.isArray(value) && value.every((v) => typeof v === "string")
      ? value
      : undefined

const attributesOf = (span: Span<any>): Record<string, unknown> => {
  const data = span.spanData as Record<string, unknown>
  const attributes: Record<string, unknown> = {
    "openai_agents.span.type": data.type,
    "openai_agents.trace_id": span.traceId,
    "openai_agents.span_id": span.spanId
  }
  for (const [key, value] of Object.entries(data)) {
    if (key === "type" || CONTENT.has(key)) continue
    if (key === "usage" && typeof value === "object" && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        const a = attribute(v)
        if (a !== undefined) attributes[`openai_agents.usage.${k}`] = a
      }
      continue
    }
    const a = attribute(value)
    if (a !== undefined) attributes[`openai_agents.${key}`] = a
  }
  return attributes
}

/** `openai_agents.<type>`, with the agent's, task's, tool's or guardrail's name, or the turn's number. */
const nameOf = (span: Span<any>): string => {
  const data = span.spanData as Record<string, unknown>
  const label =
    typeof data.name === "string"
      ? data.name
      : data.type === "turn"
        ? String(data.turn)
        : data.type === "handoff"
          ? `${String(data.from_agent)} -> ${String(data.to_agent)}`
          : undefined
  return label === undefined ? `openai_agents.${String(data.type)}` : `openai_agents.${String(data.type)} ${label}`
}

const KIND_CLIENT = new Set(["response", "generation"])

/**
 * A collector for one traced SDK run: `run` runs the SDK call in its context, `finish` records what the SDK
 * traced (once); a span still open ends then.
 */
export const recordSpans = (spans: SessionTracer.FrameworkSpansShape) => {
  register()
  const collector: Collector = { started: nowNanos(), spans: new Map(), traceIds: new Set() }
  let done = false
  return {
    run: <A>(f: () => A): A => storage.run(collector, f),
    finish: (error?: string) => {
      if (done) return
      done = true
      const end = nowNanos()
      for (const id of collector.traceIds) byTrace.delete(id)
      for (const id of collector.spans.keys()) bySpan.delete(id)
      const children = new Map<string | null, Array<Entry>>()
      for (const entry of collector.spans.values()) {
        const parent = entry.span.parentId
        // a parent this run did not start (an agent span of the restored run state) is not recorded
        const key = parent !== null && collector.spans.has(parent) ? parent : null
        const list = children.get(key) ?? []
        list.push(entry)
        children.set(key, list)
      }
      const toRecorded = (entry: Entry, parentEnd: bigint): SessionTracer.RecordedSpan => {
        const start = latest(collector.started, entry.start)
        const stop = entry.end ?? isoNanos(entry.span.endedAt) ?? parentEnd
        const spanError = entry.span.error?.message
        return {
          name: nameOf(entry.span),
          startTime: start,
          endTime: latest(start, stop),
          kind: KIND_CLIENT.has(String(entry.span.spanData.type)) ? "client" : "internal",
          attributes: attributesOf(entry.span),
          error: spanError ?? (entry.end === undefined ? error : undefined),
          children: (children.get(entry.span.spanId) ?? []).map((c) => toRecorded(c, stop))
        }
      }
      for (const entry of children.get(null) ?? []) spans.record(toRecorded(entry, end))
    }
  }
}
