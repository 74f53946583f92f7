// Conversions between Mastra's stored message format (format 2: a message with parts) and the session's
// stored messages, plus the run-state repairs the runner needs between rounds.
import type { Runner, Wire } from "@durable-agent/session"

/** A part of a Mastra message, as plain JSON. */
export type Part = { readonly type: string } & Record<string, unknown>

/** A Mastra tool invocation (the `toolInvocation` field of a `tool-invocation` part). */
export interface ToolInvocation {
  readonly state: string
  readonly toolCallId: string
  readonly toolName: string
  readonly args?: unknown
  readonly result?: unknown
}

/** A Mastra message (`MastraDBMessage`), as plain JSON. */
export interface DbMessage {
  readonly id: string
  readonly role: string
  readonly createdAt?: string | undefined
  readonly content: {
    readonly format: 2
    readonly parts: Array<Part>
    readonly metadata?: unknown
  } & Record<string, unknown>
}

/**
 * One stored item: a Mastra message is stored as one item per part (so each tool call has its own
 * projection) and regrouped by `id`. A `step-start` part rides on the part after it (`step_start`); the
 * `tool` projection of a finished invocation carries only `result_of`, because the result lives in the
 * invocation part.
 */
interface StoredItem {
  readonly v: 1
  readonly id: string
  readonly role: string
  readonly part?: Part | undefined
  readonly step_start?: true | undefined
  readonly metadata?: unknown
  readonly result_of?: string | undefined
}

/** A stored message as the session gives it back (only the fields the rebuild reads). */
export type StoredMessageView = Pick<
  Wire.AgentMessage,
  "role" | "text" | "toolCallId" | "toolName" | "toolArguments" | "toolOutput" | "frameworkItem"
>

const base = { text: null, toolCallId: null, toolName: null, toolArguments: null, toolOutput: null }

/** JSON-safe deep copy: Mastra mutates the messages it is given, and run state must be plain JSON. */
export const copy = <A>(value: A): A => JSON.parse(JSON.stringify(value)) as A

/** The invocation of a `tool-invocation` part. */
export const invocationOf = (part: Part): ToolInvocation | undefined =>
  part.type === "tool-invocation" ? (part.toolInvocation as ToolInvocation | undefined) : undefined

/** A tool result as the text the model and the projection see. */
export const resultText = (result: unknown): string => (typeof result === "string" ? result : JSON.stringify(result))

/** Splits Mastra messages into stored messages: one per part, tool results after the calls of their step. */
export const toFrameworkMessages = (messages: ReadonlyArray<DbMessage>): Array<Runner.FrameworkMessage> => {
  const out: Array<Runner.FrameworkMessage> = []
  for (const message of messages) {
    if (message.role !== "user" && message.role !== "assistant") continue
    const role = message.role
    const results: Array<Runner.FrameworkMessage> = []
    const flush = () => out.push(...results.splice(0))
    let stepStart = false
    let first = true
    const item = (part: Part): string => {
      const stored: StoredItem = {
        v: 1,
        id: message.id,
        role,
        part,
        ...(stepStart ? { step_start: true as const } : {}),
        ...(first && message.content.metadata !== undefined ? { metadata: message.content.metadata } : {})
      }
      stepStart = false
      first = false
      return JSON.stringify(stored)
    }
    for (const part of message.content.parts) {
      if (part.type === "step-start") {
        flush()
        stepStart = true
        continue
      }
      const invocation = invocationOf(part)
      if (invocation !== undefined) {
        out.push({
          ...base,
          role: "assistant",
          toolCallId: invocation.toolCallId,
          toolName: invocation.toolName,
          toolArguments: JSON.stringify(invocation.args ?? {}),
          frameworkItem: item(part)
        })
        if (invocation.state === "result") {
          const ref: StoredItem = { v: 1, id: message.id, role: "tool", result_of: invocation.toolCallId }
          results.push({
            ...base,
            role: "tool",
            toolCallId: invocation.toolCallId,
            toolName: invocation.toolName,
            toolOutput: resultText(invocation.result),
            frameworkItem: JSON.stringify(ref)
          })
        }
      } else if (part.type === "text") {
        out.push({ ...base, role, text: String(part.text ?? ""), frameworkItem: item(part) })
      } else {
        // reasoning, files, sources and the rest: kept for the model, no projection text
        out.push({ ...base, role, frameworkItem: item(part) })
      }
    }
    flush()
    if (stepStart) out.push({ ...base, role, frameworkItem: item({ type: "step-start" }) })
  }
  return out
}

const parseItem = (text: string): StoredItem | undefined => {
  try {
    const parsed = JSON.parse(text) as StoredItem
    return parsed !== null && typeof parsed === "object" && parsed.v === 1 && typeof parsed.id === "string"
      ? parsed
      : undefined
  } catch {
    return undefined
  }
}

const newMessage = (id: string, role: string, index: number, parts: Array<Part>, metadata?: unknown): DbMessage => ({
  id,
  role,
  // history is older than anything of the current turn, and stays in stored order
  createdAt: new Date(index).toISOString(),
  content: { format: 2, parts, ...(metadata !== undefined ? { metadata } : {}) }
})

/** A part that ends a model call: a tool invocation with its result (the next part is a new round). */
const endsRound = (part: Part | undefined): boolean => part !== undefined && invocationOf(part)?.state === "result"

