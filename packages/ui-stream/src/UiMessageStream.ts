/**
 * One agent turn as an AI SDK UI message stream (`x-vercel-ai-ui-message-stream: v1`), read from the session's
 * `AgentEvents` and its committed state. See `docs/ui-stream.md` for the mapping:
 *
 * - `turn_started` → `start` (the message ID is the turn ID);
 * - the events of one RunModel Step execution → one AI SDK step (`start-step` … `finish-step`); a higher
 *   attempt of the same execution → `reset-step`, and the events of lower attempts are dropped;
 * - `tool_call_deferred` → a dynamic tool part whose input comes from the committed `AgentToolCalls` record
 *   (or the stored messages once the turn ended); `interrupt_raised` → `tool-approval-request` with the
 *   interrupt ID as `approvalId`; `tool_call_finished` → the output, error or denial of the committed record;
 * - a question interrupt (`ask_user`, a tool's `<tool_call_id>-input-<n>`) → a `data-question` part (ID: the
 *   interrupt ID) once it is committed as pending, updated when it is answered, declined or expired;
 * - `plan_updated`, `plan_execution_started` → the `data-plan` part (ID `plan`) with the committed plan;
 * - a turn end → `finish`, once the end is committed; `tool-calls` when the turn waits only for approvals and
 *   questions.
 *
 * An event that its Step attempt never committed produces no part. When events are missing (a full or disabled
 * Stream store), the committed state fills in the tool parts and ends the stream.
 *
 * @since 0.1.0
 */
import { Client, type EngineError } from "@durable-agent/engine"
import { AgentSessionClient } from "@durable-agent/session"
import * as Wire from "@durable-agent/session/wire"
import type { UIMessageChunk } from "ai"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as ResumeToken from "./ResumeToken.ts"
import * as UiMessages from "./UiMessages.ts"

/**
 * The metadata of the streamed assistant message: its turn, and the token to continue after the last `finish`
 * (`UiMessages.TurnMetadata`; its Standard Schema is `UiMessages.messageMetadataSchema`).
 *
 * @category models
 * @since 0.1.0
 */
export type TurnMessageMetadata = UiMessages.TurnMetadata

/**
 * The data parts this stream writes: the transient `data-tool-status` while a tool Step runs, `data-question`
 * per question (ID: the interrupt ID), and `data-plan` (ID `plan`) for the session's plan
 * (`UiMessages.TurnDataParts`; their Standard Schemas are `UiMessages.dataPartSchemas`).
 *
 * @category models
 * @since 0.1.0
 */
export type TurnDataParts = UiMessages.TurnDataParts

/**
 * A UI message chunk as this stream writes it.
 *
 * @category models
 * @since 0.1.0
 */
export type TurnChunk = UIMessageChunk<TurnMessageMetadata, TurnDataParts>

/**
 * One part of the stream with the resume token that follows it.
 *
 * @category models
 * @since 0.1.0
 */
export interface UiPart {
  readonly chunk: TurnChunk
  readonly token: string
}

/**
 * Where the stream starts.
 *
 * - `TurnStart`: the whole turn, read after `after` (the engine token before its `turn_started`, or null for
 *   the oldest retained event);
 * - `Continue`: exactly after a token, for a browser that kept its message.
 *
 * @category models
 * @since 0.1.0
 */
export type StreamFrom =
  | { readonly _tag: "TurnStart"; readonly after: string | null }
  | { readonly _tag: "Continue"; readonly token: ResumeToken.ResumeTokenData }

/**
 * Options of {@link turnStream}.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnStreamOptions {
  readonly sessionId: string
  readonly turnId: string
  readonly from: StreamFrom
  /**
   * When no commit notice comes, how long to wait before looking for new events anyway (a missed notice); at
   * least 1 s, the default. The stream reads as soon as the session commits.
   */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * Answers this reader knows already, by interrupt ID: the answer a request of this stream submitted. A tool's
   * question keeps its answer in committed state only while its turn runs (the turn's records go when it ends), so
   * a reader that reads the snapshot after that still shows the answer it was given.
   */
  readonly knownAnswers?: ReadonlyMap<string, string> | undefined
}

/**
 * The errors of reading a turn.
 *
 * @category models
 * @since 0.1.0
 */
export type TurnStreamError = AgentSessionClient.RpcError | AgentSessionClient.EventsError | EngineError

const PAGE = 500

const turnNumber = (turnId: string): number => {
  const n = Number(turnId.slice(turnId.lastIndexOf("-") + 1))
  return Number.isFinite(n) ? n : Number.POSITIVE_INFINITY
}

