/**
 * The chat's sessions: which one is current (remembered next to the database), attaching to one
 * (resuming a running turn from the snapshot and the events, then following its events), sending
 * messages, answering approvals, listing sessions and showing a session's Step history.
 */
import { readFile, writeFile } from "node:fs/promises"
import { Client, type EngineError, type FlowNotFound, Inspect } from "@durable-agent/engine"
import { AgentSessionClient, type Wire } from "@durable-agent/session"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberHandle from "effect/FiberHandle"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { SqlClient } from "effect/sql"
import { FLOW_TYPE } from "./agent.ts"
import {
  approvalLines,
  approvalPrompt,
  approveLine,
  chatLine,
  describeCall,
  errorLine,
  finishedLine,
  isUserText,
  questionLines,
  Screen,
  showMessage,
  stepLines,
  toolLine,
  YOU_PROMPT
} from "./ui.ts"

/** One session as `/sessions` lists it. */
export interface SessionInfo {
  readonly sessionId: string
  readonly current: boolean
  readonly status: string
  readonly turns: number | null
  readonly startedAt: number
}

/** What the chat's operations can fail with: the session client's and the engine's errors. */
export type ChatError =
  | AgentSessionClient.RpcError
  | AgentSessionClient.StartError
  | AgentSessionClient.EventsError
  | EngineError
  | FlowNotFound

export interface ChatShape {
  /** The current session's ID. */
  readonly current: Effect.Effect<string>
  /** Opens the session of last time (or the newest, or a new one) and follows it. */
  readonly openInitial: Effect.Effect<void, ChatError>
  /** Switches to a session. */
  readonly resume: (sessionId: string) => Effect.Effect<void, ChatError>
  /** Starts a new session and switches to it. */
  readonly create: Effect.Effect<string, ChatError>
  readonly list: Effect.Effect<ReadonlyArray<SessionInfo>, ChatError>
  /** Sends a user message to the current session. */
  readonly send: (text: string) => Effect.Effect<void, ChatError>
  /** The approval the chat is asking for, if any. */
  readonly asking: Effect.Effect<Option.Option<Wire.AgentInterrupt>>
  /** Answers the approval the chat is asking for (or declines its question with `false`). */
  readonly answer: (approved: boolean) => Effect.Effect<void, ChatError>
  /** Answers the question the chat is asking with a text. */
  readonly answerText: (text: string) => Effect.Effect<void, ChatError>
  /** Whether a turn of the current session runs. */
  readonly busy: Effect.Effect<boolean>
  /** Cancels the running turn (`cancel_turn`); the session stays open. */
  readonly cancel: Effect.Effect<void, ChatError>
  /** Sends a message that asks for a plan first (`plan_mode`): a planning turn, in which the agent only plans. */
  readonly plan: (text: string) => Effect.Effect<void, ChatError>
  /** Approves the current plan revision (`execute_plan`), which starts a turn that carries it out. */
  readonly executePlan: Effect.Effect<void, ChatError>
  /** Steers the running turn with a new message (`steer_user_message`); queued when no turn runs. */
  readonly steer: (text: string) => Effect.Effect<void, ChatError>
  /** The current session's Steps (or, with `full`, the engine's whole history of it). */
  readonly history: (full: boolean) => Effect.Effect<string, ChatError>
  /** Shows the prompt that fits the state: an approval question, nothing while the agent works, or `you>`. */
  readonly refreshPrompt: Effect.Effect<void>
}

/** What the screen shows of the current session. */
interface View {
  readonly sessionId: string
  /** Opened when this process started: nothing of the session ran in this process before. */
  readonly afterStart: boolean
  /** A turn is running. */
  busy: boolean
  /** Pending approvals, the first one asked. */
  pending: Array<Wire.AgentInterrupt>
  /** Tool calls seen in snapshots, by ID (for their arguments and results). */
  readonly calls: Map<string, Wire.AgentToolCall>
  /** Tool names of approvals seen in events, by interrupt ID. */
  readonly approvals: Map<string, string>
  /** The Step attempt that streamed text last. */
  lastText: { readonly stepExecutionId: string; readonly attempt: number } | null
  /**
   * Model Steps that streamed text before this process started: the process that ran them is gone, so
   * text they stream now comes from a new run of the Step (possibly with the same attempt number).
   */
  readonly rerun: Set<string>
}

