/**
 * Browser-safe: the conversation of a snapshot as AI SDK `UIMessage`s, to seed `useChat` after a page load.
 * Imports only the session's wire codecs (`@durable-agent/session/wire`), never the engine.
 *
 * The active turn's user message is included and its assistant message is not: the resume stream
 * (`GET {api}/{id}/stream`) replays that turn.
 *
 * @since 0.1.0
 */
import * as Wire from "@durable-agent/session/wire"
import type { DynamicToolUIPart, UIMessage } from "ai"
import * as Schema from "effect/Schema"

const parse = (text: string | null): unknown => {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * Decodes the snapshot JSON that `GET {api}/{id}/snapshot` serves (`{ snapshot, token }`).
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeSnapshotResponse = Schema.decodeUnknownSync(
  Schema.Struct({ snapshot: Wire.UiAgentSnapshot, token: Schema.NullOr(Schema.String) })
)

/**
 * The stored messages of a snapshot as `UIMessage`s: one user message per user text, one assistant message
 * per turn (ID: the turn ID) with its text and dynamic tool parts.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromSnapshot = (snapshot: {
  readonly state: { readonly activeTurnId: string | null } | null
  readonly messages: ReadonlyArray<Wire.UiAgentMessage>
}): Array<UIMessage> => {
  const active = snapshot.state?.activeTurnId ?? null
  const out: Array<UIMessage> = []
  let assistant: UIMessage | undefined
  let stepOpen = false
  for (const m of snapshot.messages) {
    if (m.role === "user") {
      assistant = undefined
      out.push({ id: `user-${m.sequence}`, role: "user", parts: [{ type: "text", text: m.text ?? "" }] })
      continue
    }
    if (m.turnId === active) continue
    if (assistant === undefined || assistant.id !== m.turnId) {
      assistant = { id: m.turnId, role: "assistant", parts: [] }
      out.push(assistant)
      stepOpen = false
    }
    const parts = assistant.parts
    if (m.role === "assistant") {
      if (!stepOpen) {
        parts.push({ type: "step-start" })
        stepOpen = true
      }
      if (m.toolCallId !== null) {
        parts.push({
          type: "dynamic-tool",
          toolName: m.toolName ?? "tool",
          toolCallId: m.toolCallId,
          state: "input-available",
          input: parse(m.toolArguments)
        })
      } else if (m.text !== null && m.text.length > 0) {
        parts.push({ type: "text", text: m.text, state: "done" })
      }
    } else if (m.toolCallId !== null) {
      stepOpen = false
      const index = parts.findIndex((p) => p.type === "dynamic-tool" && p.toolCallId === m.toolCallId)
      if (index >= 0) {
        const part = parts[index] as DynamicToolUIPart
        parts[index] = {
          type: "dynamic-tool",
          toolName: part.toolName,
          toolCallId: part.toolCallId,
          state: "output-available",
          input: part.input,
          output: parse(m.toolOutput)
        }
      }
    }
  }
  return out
}