/** Whether the snapshot shows turn `turnId` ended and committed. */
export const turnEnded = (snapshot: Wire.AgentSnapshot, turnId: string): boolean =>
  snapshot.state !== null &&
  snapshot.state.activeTurnId !== turnId &&
  (snapshot.state.turnCount >= turnNumber(turnId) || snapshot.state.status === "failed")

const parseOutput = (text: string | null): unknown => {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const parseArguments = (text: string | null): unknown => {
  if (text === null) return {}
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** The open parts as the stream updates them. */
type State = { -readonly [K in keyof ResumeToken.OpenParts]: ResumeToken.OpenParts[K] } & {
  tools: Record<string, number>
  questions: Record<string, number>
}

const clone = (o: ResumeToken.OpenParts): State => ({ ...o, tools: { ...o.tools }, questions: { ...o.questions } })

/** The committed answer of a question: from the tool's `input_answers`, or the output of an answered `ask_user`. */
const findCommittedAnswer = (snapshot: Wire.AgentSnapshot, interruptId: string, toolCallId: string): string | null => {
  const record = snapshot.toolCalls.find((r) => r.toolCallId === toolCallId)
  const entry = record?.inputAnswers.find((a) => a.interruptId === interruptId)
  if (entry !== undefined) return entry.resolution === "answered" ? entry.answer : null
  if (interruptId !== toolCallId) return null
  const message = snapshot.messages.find((m) => m.role === "tool" && m.toolCallId === toolCallId)
  const output = parseOutput(record?.output ?? message?.toolOutput ?? null)
  if (typeof output === "object" && output !== null) {
    const o = output as { readonly status?: unknown; readonly answer?: unknown }
    if (o.status === "answered" && typeof o.answer === "string") return o.answer
  }
  return null
}

/**
 * What a question asked, rebuilt from the committed state when its `interrupt_raised` is not at hand: the
 * `ask_user` arguments, or the question a tool's `input_answers` keep (its choices are gone by then).
 */
const recoverQuestion = (snapshot: Wire.AgentSnapshot, interruptId: string): UiMessages.QuestionData | undefined => {
  const pending = snapshot.pendingInterrupts.find((i) => i.interruptId === interruptId)
  if (pending !== undefined) return UiMessages.questionPart(pending)?.data
  const base = { interruptId, deadline: null, status: "pending", answer: null } as const
  const input = findInput(snapshot, interruptId)
  if (input !== undefined && input.toolName === "ask_user" && typeof input.input === "object" && input.input !== null) {
    const args = input.input as {
      readonly question?: unknown
      readonly choices?: unknown
      readonly allows_free_text?: unknown
    }
    return {
      ...base,
      toolCallId: interruptId,
      toolName: "ask_user",
      question: typeof args.question === "string" ? args.question : "",
      choices: Array.isArray(args.choices) ? args.choices.filter((c): c is string => typeof c === "string") : [],
      allowsFreeText: args.allows_free_text !== false
    }
  }
  const toolCallId = interruptId.replace(/-input-\d+$/, "")
  const record = snapshot.toolCalls.find((r) => r.toolCallId === toolCallId)
  const entry = record?.inputAnswers.find((a) => a.interruptId === interruptId)
  if (record === undefined || entry === undefined) return undefined
  return { ...base, toolCallId, toolName: record.toolName, question: entry.question, choices: [], allowsFreeText: true }
}

/** Whether the committed state shows a question no longer pending (answered, declined, expired, or its turn over). */
const questionSettled = (snapshot: Wire.AgentSnapshot, interruptId: string, toolCallId: string): boolean => {
  if (snapshot.pendingInterrupts.some((i) => i.interruptId === interruptId)) return false
  const record = snapshot.toolCalls.find((r) => r.toolCallId === toolCallId)
  return (
    record === undefined ||
    record.status !== "awaiting_answer" ||
    record.inputAnswers.some((a) => a.interruptId === interruptId)
  )
}

interface ToolInput {
  readonly toolName: string
  readonly input: unknown
  readonly effect: string | null
  readonly requiresApproval: boolean
}

const findInput = (snapshot: Wire.AgentSnapshot, toolCallId: string): ToolInput | undefined => {
  const record = snapshot.toolCalls.find((r) => r.toolCallId === toolCallId)
  if (record !== undefined) {
    return {
      toolName: record.toolName,
      input: parseArguments(record.arguments),
      effect: record.effect,
      requiresApproval: record.requiresApproval
    }
  }
  const message = snapshot.messages.find((m) => m.role === "assistant" && m.toolCallId === toolCallId)
  if (message !== undefined) {
    return {
      toolName: message.toolName ?? "tool",
      input: parseArguments(message.toolArguments),
      effect: null,
      requiresApproval: false
    }
  }
  return undefined
}

type Outcome =
  | { readonly _tag: "output"; readonly output: unknown }
  | { readonly _tag: "error"; readonly errorText: string }
  | { readonly _tag: "denied" }

const findOutcome = (
  snapshot: Wire.AgentSnapshot,
  toolCallId: string,
  status?: Wire.AgentToolCallFinalStatus
): Outcome | undefined => {
  const record = snapshot.toolCalls.find((r) => r.toolCallId === toolCallId)
  const message = snapshot.messages.find((m) => m.role === "tool" && m.toolCallId === toolCallId)
  const final = record !== undefined && Wire.isAgentToolCallFinalStatus(record.status) ? record.status : undefined
  if (final === undefined && message === undefined) return undefined
  const settled = final ?? status ?? "succeeded"
  const text = record?.output ?? record?.error ?? message?.toolOutput ?? null
  switch (settled) {
    case "succeeded":
      return { _tag: "output", output: parseOutput(record?.output ?? message?.toolOutput ?? null) }
    case "rejected":
      return { _tag: "denied" }
    case "failed":
      return { _tag: "error", errorText: text ?? "the tool failed" }
    case "outcome_unknown":
      return { _tag: "error", errorText: text ?? "the outcome of the tool call is unknown" }
  }
}

const finishReasonOf = (
  type: string | undefined,
  snapshot: Wire.AgentSnapshot
): { readonly reason: "stop" | "error" | "other"; readonly status: TurnMessageMetadata["turnStatus"] } => {
  switch (type) {
    case "turn_completed":
      return { reason: "stop", status: "completed" }
    case "turn_failed":
      return { reason: "error", status: "failed" }
    case "turn_cancelled":
      return { reason: "other", status: "cancelled" }
    case "turn_steered":
      return { reason: "other", status: "steered" }
    default:
      return snapshot.state?.lastTurnError !== null && snapshot.state?.lastTurnError !== undefined
        ? { reason: "error", status: "failed" }
        : { reason: "stop", status: "completed" }
  }
}

/**
 * The UI message stream of one turn. It ends after `finish`: the turn ended (and its end committed), or it
 * waits only for approvals (`finishReason: "tool-calls"`). Closing the consumer leaves the turn running.
 *
 * @category constructors
 * @since 0.1.0
 */
export const turnStream = (
  options: TurnStreamOptions
): Stream.Stream<UiPart, TurnStreamError, AgentSessionClient.AgentSessionClient | Client.Client> =>
  Stream.unwrap(
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const sessionId = options.sessionId
      const turnId = options.turnId
      // the stream reads again at each commit notice of the session, and after the fallback (at least 1 s)
      const watch = yield* (yield* Client.Client).watchCommits(sessionId)
      const poll = Duration.fromInputUnsafe(options.pollInterval ?? "1 second")
      const from = options.from
      const start: string | null = from._tag === "TurnStart" ? from.after : from.token.a
      let position: string | null = from._tag === "TurnStart" ? from.after : from.token.p
      let skip = from._tag === "TurnStart" ? 0 : from.token.k
      const state: State = clone(from._tag === "TurnStart" ? ResumeToken.emptyOpenParts() : from.token.o)
      const findAnswer = (snapshot: Wire.AgentSnapshot, interruptId: string, toolCallId: string): string | null =>
        findCommittedAnswer(snapshot, interruptId, toolCallId) ?? options.knownAnswers?.get(interruptId) ?? null
      /** What each question asked, from its `interrupt_raised` or the committed interrupt (for the updates). */
      const asked = new Map<string, UiMessages.QuestionData>()
      let done = false
      let eventsLost = false
      /** Text or reasoning was sent in this stream (the browser holds some of the turn's text). */
      let textSent = from._tag === "Continue" && from.token.o.content

      const tokenOf = (p: string | null, k: number, o: ResumeToken.OpenParts) =>
        ResumeToken.encode({ v: 1, s: sessionId, t: turnId, a: start, p, k, o })

      const readPage = Effect.suspend(() =>
        sessions
          .events(sessionId, { from: position === null ? "oldest" : { after: position }, follow: false })
          .pipe(Stream.take(PAGE), Stream.runCollect)
      )

      /**
       * What the committed snapshot says about an event. A structural event is written in the transaction that
       * commits its Step's attempt, so the snapshot read after it shows what it says (`check`), or, when `check`
       * finds nothing, what committed after it already moved the state on (`settledSince`, when given);
       * otherwise `None`, and the event is dropped. (Before events committed with their Step, this waited for the
       * commit, polling the snapshot and the Step executions.)
       */
      const awaitCommitted = <A>(
        check: (snapshot: Wire.AgentSnapshot) => A | undefined,
        _event: Wire.AgentEvent,
        settledSince?: (snapshot: Wire.AgentSnapshot) => A | undefined
      ) =>
        Effect.map(pageSnapshot(), (snapshot) => {
          const found = check(snapshot)
          return Option.fromUndefinedOr(found !== undefined ? found : settledSince?.(snapshot))
        })
      /**
       * The snapshot read after the page of events being applied, read once for the page: it was read after every
       * event of the page committed, so it serves each of them as a snapshot read after that event would.
       */
      let afterPage: Wire.AgentSnapshot | undefined
      const pageSnapshot = () =>
        afterPage !== undefined
          ? Effect.succeed(afterPage)
          : Effect.tap(sessions.getSnapshot(sessionId), (snapshot) =>
              Effect.sync(() => {
                afterPage = snapshot
              })
            )

      const ensureStart = (out: Array<TurnChunk>) => {
        if (!state.started) {
          out.push({ type: "start", messageId: turnId, messageMetadata: { turnId } })
          state.started = true
        }
      }
      const closeText = (out: Array<TurnChunk>) => {
        if (state.text !== null) out.push({ type: "text-end", id: state.text })
        state.text = null
      }
      const closeReasoning = (out: Array<TurnChunk>) => {
        if (state.reasoning !== null) out.push({ type: "reasoning-end", id: state.reasoning })
        state.reasoning = null
      }
      const closeStep = (out: Array<TurnChunk>) => {
        closeText(out)
        closeReasoning(out)
        if (state.step !== null) out.push({ type: "finish-step" })
        state.step = null
      }
      const nextId = (kind: string) => `${turnId}.${kind}${state.counter++}`

      /** Enters the AI SDK step of a RunModel event; false for an event of a superseded attempt. */
      const enterModelStep = (event: Wire.AgentEvent, out: Array<TurnChunk>): boolean => {
        if (state.step === event.stepExecutionId) {
          if (event.attempt < state.attempt) return false
          if (event.attempt > state.attempt) {
            // the parts of the earlier attempt go; the step's start-step stays
            out.push({ type: "reset-step" })
            state.text = null
            state.reasoning = null
            state.attempt = event.attempt
          }
          return true
        }
        closeStep(out)
        out.push({ type: "start-step" })
        state.step = event.stepExecutionId
        state.attempt = event.attempt
        return true
      }

      const announceTool = (toolCallId: string, input: ToolInput, out: Array<TurnChunk>) => {
        const toolMetadata = {
          ...(input.effect === null ? {} : { effect: input.effect }),
          requiresApproval: input.requiresApproval
        }
        out.push(
          { type: "tool-input-start", toolCallId, toolName: input.toolName, dynamic: true, toolMetadata },
          {
            type: "tool-input-available",
            toolCallId,
            toolName: input.toolName,
            input: input.input,
            dynamic: true,
            toolMetadata
          }
        )
        state.tools[toolCallId] = 1
        state.content = true
      }

      const settleTool = (toolCallId: string, outcome: Outcome, out: Array<TurnChunk>) => {
        switch (outcome._tag) {
          case "output":
            out.push({ type: "tool-output-available", toolCallId, output: outcome.output, dynamic: true })
            break
          case "error":
            out.push({ type: "tool-output-error", toolCallId, errorText: outcome.errorText, dynamic: true })
            break
          case "denied":
            out.push({ type: "tool-output-denied", toolCallId })
            break
        }
        state.tools[toolCallId] = 3
      }

      const sendQuestion = (data: UiMessages.QuestionData, out: Array<TurnChunk>) => {
        asked.set(data.interruptId, data)
        out.push({ type: "data-question", id: data.interruptId, data })
        state.questions[data.interruptId] = data.status === "pending" ? 1 : 2
      }

      /** Sends the committed plan when it is newer than the one the browser holds. */
      const sendPlan = (plan: Wire.AgentPlan | null, out: Array<TurnChunk>) => {
        if (plan === null || (state.plan !== undefined && state.plan >= plan.revision)) return
        ensureStart(out)
        const part = UiMessages.planPart(plan)
        out.push({ type: "data-plan", id: part.id, data: part.data })
        state.plan = plan.revision
      }

      /** Ends the stream from the committed state: missing tool parts from the stored messages, then `finish`. */
      const finishFromCommitted = (
        snapshot: Wire.AgentSnapshot,
        endType: string | undefined,
        out: Array<TurnChunk>
      ) => {
        ensureStart(out)
        closeText(out)
        closeReasoning(out)
        const messages = snapshot.messages.filter((m) => m.turnId === turnId && m.role !== "user")
        if (!state.content || (eventsLost && !textSent)) {
          // nothing of the turn's text was sent: rebuild it from the stored messages, one step per model response
          closeStep(out)
          let afterTool = true
          for (const m of messages) {
            if (m.role === "assistant") {
              if (afterTool || state.step === null) {
                closeStep(out)
                out.push({ type: "start-step" })
                state.step = `stored.${m.sequence}`
                afterTool = false
              }
              if (m.toolCallId !== null) {
                if (state.tools[m.toolCallId] !== undefined) continue
                announceTool(
                  m.toolCallId,
                  {
                    toolName: m.toolName ?? "tool",
                    input: parseArguments(m.toolArguments),
                    effect: null,
                    requiresApproval: false
                  },
                  out
                )
              } else if (m.text !== null && m.text.length > 0) {
                const id = nextId("t")
                out.push(
                  { type: "text-start", id },
                  { type: "text-delta", id, delta: m.text },
                  { type: "text-end", id }
                )
                state.content = true
              }
            } else if (m.toolCallId !== null) {
              if (state.step !== null) closeStep(out)
              afterTool = true
              if (state.tools[m.toolCallId] !== 3) {
                settleTool(m.toolCallId, { _tag: "output", output: parseOutput(m.toolOutput) }, out)
              }
            }
          }
        } else {
          for (const m of messages) {
            if (m.role !== "tool" || m.toolCallId === null || state.tools[m.toolCallId] === 3) continue
            if (state.tools[m.toolCallId] === undefined) {
              const input = findInput(snapshot, m.toolCallId)
              if (input !== undefined) announceTool(m.toolCallId, input, out)
            }
            settleTool(m.toolCallId, { _tag: "output", output: parseOutput(m.toolOutput) }, out)
          }
        }
        // questions still shown as pending: their end from the committed state (the resolution event was lost)
        for (const [interruptId, stage] of Object.entries(state.questions)) {
          if (stage !== 1) continue
          const data = asked.get(interruptId) ?? recoverQuestion(snapshot, interruptId)
          if (data === undefined) continue
          const answer = findAnswer(snapshot, interruptId, data.toolCallId)
          sendQuestion({ ...data, status: answer === null ? "closed" : "answered", answer }, out)
        }
        closeStep(out)
        const { reason, status } = finishReasonOf(endType, snapshot)
        out.push({
          type: "finish",
          finishReason: reason,
          messageMetadata: { turnId, turnStatus: status, resumeToken: tokenOf(position, 0, state) }
        })
        done = true
      }

      const translate = (event: Wire.AgentEvent, out: Array<TurnChunk>) =>
        Effect.gen(function* () {
          switch (event.type) {
            case "turn_started":
              ensureStart(out)
              return
            case "text_delta":
            case "reasoning_delta": {
              ensureStart(out)
              if (!enterModelStep(event, out)) return
              state.content = true
              textSent = true
              const delta = (event.payload as Wire.TextDeltaPayload).text
              if (event.type === "text_delta") {
                closeReasoning(out)
                if (state.text === null) {
                  state.text = nextId("t")
                  out.push({ type: "text-start", id: state.text })
                }
                out.push({ type: "text-delta", id: state.text, delta })
              } else {
                closeText(out)
                if (state.reasoning === null) {
                  state.reasoning = nextId("r")
                  out.push({ type: "reasoning-start", id: state.reasoning })
                }
                out.push({ type: "reasoning-delta", id: state.reasoning, delta })
              }
              return
            }
            case "tool_call_deferred": {
              ensureStart(out)
              const { toolCallId } = event.payload
              if (state.tools[toolCallId] !== undefined) return
              if (!enterModelStep(event, out)) return
              closeText(out)
              closeReasoning(out)
              const input = yield* awaitCommitted((s) => findInput(s, toolCallId), event)
              if (Option.isNone(input)) return
              announceTool(toolCallId, input.value, out)
              return
            }
            case "interrupt_raised": {
              const { toolCallId, interruptId, kind } = event.payload
              if (kind === "question") {
                if (state.questions[interruptId] !== undefined) return
                if (state.step === event.stepExecutionId && event.attempt < state.attempt) return
                const data: UiMessages.QuestionData = {
                  interruptId,
                  toolCallId,
                  toolName: event.payload.toolName,
                  question: event.payload.question ?? "",
                  choices: event.payload.choices,
                  allowsFreeText: event.payload.allowsFreeText,
                  deadline: event.payload.deadline,
                  status: "pending",
                  answer: null
                }
                // shown as pending only once the pending interrupt is committed; a question settled already is
                // shown by its interrupt_resolved
                const committed = yield* awaitCommitted(
                  (s) => {
                    const pending = s.pendingInterrupts.find((i) => i.interruptId === interruptId)
                    if (pending !== undefined) return UiMessages.questionPart(pending)?.data
                    return questionSettled(s, interruptId, toolCallId) ? null : undefined
                  },
                  event,
                  // the question committed and is no longer pending: answered or declined, and the Step that
                  // applies the resolution has not committed yet; its interrupt_resolved shows it
                  (s) => (s.pendingInterrupts.some((i) => i.interruptId === interruptId) ? undefined : null)
                )
                if (Option.isNone(committed)) return
                asked.set(interruptId, committed.value ?? data)
                if (committed.value === null) return
                ensureStart(out)
                sendQuestion(committed.value, out)
                return
              }
              if (kind !== "tool_approval" || state.tools[toolCallId] !== 1) return
              if (state.step === event.stepExecutionId && event.attempt < state.attempt) return
              out.push({ type: "tool-approval-request", approvalId: interruptId, toolCallId })
              state.tools[toolCallId] = 2
              return
            }
            case "interrupt_resolved": {
              const { interruptId, approved, rejectionMessage } = event.payload
              if (event.payload.kind === "question") {
                const stage = state.questions[interruptId]
                if (stage === 2 || (stage === undefined && !asked.has(interruptId))) return
                const committed = yield* awaitCommitted((s) => {
                  const data = asked.get(interruptId) ?? recoverQuestion(s, interruptId)
                  if (data === undefined) return turnEnded(s, turnId) ? null : undefined
                  return questionSettled(s, interruptId, data.toolCallId)
                    ? { data, answer: findAnswer(s, interruptId, data.toolCallId) }
                    : undefined
                }, event)
                if (Option.isNone(committed) || committed.value === null) return
                const { data } = committed.value
                const status: UiMessages.QuestionStatus = event.payload.answered
                  ? "answered"
                  : event.payload.cancellationReason !== null
                    ? "closed"
                    : rejectionMessage === Wire.QUESTION_DEADLINE_PASSED_MESSAGE
                      ? "expired"
                      : "declined"
                ensureStart(out)
                sendQuestion({ ...data, status, answer: status === "answered" ? committed.value.answer : null }, out)
                return
              }
              if (state.tools[interruptId] !== 2) return
              const committed = yield* awaitCommitted(
                (s) => (s.pendingInterrupts.some((i) => i.interruptId === interruptId) ? undefined : true),
                event
              )
              if (Option.isNone(committed)) return
              out.push({
                type: "tool-approval-response",
                approvalId: interruptId,
                approved,
                ...(rejectionMessage === null ? {} : { reason: rejectionMessage })
              })
              return
            }
            case "tool_call_started": {
              ensureStart(out)
              const { toolCallId } = event.payload
              if (state.tools[toolCallId] === undefined || state.tools[toolCallId] === 3) return
              closeStep(out)
              out.push({
                type: "data-tool-status",
                id: `status-${toolCallId}`,
                data: { toolCallId, status: "running" },
                // a status, not content: useChat's onData gets it, the message does not keep it
                transient: true
              })
              return
            }
            case "tool_call_finished": {
              ensureStart(out)
              const { toolCallId, status } = event.payload
              if (state.tools[toolCallId] === 3) return
              const settled = yield* awaitCommitted((s) => {
                const outcome = findOutcome(s, toolCallId, status)
                return outcome === undefined ? undefined : { outcome, input: findInput(s, toolCallId) }
              }, event)
              if (Option.isNone(settled)) return
              if (state.step !== event.stepExecutionId) closeStep(out)
              if (state.tools[toolCallId] === undefined) {
                if (settled.value.input === undefined) return
                announceTool(toolCallId, settled.value.input, out)
              }
              settleTool(toolCallId, settled.value.outcome, out)
              return
            }
            case "plan_updated":
            case "plan_execution_started": {
              const { revision } = event.payload
              const plan = yield* awaitCommitted(
                (s) => (s.plan !== null && s.plan.revision >= revision ? s.plan : undefined),
                event
              )
              if (Option.isNone(plan)) return
              sendPlan(plan.value, out)
              return
            }
            case "turn_completed":
            case "turn_failed":
            case "turn_cancelled":
            case "turn_steered": {
              const ended = yield* awaitCommitted((s) => (turnEnded(s, turnId) ? s : undefined), event)
              if (Option.isNone(ended)) return
              finishFromCommitted(ended.value, event.type, out)
              return
            }
            default:
              return
          }
        })

      /** Applies one event; returns its parts with their tokens. */
      const apply = (entry: AgentSessionClient.AgentSessionEvent) =>
        Effect.gen(function* () {
          const previous = position
          if (entry.event.turnId !== turnId) {
            position = entry.token
            return []
          }
          if (!state.started && entry.event.type !== "turn_started") {
            // the turn's first events are gone (trimmed): its text cannot be streamed, the committed state ends it
            eventsLost = true
            return []
          }
          const before = clone(state)
          const out: Array<TurnChunk> = []
          yield* translate(entry.event, out)
          position = entry.token
          const parts = out.map(
            (chunk, i): UiPart => ({
              chunk,
              token: i === out.length - 1 ? tokenOf(position, 0, state) : tokenOf(previous, i + 1, before)
            })
          )
          const dropped = parts.slice(Math.min(skip, parts.length))
          skip = 0
          return dropped
        })

      /** Nothing new in the events: the committed state shows what the events lost, or that the stream can end. */
      const sync = (snapshot: Wire.AgentSnapshot): Array<UiPart> => {
        const st = snapshot.state
        if (st === null) return []
        const active = st.activeTurnId === turnId
        const ended = turnEnded(snapshot, turnId)
        if (!active && !ended) return []
        const out: Array<TurnChunk> = []
        ensureStart(out)
        if (ended) {
          finishFromCommitted(snapshot, undefined, out)
        } else {
          const records = snapshot.toolCalls
            .filter((r) => r.turnId === turnId)
            .sort((a, b) => a.deferralOrder - b.deferralOrder)
          for (const r of records) {
            if (state.tools[r.toolCallId] === undefined) {
              closeStep(out)
              announceTool(r.toolCallId, findInput(snapshot, r.toolCallId)!, out)
            }
            const pending = snapshot.pendingInterrupts.some(
              (i) => i.toolCallId === r.toolCallId && i.kind === "tool_approval"
            )
            if (pending && state.tools[r.toolCallId] === 1) {
              out.push({ type: "tool-approval-request", approvalId: r.toolCallId, toolCallId: r.toolCallId })
              state.tools[r.toolCallId] = 2
            }
            const outcome = findOutcome(snapshot, r.toolCallId)
            if (outcome !== undefined && state.tools[r.toolCallId] !== 3) settleTool(r.toolCallId, outcome, out)
          }
          // questions the events did not show (lost events, or the raise was read before its commit)
          for (const i of snapshot.pendingInterrupts) {
            const part = UiMessages.questionPart(i)
            if (part === undefined || state.questions[i.interruptId] !== undefined) continue
            if (!records.some((r) => r.toolCallId === i.toolCallId)) continue
            sendQuestion(part.data, out)
          }
          const open = records.filter((r) => !Wire.isAgentToolCallFinalStatus(r.status))
          const approval = (r: Wire.AgentToolCall) =>
            r.status === "awaiting_approval" &&
            state.tools[r.toolCallId] === 2 &&
            snapshot.pendingInterrupts.some((i) => i.toolCallId === r.toolCallId && i.kind === "tool_approval")
          const question = (r: Wire.AgentToolCall) =>
            r.status === "awaiting_answer" &&
            snapshot.pendingInterrupts.some(
              (i) => i.toolCallId === r.toolCallId && i.kind === "question" && state.questions[i.interruptId] === 1
            )
          if (open.length > 0 && open.every((r) => approval(r) || question(r))) {
            closeStep(out)
            out.push({
              type: "finish",
              finishReason: "tool-calls",
              messageMetadata: {
                turnId,
                turnStatus: open.some(approval) ? "awaiting_approval" : "awaiting_answer",
                resumeToken: tokenOf(position, 0, state)
              }
            })
            done = true
          }
        }
        const token = tokenOf(position, 0, state)
        return out.map((chunk) => ({ chunk, token }))
      }

      const readEvents = Effect.gen(function* () {
        if (eventsLost) return []
        return yield* readPage.pipe(
          Effect.catchTag("InvalidResumeToken", () =>
            Effect.sync(() => {
              // the engine trimmed the events after our position: the committed state ends the turn
              eventsLost = true
              return []
            })
          )
        )
      })

      if (Object.values(state.questions).some((stage) => stage === 1)) {
        // an exact continuation with open questions: what they asked comes from their interrupt_raised, so an
        // update replaces the browser's part with the whole question
        const raised = yield* sessions
          .events(sessionId, { from: start === null ? "oldest" : { after: start }, follow: false })
          .pipe(
            Stream.filter((e) => e.event.turnId === turnId && e.event.type === "interrupt_raised"),
            Stream.runCollect,
            Effect.orElseSucceed(() => [])
          )
        for (const { event } of raised) {
          if (event.type !== "interrupt_raised" || state.questions[event.payload.interruptId] !== 1) continue
          const p = event.payload
          asked.set(p.interruptId, {
            interruptId: p.interruptId,
            toolCallId: p.toolCallId,
            toolName: p.toolName,
            question: p.question ?? "",
            choices: p.choices,
            allowsFreeText: p.allowsFreeText,
            deadline: p.deadline,
            status: "pending",
            answer: null
          })
        }
      }

      return Stream.paginate(undefined, () =>
        Effect.gen(function* () {
          const out: Array<UiPart> = []
          let events = yield* readEvents
          afterPage = undefined
          if (events.length === 0) {
            // the snapshot first, then the events again: every record the snapshot shows had its events written
            const snapshot = yield* sessions.getSnapshot(sessionId)
            events = yield* readEvents
            // that snapshot was read before these events: the page reads its own
            afterPage = undefined
            if (events.length === 0) {
              out.push(...sync(snapshot))
              if (!done && out.length === 0) yield* watch.next(poll)
            }
          }
          for (const entry of events) {
            if (done) break
            out.push(...(yield* apply(entry)))
          }
          return [out, done ? Option.none() : Option.some(undefined)] as const
        })
      )
    })
  )

