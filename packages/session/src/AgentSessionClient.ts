/**
 * `AgentSessionClient`: the application's side of a session Flow type over the engine `Client`. It starts
 * and stops sessions, calls every RPC (retrying `RpcLockConflict` for up to 5 seconds, as a locking RPC
 * fails at once while a Step holds its lock), and reads the decoded `AgentEvents` with resume tokens.
 *
 * The client needs only the Flow type: it carries no runner, so client applications do not load one.
 *
 * @since 0.1.0
 */
import { Client, type EngineError, Flow, type FlowDef, type RpcDef, Step } from "@durable-agent/engine"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { AwaitTurnTimeout, type LiveClockRequired, SessionSettingsTooLarge } from "./Errors.ts"
import { requireLiveClock } from "./internal/clock.ts"
import { makeRpcs, type SessionRpcs } from "./internal/rpcs.ts"
import { StartInput } from "./internal/schemas.ts"
import * as P from "./Persistence.ts"
import * as Wire from "./wire/index.ts"

type EngineClient = Client.ClientShape

/**
 * The errors of an RPC call through the engine client.
 *
 * @category models
 * @since 0.1.0
 */
export type RpcError = Effect.Error<ReturnType<EngineClient["invokeRpc"]>>

/**
 * The errors of `updateSessionSettings`: an RPC error, or settings over the client-side size limit.
 *
 * @category models
 * @since 0.1.0
 */
export type UpdateSettingsError = RpcError | SessionSettingsTooLarge

/**
 * The errors of starting a session.
 *
 * @category models
 * @since 0.1.0
 */
export type StartError = Effect.Error<ReturnType<EngineClient["startFlow"]>> | SessionSettingsTooLarge

/**
 * The errors of stopping a session.
 *
 * @category models
 * @since 0.1.0
 */
export type StopError = Effect.Error<ReturnType<EngineClient["stopFlow"]>>

/**
 * The errors of reading a session's events.
 *
 * @category models
 * @since 0.1.0
 */
export type EventsError = Stream.Error<ReturnType<EngineClient["readStream"]>>

/**
 * One decoded event with its resume token (pass it as `from: { after: token }` to continue after it).
 *
 * @category models
 * @since 0.1.0
 */
export interface AgentSessionEvent {
  readonly token: string
  readonly event: Wire.AgentEvent
}

/**
 * Options of `startSession`.
 *
 * @category models
 * @since 0.1.0
 */
export interface StartSessionOptions {
  readonly initialMessage?: string | null | undefined
  readonly sessionSettings?: Wire.SessionSettings | null | undefined
  /** Makes a repeated start with the same ID return the existing run. */
  readonly requestId?: string | undefined
  /**
   * The session Flow's default Step durability (Dex `configOverride.stepDurability`). Every session Step sets
   * SYNC explicitly, so an `async` default changes none of them; the engine records it in the history.
   */
  readonly stepDurability?: "sync" | "async" | undefined
}

/**
 * Options of the RPCs that change a session (`sendUserMessage`, `resolveInterrupt`, `answerQuestion`,
 * `steerUserMessage`, `cancelTurn`).
 *
 * @category models
 * @since 0.1.0
 */
export interface RequestOptions {
  /**
   * The caller's idempotency key for this request (1 to 200 characters, unique per session and request, e.g. a
   * UUID made when the user pressed send). A retry with the same key after an ambiguous failure (a timeout, a
   * dropped connection, a crash of the worker between its commit and its reply) returns the first call's
   * result and changes nothing: no second message is queued, no interrupt is answered twice. The same key with
   * other arguments fails with `IdempotencyKeyReused`. See `InvokeRpcOptions.requestId` of the engine client.
   */
  readonly requestId?: string | undefined
}

/**
 * The service shape of {@link AgentSessionClient}.
 *
 * @category models
 * @since 0.1.0
 */
