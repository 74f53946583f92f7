// A browser client of a session's events: it imports only the codecs entry (`@durable-agent/session/wire`,
// Effect and Schema), decodes the events a server sends as JSON (for example over Server-Sent Events), applies
// the reading rules, and renders what happened.
import { type AgentEvent, decodeAgentEvent, settleEvents } from "@durable-agent/session/wire"
import { Effect } from "effect"

/** One line for the page, or nothing for events it does not show. */
const line = (event: AgentEvent): ReadonlyArray<string> => {
  switch (event.type) {
    case "turn_started":
      return [`— turn ${event.turnId}`]
    case "tool_call_started":
      return [`running ${event.payload.toolName}`]
    case "tool_call_finished":
      return [`${event.payload.toolName}: ${event.payload.status}`]
    case "turn_completed":
      return [`— done (${event.payload.messageCount} messages)`]
    case "turn_failed":
      return [`— failed: ${event.payload.error}`]
    default:
      return []
  }
}

/**
 * Decodes the JSON events (each `{type, turn_id, attempt, payload, step_execution_id}`), keeps what the reading
 * rules keep, and renders them: the streamed text of each model call joined, other events as lines.
 */
export const render = (json: ReadonlyArray<unknown>): Effect.Effect<Array<string>> =>
  Effect.gen(function* () {
    const events: Array<AgentEvent> = []
    for (const item of json) {
      const decoded = yield* Effect.result(decodeAgentEvent(item))
      if (decoded._tag === "Success") events.push(decoded.success)
      else console.warn(`skipped an event: ${decoded.failure.message}`)
    }
    const out: Array<string> = []
    let text: { step: string; value: string } | undefined
    for (const event of settleEvents(events)) {
      if (event.type === "text_delta") {
        if (text?.step === event.stepExecutionId) text.value += event.payload.text
        else {
          if (text) out.push(text.value)
          text = { step: event.stepExecutionId, value: event.payload.text }
        }
        continue
      }
      if (text) out.push(text.value)
      text = undefined
      out.push(...line(event))
    }
    if (text) out.push(text.value)
    return out
  })

/** In a page: follows `url` (an SSE endpoint sending one event per message) and appends lines to `target`. */
export const follow = (url: string, target: { append: (text: string) => void }) => {
  const received: Array<unknown> = []
  const source = new EventSource(url)
  source.onmessage = (message) => {
    received.push(JSON.parse(message.data))
    Effect.runPromise(render(received)).then((lines) => target.append(lines.at(-1) ?? ""))
  }
  return () => source.close()
}
