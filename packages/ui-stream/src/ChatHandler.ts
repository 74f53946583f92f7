/**
 * The HTTP side of the UI stream adapters as Web-standard `Request → Response` handlers (Next.js route handlers,
 * Bun, Deno, Hono, and `HttpChat` for effect/http all use the same routes). Under a base path (`/api/chat` by
 * default):
 *
 * | Route                     | What it does                                                                      |
 * | ------------------------- | --------------------------------------------------------------------------------- |
 * | `POST {base}`             | `useChat`'s send: a user message, or the approval answers; streams the turn       |
 * | `GET {base}/{id}/stream`  | `useChat`'s resume: the active turn (204 when none), or the turn of `?token=`     |
 * | `GET {base}/{id}/events`  | plain SSE of the session's events; `id` is the engine's resume token              |
 * | `GET {base}/{id}/snapshot`| the snapshot JSON and the token to open the events from                           |
 * | `POST {base}/{id}/answer` | answers or declines a pending question; streams the rest of the turn              |
 * | `POST {base}/{id}/stop`   | stops the active turn (a durable `cancel_turn`), unlike closing the connection    |
 *
 * Every route asks the application's `authorize` hook first, and reads or changes nothing when it says no
 * (403). The POST routes take an `Idempotency-Key` header (1 to 150 characters): a retry with the same key after
 * a lost response sends, answers or stops nothing again; `POST {base}` and `POST {base}/{id}/answer` then stream
 * the session's active turn (or its last turn) from its start, `POST {base}/{id}/stop` answers the first call's
 * result. See `docs/ui-stream.md`.
 *
 * @since 0.1.0
 */
import { Client, type EngineError, type InvalidResumeToken } from "@durable-agent/engine"
import { AgentSessionClient, Persistence } from "@durable-agent/session"
import * as Wire from "@durable-agent/session/wire"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as ResumeToken from "./ResumeToken.ts"
import * as UiMessageStream from "./UiMessageStream.ts"
import type * as UiMessages from "./UiMessages.ts"

/**
 * What a request wants to do with a session.
 *
 * @category models
 * @since 0.1.0
 */
export type Access = "read" | "write"

/**
 * The input of the authorization hook.
 *
 * @category models
 * @since 0.1.0
 */
export interface AuthorizationRequest {
  readonly request: Request
  readonly sessionId: string
  readonly access: Access
}

/**
 * The application's authorization hook: whether this request may read (or write) this session. A session ID
 * alone is never a credential, so the hook looks at the request (a cookie, a header) and the session's owner.
 *
 * @category models
 * @since 0.1.0
 */
export type Authorize = (input: AuthorizationRequest) => Effect.Effect<boolean> | Promise<boolean> | boolean

/**
 * The services the handlers run with: the session client and the engine client.
 *
 * @category models
 * @since 0.1.0
 */
export type Services = AgentSessionClient.AgentSessionClient | Client.Client

/**
 * Options of the handlers.
 *
 * @category models
 * @since 0.1.0
 */
export interface ChatHandlerOptions {
  /** Required: there is no default that allows everyone. */
  readonly authorize: Authorize
  /** `/api/chat` by default; `useChat`'s `api`. */
  readonly basePath?: string | undefined
  /**
   * Stops the active turn of a session (the stop button); the session client's `cancelTurn` (the durable
   * `cancel_turn` RPC) by default.
   */
  readonly cancelTurn?:
    | ((
        sessionId: string,
        options?: { readonly requestId?: string | undefined }
      ) => Effect.Effect<boolean, unknown, Services>)
    | undefined
  /** Starts a session that does not exist yet with the first message; true by default. */
  readonly startSessions?: boolean | undefined
  /** The largest request body; 1 MiB by default. */
  readonly maxBodyBytes?: number | undefined
  /** The longest user message, in characters; 32,000 by default. */
  readonly maxMessageChars?: number | undefined
  /**
   * How long the streams wait for a commit notice before they look for new events anyway (a missed notice); at
   * least 1 s, the default. They read as soon as the session commits.
   */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * How often an open stream (the UI stream and the plain SSE) sends an SSE keep-alive comment, so a proxy does
   * not cut it while a long tool Step or an approval keeps it quiet; 15 s by default.
   */
  readonly keepAliveInterval?: Duration.Input | undefined
}

/**
 * The handler's request errors; each becomes a 4xx JSON response `{ "error": { "code", "message" } }`.
 *
 * @category errors
 * @since 0.1.0
 */
