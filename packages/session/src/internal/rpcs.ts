// The RPCs of the session Flow (docs/session-contract.md, "RPCs"): send_user_message, resolve_interrupt, get_agent_snapshot,
// list_agent_messages, update_session_settings, the steering RPCs, answer_question and execute_plan. Handlers read and write through the RPC's TxView, so
// each commits atomically or not at all.
import { FlowRpc, type RpcDef, StepMovement } from "@durable-agent/engine"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as P from "../Persistence.ts"
import * as Wire from "../wire/index.ts"
import { messageIndex, messagesBefore } from "./messages.ts"
import { NoInput, UpdateSettingsInput } from "./schemas.ts"
import { isBlank, isTurnCancelled, settingsProblem, turnRecords, ZERO_USAGE } from "./session.ts"
import type { SessionSteps } from "./steps/index.ts"

export interface SessionRpcs {
  readonly send_user_message: RpcDef<Wire.AgentUserMessage, boolean>
  readonly resolve_interrupt: RpcDef<Wire.ResolveInterruptRequest, boolean>
  readonly get_agent_snapshot: RpcDef<null, Wire.AgentSnapshot>
  readonly list_agent_messages: RpcDef<Wire.ListAgentMessagesRequest, Wire.AgentMessagesPage>
  readonly update_session_settings: RpcDef<typeof UpdateSettingsInput.Type, boolean>
  readonly cancel_turn: RpcDef<Wire.CancelTurnRequest, boolean>
  readonly steer_user_message: RpcDef<Wire.SteerUserMessageRequest, boolean>
  readonly delete_queued_message: RpcDef<Wire.DeleteQueuedMessageRequest, boolean>
  readonly answer_question: RpcDef<Wire.AnswerQuestionRequest, boolean>
  readonly execute_plan: RpcDef<Wire.ExecutePlanRequest, boolean>
}

/** What the RPC handlers need to know of the session's options. */
export interface RpcOptions {
  readonly planModeEnabled: boolean
}

/** The Steps an RPC handler schedules or cancels; a client-side definition has none (it runs no handler). */
const requireSteps = (steps: SessionSteps | undefined): Effect.Effect<SessionSteps> =>
  steps === undefined
    ? Effect.die(new Error("a client-side session Flow definition does not run RPC handlers"))
    : Effect.succeed(steps)

/**
 * RPC definitions: shared by the Flow (which runs them, with its Steps) and the client (which only names
 * them, without Steps).
 */