export interface AgentSessionClientShape {
  readonly flowType: string
  /** Starts a session (a Flow whose ID is the session ID); returns its run ID. */
  readonly startSession: (sessionId: string, options?: StartSessionOptions) => Effect.Effect<string, StartError>
  /** Stops a session; `cancel` by default. */
  readonly stopSession: (
    sessionId: string,
    options?: { readonly reason?: string | undefined; readonly mode?: "cancel" | "terminate" | "fail" | undefined }
  ) => Effect.Effect<void, StopError>
  /**
   * `send_user_message`: false for blank text. `{ text, planMode: true }` asks for a planning turn, which a
   * session accepts only with plan mode enabled (false otherwise).
   */
  readonly sendUserMessage: (
    sessionId: string,
    message: string | Wire.AgentUserMessage,
    options?: RequestOptions
  ) => Effect.Effect<boolean, RpcError>
  /** `resolve_interrupt`: false when the interrupt is not pending or its deadline passed. */
  readonly resolveInterrupt: (
    sessionId: string,
    request: {
      readonly interruptId: string
      readonly approved: boolean
      readonly rejectionMessage?: string | null | undefined
    },
    options?: RequestOptions
  ) => Effect.Effect<boolean, RpcError>
  /**
   * `answer_question`: answers a pending question (`ask_user`, or a tool's `<tool_call_id>-input-<n>`). False
   * when it is not a pending question, its deadline passed, the answer is blank, or it is not one of the
   * choices of a question without free text. Decline with `resolveInterrupt({ approved: false })`.
   */
  readonly answerQuestion: (
    sessionId: string,
    request: { readonly interruptId: string; readonly answer: string },
    options?: RequestOptions
  ) => Effect.Effect<boolean, RpcError>
  /**
   * `cancel_turn`: stops the active turn (or `turnId` when it is still the active one) without ending the
   * session. True means the cancellation is recorded: a running model call is aborted, waiting approvals
   * are rejected, and the session waits for the next message; a final answer that committed first wins
   * (false, as for no active turn). A started tool call runs to its end.
   */
  readonly cancelTurn: (
    sessionId: string,
    options?: { readonly turnId?: string | null | undefined } & RequestOptions
  ) => Effect.Effect<boolean, RpcError>
  /**
   * `steer_user_message`: redirects the active turn with a new text or a queued message (by its
   * `messageId` from the snapshot's `queuedMessages`). The turn ends at its next boundary, abandoning only
   * the calls that took no effect, and the steered messages start the next turn in order. Without an active
   * turn a text is queued like `sendUserMessage`. False for a blank text or an ID that is not queued.
   */
  readonly steerUserMessage: (
    sessionId: string,
    message: { readonly text: string } | { readonly messageId: string },
    options?: RequestOptions
  ) => Effect.Effect<boolean, RpcError>
  /**
   * `execute_plan`: approves plan revision `revision` (the snapshot's `plan.revision`) of a session with plan
   * mode. The session then starts an executing turn, in which the model carries out the plan and keeps its task
   * statuses current with `write_todos`. False unless the session waits for a user message, the plan has this
   * revision and is `draft` or `active`, this revision is not already approved, and no queued or steered message
   * or interrupt is pending. Retried inside the client while AwaitUserMessage holds the lock.
   */
  readonly executePlan: (sessionId: string, revision: number) => Effect.Effect<boolean, RpcError>
  /** `delete_queued_message`: removes a queued message by its ID; false when it is not queued. */
  readonly deleteQueuedMessage: (sessionId: string, messageId: string) => Effect.Effect<boolean, RpcError>
  /** `get_agent_snapshot`, read from committed state (`Client.queryRpc`): it never writes or waits for a Step. */
  readonly getSnapshot: (sessionId: string) => Effect.Effect<Wire.AgentSnapshot, RpcError>
  /** `list_agent_messages`, oldest first; `limit` defaults to 50. Read from committed state, as `getSnapshot`. */
  readonly listMessages: (
    sessionId: string,
    request?: { readonly beforeSequence?: number | null | undefined; readonly limit?: number | undefined }
  ) => Effect.Effect<Wire.AgentMessagesPage, RpcError>
  /** `update_session_settings`: replaces the next turn's settings; `{}` clears them. */
  readonly updateSessionSettings: (
    sessionId: string,
    settings: Wire.SessionSettings | null
  ) => Effect.Effect<boolean, UpdateSettingsError>
  /**
   * Waits until the session has settled: started, no active turn, no queued message, and at least `turn` turns
   * ended when given. Returns that snapshot. It reads again at each of the session's commit notices, and after
   * `pollInterval` (at least 1 s, the default) for a notice it missed. A turn that waits for an approval is
   * still active, so resolve it first. Fails with {@link AwaitTurnTimeout} after `timeout` (default 60 seconds), and at once with
   * {@link LiveClockRequired} under `TestClock` (`it.effect`): use `it.live` in tests.
   */
  readonly awaitTurn: (
    sessionId: string,
    options?: {
      readonly turn?: number | undefined
      readonly timeout?: Duration.Input | undefined
      readonly pollInterval?: Duration.Input | undefined
    }
  ) => Effect.Effect<Wire.AgentSnapshot, RpcError | EngineError | AwaitTurnTimeout | LiveClockRequired>
  /**
   * The session's events, decoded; with `follow` it keeps reading until the session closes, waiting for the
   * session's commit notices (`pollInterval`, at least 1 s, is the fallback for a missed one). An event that does
   * not decode is skipped with a warning in the log that names its type, its token and the decode error.
   */
  readonly events: (
    sessionId: string,
    options?: {
      readonly from?: "oldest" | { readonly after: string } | undefined
      readonly follow?: boolean | undefined
      readonly pollInterval?: Duration.Input | undefined
    }
  ) => Stream.Stream<AgentSessionEvent, EventsError>
}