export class ChatRequestError extends Schema.TaggedError<ChatRequestError>()("ChatRequestError", {
  status: Schema.Int,
  code: Schema.String,
  message: Schema.String
}) {}

const fail = (status: number, code: string, message: string) =>
  Effect.fail(new ChatRequestError({ status, code, message }))

const json = (status: number, body: unknown, headers?: Record<string, string>) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } })

/** The longest `Idempotency-Key` header: its derived request IDs stay within the engine's 200 characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 150

/** The request's `Idempotency-Key` header, if any; a 400 for an empty or overlong one. */
const idempotencyKey = (request: Request) => {
  const key = request.headers.get("idempotency-key")
  if (key === null) return Effect.succeed(undefined)
  if (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    return fail(400, "bad_idempotency_key", `an Idempotency-Key has 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`)
  }
  return Effect.succeed(key)
}

/** The request options of one session RPC under the header's key (`part` tells apart several RPCs of a request). */
const keyed = (key: string | undefined, part?: string) =>
  key === undefined ? undefined : { requestId: part === undefined ? key : `${key}/${part}` }

const errorResponse = (e: ChatRequestError) => json(e.status, { error: { code: e.code, message: e.message } })

/** The body `useChat`'s default transport posts. */
const ChatBody = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)),
  messages: Schema.Array(
    Schema.Struct({
      id: Schema.optional(Schema.String),
      role: Schema.Literals(["user", "assistant", "system"]),
      parts: Schema.Array(Schema.Unknown),
      metadata: Schema.optional(Schema.Unknown)
    })
  ).check(Schema.isMinLength(1)),
  trigger: Schema.optional(Schema.String),
  messageId: Schema.optional(Schema.String),
  /** Sends the user message with `plan_mode` (useChat: `sendMessage(message, { body: { planMode: true } })`). */
  planMode: Schema.optional(Schema.Boolean)
})
type ChatBody = typeof ChatBody.Type
const decodeChatBody = Schema.decodeUnknownEffect(Schema.fromJsonString(ChatBody))

/**
 * The body of `POST {base}/{id}/answer`: `answer` answers the question, `decline: true` declines it (with an
 * optional `reason`); `resumeToken` (the `resumeToken` of the message's last `finish`) continues the stream
 * exactly after it, else the turn is replayed from its start.
 *
 * @category models
 * @since 0.1.0
 */
export const AnswerBody = Schema.Struct({
  interruptId: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(500)),
  answer: Schema.optional(Schema.String),
  decline: Schema.optional(Schema.Boolean),
  reason: Schema.optional(Schema.String),
  resumeToken: Schema.optional(Schema.String)
})
/** @since 0.1.0 */
export type AnswerBody = typeof AnswerBody.Type
const decodeAnswerBody = Schema.decodeUnknownEffect(Schema.fromJsonString(AnswerBody))

const encodeEvent = Schema.encodeSync(Wire.AgentEvent)
const encodeSnapshot = Schema.encodeSync(Wire.UiAgentSnapshot)

interface ApprovalAnswer {
  readonly approvalId: string
  readonly approved: boolean
  readonly reason: string | null
}

/** The approval answers of a message's tool parts (`state: "approval-responded"`). */
const approvalAnswers = (parts: ReadonlyArray<unknown>): Array<ApprovalAnswer> => {
  const answers: Array<ApprovalAnswer> = []
  for (const part of parts) {
    if (typeof part !== "object" || part === null) continue
    const p = part as { state?: unknown; approval?: { id?: unknown; approved?: unknown; reason?: unknown } }
    if (p.state !== "approval-responded" || typeof p.approval?.id !== "string") continue
    answers.push({
      approvalId: p.approval.id,
      approved: p.approval.approved === true,
      reason: typeof p.approval.reason === "string" ? p.approval.reason : null
    })
  }
  return answers
}

const textOf = (parts: ReadonlyArray<unknown>): string =>
  parts
    .map((part) =>
      typeof part === "object" && part !== null && (part as { type?: unknown }).type === "text"
        ? String((part as { text?: unknown }).text ?? "")
        : ""
    )
    .join("")

const readBody = (request: Request, limit: number) =>
  Effect.gen(function* () {
    const declared = Number(request.headers.get("content-length") ?? "0")
    if (declared > limit) return yield* fail(413, "body_too_large", `the request body is larger than ${limit} bytes`)
    const text = yield* Effect.tryPromise({
      try: () => request.text(),
      catch: () =>
        new ChatRequestError({ status: 400, code: "bad_body", message: "the request body could not be read" })
    })
    if (new TextEncoder().encode(text).byteLength > limit) {
      return yield* fail(413, "body_too_large", `the request body is larger than ${limit} bytes`)
    }
    return text
  })