/**
 * The rebuilt history, as Mastra would hold it. Mastra merges an assistant message into the assistant
 * message before it (`MessageMerger.shouldMerge`), so two adjacent assistant messages (another runner's
 * projection stores a call, its result and the answer after it as separate messages) would reach the run
 * as one, and the runner would see a stored message changed. The rebuild merges them itself, with a
 * `step-start` where a new model call begins.
 */
class History {
  readonly messages: Array<DbMessage> = []
  /** The stored ID of the last message appended (a merged message keeps the ID of the one it joined). */
  private lastId: string | undefined

  append(id: string, role: string, index: number, parts: Array<Part>, metadata?: unknown): void {
    const last = this.messages[this.messages.length - 1]
    if (last !== undefined && last.id === this.lastId && this.lastId === id) {
      last.content.parts.push(...parts)
    } else if (last !== undefined && role === "assistant" && last.role === "assistant") {
      const newRound = endsRound(last.content.parts[last.content.parts.length - 1]) && parts[0]?.type !== "step-start"
      last.content.parts.push(...(newRound ? [{ type: "step-start" }, ...parts] : parts))
      if (metadata !== undefined) {
        Object.assign(last.content, { metadata: { ...(last.content.metadata as object | undefined), ...metadata } })
      }
    } else {
      this.messages.push(newMessage(id, role, index, parts, metadata))
    }
    this.lastId = id
  }
}

/**
 * Rebuilds Mastra messages from stored ones, regrouping parts by message. Messages this runner did not
 * write (another runner's, or older) are rebuilt from their projection. Adjacent assistant messages become
 * one, as Mastra would merge them (see {@link History}).
 */
export const fromStoredMessages = (stored: ReadonlyArray<StoredMessageView>): Array<DbMessage> => {
  const history = new History()
  stored.forEach((message, index) => {
    const item = parseItem(message.frameworkItem)
    if (item === undefined) {
      fromProjection(history, message, index)
    } else if (item.result_of === undefined && item.part !== undefined) {
      const parts: Array<Part> = item.step_start ? [{ type: "step-start" }, item.part] : [item.part]
      history.append(item.id, item.role, index, parts, item.metadata)
    }
  })
  return history.messages
}

const fromProjection = (history: History, m: StoredMessageView, index: number) => {
  const id = `stored-${index}`
  const out = history.messages
  if (m.role === "tool") {
    // the result goes into its call's invocation, as Mastra keeps it
    for (let i = out.length - 1; i >= 0; i--) {
      const parts = out[i]!.content.parts
      const at = parts.findIndex((p) => invocationOf(p)?.toolCallId === m.toolCallId)
      if (at >= 0) {
        parts[at] = {
          type: "tool-invocation",
          toolInvocation: { ...invocationOf(parts[at]!)!, state: "result", result: m.toolOutput ?? "" }
        }
        return
      }
    }
    return
  }
  if (m.role === "assistant" && m.toolCallId !== null) {
    let args: unknown = {}
    try {
      args = JSON.parse(m.toolArguments ?? "{}")
    } catch {
      args = {}
    }
    const invocation = { state: "call", toolCallId: m.toolCallId, toolName: m.toolName ?? "", args }
    history.append(id, "assistant", index, [{ type: "tool-invocation", toolInvocation: invocation }])
    return
  }
  history.append(id, m.role, index, [{ type: "text", text: m.text ?? "" }])
}

/** The tool call IDs of the invocations in `messages` (only those in `state` when given). */
export const toolCallIds = (messages: ReadonlyArray<DbMessage>, state?: string): Array<string> =>
  messages.flatMap((m) =>
    m.content.parts.flatMap((p) => {
      const invocation = invocationOf(p)
      return invocation !== undefined && (state === undefined || invocation.state === state)
        ? [invocation.toolCallId]
        : []
    })
  )

/** The part count of every message, by ID (what a message held before a model call). */
export const partCounts = (messages: ReadonlyArray<DbMessage>): Map<string, number> =>
  new Map(messages.map((m) => [m.id, m.content.parts.length]))

/**
 * Marks where a model call's parts begin. Mastra appends a response to the assistant message it continues;
 * without a `step-start` at that point, the next prompt merges this round's tool calls with the earlier
 * round's, as if they had been parallel calls of one response.
 */
export const markNewRounds = (messages: ReadonlyArray<DbMessage>, before: ReadonlyMap<string, number>): void => {
  for (const message of messages) {
    const count = before.get(message.id)
    const parts = message.content.parts
    if (count === undefined || count === 0 || parts.length <= count) continue
    if (parts[count]!.type !== "step-start") parts.splice(count, 0, { type: "step-start" })
  }
}

/** Sets the results of `results` (by tool call ID) on their invocations, in copies of `messages`. */
export const withResults = (
  messages: ReadonlyArray<DbMessage>,
  results: ReadonlyMap<string, string>
): Array<DbMessage> =>
  copy(messages).map((m) => {
    m.content.parts.forEach((part, i) => {
      const invocation = invocationOf(part)
      if (invocation !== undefined && results.has(invocation.toolCallId)) {
        m.content.parts[i] = {
          ...part,
          toolInvocation: { ...invocation, state: "result", result: results.get(invocation.toolCallId) }
        }
      }
    })
    return m
  })
