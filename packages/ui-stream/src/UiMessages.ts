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
 * @category schemas
 * @since 0.1.0
 */
export const QuestionStatus = Schema.Literals(["pending", "answered", "declined", "expired", "closed"])
/** @since 0.1.0 */
export type QuestionStatus = typeof QuestionStatus.Type

/**
 * The data of a `data-question` part (its part ID is the interrupt ID): a question of `ask_user` (interrupt ID
 * = tool call ID) or of a tool (`<tool_call_id>-input-<n>`). Answer it with `POST {api}/{id}/answer`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const QuestionData = Schema.Struct({
  interruptId: Schema.String,
  toolCallId: Schema.String,
  toolName: Schema.String,
  question: Schema.String,
  /** The answers to choose from; empty when any text goes. */
  choices: Schema.Array(Schema.String),
  /** Whether an answer outside `choices` is accepted. */
  allowsFreeText: Schema.Boolean,
  /** When the question expires (RFC 3339), or null. */
  deadline: Schema.NullOr(Schema.String),
  status: QuestionStatus,
  /** The answer, once known. */
  answer: Schema.NullOr(Schema.String)
})
/** @since 0.1.0 */
export type QuestionData = typeof QuestionData.Type

/**
 * The data of the `data-plan` part (part ID `plan`): the committed plan that `write_todos` keeps.
 *
 * @category schemas
 * @since 0.1.0
 */
export const PlanData = Schema.Struct({
  revision: Schema.Int,
  status: Wire.AgentPlanStatus,
  tasks: Schema.Array(Schema.Struct({ content: Schema.String, status: Wire.AgentPlanTaskStatus }))
})
/** @since 0.1.0 */
export type PlanData = typeof PlanData.Type

/**
 * The data of the transient `data-tool-status` part (ID `status-<tool_call_id>`): the tool's Step started. It
 * reaches `useChat`'s `onData` only; the message never keeps it.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ToolStatusData = Schema.Struct({ toolCallId: Schema.String, status: Schema.Literal("running") })
/** @since 0.1.0 */
export type ToolStatusData = typeof ToolStatusData.Type

/**
 * How a turn stands in its assistant message's metadata.
 *
 * @category schemas
 * @since 0.1.0
 */
export const TurnStatus = Schema.Literals([
  "completed",
  "failed",
  "cancelled",
  "steered",
  "awaiting_approval",
  "awaiting_answer"
])
/** @since 0.1.0 */
export type TurnStatus = typeof TurnStatus.Type

/**
 * The metadata of a turn's assistant message: its turn, how it stands, and (on a streamed `finish`) the token
 * to continue after it. `start` carries `{ turnId }` only; `fromSnapshot` sets `turnStatus` when it is known.
 *
 * @category schemas
 * @since 0.1.0
 */
export const TurnMetadata = Schema.Struct({
  turnId: Schema.String,
  turnStatus: Schema.optional(TurnStatus),
  resumeToken: Schema.optional(Schema.String)
})
/** @since 0.1.0 */
export type TurnMetadata = typeof TurnMetadata.Type

/**
 * Standard Schemas (v1) of the data parts, for `useChat({ dataPartSchemas })` (keys without the `data-` prefix).
 *
 * @category schemas
 * @since 0.1.0
 */
export const dataPartSchemas = {
  question: Schema.toStandardSchemaV1(QuestionData),
  plan: Schema.toStandardSchemaV1(PlanData),
  "tool-status": Schema.toStandardSchemaV1(ToolStatusData)
}

/**
 * The Standard Schema (v1) of the message metadata, for `useChat({ messageMetadataSchema })`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const messageMetadataSchema = Schema.toStandardSchemaV1(TurnMetadata)

/**
 * The data parts of a turn's message by name, as `UIMessage`'s second type parameter.
 *
 * @category models
 * @since 0.1.0
 */
export type TurnDataParts = {
  readonly "tool-status": ToolStatusData
  readonly question: QuestionData
  readonly plan: PlanData
}

/**
 * A turn's message as `useChat` holds it: `useChat<TurnUIMessage>({ dataPartSchemas, messageMetadataSchema })`.
 *
 * @category models
 * @since 0.1.0
 */
export type TurnUIMessage = UIMessage<TurnMetadata, TurnDataParts>

/**
 * What the stored messages do not keep of ended turns, read from the session's events by the snapshot route
 * (empty when those events were trimmed): each tool call's effect class, and for each stopped turn the text it
 * streamed after its last stored message (the aborted model call's words, `""` when none).
 *
 * @category schemas
 * @since 0.1.0
 */
export const History = Schema.Struct({
  tools: Schema.Record(Schema.String, Schema.Struct({ effect: Schema.String, requiresApproval: Schema.Boolean })),
  stopped: Schema.Record(Schema.String, Schema.String)
})
/** @since 0.1.0 */
export type History = typeof History.Type

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
  Schema.Struct({
    snapshot: Wire.UiAgentSnapshot,
    token: Schema.NullOr(Schema.String),
    history: Schema.optional(History)
  })
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

