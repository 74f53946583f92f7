/**
 * Browser-safe: the conversation of a snapshot as AI SDK `UIMessage`s, to seed `useChat` after a page load.
 * Imports only the session's wire codecs (`@durable-agent/session/wire`), never the engine.
 *
 * The active turn's user message is included and its assistant message is not: the resume stream
 * (`GET {api}/{id}/stream`) replays that turn, with its `data-question` parts. The session's plan is a
 * `data-plan` part of the last assistant message, as the stream writes it.
 *
 * @since 0.1.0
 */
import * as Wire from "@durable-agent/session/wire"
import type { DynamicToolUIPart, UIMessage } from "ai"
import * as Schema from "effect/Schema"

/**
 * Where a question stands: `pending` until answered, declined, or past its deadline (`expired`); `closed` when
 * its turn was cancelled, or ended while the stream could not tell how the question ended.
 *
 * @category models
 * @since 0.1.0
 */
export type QuestionStatus = "pending" | "answered" | "declined" | "expired" | "closed"

/**
 * The data of a `data-question` part (its part ID is the interrupt ID): a question of `ask_user` (interrupt ID
 * = tool call ID) or of a tool (`<tool_call_id>-input-<n>`). Answer it with `POST {api}/{id}/answer`.
 *
 * @category models
 * @since 0.1.0
 */
export interface QuestionData {
  readonly interruptId: string
  readonly toolCallId: string
  readonly toolName: string
  readonly question: string
  /** The answers to choose from; empty when any text goes. */
  readonly choices: ReadonlyArray<string>
  /** Whether an answer outside `choices` is accepted. */
  readonly allowsFreeText: boolean
  /** When the question expires (RFC 3339), or null. */
  readonly deadline: string | null
  readonly status: QuestionStatus
  /** The answer, once known. */
  readonly answer: string | null
}

/**
 * The data of the `data-plan` part (part ID `plan`): the committed plan that `write_todos` keeps.
 *
 * @category models
 * @since 0.1.0
 */
export interface PlanData {
  readonly revision: number
  readonly status: Wire.AgentPlanStatus
  readonly tasks: ReadonlyArray<{ readonly content: string; readonly status: Wire.AgentPlanTaskStatus }>
}

/**
 * The `data-question` part of a pending question interrupt (undefined for a tool approval).
 *
 * @category constructors
 * @since 0.1.0
 */
export const questionPart = (
  interrupt: Wire.AgentInterrupt
): { readonly type: "data-question"; readonly id: string; readonly data: QuestionData } | undefined =>
  interrupt.kind !== "question"
    ? undefined
    : {
        type: "data-question",
        id: interrupt.interruptId,
        data: {
          interruptId: interrupt.interruptId,
          toolCallId: interrupt.toolCallId,
          toolName: interrupt.toolName,
          question: interrupt.question ?? "",
          choices: interrupt.choices,
          allowsFreeText: interrupt.allowsFreeText,
          deadline: interrupt.deadline,
          status: "pending",
          answer: null
        }
      }

/**
 * The `data-plan` part of a committed plan.
 *
 * @category constructors
 * @since 0.1.0
 */
export const planPart = (
  plan: Wire.AgentPlan
): { readonly type: "data-plan"; readonly id: "plan"; readonly data: PlanData } => ({
  type: "data-plan",
  id: "plan",
  data: {
    revision: plan.revision,
    status: plan.status,
    tasks: plan.tasks.map((t) => ({ content: t.content, status: t.status }))
  }
})

/** The `data-question` part of a stored `ask_user` call, from its arguments. */
const askUserPart = (toolCallId: string, input: unknown) => {
  const args = (typeof input === "object" && input !== null ? input : {}) as {
    readonly question?: unknown
    readonly choices?: unknown
    readonly allows_free_text?: unknown
  }
  const data: QuestionData = {
    interruptId: toolCallId,
    toolCallId,
    toolName: "ask_user",
    question: typeof args.question === "string" ? args.question : "",
    choices: Array.isArray(args.choices) ? args.choices.filter((c): c is string => typeof c === "string") : [],
    allowsFreeText: args.allows_free_text !== false,
    deadline: null,
    status: "pending",
    answer: null
  }
  return { type: "data-question" as const, id: toolCallId, data }
}

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
 * The pending questions of a snapshot as `data-question` parts (the resume stream writes the same parts into
 * the active turn's message).
 *
 * @category constructors
 * @since 0.1.0
 */
export const pendingQuestions = (snapshot: {
  readonly pendingInterrupts: ReadonlyArray<Wire.AgentInterrupt>
}): Array<{ readonly type: "data-question"; readonly id: string; readonly data: QuestionData }> =>
  snapshot.pendingInterrupts.flatMap((i) => {
    const part = questionPart(i)
    return part === undefined ? [] : [part]
  })

/**
 * The stored messages of a snapshot as `UIMessage`s: one user message per user text, one assistant message
 * per turn (ID: the turn ID) with its text and dynamic tool parts. An `ask_user` call also gets its
 * `data-question` part (`answered` with the answer, or `closed`); with the snapshot's `plan`, the last
 * assistant message gets the `data-plan` part.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromSnapshot = (snapshot: {
  readonly state: { readonly activeTurnId: string | null } | null
  readonly messages: ReadonlyArray<Wire.UiAgentMessage>
  readonly plan?: Wire.AgentPlan | null | undefined
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
        const input = parse(m.toolArguments)
        parts.push({
          type: "dynamic-tool",
          toolName: m.toolName ?? "tool",
          toolCallId: m.toolCallId,
          state: "input-available",
          input
        })
        if (m.toolName === "ask_user") parts.push(askUserPart(m.toolCallId, input))
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
        const question = parts.findIndex((p) => p.type === "data-question" && p.id === m.toolCallId)
        if (question >= 0) {
          const asked = parts[question] as { readonly data: QuestionData }
          const output = parse(m.toolOutput) as { readonly status?: unknown; readonly answer?: unknown } | null
          const answer =
            typeof output === "object" && output?.status === "answered" && typeof output.answer === "string"
              ? output.answer
              : null
          parts[question] = {
            type: "data-question",
            id: m.toolCallId,
            data: { ...asked.data, status: answer === null ? "closed" : "answered", answer }
          }
        }
      }
    }
  }
  const plan = snapshot.plan ?? null
  const last = out.findLast((m) => m.role === "assistant")
  if (plan !== null && last !== undefined) last.parts.push(planPart(plan))
  return out
}