/**
 * The headers of a UI message stream response.
 *
 * @category constants
 * @since 0.1.0
 */
export const UI_MESSAGE_STREAM_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-vercel-ai-ui-message-stream": "v1",
  "x-accel-buffering": "no"
}

/**
 * Whether a chunk ends at a resumable point, where the SSE event carries its resume token as `id:`: the
 * message's `start`, the end of each AI SDK step (`finish-step`), a tool part that waits for the user
 * (`tool-approval-request`, a `data-question`), and `finish` (whose metadata has the token too). The chunks
 * between them (text and reasoning deltas, tool inputs and outputs) carry none: a resume replays the turn from its
 * start by default, and an exact continuation needs no more than these points.
 *
 * @category encoding
 * @since 0.1.0
 */
export const isResumablePoint = (chunk: { readonly type: string }): boolean => {
  switch (chunk.type) {
    case "start":
    case "finish-step":
    case "tool-approval-request":
    case "data-question":
    case "finish":
      return true
    default:
      return false
  }
}

/**
 * Encodes parts as the UI message stream's SSE: `data: <chunk JSON>` per part, with `id: <token>` at each
 * resumable point ({@link isResumablePoint}), then `data: [DONE]`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const toSse = <E, R>(parts: Stream.Stream<UiPart, E, R>): Stream.Stream<string, E, R> =>
  Stream.concat(
    Stream.map(parts, (p) =>
      isResumablePoint(p.chunk)
        ? `id: ${p.token}\ndata: ${JSON.stringify(p.chunk)}\n\n`
        : `data: ${JSON.stringify(p.chunk)}\n\n`
    ),
    Stream.succeed("data: [DONE]\n\n")
  )

/**
 * The SSE comment a stream sends at the keep-alive interval while it has nothing else to send, so a proxy does
 * not cut an idle connection (a long tool Step, a wait for an approval's commit). Clients ignore comments.
 *
 * @category encoding
 * @since 0.1.0
 */
export const KEEP_ALIVE_COMMENT = ": keep-alive\n\n"

/**
 * Adds keep-alive comments ({@link KEEP_ALIVE_COMMENT}) to an SSE stream, one per `interval` while the stream
 * runs; the stream's end ends them.
 *
 * @category encoding
 * @since 0.1.0
 */
export const withKeepAlive =
  (interval: Duration.Input) =>
  <E, R>(sse: Stream.Stream<string, E, R>): Stream.Stream<string, E, R> =>
    Stream.merge(sse, Stream.tick(interval).pipe(Stream.drop(1), Stream.as(KEEP_ALIVE_COMMENT)), {
      haltStrategy: "left"
    })