const utf8 = new TextEncoder()

/**
 * The client-side check of session settings: their compact JSON text in UTF-8 is at most
 * `Wire.MAX_SESSION_SETTINGS_BYTES` (16,384) bytes, or the call fails with {@link SessionSettingsTooLarge}
 * before anything is sent. The session's own check accepts `Wire.SESSION_SETTINGS_SIZE_TOLERANCE_BYTES` more.
 *
 * @category validation
 * @since 0.1.0
 */
export const checkSessionSettings = (
  settings: Wire.SessionSettings | null | undefined
): Effect.Effect<void, SessionSettingsTooLarge> => {
  if (settings === null || settings === undefined) return Effect.void
  const bytes = utf8.encode(JSON.stringify(settings) ?? "null").length
  return bytes > Wire.MAX_SESSION_SETTINGS_BYTES
    ? Effect.fail(new SessionSettingsTooLarge({ bytes, limit: Wire.MAX_SESSION_SETTINGS_BYTES }))
    : Effect.void
}

/** Retries a locking RPC that met a running Step's lock, for up to 5 seconds. */
const retryLockConflicts = <A, E extends { readonly _tag: string }, R>(self: Effect.Effect<A, E, R>) =>
  Effect.retry(self, {
    while: (e: E) => e._tag === "RpcLockConflict",
    schedule: Schedule.spaced("25 millis").pipe(Schedule.upTo({ duration: Duration.seconds(5) }))
  })

const encodeEnvelope = Schema.encodeSync(Wire.AgentEventEnvelope)

/** What the client's reads read lazily: the message chunks (a snapshot or a page reads only the newest it needs). */
const LAZY = [P.AgentMessageChunks]

const messageJson = Schema.toCodecJson(Wire.AgentMessage)
const encodeMessage = Schema.encodeUnknownSync(messageJson)
const decodeMessage = Schema.decodeUnknownSync(messageJson)
/** Each stored message's trip through its JSON codec, by the decoded message (the engine decodes a stored value once). */
const roundTrips = new WeakMap<Wire.AgentMessage, Wire.AgentMessage>()

/**
 * What a message of an RPC's reply decodes to: the message through `Wire.AgentMessage`'s JSON codec and back,
 * as every element of the reply's `messages` goes (a Struct's fields and an Array's elements are coded one by
 * one). Done once per decoded message, which the engine shares between reads of the same stored value.
 */
const roundTrip = (message: Wire.AgentMessage): Wire.AgentMessage => {
  let out = roundTrips.get(message)
  if (out === undefined) {
    out = decodeMessage(JSON.parse(JSON.stringify(encodeMessage(message)))) as Wire.AgentMessage
    roundTrips.set(message, out)
  }
  return out
}

/**
 * The messages of a reply page through `roundTrip`, by the page: a read of a session that did not change since
 * gets the page it built before (`messagesBefore`), whose messages went through their codec already.
 */
const roundTripPages = new WeakMap<ReadonlyArray<Wire.AgentMessage>, ReadonlyArray<Wire.AgentMessage>>()

/** A page's messages through `roundTrip`, as a new array (the caller's to keep). */
const roundTripPage = (page: ReadonlyArray<Wire.AgentMessage>): Array<Wire.AgentMessage> => {
  let out = roundTripPages.get(page)
  if (out === undefined) {
    out = page.map(roundTrip)
    roundTripPages.set(page, out)
  }
  return out.slice()
}

/**
 * A client-side definition of a session Flow type: its start input, RPCs and event Stream, without Step
 * bodies. Worker and client agree on it by Flow type and names.
 *
 * @category constructors
 * @since 0.1.0
 */
export const clientFlow = (flowType: string): FlowDef<StartInput> & { readonly rpcs_: SessionRpcs } => {
  const rpcs = makeRpcs()
  const flow = Flow({
    type: flowType,
    start: Step({
      type: "StartAgentSession",
      input: StartInput,
      execute: () => Effect.die(new Error("a client-side Flow definition does not run Steps"))
    }),
    rpcs: Object.values(rpcs),
    // What the read-only RPCs read, so that the client can run them on committed state (Client.queryRpc).
    attributes: [...P.attributes],
    channels: [...P.channels],
    streams: [P.AgentEvents]
  })
  return { ...flow, rpcs_: rpcs }
}