export const makeRpcs = (steps?: SessionSteps, options: RpcOptions = { planModeEnabled: false }): SessionRpcs => ({
  send_user_message: FlowRpc({
    name: "send_user_message",
    input: Wire.AgentUserMessage,
    output: Schema.Boolean,
    handler: (ctx, message) =>
      Effect.sync(() => {
        // A plan_mode message is refused unless plan mode is enabled.
        if (isBlank(message.text) || (message.planMode && !options.planModeEnabled)) return { output: false }
        ctx.publish(P.QueuedUserMessages, message)
        return { output: true }
      })
  }),

  resolve_interrupt: FlowRpc({
    name: "resolve_interrupt",
    input: Wire.ResolveInterruptRequest,
    output: Schema.Boolean,
    locks: [P.PendingInterrupts],
    handler: Effect.fnUntraced(function* (ctx, request) {
      const pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])
      const interrupt = pending.find((i) => i.interruptId === request.interruptId)
      if (interrupt === undefined) return { output: false }
      const now = yield* Clock.currentTimeMillis
      if (interrupt.deadline !== null && now >= Date.parse(interrupt.deadline)) return { output: false }
      // On a question, approved=true is not an answer (answer_question is); approved=false declines it.
      if (interrupt.kind === "question" && request.approved) return { output: false }
      ctx.set(
        P.PendingInterrupts,
        pending.filter((i) => i !== interrupt)
      )
      ctx.publishAt(P.InterruptResolutions, interrupt.interruptId, {
        approved: request.approved,
        rejectionMessage: request.approved ? null : request.rejectionMessage,
        answer: null
      })
      return { output: true }
    })
  }),

  // Serializes with resolve_interrupt, ResumeTurn and the waiting Steps on the PendingInterrupts lock.
  answer_question: FlowRpc({
    name: "answer_question",
    input: Wire.AnswerQuestionRequest,
    output: Schema.Boolean,
    locks: [P.PendingInterrupts],
    handler: Effect.fnUntraced(function* (ctx, request) {
      const pending = Option.getOrElse(ctx.get(P.PendingInterrupts), () => [])
      const interrupt = pending.find((i) => i.interruptId === request.interruptId && i.kind === "question")
      if (interrupt === undefined || isBlank(request.answer)) return { output: false }
      const now = yield* Clock.currentTimeMillis
      if (interrupt.deadline !== null && now >= Date.parse(interrupt.deadline)) return { output: false }
      if (!interrupt.allowsFreeText && !interrupt.choices.includes(request.answer)) return { output: false }
      ctx.set(
        P.PendingInterrupts,
        pending.filter((i) => i !== interrupt)
      )
      ctx.publishAt(P.InterruptResolutions, interrupt.interruptId, {
        approved: true,
        rejectionMessage: null,
        answer: request.answer
      })
      return { output: true }
    })
  }),

  // Locks only what short Steps lock (never a model call's Step), so it never waits for a model call. The
  // commit cancels the model call and every waiting Step of the turn, and FinishTurnCancellation records their
  // calls; a final answer that committed first already ended the turn, so this returns false.
  cancel_turn: FlowRpc({
    name: "cancel_turn",
    input: Wire.CancelTurnRequest,
    output: Schema.Boolean,
    locks: [P.TurnCancellationRequest, P.PendingInterrupts],
    handler: Effect.fnUntraced(function* (ctx, request) {
      const state = Option.getOrNull(ctx.get(P.AgentState))
      const turnId = state?.activeTurnId ?? null
      if (state === null || turnId === null) return { output: false }
      if (request.turnId !== null && request.turnId !== turnId) return { output: false }
      if (!state.acceptsTurnControl) return { output: false }
      if (isTurnCancelled(ctx, turnId)) return { output: true }
      const s = yield* requireSteps(steps)
      const now = yield* Clock.currentTimeMillis
      ctx.set(P.TurnCancellationRequest, { turnId, requestedAt: new Date(now).toISOString() })
      return {
        output: true,
        cancelSteps: [
          s.RunModel,
          s.CompactContext,
          s.RecordTurnFailure,
          s.AwaitToolApproval,
          s.AwaitQuestionAnswer,
          s.AwaitTimer,
          s.PollToolTask
        ],
        nextSteps: [StepMovement.of(s.FinishTurnCancellation, turnId)]
      }
    })
  }),

  // Transactional and lock-free. With an active turn the message goes to SteeredUserMessages and a control wake
  // to TurnControlRequests; the turn applies it at its next boundary ("Steering and cancellation rules").
  steer_user_message: FlowRpc({
    name: "steer_user_message",
    input: Wire.SteerUserMessageRequest,
    output: Schema.Boolean,
    handler: (ctx, request) =>
      Effect.sync(() => {
        const { messageId, text } = request
        if ((messageId === null) === (text === null)) return { output: false }
        if (text !== null && isBlank(text)) return { output: false }
        const queued =
          messageId === null ? undefined : ctx.messages(P.QueuedUserMessages).find((m) => m.id === messageId)
        if (messageId !== null && queued === undefined) return { output: false }
        const state = Option.getOrNull(ctx.get(P.AgentState))
        if (state === null) return { output: false }
        if (state.activeTurnId === null) {
          // No turn to steer: the idle wait listens to queued messages, so a text is queued and an ID stays.
          if (text !== null) ctx.publish(P.QueuedUserMessages, { text, planMode: false })
          return { output: true }
        }
        if (!state.acceptsTurnControl) return { output: false }
        if (queued !== undefined) {
          ctx.deleteMessage(P.QueuedUserMessages, queued.id)
          ctx.publish(P.SteeredUserMessages, queued.value)
        } else if (text !== null) {
          ctx.publish(P.SteeredUserMessages, { text, planMode: false })
        }
        ctx.publish(P.TurnControlRequests, { kind: "steer" })
        return { output: true }
      })
  }),

  delete_queued_message: FlowRpc({
    name: "delete_queued_message",
    input: Wire.DeleteQueuedMessageRequest,
    output: Schema.Boolean,
    handler: (ctx, request) =>
      Effect.sync(() => {
        const queued = ctx.messages(P.QueuedUserMessages).find((m) => m.id === request.messageId)
        if (queued === undefined) return { output: false }
        ctx.deleteMessage(P.QueuedUserMessages, queued.id)
        return { output: true }
      })
  }),

  // Serializes on the PendingPlanExecution lock, which AwaitUserMessage's Execute also holds: a second approval
  // is refused until AwaitUserMessage consumed the first, including while its Execute has not committed.
  execute_plan: FlowRpc({
    name: "execute_plan",
    input: Wire.ExecutePlanRequest,
    output: Schema.Boolean,
    locks: [P.PendingPlanExecution],
    handler: (ctx, request) =>
      Effect.sync(() => {
        if (!options.planModeEnabled) return { output: false }
        const state = Option.getOrNull(ctx.get(P.AgentState))
        if (state === null || state.activeTurnId !== null || state.status !== "waiting_for_user_message") {
          return { output: false }
        }
        const plan = Option.getOrNull(ctx.get(P.AgentPlan))
        if (plan === null || plan.revision !== request.revision) return { output: false }
        if (plan.status !== "draft" && plan.status !== "active") return { output: false }
        if (Option.getOrNull(ctx.get(P.PendingPlanExecution))?.revision === request.revision) return { output: false }
        if (ctx.channelSize(P.QueuedUserMessages) > 0 || ctx.channelSize(P.SteeredUserMessages) > 0) {
          return { output: false }
        }
        if (Option.getOrElse(ctx.get(P.PendingInterrupts), () => []).length > 0) return { output: false }
        ctx.set(P.PendingPlanExecution, { revision: request.revision })
        ctx.publishAt(P.PlanExecutions, String(request.revision), { revision: request.revision })
        return { output: true }
      })
  }),

  get_agent_snapshot: FlowRpc({
    name: "get_agent_snapshot",
    input: NoInput,
    output: Wire.AgentSnapshot,
    handler: (ctx) =>
      Effect.sync(() => {
        const state = Option.getOrNull(ctx.get(P.AgentState))
        const pendingMessages = (channel: typeof P.QueuedUserMessages) =>
          ctx.messages(channel).map((m) => ({ messageId: m.id, message: m.value }))
        const queued = pendingMessages(P.QueuedUserMessages)
        return {
          output: {
            state,
            messages: messagesBefore(ctx, null, Wire.SNAPSHOT_MESSAGE_LIMIT),
            pendingInterrupts: Option.getOrElse(ctx.get(P.PendingInterrupts), () => []),
            toolCalls: state?.activeTurnId ? turnRecords(ctx, state.activeTurnId) : [],
            usage: Option.getOrElse(ctx.get(P.AgentUsage), () => ZERO_USAGE),
            queuedMessageCount: queued.length,
            plan: Option.getOrNull(ctx.get(P.AgentPlan)),
            queuedMessages: queued,
            steeredMessages: pendingMessages(P.SteeredUserMessages),
            contextSummary: Option.getOrNull(ctx.get(P.ContextSummary)),
            sessionSettings: Option.getOrNull(ctx.get(P.SessionSettings))
          }
        }
      })
  }),

  list_agent_messages: FlowRpc({
    name: "list_agent_messages",
    input: Wire.ListAgentMessagesRequest,
    output: Wire.AgentMessagesPage,
    handler: (ctx, request) =>
      Effect.sync(() => {
        const limit = Math.min(Wire.MAX_LIST_AGENT_MESSAGES_LIMIT, Math.max(1, Math.trunc(request.limit)))
        const before = request.beforeSequence
        const page = messagesBefore(ctx, before, limit)
        // The oldest stored message is AgentMessageIndex.first_sequence, 1 without an index.
        const oldest = messageIndex(ctx).firstSequence
        const first = page[0]
        return {
          output: {
            messages: page,
            nextBeforeSequence: first === undefined || first.sequence <= oldest ? null : first.sequence,
            deletedBeforeSequence: oldest > 1 ? oldest : null
          }
        }
      })
  }),

  update_session_settings: FlowRpc({
    name: "update_session_settings",
    input: UpdateSettingsInput,
    output: Schema.Boolean,
    handler: (ctx, request) =>
      Effect.sync(() => {
        const settings = request.sessionSettings
        if (Option.isNone(ctx.get(P.AgentState)) || settings === null || settingsProblem(settings) !== undefined) {
          return { output: false }
        }
        if (Object.keys(settings as object).length === 0) ctx.delete(P.SessionSettings)
        else ctx.set(P.SessionSettings, settings as Wire.SessionSettings)
        return { output: true }
      })
  })
})
