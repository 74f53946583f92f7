// The AI SDK's own telemetry as framework spans of the session's `chat` span: a telemetry integration that
// records the SDK's operation (`ai.streamText`) and its model call (`ai.streamText.doStream`) with their times,
// handed to the session's `FrameworkSpans`, which emits them under the RunModel attempt's `chat` span.
import type { SessionTracer as Tracer } from "@durable-agent/session"
import type { Telemetry } from "ai"

const nowNanos = (): bigint => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))

/** An integration for one `streamText` call, and `finish`, which records what it saw (once). */
export const recordTelemetry = (spans: Tracer.FrameworkSpansShape) => {
  let operation: { name: string; start: bigint; attributes: Record<string, unknown> } | undefined
  let callStart: bigint | undefined
  const children: Array<Tracer.RecordedSpan> = []
  let done = false
  const finish = (error?: string) => {
    if (done || operation === undefined) return
    done = true
    const end = nowNanos()
    if (callStart !== undefined) {
      // the model call never ended (an error or an abort): it ends with the operation
      children.push({ name: `${operation.name}.doStream`, startTime: callStart, endTime: end, kind: "client", error })
      callStart = undefined
    }
    spans.record({
      name: operation.name,
      startTime: operation.start,
      endTime: end,
      attributes: operation.attributes,
      error,
      children
    })
  }
  const integration: Telemetry = {
    onStart: (event) => {
      operation = {
        name: event.operationId,
        start: nowNanos(),
        attributes: {
          "ai.operationId": event.operationId,
          "ai.model.id": event.modelId,
          "ai.model.provider": event.provider
        }
      }
    },
    onLanguageModelCallStart: () => {
      callStart = nowNanos()
    },
    onLanguageModelCallEnd: () => {
      if (operation === undefined || callStart === undefined) return
      children.push({ name: `${operation.name}.doStream`, startTime: callStart, endTime: nowNanos(), kind: "client" })
      callStart = undefined
    },
    onEnd: () => finish(),
    onError: (error) => finish(error instanceof Error ? error.message : String(error)),
    onAbort: () => finish("aborted")
  }
  return { integration, finish }
}