/**
 * Builds a client for one session Flow type from the engine client.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeAgentSessionClient = (flowType: string) =>
  Effect.gen(function* () {
    const engine = yield* Client.Client
    const flow = clientFlow(flowType)
    const rpcs = flow.rpcs_
    const invoke = <I, O>(rpc: { readonly name: string }, sessionId: string, input: I, options?: RequestOptions) =>
      retryLockConflicts(
        engine.invokeRpc<I, O>(
          flow,
          rpc as never,
          sessionId,
          input,
          options?.requestId === undefined ? undefined : { requestId: options.requestId }
        )
      )
    // The reads run their handlers on committed state: they never write, queue or wait for a running Step. The
    // message chunks are read as the handler pages through them (the newest a page needs), not all of them.
    const query = <I, O>(rpc: RpcDef<I, O, never>, sessionId: string, input: I) =>
      engine.queryRpc<I, O>(flow, rpc, sessionId, input, { readLazily: LAZY })
    // A reply's messages (200 in a snapshot) go through their codec apart, once per stored message: the engine
    // codes the rest of the reply, and the answer is the same as the whole reply's trip through its codec.
    const queryMessages = <I, O extends { readonly messages: ReadonlyArray<Wire.AgentMessage> }>(
      rpc: RpcDef<I, O, never>,
      sessionId: string,
      input: I
    ) =>
      Effect.suspend(() => {
        // the messages of the handler's last run: the run whose reply the query returns
        let messages: ReadonlyArray<Wire.AgentMessage> = []
        const apart: RpcDef<I, O, never> = {
          ...rpc,
          handler: (ctx, i) =>
            Effect.map(rpc.handler(ctx, i), (result) => {
              messages = result.output.messages
              return { ...result, output: { ...result.output, messages: [] } }
            })
        }
        return Effect.map(
          query(apart, sessionId, input),
          (output): O => ({ ...output, messages: roundTripPage(messages) })
        )
      })

    const shape: AgentSessionClientShape = {
      flowType,
      startSession: (sessionId, options) =>
        Effect.andThen(checkSessionSettings(options?.sessionSettings), () =>
          engine.startFlow(
            flow,
            sessionId,
            {
              initialMessage: options?.initialMessage ?? null,
              sessionSettings: options?.sessionSettings ?? null
            },
            {
              ...(options?.requestId === undefined ? {} : { requestId: options.requestId, ignoreAlreadyStarted: true }),
              ...(options?.stepDurability === undefined ? {} : { stepDurability: options.stepDurability })
            }
          )
        ),
      stopSession: (sessionId, options) =>
        engine.stopFlow(sessionId, { mode: options?.mode ?? "cancel", reason: options?.reason }),
      sendUserMessage: (sessionId, message, options) =>
        invoke<Wire.AgentUserMessage, boolean>(
          rpcs.send_user_message,
          sessionId,
          typeof message === "string" ? { text: message, planMode: false } : message,
          options
        ),
      resolveInterrupt: (sessionId, request, options) =>
        invoke<Wire.ResolveInterruptRequest, boolean>(
          rpcs.resolve_interrupt,
          sessionId,
          {
            interruptId: request.interruptId,
            approved: request.approved,
            rejectionMessage: request.rejectionMessage ?? null
          },
          options
        ),
      answerQuestion: (sessionId, request, options) =>
        invoke<Wire.AnswerQuestionRequest, boolean>(
          rpcs.answer_question,
          sessionId,
          { interruptId: request.interruptId, answer: request.answer },
          options
        ),
      cancelTurn: (sessionId, options) =>
        invoke<Wire.CancelTurnRequest, boolean>(
          rpcs.cancel_turn,
          sessionId,
          { turnId: options?.turnId ?? null },
          options
        ),
      steerUserMessage: (sessionId, message, options) =>
        invoke<Wire.SteerUserMessageRequest, boolean>(
          rpcs.steer_user_message,
          sessionId,
          {
            messageId: "messageId" in message ? message.messageId : null,
            text: "text" in message ? message.text : null
          },
          options
        ),
      executePlan: (sessionId, revision) =>
        invoke<Wire.ExecutePlanRequest, boolean>(rpcs.execute_plan, sessionId, { revision }),
      deleteQueuedMessage: (sessionId, messageId) =>
        invoke<Wire.DeleteQueuedMessageRequest, boolean>(rpcs.delete_queued_message, sessionId, { messageId }),
      getSnapshot: (sessionId) => queryMessages(rpcs.get_agent_snapshot, sessionId, null),
      listMessages: (sessionId, request) =>
        queryMessages(rpcs.list_agent_messages, sessionId, {
          beforeSequence: request?.beforeSequence ?? null,
          limit: request?.limit ?? Wire.DEFAULT_LIST_AGENT_MESSAGES_LIMIT
        }),
      updateSessionSettings: (sessionId, settings) =>
        Effect.andThen(checkSessionSettings(settings), () =>
          invoke<{ readonly sessionSettings: Schema.Json | null }, boolean>(rpcs.update_session_settings, sessionId, {
            sessionSettings: settings
          })
        ),
      awaitTurn: (sessionId, options) =>
        Effect.gen(function* () {
          yield* requireLiveClock("AgentSessionClient.awaitTurn")
          let last: Wire.AgentSnapshot | undefined
          const settled = (s: Wire.AgentSnapshot) =>
            s.state !== null &&
            (s.state.status === "failed" ||
              (s.state.activeTurnId === null &&
                s.queuedMessageCount === 0 &&
                s.state.turnCount >= (options?.turn ?? 0)))
          const timeout = options?.timeout ?? "60 seconds"
          // Settled Steps first: a queued message the engine took off the queue but whose turn has not started
          // yet shows as a ready or running AwaitUserMessage, not in the snapshot. Only the open executions are
          // read, so the check does not grow with the session's closed ones.
          const idle = Effect.map(engine.openStepExecutions(sessionId), (steps) =>
            steps.every((step) => step.status === "waiting" && step.stepType === "AwaitUserMessage")
          )
          const snapshot = queryMessages(rpcs.get_agent_snapshot, sessionId, null)
          const read = Effect.flatMap(idle, (steps) =>
            Effect.map(snapshot, (s) => (steps ? s : { ...s, queuedMessageCount: s.queuedMessageCount + 1 }))
          )
          // reads again at each commit notice of the session (or after the fallback, at least 1 s)
          const untilSettled = Effect.scoped(
            Effect.gen(function* () {
              const watch = yield* engine.watchCommits(sessionId)
              while (true) {
                const s = yield* read
                last = s
                if (settled(s)) return s
                yield* watch.next(options?.pollInterval)
              }
            })
          )
          return yield* untilSettled.pipe(
            Effect.timeoutOrElse({
              duration: timeout,
              orElse: () =>
                Effect.fail(
                  new AwaitTurnTimeout({
                    sessionId,
                    timeout: Duration.format(Duration.fromInputUnsafe(timeout)),
                    state: last?.state === null || last === undefined ? "not started" : JSON.stringify(last.state)
                  })
                )
            })
          )
        }),
      events: (sessionId, options) =>
        engine
          .readStream(sessionId, P.AgentEvents, {
            from: options?.from,
            follow: options?.follow,
            pollInterval: options?.pollInterval
          })
          .pipe(
            Stream.mapEffect((m) =>
              Wire.decodeAgentEvent(encodeEnvelope(m.value)).pipe(
                Effect.map((event): Option.Option<AgentSessionEvent> => Option.some({ token: m.token, event })),
                // An event this client cannot decode is skipped, and said so: never dropped silently.
                Effect.catch((error) =>
                  Effect.as(
                    Effect.logWarning(
                      `AgentSessionClient.events: skipped an undecodable ${m.value.type} event at ${m.token} of session ${sessionId}`,
                      error.message
                    ),
                    Option.none()
                  )
                )
              )
            ),
            Stream.filter(Option.isSome),
            Stream.map((o) => o.value)
          )
    }
    return shape
  })

/**
 * The client of one session Flow type. Build it with `AgentSessionClient.layer(flowType)` over an engine
 * layer (which provides the engine `Client`).
 *
 * @category services
 * @since 0.1.0
 */
export class AgentSessionClient extends Context.Service<AgentSessionClient, AgentSessionClientShape>()(
  "@durable-agent/session/AgentSessionClient"
) {
  /** The client of the session Flow type `flowType`. */
  static readonly layer = (flowType: string): Layer.Layer<AgentSessionClient, never, Client.Client> =>
    Layer.effect(AgentSessionClient, makeAgentSessionClient(flowType))
}

/**
 * The `AgentSessionClient` of the sessions of `flowType`, over the engine's `Client`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: (flowType: string) => Layer.Layer<AgentSessionClient, never, Client.Client> =
  AgentSessionClient.layer