/** When this process started: a Step created before it and run after it waited across a restart. */
const processStartedAt = Date.now() - Math.round(process.uptime() * 1000)

const makeView = (sessionId: string, afterStart = false): View => ({
  sessionId,
  afterStart,
  busy: false,
  pending: [],
  calls: new Map(),
  approvals: new Map(),
  lastText: null,
  rerun: new Set()
})

/** A session's status in words. */
export const statusOf = (snapshot: Wire.AgentSnapshot): string => {
  if (snapshot.pendingInterrupts.length > 0) return "waiting for an approval"
  switch (snapshot.state?.status) {
    case undefined:
      return "starting"
    case "waiting_for_user_message":
      return "waiting for a message"
    case "running_model":
      return "running the model"
    case "running_tools":
      return "running tools"
    case "compacting_context":
      return "compacting its context"
    case "failed":
      return `failed: ${snapshot.state.lastTurnError ?? "unknown error"}`
  }
}

/** The chat's session logic, over the session client, the engine client and the screen. */
export class Chat extends Context.Service<Chat, ChatShape>()("examples/chat/Chat") {
  /** `currentFile` remembers the current session between runs. */
  static readonly layer = (options: {
    readonly currentFile: string
  }): Layer.Layer<Chat, never, AgentSessionClient.AgentSessionClient | Client.Client | SqlClient.SqlClient | Screen> =>
    Layer.effect(
      Chat,
      Effect.gen(function* () {
        const client = yield* AgentSessionClient.AgentSessionClient
        const engine = yield* Client.Client
        const sql = yield* SqlClient.SqlClient
        const screen = yield* Screen
        const follower = yield* FiberHandle.make<void, never>()
        let view = makeView("")

        const print = (text: string) => screen.print(text)

        const refreshPrompt = Effect.suspend(() => {
          const asking = view.pending[0]
          return screen.setPrompt(asking !== undefined ? approvalPrompt(asking) : view.busy ? null : YOU_PROMPT)
        })

        /** Reads the snapshot into the view's tool calls. */
        const loadCalls = (v: View) =>
          Effect.map(client.getSnapshot(v.sessionId), (snapshot) => {
            for (const call of snapshot.toolCalls) v.calls.set(call.toolCallId, call)
            return snapshot
          })

        /**
         * The pending interrupt an `interrupt_raised` event names. The event commits with the transition that
         * raised it, so the snapshot read after it shows the interrupt, unless it was resolved meanwhile (none).
         */
        const pendingInterrupt = (sessionId: string, interruptId: string) =>
          Effect.map(client.getSnapshot(sessionId), (s) =>
            Option.fromNullishOr(s.pendingInterrupts.find((i) => i.interruptId === interruptId))
          )

        const ask = (v: View, interrupt: Wire.AgentInterrupt) =>
          Effect.gen(function* () {
            if (v.pending.some((p) => p.interruptId === interrupt.interruptId)) return
            v.pending.push(interrupt)
            v.approvals.set(interrupt.interruptId, interrupt.toolName)
            yield* print(interrupt.kind === "question" ? questionLines(interrupt) : approvalLines(interrupt))
          })

        /** Shows one event. `replay` shows a resumed turn's earlier events without asking again. */
        const show = (
          v: View,
          event: Wire.AgentEvent,
          replay: boolean
        ): Effect.Effect<void, AgentSessionClient.RpcError> =>
          Effect.gen(function* () {
            switch (event.type) {
              case "turn_started":
                v.busy = true
                v.lastText = null
                return
              case "text_delta": {
                const last = v.lastText
                if (!replay && v.rerun.delete(event.stepExecutionId)) {
                  yield* print(chatLine(`the model call ${event.stepExecutionId} runs again; its answer starts over`))
                } else if (last?.stepExecutionId === event.stepExecutionId && last.attempt !== event.attempt) {
                  yield* print(
                    chatLine(`the model call ${event.stepExecutionId} started over (attempt ${event.attempt})`)
                  )
                }
                if (replay && v.afterStart) v.rerun.add(event.stepExecutionId)
                v.lastText = { stepExecutionId: event.stepExecutionId, attempt: event.attempt }
                return yield* screen.agentText(event.payload.text)
              }
              case "tool_call_started": {
                const { toolCallId, toolName } = event.payload
                if (!v.calls.has(toolCallId)) yield* loadCalls(v)
                return yield* print(toolLine(`… ${describeCall(toolName, v.calls.get(toolCallId)?.arguments)} started`))
              }
              case "tool_call_finished": {
                const { toolCallId, toolName, status } = event.payload
                // the call's record as the commit that finished it wrote it (the event commits with it; gone: its
                // turn has ended)
                yield* loadCalls(v)
                return yield* print(finishedLine(toolName, status, v.calls.get(toolCallId)))
              }
              case "interrupt_raised": {
                v.approvals.set(event.payload.interruptId, event.payload.toolName)
                if (replay) return
                const interrupt = yield* pendingInterrupt(v.sessionId, event.payload.interruptId)
                return yield* Option.isNone(interrupt) ? Effect.void : ask(v, interrupt.value)
              }
              case "interrupt_resolved": {
                const { interruptId, approved, kind, answered, cancellationReason } = event.payload
                v.pending = v.pending.filter((p) => p.interruptId !== interruptId)
                const name = v.approvals.get(interruptId) ?? interruptId
                const outcome =
                  cancellationReason === "steered"
                    ? "abandoned (steered)"
                    : cancellationReason === "turn_cancelled"
                      ? "abandoned (turn cancelled)"
                      : kind === "question"
                        ? answered
                          ? "answered"
                          : "declined"
                        : approved
                          ? "approved"
                          : "rejected"
                return yield* print(approveLine(`${name}: ${outcome}`))
              }
              case "turn_completed":
                v.busy = false
                return yield* screen.endAgentText
              case "turn_failed":
                v.busy = false
                return yield* print(errorLine(`the turn failed: ${event.payload.error}`))
              case "turn_cancelled":
                v.busy = false
                return yield* print(chatLine("the turn was cancelled"))
              case "turn_steered":
                return yield* print(chatLine("the turn was steered by a newer message"))
              case "plan_updated": {
                if (replay) return
                const revision = event.payload.revision
                // the event commits with the revision: the snapshot shows it, or a later one
                const current = (yield* client.getSnapshot(v.sessionId)).plan
                if (current === null || current.revision !== revision) return
                const tasks = current.tasks.map((t) => `  [${t.status}] ${t.content}`)
                const hint = current.status === "draft" ? ["/execute runs it; /plan <text> revises it"] : []
                return yield* print(
                  chatLine([`plan revision ${current.revision} (${current.status}):`, ...tasks, ...hint].join("\n"))
                )
              }
              default:
                return
            }
          })

        /** Follows the session's events after `token`, until the session closes or the chat switches. */
        const follow = (v: View, token: string | undefined) =>
          client
            .events(v.sessionId, {
              from: token === undefined ? "oldest" : { after: token },
              follow: true,
              pollInterval: "50 millis"
            })
            .pipe(
              Stream.runForEach(({ event }) =>
                show(v, event, false).pipe(
                  Effect.catch((error) => print(errorLine(`cannot show ${event.type}: ${error.message}`))),
                  Effect.andThen(refreshPrompt)
                )
              ),
              Effect.andThen(print(chatLine(`session ${v.sessionId} is closed; /new starts another`))),
              Effect.catch((error) => print(errorLine(`lost the session's events: ${error.message}`)))
            )

        const saveCurrent = (sessionId: string) =>
          Effect.promise(() => writeFile(options.currentFile, `${sessionId}\n`, "utf8").catch(() => undefined))

        /** Attaches the screen to a session: resumes a running turn, then follows new events. */
        const attach = (sessionId: string, how: "opened" | "switched" | "new") =>
          Effect.gen(function* () {
            yield* FiberHandle.clear(follower)
            yield* screen.endAgentText
            const v = makeView(sessionId, how === "opened")
            view = v
            yield* saveCurrent(sessionId)
            // the token first, then the snapshot: an event in between is followed, and asked only once
            const past = Array.from(yield* Stream.runCollect(client.events(sessionId)))
            const snapshot = yield* loadCalls(v)
            const activeTurn = snapshot.state?.activeTurnId ?? null
            const turns = snapshot.state?.turnCount ?? 0
            if (activeTurn !== null) {
              const waiting = snapshot.pendingInterrupts.length > 0 ? "; it waits for your approval" : ""
              yield* print(
                chatLine(`Resuming session ${sessionId}: the turn that was running continues where it was${waiting}.`)
              )
              v.busy = true
              const user = snapshot.messages.find((m) => m.turnId === activeTurn && m.role === "user")
              if (user !== undefined) yield* showMessage(screen, user)
              for (const { event } of past) {
                if (event.turnId === activeTurn) yield* show(v, event, true)
              }
              yield* screen.endAgentText
              for (const interrupt of snapshot.pendingInterrupts) yield* ask(v, interrupt)
            } else if (how === "new") {
              yield* print(chatLine(`Session ${sessionId} (new). Try: summarize the notes`))
            } else {
              const turnsText = `${turns} turn${turns === 1 ? "" : "s"}`
              yield* print(chatLine(`Session ${sessionId} (${turnsText}, ${statusOf(snapshot)}).`))
              // a continuation's message is the model's, not the user's; a turn note shows as one line
              const said = snapshot.messages.filter(
                (m) =>
                  m.text !== null &&
                  m.text !== "" &&
                  (m.role === "assistant" ||
                    (m.role === "user" && (isUserText(snapshot.messages, m) || m.text.startsWith("[Dex] "))))
              )
              for (const message of said.slice(-4)) yield* showMessage(screen, message)
            }
            yield* refreshPrompt
            yield* FiberHandle.run(follower, follow(v, past.at(-1)?.token))
          })

        const sessions = engine.listFlows({ flowType: FLOW_TYPE, limit: 100 })

        const nextId = Effect.map(sessions, (flows) => {
          const numbers = flows.map((f) => Number(/^chat-(\d+)$/.exec(f.flowId)?.[1] ?? 0))
          return `chat-${Math.max(0, ...numbers) + 1}`
        })

        const create = Effect.gen(function* () {
          const sessionId = yield* nextId
          yield* client.startSession(sessionId)
          yield* attach(sessionId, "new")
          return sessionId
        })

        const isOpen = (sessionId: string) =>
          engine.describeFlow(sessionId).pipe(
            Effect.map((d) => d.flowType === FLOW_TYPE && d.status === "running"),
            Effect.orElseSucceed(() => false)
          )

        const openInitial = Effect.gen(function* () {
          const saved = yield* Effect.promise(() =>
            readFile(options.currentFile, "utf8").then(
              (text) => text.trim(),
              () => ""
            )
          )
          if (saved !== "" && (yield* isOpen(saved))) return yield* attach(saved, "opened")
          const newest = (yield* sessions).find((f) => f.status === "running")
          if (newest !== undefined) return yield* attach(newest.flowId, "opened")
          yield* create
        })

        const list = Effect.gen(function* () {
          const flows = yield* sessions
          return yield* Effect.forEach(flows, (f) =>
            f.status !== "running"
              ? Effect.succeed<SessionInfo>({
                  sessionId: f.flowId,
                  current: f.flowId === view.sessionId,
                  status: f.status,
                  turns: null,
                  startedAt: f.startedAt
                })
              : Effect.map(
                  client.getSnapshot(f.flowId),
                  (snapshot): SessionInfo => ({
                    sessionId: f.flowId,
                    current: f.flowId === view.sessionId,
                    status: statusOf(snapshot),
                    turns: snapshot.state?.turnCount ?? 0,
                    startedAt: f.startedAt
                  })
                )
          )
        })

        const resume = (sessionId: string) =>
          Effect.gen(function* () {
            const found = yield* engine.describeFlow(sessionId).pipe(Effect.option)
            if (Option.isNone(found) || found.value.flowType !== FLOW_TYPE) {
              return yield* print(errorLine(`no session ${sessionId}; /sessions lists them`))
            }
            yield* attach(sessionId, "switched")
          })

        const send = (text: string, planMode = false) =>
          Effect.gen(function* () {
            view.busy = true
            yield* refreshPrompt
            const accepted = yield* client.sendUserMessage(view.sessionId, { text, planMode })
            if (!accepted) {
              view.busy = false
              yield* print(
                errorLine(
                  planMode
                    ? "the session did not take that message: plan mode needs --runner stepwise"
                    : "the session did not take that message"
                )
              )
            }
          })

        const plan = (text: string) => send(text, true)

        const executePlan = Effect.gen(function* () {
          const snapshot = yield* client.getSnapshot(view.sessionId)
          const current = snapshot.plan
          if (current === null || (current.status !== "draft" && current.status !== "active")) {
            return yield* print(errorLine("there is no plan to execute; /plan <text> asks for one"))
          }
          const accepted = yield* client.executePlan(view.sessionId, current.revision)
          if (!accepted) yield* print(errorLine(`plan revision ${current.revision} cannot run now`))
          else {
            view.busy = true
            yield* print(chatLine(`executing plan revision ${current.revision}`))
          }
        })

        const answer = (approved: boolean) =>
          Effect.gen(function* () {
            const v = view
            const interrupt = v.pending.shift()
            if (interrupt === undefined) return
            const resolved = yield* client
              .resolveInterrupt(v.sessionId, {
                interruptId: interrupt.interruptId,
                approved,
                rejectionMessage:
                  approved || interrupt.kind === "question"
                    ? null
                    : `The user rejected this ${interrupt.toolName} call.`
              })
              // still pending: ask again
              .pipe(Effect.onError(() => Effect.sync(() => v.pending.unshift(interrupt))))
            if (!resolved) yield* print(errorLine(`the approval of ${interrupt.toolName} is no longer pending`))
          })

        const answerText = (text: string) =>
          Effect.gen(function* () {
            const v = view
            const interrupt = v.pending[0]
            if (interrupt === undefined) return
            const accepted = yield* client.answerQuestion(v.sessionId, {
              interruptId: interrupt.interruptId,
              answer: text
            })
            if (accepted) v.pending.shift()
            else if (interrupt.choices.length > 0 && !interrupt.allowsFreeText) {
              yield* print(errorLine(`please answer one of: ${interrupt.choices.join(", ")}`))
            } else yield* print(errorLine("the question is no longer pending"))
          })

        const cancel = Effect.gen(function* () {
          const cancelled = yield* client.cancelTurn(view.sessionId)
          if (!cancelled) yield* print(errorLine("no turn is running"))
          else yield* print(chatLine("cancelling the turn…"))
        })

        const steer = (text: string) =>
          Effect.gen(function* () {
            const steered = yield* client.steerUserMessage(view.sessionId, { text })
            if (!steered) yield* print(errorLine("the session did not take that message"))
            else if (view.busy)
              yield* print(chatLine("steering: the turn ends at its next step and this message starts the next"))
            else view.busy = true
          })

        const history = (full: boolean) =>
          Effect.gen(function* () {
            const sessionId = view.sessionId
            if (full) return yield* Effect.provideService(Inspect.renderHistory(sessionId), SqlClient.SqlClient, sql)
            const steps = yield* engine.stepExecutions(sessionId)
            return [
              `Steps of session ${sessionId} (${steps.length}; /history full shows the engine's whole history):`,
              stepLines(steps, processStartedAt)
            ].join("\n")
          })

        return {
          current: Effect.sync(() => view.sessionId),
          openInitial,
          resume,
          create,
          list,
          send: (text: string) => send(text),
          plan,
          executePlan,
          asking: Effect.sync(() => Option.fromUndefinedOr(view.pending[0])),
          answer,
          answerText,
          busy: Effect.sync(() => view.busy),
          cancel,
          steer,
          history,
          refreshPrompt
        } satisfies ChatShape
      })
    )
}
