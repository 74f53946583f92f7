// Conversions between the SDK's input items (plain JSON, one item per message, tool call or tool result)
// and the session's stored messages. An item is stored whole as the message's `frameworkItem`.
import type { Runner, Wire } from "@durable-agent/session"
import type { AgentInputItem } from "@openai/agents"

/** A loosely typed view of an item: the SDK's item union is wide and its fields vary by `type`. */
type Loose = { readonly [key: string]: unknown }

const base = { text: null, toolCallId: null, toolName: null, toolArguments: null, toolOutput: null }

/** The text of a message content: a string, or the text of its `input_text` / `output_text` / refusal parts. */
const contentText = (content: unknown): string | null => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return null
  const texts = (content as Array<Loose>).flatMap((part) =>
    typeof part.text === "string" ? [part.text] : typeof part.refusal === "string" ? [part.refusal] : []
  )
  return texts.length > 0 ? texts.join("") : null
}

/** The text a tool result's output carries: a string, a `{ type: "text" }` output, or its JSON. */
export const outputText = (output: unknown): string => {
  if (typeof output === "string") return output
  const o = output as Loose | null | undefined
  if (o?.type === "text" && typeof o.text === "string") return o.text
  if (Array.isArray(output)) {
    const text = contentText(output)
    if (text !== null) return text
  }
  return JSON.stringify(output ?? null)
}

/** Projects one SDK item onto a stored message, keeping the item itself as `frameworkItem`. */
export const toFrameworkMessage = (item: AgentInputItem): Runner.FrameworkMessage => {
  const i = item as unknown as Loose
  const frameworkItem = JSON.stringify(item)
  switch (i.type) {
    case "function_call":
      return {
        ...base,
        role: "assistant",
        toolCallId: String(i.callId),
        toolName: String(i.name),
        toolArguments: typeof i.arguments === "string" ? i.arguments : JSON.stringify(i.arguments ?? {}),
        frameworkItem
      }
    case "function_call_result":
      return {
        ...base,
        role: "tool",
        toolCallId: String(i.callId),
        toolName: String(i.name),
        toolOutput: outputText(i.output),
        frameworkItem
      }
    case undefined:
    case "message":
      return {
        ...base,
        role: i.role === "user" || i.role === "system" ? "user" : "assistant",
        text: contentText(i.content),
        frameworkItem
      }
    default:
      // reasoning, hosted tool calls and other provider items: kept for the replay, without a projection
      return { ...base, role: "assistant", frameworkItem }
  }
}

/** A user message as the SDK takes it. */
export const userItem = (text: string): AgentInputItem => ({ role: "user", content: text })

/** The keys of an SDK message item; another runner's stored form (the AI SDK's, say) has others. */
const MESSAGE_KEYS = new Set(["type", "role", "content", "id", "status", "providerData", "phase"])
const ROLES = new Set(["user", "assistant", "system", "developer"])

/** Whether stored JSON is an SDK input item (SDK item types are snake_case; AI SDK part types use hyphens). */
const isItem = (value: unknown): value is AgentInputItem => {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false
  const v = value as Loose
  if (typeof v.type === "string" && v.type !== "message") return /^[a-z_]+$/.test(v.type)
  return typeof v.role === "string" && ROLES.has(v.role) && Object.keys(v).every((k) => MESSAGE_KEYS.has(k))
}

/**
 * The SDK item of a stored message: its `frameworkItem` when that is an SDK item, otherwise an item rebuilt
 * from the projection (a message another runner stored).
 */
export const fromStoredMessage = (message: Wire.AgentMessage): AgentInputItem => {
  try {
    const parsed: unknown = JSON.parse(message.frameworkItem)
    if (isItem(parsed)) return parsed
  } catch {
    // not JSON: rebuilt below
  }
  if (message.role === "tool" && message.toolCallId !== null) {
    return {
      type: "function_call_result",
      callId: message.toolCallId,
      name: message.toolName ?? "",
      status: "completed",
      output: { type: "text", text: message.toolOutput ?? "" }
    }
  }
  if (message.role === "assistant" && message.toolCallId !== null) {
    return {
      type: "function_call",
      callId: message.toolCallId,
      name: message.toolName ?? "",
      arguments: message.toolArguments ?? "{}"
    }
  }
  if (message.role === "assistant") {
    return {
      type: "message",
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: message.text ?? "" }]
    }
  }
  return userItem(message.text ?? "")
}

/** The sum of the SDK usage of the model calls one RunModel made, as the session counts it. */
export const toUsage = (responses: ReadonlyArray<{ readonly usage?: unknown }>): Wire.AgentUsage => {
  let inputTokens = 0
  let outputTokens = 0
  let cachedInputTokens = 0
  let reasoningTokens = 0
  const detail = (details: unknown, key: string): number => {
    const list = Array.isArray(details) ? details : details === undefined ? [] : [details]
    return list.reduce((n: number, d: Loose) => n + (typeof d?.[key] === "number" ? (d[key] as number) : 0), 0)
  }
  for (const response of responses) {
    const usage = response.usage as Loose | undefined
    if (usage === undefined) continue
    inputTokens += Number(usage.inputTokens ?? 0)
    outputTokens += Number(usage.outputTokens ?? 0)
    cachedInputTokens += detail(usage.inputTokensDetails, "cached_tokens")
    reasoningTokens += detail(usage.outputTokensDetails, "reasoning_tokens")
  }
  return { modelCalls: responses.length, inputTokens, outputTokens, cachedInputTokens, reasoningTokens }
}
