// Conversions between the AI SDK's plain-JSON ModelMessage and the session's stored messages.
import type { ModelClient, Runner } from "@durable-agent/session"
import type { LanguageModelUsage, ModelMessage } from "ai"

/** JSON-safe copy: binary data becomes base64 text, URLs become strings, `undefined` fields are dropped. */
export const toJsonSafe = (value: unknown): unknown => {
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64")
  if (value instanceof ArrayBuffer) return Buffer.from(new Uint8Array(value)).toString("base64")
  if (value instanceof URL) return value.toString()
  if (value instanceof Date) return value.toISOString()
  if (Array.isArray(value)) return value.map(toJsonSafe)
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = toJsonSafe(v)
    return out
  }
  return value
}

/**
 * One stored item: an AI SDK message is stored as one item per content part (so each tool call has its
 * own projection), grouped back by `message_id` when the runner rebuilds the conversation.
 */
export interface StoredItem {
  readonly v: 1
  readonly message_id: string
  readonly role: "user" | "assistant" | "tool"
  /** A whole message's content when it is a string (user text). */
  readonly content?: string | undefined
  readonly part?: Record<string, unknown> | undefined
  /** Message-level provider options, kept on the first item of the message. */
  readonly provider_options?: unknown
}

const base = { text: null, toolCallId: null, toolName: null, toolArguments: null, toolOutput: null }

const outputText = (output: unknown): string => {
  const o = output as { type?: string; value?: unknown; reason?: string } | undefined
  if (o === undefined) return ""
  if (o.type === "text" || o.type === "error-text") return String(o.value ?? "")
  if (o.type === "execution-denied") return o.reason ?? "denied"
  return JSON.stringify(o.value ?? o)
}

/**
 * Splits AI SDK messages into stored messages (one per part), keeping every field, `providerOptions` included.
 * The messages are JSON-safe already (the runner's come from `toJsonSafe` or from JSON): they are not copied.
 */
export const toFrameworkMessages = (
  messages: ReadonlyArray<ModelMessage>,
  messageId: (index: number) => string
): Array<Runner.FrameworkMessage> => {
  const out: Array<Runner.FrameworkMessage> = []
  messages.forEach((raw, index) => {
    const message = raw as { role: string; content: unknown; providerOptions?: unknown }
    const id = messageId(index)
    if (message.role === "system") return
    const role = message.role as StoredItem["role"]
    if (typeof message.content === "string") {
      const item: StoredItem = {
        v: 1,
        message_id: id,
        role,
        content: message.content,
        provider_options: message.providerOptions
      }
      out.push({ ...base, role, text: message.content, frameworkItem: JSON.stringify(item) })
      return
    }
    const parts = (message.content as Array<Record<string, unknown>>) ?? []
    parts.forEach((part, i) => {
      const item: StoredItem = {
        v: 1,
        message_id: id,
        role,
        part,
        ...(i === 0 && message.providerOptions !== undefined ? { provider_options: message.providerOptions } : {})
      }
      const frameworkItem = JSON.stringify(item)
      switch (part.type) {
        case "text":
          out.push({ ...base, role, text: String(part.text ?? ""), frameworkItem })
          break
        case "tool-call":
          out.push({
            ...base,
            role,
            toolCallId: String(part.toolCallId),
            toolName: String(part.toolName),
            toolArguments: JSON.stringify(part.input ?? {}),
            frameworkItem
          })
          break
        case "tool-result":
          out.push({
            ...base,
            role,
            toolCallId: String(part.toolCallId),
            toolName: String(part.toolName),
            toolOutput: outputText(part.output),
            frameworkItem
          })
          break
        default:
          // reasoning, files and the rest: stored for the model, no projection text
          out.push({ ...base, role, frameworkItem })
      }
    })
  })
  return out
}

/** A stored message as the session gives it back (only the fields the rebuild reads). */
export interface StoredMessageView {
  readonly role: string
  readonly text: string | null
  readonly toolCallId: string | null
  readonly toolName: string | null
  readonly toolArguments: string | null
  readonly toolOutput: string | null
  readonly frameworkItem: string
}

const parseItem = (text: string): StoredItem | undefined => {
  try {
    const parsed = JSON.parse(text) as StoredItem
    return parsed !== null && typeof parsed === "object" && parsed.v === 1 && typeof parsed.message_id === "string"
      ? parsed
      : undefined
  } catch {
    return undefined
  }
}

/**
 * The items of stored messages already read, by message, with the text each was read from: the session hands
 * every Step the same decoded messages (the engine's decode cache), so each turn reads only its new messages
 * instead of parsing the whole history again. An item is never changed after it is read.
 */
const readItems = new WeakMap<StoredMessageView, { readonly text: string; readonly item: StoredItem | undefined }>()

const storedItem = (message: StoredMessageView): StoredItem | undefined => {
  const known = readItems.get(message)
  if (known !== undefined && known.text === message.frameworkItem) return known.item
  const item = parseItem(message.frameworkItem)
  readItems.set(message, { text: message.frameworkItem, item })
  return item
}

