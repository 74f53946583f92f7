// Conversions between Pi's plain-JSON messages (pi-ai `Message`) and the session's stored messages.
import type { Runner, Wire } from "@durable-agent/session"
import type {
  AssistantMessage,
  ImageContent,
  Message,
  TextContent,
  ThinkingContent,
  ToolCall,
  ToolResultMessage,
  Usage
} from "@mariozechner/pi-ai"

/**
 * One stored item. A user or tool-result message is stored whole; an assistant message is stored as one
 * item per content block (so each tool call has its own projection), the message's other fields (model,
 * usage and cost, stop reason, response ID) on its first item, and grouped back by `id` on the rebuild.
 */
export interface StoredItem {
  readonly v: 1
  readonly pi: "message" | "block"
  readonly message?: Message | undefined
  readonly id?: string | undefined
  readonly block?: AssistantMessage["content"][number] | undefined
  readonly meta?: Omit<AssistantMessage, "content"> | undefined
}

/** A stored message as the session gives it back (only the fields the rebuild reads). */
export type StoredMessageView = Pick<
  Wire.AgentMessage,
  "role" | "text" | "toolCallId" | "toolName" | "toolArguments" | "toolOutput" | "frameworkItem"
> & { readonly sequence?: number | undefined }

const base = { text: null, toolCallId: null, toolName: null, toolArguments: null, toolOutput: null }

const ZERO_USAGE: Usage = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }
}

/** The text of text and image blocks, as the projection and a tool result's output show it. */
export const blocksText = (blocks: ReadonlyArray<TextContent | ImageContent>): string =>
  blocks.map((b) => (b.type === "text" ? b.text : `[image ${b.mimeType}]`)).join("\n")

/** Splits Pi messages into stored messages; `messageId` names an assistant message's items. */
export const toFrameworkMessages = (
  messages: ReadonlyArray<Message>,
  messageId: (index: number) => string,
  onItem?: (text: string, item: StoredItem) => void
): Array<Runner.FrameworkMessage> => {
  const out: Array<Runner.FrameworkMessage> = []
  const write = (item: StoredItem): string => {
    const text = JSON.stringify(item)
    onItem?.(text, item)
    return text
  }
  messages.forEach((message, index) => {
    switch (message.role) {
      case "user": {
        const item: StoredItem = { v: 1, pi: "message", message }
        const text = typeof message.content === "string" ? message.content : blocksText(message.content)
        out.push({ ...base, role: "user", text, frameworkItem: write(item) })
        return
      }
      case "toolResult": {
        const item: StoredItem = { v: 1, pi: "message", message }
        out.push({
          ...base,
          role: "tool",
          toolCallId: message.toolCallId,
          toolName: message.toolName,
          toolOutput: blocksText(message.content),
          frameworkItem: write(item)
        })
        return
      }
      case "assistant": {
        const { content, ...meta } = message
        const id = messageId(index)
        if (content.length === 0) {
          out.push({ ...base, role: "assistant", frameworkItem: write({ v: 1, pi: "block", id, meta }) })
          return
        }
        content.forEach((block, i) => {
          const item: StoredItem = { v: 1, pi: "block", id, block, ...(i === 0 ? { meta } : {}) }
          const frameworkItem = write(item)
          if (block.type === "text") out.push({ ...base, role: "assistant", text: block.text, frameworkItem })
          else if (block.type === "toolCall") {
            out.push({
              ...base,
              role: "assistant",
              toolCallId: block.id,
              toolName: block.name,
              toolArguments: JSON.stringify(block.arguments ?? {}),
              frameworkItem
            })
          } else out.push({ ...base, role: "assistant", frameworkItem })
        })
      }
    }
  })
  return out
}

const parseItem = (text: string): StoredItem | undefined => {
  try {
    const parsed = JSON.parse(text) as StoredItem
    return parsed !== null &&
      typeof parsed === "object" &&
      parsed.v === 1 &&
      (parsed.pi === "message" || parsed.pi === "block")
      ? parsed
      : undefined
  } catch {
    return undefined
  }
}

const projectedAssistant = (content: AssistantMessage["content"]): AssistantMessage => ({
  role: "assistant",
  content,
  api: "unknown",
  provider: "unknown",
  model: "unknown",
  usage: ZERO_USAGE,
  stopReason: content.some((b) => b.type === "toolCall") ? "toolUse" : "stop",
  timestamp: 0
})

/** A rebuild in progress: the Pi messages so far and the assistant message whose blocks are being grouped. */
interface Rebuild {
  readonly out: Array<Message>
  openId: string | undefined
}

/** Adds one stored message (`item`, its parsed `frameworkItem`) to a rebuild. */
const appendStored = (state: Rebuild, m: StoredMessageView, item: StoredItem | undefined): void => {
  const out = state.out
  if (item?.pi === "message" && item.message !== undefined) {
    out.push(item.message)
    state.openId = undefined
    return
  }
  if (item?.pi === "block" && item.id !== undefined) {
    const last = out[out.length - 1]
    if (state.openId === item.id && last?.role === "assistant") {
      if (item.block !== undefined) last.content.push(item.block)
    } else {
      const meta = item.meta ?? projectedAssistant([])
      // `role` and `content` first, as a provider's assistant message has them: messages of one shape keep a
      // provider's conversion of the context (and Pi's own code) on its fast path
      const content = item.block !== undefined ? [item.block] : []
      const message = Object.assign({ role: "assistant", content }, meta) as AssistantMessage
      // the blocks win over a `content` a stored meta should not have
      message.content = content
      out.push(message)
      state.openId = item.id
    }
    return
  }
  state.openId = undefined
  if (m.role === "tool") {
    out.push({
      role: "toolResult",
      toolCallId: m.toolCallId ?? "",
      toolName: m.toolName ?? "",
      content: [{ type: "text", text: m.toolOutput ?? "" }],
      isError: false,
      timestamp: 0
    })
  } else if (m.role === "assistant" && m.toolCallId !== null) {
    let args: ToolCall["arguments"] = {}
    try {
      args = JSON.parse(m.toolArguments ?? "{}")
    } catch {
      args = {}
    }
    const call: ToolCall = { type: "toolCall", id: m.toolCallId, name: m.toolName ?? "", arguments: args }
    const last = out[out.length - 1]
    // consecutive projected calls were one response's parallel calls
    if (last?.role === "assistant" && last.provider === "unknown") last.content.push(call)
    else out.push(projectedAssistant([call]))
  } else if (m.role === "assistant") {
    out.push(projectedAssistant([{ type: "text", text: m.text ?? "" } satisfies TextContent]))
  } else {
    out.push({ role: "user", content: m.text ?? "", timestamp: 0 })
  }
}