/** The note a turn's end adds as a user message, and the turn status it tells. */
const turnNotes: ReadonlyArray<readonly [string, TurnStatus]> = [
  [Wire.TURN_CANCELLED_NOTE_HEADER, "cancelled"],
  [Wire.TURN_STEERED_NOTE_HEADER, "steered"],
  [Wire.TURN_FAILURE_NOTE_HEADER, "failed"]
]

/**
 * The stored messages of a snapshot as `UIMessage`s: one user message per user text that starts a turn, one
 * assistant message per turn (ID: the turn ID, metadata `{ turnId, turnStatus }`) with its text and dynamic tool
 * parts. A continuation's message (a user text the turn added between two model calls) and the note a stopped,
 * steered or failed turn ends with are not the user's: they stay out, and the note sets `turnStatus`. An
 * `ask_user` call also gets its `data-question` part (`answered` with the answer, or `closed`); with the
 * snapshot's `plan`, the last assistant message gets the `data-plan` part.
 *
 * With the snapshot route's `history`, tool parts get their `toolMetadata` (`effect`, `requiresApproval`), and a
 * stopped turn gets the text it streamed before the stop and `turnStatus: "cancelled"`, so a reload shows what
 * the stream showed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromSnapshot = (
  snapshot: {
    readonly state: { readonly activeTurnId: string | null; readonly lastTurnError?: string | null } | null
    readonly messages: ReadonlyArray<Wire.UiAgentMessage>
    readonly plan?: Wire.AgentPlan | null | undefined
  },
  history?: History | undefined
): Array<TurnUIMessage> => {
  const active = snapshot.state?.activeTurnId ?? null
  const out: Array<TurnUIMessage> = []
  let assistant: TurnUIMessage | undefined
  let stepOpen = false
  let turn: string | null = null
  /** Whether the current turn has an assistant or tool message yet (a later user text is a continuation). */
  let replied = false
  let noted: TurnStatus | undefined
  let lastTurn: string | null = null

  const assistantOf = (turnId: string): TurnUIMessage => {
    if (assistant === undefined || assistant.id !== turnId) {
      assistant = { id: turnId, role: "assistant", metadata: { turnId }, parts: [] }
      out.push(assistant)
      stepOpen = false
    }
    return assistant
  }
  /** Ends a turn: its status, and the text a stopped turn streamed before the stop. */
  const endTurn = (turnId: string | null) => {
    if (turnId === null || turnId === active) return
    const stopped = history?.stopped[turnId]
    const status: TurnStatus | undefined = stopped !== undefined ? "cancelled" : noted
    if (stopped !== undefined && stopped.length > 0) {
      const message = assistantOf(turnId)
      if (!stepOpen) message.parts.push({ type: "step-start" })
      message.parts.push({ type: "text", text: stopped, state: "done" })
    }
    if (status === undefined && assistant?.id !== turnId) return
    const message = assistantOf(turnId)
    message.metadata = { turnId, turnStatus: status ?? "completed" }
  }

  for (const m of snapshot.messages) {
    if (m.turnId !== turn) {
      endTurn(turn)
      turn = m.turnId
      replied = false
      noted = undefined
      assistant = undefined
    }
    if (m.turnId !== active) lastTurn = m.turnId
    if (m.role === "user") {
      const text = m.text ?? ""
      const note = turnNotes.find(([header]) => text.startsWith(header))
      if (note !== undefined) {
        noted = note[1]
        continue
      }
      // a user text after the turn's first model output is a continuation, not the user's
      if (replied) continue
      out.push({ id: `user-${m.sequence}`, role: "user", parts: [{ type: "text", text }] })
      continue
    }
    replied = true
    if (m.turnId === active) continue
    const parts = assistantOf(m.turnId).parts
    if (m.role === "assistant") {
      if (!stepOpen) {
        parts.push({ type: "step-start" })
        stepOpen = true
      }
      if (m.toolCallId !== null) {
        const input = parse(m.toolArguments)
        const known = history?.tools[m.toolCallId]
        parts.push({
          type: "dynamic-tool",
          toolName: m.toolName ?? "tool",
          toolCallId: m.toolCallId,
          state: "input-available",
          input,
          ...(known === undefined
            ? {}
            : { toolMetadata: { effect: known.effect, requiresApproval: known.requiresApproval } })
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
          output: parse(m.toolOutput),
          ...(part.toolMetadata === undefined ? {} : { toolMetadata: part.toolMetadata })
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
  endTurn(turn)
  // the last ended turn failed: the session keeps its error
  const failed = snapshot.state?.lastTurnError ?? null
  const last = out.findLast((m) => m.role === "assistant")
  if (failed !== null && last !== undefined && last.id === lastTurn && last.metadata?.turnStatus === "completed") {
    last.metadata = { turnId: last.id, turnStatus: "failed" }
  }
  const plan = snapshot.plan ?? null
  if (plan !== null && last !== undefined) last.parts.push(planPart(plan))
  return out
}