const rpcFailure = (e: { readonly _tag: string; readonly message?: string }) => {
  switch (e._tag) {
    case "FlowNotFound":
      return new ChatRequestError({ status: 404, code: "session_not_found", message: "no such session" })
    case "FlowNotActive":
      return new ChatRequestError({ status: 409, code: "session_closed", message: "the session has ended" })
    case "IdempotencyKeyReused":
      return new ChatRequestError({
        status: 422,
        code: "idempotency_key_reused",
        message: "this Idempotency-Key was used for another request"
      })
    default:
      return new ChatRequestError({ status: 500, code: "engine_error", message: e.message ?? e._tag })
  }
}

/**
 * Runs effects one at a time per key (a session ID): the sends of two tabs of one session are serialized, so each
 * knows the turn its message starts. Keys without a waiting effect are forgotten.
 */
const keyedLock = () => {
  const locks = new Map<string, { readonly semaphore: Semaphore.Semaphore; users: number }>()
  return <A, E, R>(key: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        const entry = locks.get(key) ?? { semaphore: Semaphore.makeUnsafe(1), users: 0 }
        entry.users++
        locks.set(key, entry)
        return entry
      }),
      (entry) => Semaphore.withPermit(entry.semaphore)(effect),
      (entry) =>
        Effect.sync(() => {
          entry.users--
          if (entry.users === 0) locks.delete(key)
        })
    )
}

/**
 * The turn a message sent now starts: each queued message starts its own turn after the active one, so the
 * count of ended, active and queued turns is the same at any moment before the send.
 */
const nextTurnNumber = (snapshot: Option.Option<Wire.AgentSnapshot>): number =>
  Option.match(snapshot, {
    onNone: () => 1,
    onSome: ({ state, queuedMessageCount }) =>
      state === null ? 1 : state.turnCount + (state.activeTurnId === null ? 0 : 1) + queuedMessageCount + 1
  })

/** Whether the active turn waits for the user: an approval or a question of it is pending. */
const awaitsInput = (snapshot: Wire.AgentSnapshot): boolean => {
  const active = snapshot.state?.activeTurnId ?? null
  return (
    active !== null &&
    snapshot.pendingInterrupts.some((i) =>
      snapshot.toolCalls.some((r) => r.toolCallId === i.toolCallId && r.turnId === active)
    )
  )
}

/**
 * What the stored messages do not keep of ended turns, from the session's events: each deferred call's effect,
 * and for each stopped turn the text its last model call streamed when that call stored nothing.
 */
const historyOf = (
  events: ReadonlyArray<Wire.AgentEvent>,
  messages: ReadonlyArray<Wire.AgentMessage>
): UiMessages.History => {
  const tools: Record<string, { effect: string; requiresApproval: boolean }> = {}
  const stopped: Record<string, string> = {}
  /** The text of each turn's newest model call attempt: its Step execution, attempt and words. */
  const streaming = new Map<string, { step: string; attempt: number; text: string }>()
  for (const event of events) {
    const turnId = event.turnId
    if (turnId === null) continue
    switch (event.type) {
      case "tool_call_deferred":
        tools[event.payload.toolCallId] = {
          effect: event.payload.effect,
          requiresApproval: event.payload.requiresApproval
        }
        break
      case "text_delta": {
        const current = streaming.get(turnId)
        if (current?.step === event.stepExecutionId && current.attempt === event.attempt) {
          current.text += event.payload.text
        } else if (current === undefined || current.step !== event.stepExecutionId || event.attempt > current.attempt) {
          streaming.set(turnId, { step: event.stepExecutionId, attempt: event.attempt, text: event.payload.text })
        }
        break
      }
      case "turn_cancelled": {
        const text = streaming.get(turnId)?.text ?? ""
        // the model call that streamed it committed: the stored messages hold the text already
        const stored = messages.some((m) => m.turnId === turnId && m.role === "assistant" && m.text === text)
        stopped[turnId] = stored ? "" : text
        break
      }
      default:
        break
    }
  }
  return { tools, stopped }
}