/** A list of stored messages read, with the messages rebuilt from it and the message id its last message has. */
interface ReadHistory {
  readonly stored: ReadonlyArray<StoredMessageView>
  readonly messages: ReadonlyArray<ModelMessage>
  readonly currentId: string | undefined
}

/**
 * The list read last, by its first stored message. A session's next Step reads the same stored messages again
 * (the same decoded values) and some more: the messages rebuilt from the list read last are reused when it is a
 * prefix of the new one, and only the rest is read, so a long session's Step does not rebuild its whole history.
 * A stored message is an immutable value; a rebuilt message is not changed once it is returned.
 */
const readHistories = new WeakMap<StoredMessageView, ReadHistory>()

/** Whether `known` is a prefix of `stored`, message by message. */
const isPrefix = (known: ReadonlyArray<StoredMessageView>, stored: ReadonlyArray<StoredMessageView>): boolean => {
  if (known.length > stored.length) return false
  for (let i = 0; i < known.length; i++) if (known[i] !== stored[i]) return false
  return true
}

/** Rebuilds AI SDK messages from stored ones, regrouping parts; messages stored by others use their projection. */
export const fromStoredMessages = (stored: ReadonlyArray<StoredMessageView>): Array<ModelMessage> => {
  const first = stored[0]
  if (first === undefined) return []
  const known = readHistories.get(first)
  const reused = known !== undefined && isPrefix(known.stored, stored) ? known : undefined
  const out: Array<ModelMessage> = reused === undefined ? [] : [...reused.messages]
  let currentId = reused?.currentId
  // the last reused message is shared with earlier reads: it takes more parts only as a copy
  let lastShared = out.length > 0
  for (let i = reused?.stored.length ?? 0; i < stored.length; i++) {
    const message = stored[i]!
    const item = storedItem(message)
    if (item === undefined) {
      currentId = undefined
      out.push(...projectionToMessages(message))
    } else if (item.content !== undefined) {
      currentId = item.message_id
      out.push({
        role: item.role,
        content: item.content,
        ...(item.provider_options !== undefined ? { providerOptions: item.provider_options } : {})
      } as ModelMessage)
    } else {
      const last = out[out.length - 1] as { role: string; content: unknown } | undefined
      if (currentId === item.message_id && last !== undefined && Array.isArray(last.content)) {
        const continued = lastShared ? ({ ...last, content: [...last.content] } as typeof last) : last
        ;(continued.content as Array<unknown>).push(item.part)
        out[out.length - 1] = continued as ModelMessage
      } else {
        currentId = item.message_id
        out.push({
          role: item.role,
          content: [item.part],
          ...(item.provider_options !== undefined ? { providerOptions: item.provider_options } : {})
        } as ModelMessage)
      }
    }
    lastShared = false
  }
  // copies: the caller may change its list, or the one returned
  readHistories.set(first, { stored: [...stored], messages: [...out], currentId })
  return out
}

const projectionToMessages = (m: StoredMessageView): Array<ModelMessage> => {
  if (m.role === "user") return [{ role: "user", content: m.text ?? "" }]
  if (m.role === "tool") {
    return [
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: m.toolCallId ?? "",
            toolName: m.toolName ?? "",
            output: { type: "text", value: m.toolOutput ?? "" }
          }
        ]
      }
    ]
  }
  if (m.toolCallId !== null) {
    let input: unknown = {}
    try {
      input = JSON.parse(m.toolArguments ?? "{}")
    } catch {
      input = {}
    }
    return [
      {
        role: "assistant",
        content: [{ type: "tool-call", toolCallId: m.toolCallId, toolName: m.toolName ?? "", input }]
      }
    ]
  }
  return [{ role: "assistant", content: m.text ?? "" }]
}

/** The session's simple model messages (Stepwise) as AI SDK messages. */
export const sessionToAiSdk = (messages: ReadonlyArray<ModelClient.ModelMessage>): Array<ModelMessage> =>
  messages.map((m): ModelMessage => {
    switch (m.role) {
      case "user":
        return { role: "user", content: m.text }
      case "tool":
        return {
          role: "tool",
          content: [
            {
              type: "tool-result",
              toolCallId: m.toolCallId,
              toolName: m.toolName,
              output: { type: "text", value: m.output }
            }
          ]
        }
      default:
        return {
          role: "assistant",
          content: [
            ...(m.text ? [{ type: "text" as const, text: m.text }] : []),
            ...m.toolCalls.map((c) => ({
              type: "tool-call" as const,
              toolCallId: c.toolCallId,
              toolName: c.toolName,
              input: parseObject(c.arguments)
            }))
          ]
        }
    }
  })

const parseObject = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return {}
  }
}

/** AI SDK usage as the session counts it. */
export const toUsage = (usage: LanguageModelUsage | undefined): ModelClient.ModelUsage => ({
  inputTokens: usage?.inputTokens ?? 0,
  outputTokens: usage?.outputTokens ?? 0,
  cachedInputTokens: usage?.inputTokenDetails?.cacheReadTokens ?? 0,
  reasoningTokens: usage?.outputTokenDetails?.reasoningTokens ?? 0
})