/**
 * Rebuilds Pi messages from stored ones, regrouping an assistant message's blocks by `id`. Messages this
 * runner did not write (another runner's, or older) are rebuilt from their projection.
 */
export const fromStoredMessages = (stored: ReadonlyArray<StoredMessageView>): Array<Message> => {
  const state: Rebuild = { out: [], openId: undefined }
  for (const m of stored) appendStored(state, m, parseItem(m.frameworkItem))
  return state.out
}

/**
 * {@link fromStoredMessages} that rebuilds only what was stored since the session's last rebuild. The stored
 * history only grows (a message keeps its sequence and its text), so when the stored messages of the last
 * rebuild are still the first ones (the same sequences and the same `frameworkItem` texts) their Pi messages
 * are reused and only the messages after them are rebuilt; otherwise (a compacted history, another session
 * under the same ID) it rebuilds everything. The items the runner itself wrote last for the session
 * (`wrote`), and the user messages it built lately (`built`), are not parsed again: their text finds them. It
 * keeps this for at most `maxFlows` sessions, the least recently used dropped first.
 */
export const historyCache = (maxFlows = 256) => {
  /** A session's rebuild, extended in place by the next one that finds it still matches. */
  interface Entry {
    readonly texts: Array<string>
    readonly sequences: Array<number | undefined>
    readonly out: Array<Message>
    openId: string | undefined
  }
  const flows = new Map<string, Entry>()
  const written = new Map<string, Map<string, StoredItem>>()
  // the user messages built for any session (`buildUserMessage` does not know the session), the latest kept
  const users = new Map<string, StoredItem>()
  const touch = <A>(map: Map<string, A>, flowId: string, value: A) => {
    map.delete(flowId)
    map.set(flowId, value)
    if (map.size > maxFlows) map.delete(map.keys().next().value!)
  }
  const matches = (entry: Entry, stored: ReadonlyArray<StoredMessageView>): boolean => {
    if (entry.texts.length > stored.length) return false
    for (let i = 0; i < entry.texts.length; i++) {
      if (stored[i]!.frameworkItem !== entry.texts[i] || stored[i]!.sequence !== entry.sequences[i]) return false
    }
    return true
  }
  return {
    /**
     * The Pi messages of `stored`, the stored history of `flowId`. The array and its messages are the cache's:
     * read them, copy the array to hand it on; the next rebuild of the session may extend the array.
     */
    rebuild: (flowId: string, stored: ReadonlyArray<StoredMessageView>): ReadonlyArray<Message> => {
      let entry = flows.get(flowId)
      if (entry === undefined || !matches(entry, stored)) {
        entry = { texts: [], sequences: [], out: [], openId: undefined }
      } else if (entry.texts.length < stored.length) {
        // the next stored block may extend the last assistant message: extend a copy, never the message a
        // model call was given
        const out = entry.out
        const last = out[out.length - 1]
        if (last?.role === "assistant") out[out.length - 1] = { ...last, content: [...last.content] }
      }
      if (entry.texts.length < stored.length) {
        const ours = written.get(flowId)
        for (let i = entry.texts.length; i < stored.length; i++) {
          const m = stored[i]!
          const text = m.frameworkItem
          appendStored(entry, m, ours?.get(text) ?? users.get(text) ?? parseItem(text))
          entry.texts.push(text)
          entry.sequences.push(m.sequence)
        }
      }
      touch(flows, flowId, entry)
      return entry.out
    },
    /** Collects the items the runner writes for `flowId` now (`toFrameworkMessages`' `onItem`). */
    writing: (flowId: string) => {
      const items = new Map<string, StoredItem>()
      touch(written, flowId, items)
      return (text: string, item: StoredItem) => void items.set(text, item)
    },
    /** Collects a user message the runner builds (`toFrameworkMessages`' `onItem`). */
    built: (text: string, item: StoredItem): void => {
      users.set(text, item)
      if (users.size > maxFlows) users.delete(users.keys().next().value!)
    }
  }
}

/** The tool calls of an assistant message. */
export const toolCallsOf = (message: AssistantMessage): Array<ToolCall> =>
  message.content.filter((b): b is ToolCall => b.type === "toolCall")

/** The text of an assistant message's thinking blocks. */
export const thinkingOf = (message: AssistantMessage): string =>
  message.content
    .filter((b): b is ThinkingContent => b.type === "thinking")
    .map((b) => b.thinking)
    .join("")

/** A tool result message with the model-visible text of a record. */
export const toolResultMessage = (
  call: { readonly toolCallId: string; readonly toolName: string },
  text: string,
  isError: boolean,
  timestamp: number
): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: call.toolCallId,
  toolName: call.toolName,
  content: [{ type: "text", text }],
  isError,
  timestamp
})