/**
 * The request handler as an Effect: routes one Web request, or `undefined` when the path is not under the base
 * path.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeHandler = (options: ChatHandlerOptions) => {
  const base = (options.basePath ?? "/api/chat").replace(/\/+$/, "")
  const maxBody = options.maxBodyBytes ?? 1024 * 1024
  const maxChars = options.maxMessageChars ?? 32_000
  const poll = options.pollInterval ?? "1 second"
  const keepAlive = UiMessageStream.withKeepAlive(options.keepAliveInterval ?? "15 seconds")
  const serialized = keyedLock()

  const authorize = (request: Request, sessionId: string, access: Access) =>
    Effect.gen(function* () {
      const result = options.authorize({ request, sessionId, access })
      const allowed = Effect.isEffect(result)
        ? yield* result
        : result instanceof Promise
          ? yield* Effect.promise(() => result)
          : result
      if (allowed !== true) {
        return yield* fail(403, "forbidden", `this request may not ${access} session ${JSON.stringify(sessionId)}`)
      }
    })

  /** The engine token of the session's newest event, or null (nothing retained). */
  const lastToken = (sessionId: string) =>
    Effect.flatMap(Client.Client, (engine) =>
      engine.readStream(sessionId, Persistence.AgentEvents, { follow: false }).pipe(
        Stream.runLast,
        Effect.map((o) => Option.getOrNull(Option.map(o, (m) => m.token))),
        Effect.catch(() => Effect.succeed(null))
      )
    )

  /** The session's retained events and the engine token of the newest (null when none is retained). */
  const retainedEvents = (sessionId: string) =>
    Effect.flatMap(AgentSessionClient.AgentSessionClient, (sessions) =>
      sessions.events(sessionId, { from: "oldest", follow: false }).pipe(
        Stream.runCollect,
        Effect.map((all) => ({ token: all.at(-1)?.token ?? null, events: all.map((e) => e.event) })),
        Effect.catch(() => Effect.succeed({ token: null, events: [] as Array<Wire.AgentEvent> }))
      )
    )

  /** Checks an engine position: "ok", "trimmed" (restart from the turn's start), or a 400. */
  const checkPosition = (sessionId: string, position: string | null) =>
    position === null
      ? Effect.succeed("ok" as const)
      : Effect.flatMap(Client.Client, (engine) =>
          engine.readStream(sessionId, Persistence.AgentEvents, { from: { after: position }, follow: false }).pipe(
            Stream.take(1),
            Stream.runDrain,
            Effect.as("ok" as const),
            Effect.catchTag("InvalidResumeToken", (e: InvalidResumeToken) =>
              e.reason.includes("trimmed")
                ? Effect.succeed("trimmed" as const)
                : fail(400, "invalid_token", `the resume token was rejected: ${e.reason}`)
            ),
            Effect.catchTag("EngineError", (e: EngineError) => fail(404, "session_not_found", e.reason))
          )
        )

  const uiStreamResponse = (parts: Stream.Stream<UiMessageStream.UiPart, UiMessageStream.TurnStreamError, Services>) =>
    Effect.gen(function* () {
      const body = UiMessageStream.toSse(parts).pipe(
        // an error after the stream started can only be told in the stream
        Stream.catch((e: { readonly _tag: string }) =>
          Stream.succeed(
            `data: ${JSON.stringify({ type: "error", errorText: `the turn could not be read: ${e._tag}` })}\n\n`
          )
        ),
        keepAlive,
        Stream.encodeText
      )
      const readable = yield* Stream.toReadableStreamEffect(body)
      return new Response(readable, { status: 200, headers: UiMessageStream.UI_MESSAGE_STREAM_HEADERS })
    })

  const turn = (
    sessionId: string,
    turnId: string,
    from: UiMessageStream.StreamFrom,
    knownAnswers?: ReadonlyMap<string, string>
  ) => UiMessageStream.turnStream({ sessionId, turnId, from, pollInterval: poll, knownAnswers })

  const snapshotOrNull = (sessionId: string) =>
    Effect.flatMap(AgentSessionClient.AgentSessionClient, (sessions) =>
      sessions.getSnapshot(sessionId).pipe(
        Effect.map(Option.some),
        Effect.catchTag("FlowNotFound", () => Effect.succeed(Option.none<Wire.AgentSnapshot>())),
        Effect.mapError(rpcFailure)
      )
    )

  /** Whether a request under one of these idempotency keys already committed on the session. */
  const committed = (sessionId: string, keys: ReadonlyArray<string>) =>
    Effect.flatMap(Client.Client, (engine) =>
      Effect.map(
        Effect.forEach(keys, (key) => engine.requestCommitted(sessionId, key)),
        (found) => found.some((c) => c)
      )
    ).pipe(Effect.mapError(rpcFailure))

  /**
   * The answer to a retried request that already committed: the active turn from its start, else the turn a
   * queued message starts, else the last turn (204 before any turn).
   */
  const replay = (sessionId: string) =>
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const snapshot = yield* sessions.getSnapshot(sessionId).pipe(Effect.mapError(rpcFailure))
      const st = snapshot.state
      const turnId =
        st?.activeTurnId ??
        (st === null
          ? null
          : snapshot.queuedMessageCount > 0
            ? Wire.formatTurnId(st.turnCount + 1)
            : st.turnCount > 0
              ? Wire.formatTurnId(st.turnCount)
              : null)
      if (turnId === null) return new Response(null, { status: 204 })
      return yield* uiStreamResponse(turn(sessionId, turnId, { _tag: "TurnStart", after: null }))
    })

  /**
   * Sends a user message (starting the session with it when there is none yet) and gives the turn it starts and
   * the engine token to read that turn from, or `Replay` for a retried request (same `Idempotency-Key`) that
   * already committed. Refused while the active turn waits for the user's approval or answer (the browser
   * answers those first), and for a plan-mode message the session does not take.
   */
  const sendUserMessage = (sessionId: string, message: string, planMode: boolean, key: string | undefined) =>
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const snapshot = yield* snapshotOrNull(sessionId)
      // the initial message of StartAgentSession has no plan_mode: a plan-mode session starts empty and
      // its first message follows
      const startOptions = { ...(planMode ? {} : { initialMessage: message }), ...keyed(key) }
      const send = sessions
        .sendUserMessage(sessionId, planMode ? { text: message, planMode: true } : message, keyed(key))
        .pipe(Effect.mapError(rpcFailure))
      const startFailure = (e: unknown) => rpcFailure(e as { readonly _tag: string; readonly message?: string })
      const start = sessions.startSession(sessionId, startOptions)
      if (key !== undefined && Option.isSome(snapshot)) {
        // a retry: the keyed send answers from its stored reply (or refuses another message under the key)
        if (yield* committed(sessionId, [key])) return yield* Effect.as(send, { _tag: "Replay" } as const)
        // a retry of the request that started the session: the start with the same key returns its run
        const started = yield* start.pipe(
          Effect.as(true),
          Effect.catchTag("FlowAlreadyStarted", () => Effect.succeed(false)),
          Effect.mapError(startFailure)
        )
        if (started && !planMode) return { _tag: "Replay" } as const
      }
      if (Option.isNone(snapshot)) {
        if (options.startSessions === false) return yield* fail(404, "session_not_found", "no such session")
        yield* Effect.mapError(start, startFailure)
        if (!planMode) return { _tag: "Turn", turnId: Wire.formatTurnId(1), after: null } as const
      } else if (awaitsInput(snapshot.value)) {
        return yield* fail(
          409,
          "awaiting_input",
          "the turn waits for your approval or answer: give it (or stop the turn) before sending a message"
        )
      }
      const next = nextTurnNumber(snapshot)
      const after = Option.isNone(snapshot) ? null : yield* lastToken(sessionId)
      const accepted = yield* send
      if (!accepted) {
        return yield* planMode
          ? fail(400, "plan_mode_refused", "the session refused the plan-mode message (is plan mode enabled?)")
          : fail(400, "empty_message", "the session refused the message")
      }
      return { _tag: "Turn", turnId: Wire.formatTurnId(next), after } as const
    })

  // POST {base}
  const chat = (request: Request) =>
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const key = yield* idempotencyKey(request)
      const text = yield* readBody(request, maxBody)
      const body: ChatBody = yield* decodeChatBody(text).pipe(
        Effect.mapError(
          (e) =>
            new ChatRequestError({ status: 400, code: "bad_request", message: `invalid chat request: ${e.message}` })
        )
      )
      const sessionId = body.id
      yield* authorize(request, sessionId, "write")
      if (body.trigger === "regenerate-message") {
        // a durable turn cannot be taken back: the spec has no regenerate, so nothing is sent
        return yield* fail(
          400,
          "regenerate_unsupported",
          "a durable session cannot regenerate an answer: send the message again as a new message"
        )
      }
      const last = body.messages[body.messages.length - 1]!
      if (last.role === "user") {
        const message = textOf(last.parts)
        if (message.trim().length === 0) return yield* fail(400, "empty_message", "the message has no text")
        if (message.length > maxChars) {
          return yield* fail(413, "message_too_large", `the message is longer than ${maxChars} characters`)
        }
        const from = yield* serialized(sessionId, sendUserMessage(sessionId, message, body.planMode === true, key))
        if (from._tag === "Replay") return yield* replay(sessionId)
        return yield* uiStreamResponse(turn(sessionId, from.turnId, { _tag: "TurnStart", after: from.after }))
      }
      if (last.role !== "assistant") return yield* fail(400, "bad_request", "the last message must be a user message")
      const answers = approvalAnswers(last.parts)
      if (answers.length === 0) {
        return yield* fail(400, "nothing_to_send", "the last assistant message holds no approval answer")
      }
      const resolve = (answer: ApprovalAnswer) =>
        sessions
          .resolveInterrupt(
            sessionId,
            { interruptId: answer.approvalId, approved: answer.approved, rejectionMessage: answer.reason },
            keyed(key, answer.approvalId)
          )
          .pipe(Effect.mapError(rpcFailure))
      if (
        key !== undefined &&
        (yield* committed(
          sessionId,
          answers.map((a) => keyed(key, a.approvalId)!.requestId)
        ))
      ) {
        // a retry: each keyed answer is its stored reply, or completes what the first request did not reach
        yield* Effect.forEach(answers, resolve, { discard: true })
        return yield* replay(sessionId)
      }
      const snapshot = yield* sessions.getSnapshot(sessionId).pipe(Effect.mapError(rpcFailure))
      const active = snapshot.state?.activeTurnId ?? null
      if (active === null) return yield* fail(409, "no_active_turn", "the session has no turn waiting for approvals")
      // validate every answer before resolving any: all must belong to the active turn
      const toResolve: Array<ApprovalAnswer> = []
      for (const answer of answers) {
        const pending = snapshot.pendingInterrupts.find((i) => i.interruptId === answer.approvalId)
        const record = snapshot.toolCalls.find((r) => r.toolCallId === (pending?.toolCallId ?? answer.approvalId))
        if (record === undefined || record.turnId !== active) {
          return yield* fail(
            409,
            "interrupt_not_pending",
            `interrupt ${JSON.stringify(answer.approvalId)} is not pending in the active turn of this session`
          )
        }
        if (pending !== undefined && pending.kind !== "tool_approval") {
          return yield* fail(
            400,
            "not_an_approval",
            `interrupt ${JSON.stringify(answer.approvalId)} is a question: answer it with POST ${base}/${sessionId}/answer`
          )
        }
        if (pending !== undefined) toResolve.push(answer)
      }
      yield* Effect.forEach(toResolve, resolve, { discard: true })
      const metadata = last.metadata as { readonly resumeToken?: unknown } | undefined
      return yield* continueTurn(
        sessionId,
        active,
        typeof metadata?.resumeToken === "string" ? metadata.resumeToken : undefined
      )
    })

  /** The rest of the active turn: exactly after the browser's token when it is usable, else from its start. */
  const continueTurn = (
    sessionId: string,
    active: string,
    tokenText: string | undefined,
    knownAnswers?: ReadonlyMap<string, string>
  ) =>
    Effect.gen(function* () {
      const token = tokenText === undefined ? Option.none() : yield* ResumeToken.decode(tokenText).pipe(Effect.option)
      if (Option.isSome(token) && token.value.s === sessionId && token.value.t === active) {
        const position = yield* checkPosition(sessionId, token.value.p)
        if (position === "ok") {
          return yield* uiStreamResponse(
            turn(sessionId, active, { _tag: "Continue", token: token.value }, knownAnswers)
          )
        }
      }
      // no usable token: the turn from its start (the browser's message is replaced by the replay)
      return yield* uiStreamResponse(turn(sessionId, active, { _tag: "TurnStart", after: null }, knownAnswers))
    })

  // POST {base}/{id}/answer
  const answer = (request: Request, sessionId: string) =>
    Effect.gen(function* () {
      yield* authorize(request, sessionId, "write")
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const key = yield* idempotencyKey(request)
      const text = yield* readBody(request, maxBody)
      const body: AnswerBody = yield* decodeAnswerBody(text).pipe(
        Effect.mapError(
          (e) =>
            new ChatRequestError({ status: 400, code: "bad_request", message: `invalid answer request: ${e.message}` })
        )
      )
      const decline = body.decline === true
      if (decline === (body.answer !== undefined)) {
        return yield* fail(400, "bad_answer", "give either an answer or decline: true")
      }
      if (body.answer !== undefined && body.answer.trim().length === 0) {
        return yield* fail(400, "bad_answer", "the answer is blank")
      }
      if ((body.answer ?? body.reason ?? "").length > maxChars) {
        return yield* fail(413, "message_too_large", `the answer is longer than ${maxChars} characters`)
      }
      const submit = (
        body.answer !== undefined
          ? sessions.answerQuestion(sessionId, { interruptId: body.interruptId, answer: body.answer }, keyed(key))
          : sessions.resolveInterrupt(
              sessionId,
              { interruptId: body.interruptId, approved: false, rejectionMessage: body.reason ?? null },
              keyed(key)
            )
      ).pipe(Effect.mapError(rpcFailure))
      // a retry: the keyed answer is its stored reply (or refuses another answer under the key)
      if (key !== undefined && (yield* committed(sessionId, [key])))
        return yield* Effect.andThen(submit, replay(sessionId))
      const snapshot = yield* sessions.getSnapshot(sessionId).pipe(Effect.mapError(rpcFailure))
      const active = snapshot.state?.activeTurnId ?? null
      const pending = snapshot.pendingInterrupts.find((i) => i.interruptId === body.interruptId)
      const record = snapshot.toolCalls.find((r) => r.toolCallId === pending?.toolCallId)
      if (pending === undefined || active === null || record === undefined || record.turnId !== active) {
        return yield* fail(
          409,
          "interrupt_not_pending",
          `question ${JSON.stringify(body.interruptId)} is not pending in the active turn of this session`
        )
      }
      if (pending.kind !== "question") {
        return yield* fail(
          400,
          "not_a_question",
          `interrupt ${JSON.stringify(body.interruptId)} is a tool approval: answer it with the approval response`
        )
      }
      if (body.answer !== undefined && !pending.allowsFreeText && !pending.choices.includes(body.answer)) {
        return yield* fail(
          400,
          "bad_answer",
          `the answer must be one of the choices: ${pending.choices.map((c) => JSON.stringify(c)).join(", ")}`
        )
      }
      const accepted = yield* submit
      if (!accepted) {
        return yield* fail(
          409,
          "interrupt_not_pending",
          `question ${JSON.stringify(body.interruptId)} is no longer pending (answered, declined or past its deadline)`
        )
      }
      // the stream shows the answer given here even when it reads the snapshot after the turn ended
      const known = body.answer === undefined ? undefined : new Map([[body.interruptId, body.answer]])
      return yield* continueTurn(sessionId, active, body.resumeToken, known)
    })

  // GET {base}/{id}/stream
  const resume = (request: Request, sessionId: string, url: URL) =>
    Effect.gen(function* () {
      yield* authorize(request, sessionId, "read")
      const tokenText = url.searchParams.get("token")
      if (tokenText !== null) {
        const token = yield* ResumeToken.decode(tokenText).pipe(
          Effect.mapError((e) => new ChatRequestError({ status: 400, code: "invalid_token", message: e.reason }))
        )
        if (token.s !== sessionId) {
          return yield* fail(403, "forbidden", "the resume token belongs to another session")
        }
        if (url.searchParams.get("mode") === "continue") {
          const position = yield* checkPosition(sessionId, token.p)
          if (position === "ok") return yield* uiStreamResponse(turn(sessionId, token.t, { _tag: "Continue", token }))
        }
        const start = yield* checkPosition(sessionId, token.a)
        return yield* uiStreamResponse(
          turn(sessionId, token.t, { _tag: "TurnStart", after: start === "ok" ? token.a : null })
        )
      }
      const snapshot = yield* snapshotOrNull(sessionId)
      // a session that does not exist yet has no stream either (useChat resumes on every page load)
      if (Option.isNone(snapshot)) return new Response(null, { status: 204 })
      const active = snapshot.value.state?.activeTurnId ?? null
      if (active === null) return new Response(null, { status: 204 })
      return yield* uiStreamResponse(turn(sessionId, active, { _tag: "TurnStart", after: null }))
    })

  // GET {base}/{id}/events
  const events = (request: Request, sessionId: string, url: URL) =>
    Effect.gen(function* () {
      yield* authorize(request, sessionId, "read")
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const after = request.headers.get("last-event-id") ?? url.searchParams.get("after")
      const snapshot = yield* snapshotOrNull(sessionId)
      if (Option.isNone(snapshot)) return yield* fail(404, "session_not_found", "no such session")
      const position = yield* checkPosition(sessionId, after)
      if (position === "trimmed") {
        return yield* fail(400, "invalid_token", "the events after this token were trimmed; open the snapshot again")
      }
      const body = sessions
        .events(sessionId, { from: after === null ? "oldest" : { after }, follow: true, pollInterval: poll })
        .pipe(
          Stream.map((e) => `id: ${e.token}\ndata: ${JSON.stringify(encodeEvent(e.event))}\n\n`),
          Stream.catch((e: { readonly _tag: string }) =>
            Stream.succeed(`event: error\ndata: ${JSON.stringify(e._tag)}\n\n`)
          ),
          keepAlive,
          Stream.encodeText
        )
      const readable = yield* Stream.toReadableStreamEffect(body)
      return new Response(readable, {
        status: 200,
        headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" }
      })
    })

  // GET {base}/{id}/snapshot
  const snapshot = (request: Request, sessionId: string) =>
    Effect.gen(function* () {
      yield* authorize(request, sessionId, "read")
      const { token, events } = yield* retainedEvents(sessionId)
      const found = yield* snapshotOrNull(sessionId)
      if (Option.isNone(found)) return yield* fail(404, "session_not_found", "no such session")
      const history = historyOf(events, found.value.messages)
      return json(200, { snapshot: encodeSnapshot(found.value), token, history })
    })

  // POST {base}/{id}/stop
  const stop = (request: Request, sessionId: string) =>
    Effect.gen(function* () {
      yield* authorize(request, sessionId, "write")
      const key = yield* idempotencyKey(request)
      const cancel =
        options.cancelTurn ??
        ((id: string, o?: { readonly requestId?: string | undefined }) =>
          Effect.flatMap(AgentSessionClient.AgentSessionClient, (sessions) => sessions.cancelTurn(id, o)))
      const cancelled = yield* cancel(sessionId, keyed(key)).pipe(
        Effect.mapError((e) =>
          typeof e === "object" && e !== null && "_tag" in e
            ? rpcFailure(e as { readonly _tag: string; readonly message?: string })
            : new ChatRequestError({ status: 500, code: "cancel_failed", message: String(e) })
        )
      )
      return json(200, { cancelled })
    })

  return (request: Request): Effect.Effect<Response | undefined, never, Services> => {
    const url = new URL(request.url)
    const path = url.pathname.replace(/\/+$/, "")
    if (path !== base && !path.startsWith(`${base}/`)) return Effect.succeed(undefined)
    const rest = path
      .slice(base.length)
      .split("/")
      .filter((s) => s.length > 0)
    let handled: Effect.Effect<Response, ChatRequestError, Services>
    if (rest.length === 0 && request.method === "POST") handled = chat(request)
    else if (rest.length === 2) {
      const sessionId = decodeURIComponent(rest[0]!)
      const action = rest[1]
      if (action === "stream" && request.method === "GET") handled = resume(request, sessionId, url)
      else if (action === "events" && request.method === "GET") handled = events(request, sessionId, url)
      else if (action === "snapshot" && request.method === "GET") handled = snapshot(request, sessionId)
      else if (action === "stop" && request.method === "POST") handled = stop(request, sessionId)
      else if (action === "answer" && request.method === "POST") handled = answer(request, sessionId)
      else handled = fail(404, "not_found", "no such route")
    } else handled = fail(404, "not_found", "no such route")
    return handled.pipe(
      Effect.catchTag("ChatRequestError", (e) => Effect.succeed(errorResponse(e))),
      Effect.catchCause((cause) =>
        Effect.as(
          Effect.logError("ui-stream handler failed", cause),
          json(500, { error: { code: "internal", message: "the request failed" } })
        )
      )
    )
  }
}

/**
 * A Web-standard handler (`(request: Request) => Promise<Response>`) with the services of the current context,
 * for Next.js-style route handlers: `export const GET = handler; export const POST = handler`. Paths outside the
 * base path answer 404.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (
  options: ChatHandlerOptions
): Effect.Effect<(request: Request) => Promise<Response>, never, Services> =>
  Effect.map(Effect.context<Services>(), (context) => {
    const handle = makeHandler(options)
    return (request: Request) =>
      Effect.runPromiseWith(context)(
        Effect.map(handle(request), (r) => r ?? json(404, { error: { code: "not_found", message: "no such route" } }))
      )
  })
