// Helpers shared by the session's Steps and RPCs: the session configuration, events, message and record
// bookkeeping, turn starts and ends. Everything that writes goes through the engine's staged TxView, so it
// commits with the Step's decision.
import type { ExecuteContext, StreamDef, TxView } from "@durable-agent/engine"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import type * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import { EventWriter, EventWriterDecorators, type EventWriterScope, type WrittenEvent } from "../EventWriter.ts"
import { Heartbeat } from "../Heartbeat.ts"
import * as P from "../Persistence.ts"
import type { ToolPolicy } from "../Policy.ts"
import type { AgentFrameworkRunnerShape, FrameworkMessage } from "../Runner.ts"
import * as Wire from "../wire/index.ts"
import { allMessages, type MessageStorageOptions, scanReplySequence, storeMessages } from "./messages.ts"
import { maxValueBytes, oversize, sizeBound, storedBytes, truncateText } from "./sizes.ts"

/** What the Steps of one session Flow need to know besides state; `Id` is the runner's service key. */
export interface SessionConfig<Id = unknown> {
  readonly flowType: string
  readonly toolPolicies: Readonly<Record<string, ToolPolicy>>
  readonly defaultToolEffect: Wire.ToolEffect
  readonly approvalDeadlineMs: number | null
  readonly events: StreamDef<Wire.AgentEventEnvelope>
  readonly runner: Context.Key<Id, AgentFrameworkRunnerShape>
  readonly heartbeatInterval: Duration.Duration
  readonly retryInitialInterval: Duration.Input
  /** The enabled built-in tools (names reserved for them). */
  readonly builtInTools: ReadonlySet<string>
  /** The longest `durable_wait`, in whole seconds. */
  readonly maxDurableWaitSeconds: number
  /** Whether plan mode is enabled (`plan_mode_enabled`). */
  readonly planModeEnabled: boolean
  /** The message storage options ("Message storage", Options). */
  readonly messageStorage: MessageStorageOptions
  /** The compaction policy (`AgentSessionOptions.compaction`), or `null` without compaction. */
  readonly compaction: {
    readonly contextWindowTokens: number
    readonly triggerRatio: number
    readonly retainedRatio: number
  } | null
}

/**
 * The message storage options a commit applies: a chunk never exceeds the engine's largest value, so no
 * rollover can fail on size.
 */
export const messageStorageFor = (config: SessionConfig, limit: number): MessageStorageOptions => ({
  ...config.messageStorage,
  messageChunkMaxBytes: Math.min(config.messageStorage.messageChunkMaxBytes, limit)
})

export const ZERO_USAGE: Wire.AgentUsage = {
  modelCalls: 0,
  inputTokens: 0,
  outputTokens: 0,
  cachedInputTokens: 0,
  reasoningTokens: 0
}

export const addUsage = (a: Wire.AgentUsage, b: Wire.AgentUsage): Wire.AgentUsage => ({
  modelCalls: a.modelCalls + b.modelCalls,
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
  reasoningTokens: a.reasoningTokens + b.reasoningTokens
})

/** The current time as the RFC 3339 text the session writes (UTC, milliseconds, `Z`). */
export const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

/** Whole seconds from now until `deadline` (RFC 3339), rounded up; 0 when it passed. */
export const secondsUntil = (deadline: string, nowMs: number): number =>
  Math.max(0, Math.ceil((Date.parse(deadline) - nowMs) / 1000))

export const isBlank = (text: string) => text.trim().length === 0

/** The session settings problem of a start input or an update, or `undefined` when they are valid. */
export const settingsProblem = (settings: unknown): string | undefined => {
  if (typeof settings !== "object" || settings === null || Array.isArray(settings)) {
    return "session_settings must be a JSON object"
  }
  const bytes = Buffer.byteLength(JSON.stringify(settings), "utf8")
  const limit = Wire.MAX_SESSION_SETTINGS_BYTES + Wire.SESSION_SETTINGS_SIZE_TOLERANCE_BYTES
  return bytes > limit ? `session_settings are ${bytes} bytes, over the limit of ${limit}` : undefined
}

// ---------------------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------------------

/** Event types that go through the attempt's delta buffer: best effort, written now, at a bounded rate. */
const DELTA_TYPES: ReadonlySet<string> = new Set(["text_delta", "reasoning_delta"])

/**
 * Structural events that must be visible before the attempt commits: written with the attempt's durable
 * heartbeat, in one write. `tool_call_started` says a tool may take effect; `compaction_started` says a summary
 * call runs ("a retried attempt writes it again"). Every other structural event is staged and commits with the
 * attempt's transition.
 */
const BEFORE_COMMIT_TYPES: ReadonlySet<string> = new Set(["tool_call_started", "compaction_started"])

/** At most this many delta writes per second per Step attempt (after the first, which goes with a heartbeat). */
const DELTA_WRITES_PER_SECOND = 20
/**
 * The delta buffer's interval; also the longest an attempt's first delta is held (see {@link AttemptEvents}).
 */
const DELTA_INTERVAL_MS = 1000 / DELTA_WRITES_PER_SECOND
/** A merged delta holds at most this many characters (a stream message has its own byte limit). */
const MAX_MERGED_CHARS = 16_384

/**
 * The events of one Step attempt that are written before its commit: the delta buffer, whether the attempt
 * has announced itself with a durable heartbeat, and the structural events staged while a runner or tool runs.
 *
 * An attempt's first event written before the commit goes with a durable heartbeat (docs/session-contract.md,
 * "Events"): an attempt that wrote one has produced output, so a crash fails it and the retry runs under a
 * higher attempt number; readers keep only the highest attempt of a Step execution. While a runner or tool
 * runs (`open`, {@link provideStepServices}), the first delta is held for at most {@link DELTA_INTERVAL_MS}:
 * a call that returns before that writes its deltas in the transaction of its commit (staged, before the
 * structural events), with no heartbeat of their own; one that does not writes them with the durable
 * heartbeat then. Later deltas are merged (adjacent ones of one type, never into the attempt's first) and
 * written at most {@link DELTA_WRITES_PER_SECOND} times a second, and what is left when the runner or tool
 * returns commits with the Step ({@link closeEvents}).
 */
interface AttemptEvents {
  announced: boolean
  /** Whether a runner or tool of the attempt runs: deltas may be held and staged. */
  open: boolean
  pending: Array<Wire.AgentEventEnvelope>
  /** Structural events staged while `open`: staged after the deltas when the runner or tool returns. */
  structural: Array<Wire.AgentEventEnvelope>
  lastWrite: number
  /** The delta buffer's next write, or (before the attempt announced itself) the end of the first delta's hold. */
  timer: Fiber.Fiber<void> | undefined
  readonly lock: Semaphore.Semaphore
}

const attempts = new WeakMap<ExecuteContext, AttemptEvents>()

const attemptEvents = (ctx: ExecuteContext): AttemptEvents => {
  let a = attempts.get(ctx)
  if (a === undefined) {
    a = {
      announced: false,
      open: false,
      pending: [],
      structural: [],
      lastWrite: 0,
      timer: undefined,
      lock: Semaphore.makeUnsafe(1)
    }
    attempts.set(ctx, a)
  }
  return a
}

/**
 * Writes the pending deltas now (one write), after any write in flight: with the durable heartbeat when the
 * attempt has not announced itself yet.
 */
const writePending = (ctx: ExecuteContext, config: SessionConfig, a: AttemptEvents) =>
  a.lock.withPermits(1)(writePendingNow(ctx, config, a))

/** {@link writePending} for a caller that holds the lock. */
const writePendingNow = (ctx: ExecuteContext, config: SessionConfig, a: AttemptEvents) =>
  Effect.suspend(() => {
    const batch = a.pending
    if (batch.length === 0) return Effect.void
    a.pending = []
    a.lastWrite = Date.now()
    if (a.announced) return ctx.emitAll(config.events, batch)
    a.announced = true
    return ctx.heartbeatWith(config.events, batch)
  })

/** Stops the buffer's timer (a write it started goes on). */
const stopTimer = (a: AttemptEvents): Effect.Effect<void> => {
  const timer = a.timer
  a.timer = undefined
  return timer === undefined ? Effect.void : Fiber.interrupt(timer)
}

/**
 * Ends a runner's or tool's part of the attempt, before the Step goes on to its commit. When it succeeded, the
 * deltas its buffer still holds (an attempt that never announced itself: all of them) are staged, then the
 * structural events it staged meanwhile, so they commit with the Step in the order readers saw them before:
 * deltas first. When it failed, its deltas are written now, as before the hold (with the durable heartbeat when
 * the attempt has not announced itself): the attempt may never commit, and a reader sees the failed attempt's
 * text before the retry's. When it was interrupted (cancelled, its Flow closed), an attempt that announced
 * itself writes the rest now, and one that did not leaves none. The structural events are staged (a failed
 * attempt's are never written).
 */
const closeEvents = (ctx: ExecuteContext, config: SessionConfig, exit: Exit.Exit<unknown, unknown>) =>
  Effect.suspend(() => {
    const a = attempts.get(ctx)
    if (a === undefined) return Effect.void
    a.open = false
    const writeNow = Exit.isFailure(exit) && (a.announced || !Cause.hasInterruptsOnly(exit.cause))
    return Effect.andThen(
      stopTimer(a),
      a.lock.withPermits(1)(
        Effect.suspend(() => {
          const structural = a.structural
          a.structural = []
          if (writeNow) return Effect.andThen(writePendingNow(ctx, config, a), stageAll(ctx, config, structural))
          const deltas = a.pending
          a.pending = []
          return stageAll(ctx, config, [...deltas, ...structural])
        })
      )
    )
  })

const stageAll = (
  ctx: ExecuteContext,
  config: SessionConfig,
  envelopes: ReadonlyArray<Wire.AgentEventEnvelope>
): Effect.Effect<void> => Effect.forEach(envelopes, (e) => ctx.stage(config.events, e), { discard: true })

/** Starts the buffer's timer: its next write `wait` ms from now. */
const startTimer = (ctx: ExecuteContext, config: SessionConfig, a: AttemptEvents, wait: number) =>
  Effect.gen(function* () {
    a.timer = yield* Effect.forkDetach(
      Effect.andThen(
        Effect.sleep(wait),
        // a write once started is not cut short by the buffer's close, which waits for it
        Effect.uninterruptible(
          Effect.suspend(() => {
            a.timer = undefined
            return writePending(ctx, config, a)
          })
        )
      ),
      { startImmediately: true }
    )
  })

const writeEnvelope = (
  ctx: ExecuteContext,
  config: SessionConfig,
  envelope: Wire.AgentEventEnvelope
): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (!DELTA_TYPES.has(envelope.type) && !BEFORE_COMMIT_TYPES.has(envelope.type)) {
      const open = attempts.get(ctx)
      if (open?.open === true) {
        open.structural.push(envelope)
        return Effect.void
      }
      return ctx.stage(config.events, envelope)
    }
    const a = attemptEvents(ctx)
    if (BEFORE_COMMIT_TYPES.has(envelope.type) || (!a.announced && !a.open)) {
      // with a durable heartbeat, after (and together with) the deltas still pending
      return Effect.andThen(
        stopTimer(a),
        a.lock.withPermits(1)(
          Effect.suspend(() => {
            const batch = [...a.pending, envelope]
            a.pending = []
            a.announced = true
            a.lastWrite = Date.now()
            return ctx.heartbeatWith(config.events, batch)
          })
        )
      )
    }
    const last = a.pending[a.pending.length - 1]
    // the attempt's first delta stays as it is: it is the one a reader sees first
    const mergeable = a.announced || a.pending.length > 1
    if (mergeable && last !== undefined && last.type === envelope.type) {
      const merged = mergeDelta(last, envelope)
      if (merged !== undefined) a.pending[a.pending.length - 1] = merged
      else a.pending.push(envelope)
    } else {
      a.pending.push(envelope)
    }
    if (a.timer !== undefined) return Effect.void
    // the first delta of an attempt that has not announced itself is held for one interval
    const wait = a.announced ? Math.max(0, a.lastWrite + DELTA_INTERVAL_MS - Date.now()) : DELTA_INTERVAL_MS
    return startTimer(ctx, config, a, wait)
  })

/** Two adjacent deltas of one type as one (their texts joined), or `undefined` when that would be too long. */
const mergeDelta = (a: Wire.AgentEventEnvelope, b: Wire.AgentEventEnvelope): Wire.AgentEventEnvelope | undefined => {
  const first = JSON.parse(a.payload) as { text?: unknown }
  const second = JSON.parse(b.payload) as { text?: unknown }
  if (typeof first.text !== "string" || typeof second.text !== "string") return undefined
  if (first.text.length + second.text.length > MAX_MERGED_CHARS) return undefined
  return { ...a, payload: JSON.stringify({ ...first, text: first.text + second.text }) }
}

const payloadEncoders = new WeakMap<object, (payload: any) => unknown>()

/** An event payload's encoder, built once per schema. */
const payloadEncoder = <A>(schema: Schema.Codec<A, unknown>): ((payload: A) => unknown) => {
  let encode = payloadEncoders.get(schema)
  if (encode === undefined) {
    encode = Schema.encodeSync(schema as Schema.Codec<A, unknown, never, never>)
    payloadEncoders.set(schema, encode)
  }
  return encode
}

/**
 * Writes typed session events for one Step attempt; best effort, never fails. Structural events are staged and
 * commit with the attempt's transition; `tool_call_started` goes with a durable heartbeat; deltas go through
 * the attempt's buffer.
 */
export const emitter = (ctx: ExecuteContext, config: SessionConfig, turnId: string | null): Emitter => {
  let byTurn = emitters.get(ctx)
  if (byTurn === undefined) {
    byTurn = new Map()
    emitters.set(ctx, byTurn)
  }
  let events = byTurn.get(turnId)
  // one attempt's emitter, built once per turn ID: a Step asks for it several times
  if (events === undefined || events.config !== config) {
    events = { config, emitter: makeEmitter(ctx, config, turnId) }
    byTurn.set(turnId, events)
  }
  return events.emitter
}

/** The emitters of each Step attempt, by turn ID, with the configuration they were built with. */
const emitters = new WeakMap<
  ExecuteContext,
  Map<string | null, { readonly config: SessionConfig; readonly emitter: Emitter }>
>()

/**
 * The events of one Step attempt and turn: its methods are on the prototype, so an attempt's emitter costs one
 * object, not a closure per event type.
 */
export class AttemptEmitter {
  readonly ctx: ExecuteContext
  readonly config: SessionConfig
  readonly turnId: string | null
  private scope: EventWriterScope | undefined

  constructor(ctx: ExecuteContext, config: SessionConfig, turnId: string | null) {
    this.ctx = ctx
    this.config = config
    this.turnId = turnId
  }

  private write(event: WrittenEvent): Effect.Effect<void> {
    return writeEnvelope(this.ctx, this.config, {
      type: event.type,
      turnId: this.turnId,
      attempt: this.ctx.attempt,
      payload: JSON.stringify(event.payload),
      stepExecutionId: this.ctx.stepExecutionId
    })
  }

  /** Every event, the session's own and the runner's, goes through the decorators provided to the worker. */
  raw(type: string, payload: unknown): Effect.Effect<void> {
    return Effect.flatMap(Effect.service(EventWriterDecorators), (decorators) => {
      const event = { type, payload: payload as WrittenEvent["payload"] }
      if (decorators.length === 0) return this.write(event)
      const ctx = this.ctx
      this.scope ??= {
        flowId: ctx.flowId,
        turnId: this.turnId,
        stepExecutionId: ctx.stepExecutionId,
        attempt: ctx.attempt
      }
      const scope = this.scope
      return decorators
        .reduce(
          (writer, decorate) => decorate(writer, scope),
          EventWriter.make((e) => this.write(e))
        )
        .write(event)
    })
  }

  private typed<A>(type: Wire.AgentEventType, schema: Schema.Codec<A, unknown>, payload: A): Effect.Effect<void> {
    return this.raw(type, payloadEncoder(schema)(payload))
  }

  turnStarted(payload: Wire.TurnStartedPayload) {
    return this.typed("turn_started", Wire.TurnStartedPayload, payload)
  }
  turnCompleted(payload: Wire.TurnCompletedPayload) {
    return this.typed("turn_completed", Wire.TurnCompletedPayload, payload)
  }
  turnFailed(payload: Wire.TurnFailedPayload) {
    return this.typed("turn_failed", Wire.TurnFailedPayload, payload)
  }
  turnSteered(payload: Wire.TurnSteeredPayload) {
    return this.typed("turn_steered", Wire.TurnSteeredPayload, payload)
  }
  turnCancelled(payload: Wire.TurnCancelledPayload) {
    return this.typed("turn_cancelled", Wire.TurnCancelledPayload, payload)
  }
  timerStarted(payload: Wire.TimerStartedPayload) {
    return this.typed("timer_started", Wire.TimerStartedPayload, payload)
  }
  planUpdated(payload: Wire.PlanUpdatedPayload) {
    return this.typed("plan_updated", Wire.PlanUpdatedPayload, payload)
  }
  planExecutionStarted(payload: Wire.PlanExecutionStartedPayload) {
    return this.typed("plan_execution_started", Wire.PlanExecutionStartedPayload, payload)
  }
  toolCallStarted(payload: Wire.ToolCallStartedPayload) {
    return this.typed("tool_call_started", Wire.ToolCallStartedPayload, payload)
  }
  toolCallFinished(payload: Wire.ToolCallFinishedPayload) {
    return this.typed("tool_call_finished", Wire.ToolCallFinishedPayload, payload)
  }
  toolCallDeferred(payload: Wire.ToolCallDeferredPayload) {
    return this.typed("tool_call_deferred", Wire.ToolCallDeferredPayload, payload)
  }
  interruptRaised(payload: Wire.InterruptRaisedPayload) {
    return this.typed("interrupt_raised", Wire.InterruptRaisedPayload, payload)
  }
  interruptResolved(payload: Wire.InterruptResolvedPayload) {
    return this.typed("interrupt_resolved", Wire.InterruptResolvedPayload, payload)
  }
  usageRecorded(payload: Wire.UsageRecordedPayload) {
    return this.typed("usage_recorded", Wire.UsageRecordedPayload, payload)
  }
}

const makeEmitter = (ctx: ExecuteContext, config: SessionConfig, turnId: string | null) =>
  new AttemptEmitter(ctx, config, turnId)
export type Emitter = AttemptEmitter

/** Provides the per-attempt `EventWriter` and `Heartbeat` services built from the engine's Step context. */
export const provideStepServices =
  (ctx: ExecuteContext, config: SessionConfig, turnId: string | null) =>
  <A, E, R>(self: Effect.Effect<A, E, R>) => {
    const events = emitter(ctx, config, turnId)
    return self.pipe(
      Effect.provideService(
        EventWriter,
        EventWriter.make((event) => events.raw(event.type, event.payload))
      ),
      Effect.provideService(Heartbeat, {
        beat: (checkpoint) => ctx.heartbeat(checkpoint),
        checkpoint: ctx.heartbeatCheckpoint
      }),
      // the deltas and events of the runner or tool commit with the Step (closeEvents)
      Effect.onExit((exit) => closeEvents(ctx, config, exit)),
      (run) =>
        Effect.andThen(
          Effect.sync(() => {
            attemptEvents(ctx).open = true
          }),
          run
        )
    )
  }

/** Runs `self` while heartbeating every `interval`; the first beat comes one interval after the start. */
export const withHeartbeats =
  (ctx: ExecuteContext, interval: Duration.Duration) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.raceFirst(self, Effect.forever(Effect.andThen(Effect.sleep(interval), ctx.heartbeat())))

// ---------------------------------------------------------------------------------------------------------
// State reads
// ---------------------------------------------------------------------------------------------------------

export const initialState: Wire.AgentState = {
  status: "waiting_for_user_message",
  turnCount: 0,
  activeTurnId: null,
  nextMessageSequence: 1,
  lastTurnError: null,
  interactionMode: "chat",
  acceptsTurnControl: false
}

/** The session's state; a defect when StartAgentSession has not committed (no Step runs before it). */
export const requireState = (ctx: TxView): Effect.Effect<Wire.AgentState> =>
  Option.match(ctx.get(P.AgentState), {
    onNone: () => Effect.die(new Error("AgentState is missing: the session was not started")),
    onSome: Effect.succeed
  })

/** Every stored message, in sequence order, from the chunks and the window ("Message storage", Reads). */
export const storedMessages = (ctx: TxView): Array<Wire.AgentMessage> => allMessages(ctx)

/** Every stored tool call record. */
export const allRecords = (ctx: TxView): Array<Wire.AgentToolCall> =>
  ctx.keys(P.AgentToolCalls).flatMap((key) => Option.toArray(ctx.getAt(P.AgentToolCalls, key)))

/** The records of one turn, in `deferral_order`. */
export const turnRecords = (ctx: TxView, turnId: string): Array<Wire.AgentToolCall> =>
  allRecords(ctx)
    .filter((r) => r.turnId === turnId)
    .sort((a, b) => a.deferralOrder - b.deferralOrder)

export const isFinal = (
  record: Wire.AgentToolCall
): record is Wire.AgentToolCall & {
  readonly status: Wire.AgentToolCallFinalStatus
} => Wire.isAgentToolCallFinalStatus(record.status)

/** The settings the active turn started with; `{}` when the stored copy belongs to another turn. */
export const turnSettings = (ctx: TxView, turnId: string): Wire.SessionSettings =>
  Option.match(ctx.get(P.TurnSessionSettings), {
    onNone: () => ({}),
    onSome: (s) => (s.turnId === turnId ? s.sessionSettings : {})
  })

// ---------------------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------------------

/** The stored form of messages at the next sequences of the turn. */
export const buildMessages = (
  state: Wire.AgentState,
  turnId: string,
  messages: ReadonlyArray<FrameworkMessage>,
  createdAt: string
): Array<Wire.AgentMessage> =>
  messages.map((m, i) => ({
    sequence: state.nextMessageSequence + i,
    turnId,
    role: m.role,
    text: m.text,
    toolCallId: m.toolCallId,
    toolName: m.toolName,
    toolArguments: m.toolArguments,
    toolOutput: m.toolOutput,
    frameworkItem: m.frameworkItem,
    createdAt
  }))

/** The `ValueTooLarge` detail of the first message that would not fit in one stored value, if any. */
export const messagesOversize = (
  state: Wire.AgentState,
  turnId: string,
  messages: ReadonlyArray<FrameworkMessage>,
  createdAt: string,
  limit: number
): string | undefined => {
  for (const m of buildMessages(state, turnId, messages, createdAt)) {
    const name = `AgentMessages[${Wire.messageSequenceKey(m.sequence)}]`
    const problem = oversize(name, Wire.AgentMessage, m, limit)
    if (problem !== undefined) return problem
    // A message too large for the window is stored in a chunk of its own, 15 bytes larger.
    if (sizeBound(m) + SINGLE_CHUNK_OVERHEAD_BYTES <= limit) continue
    const chunkBytes = storedBytes(Wire.AgentMessage, m) + SINGLE_CHUNK_OVERHEAD_BYTES
    if (chunkBytes > limit) {
      return `Value AgentMessageChunks[${Wire.messageSequenceKey(m.sequence)}] is ${chunkBytes} bytes, over the limit of ${limit}`
    }
  }
  return undefined
}

/** What a chunk of one message adds to the message's size: `{"messages":[` and `]}`. */
const SINGLE_CHUNK_OVERHEAD_BYTES = 15

/**
 * Stores messages at the next sequences of the turn ("Message storage"); returns the state with the counter
 * advanced. In an active turn whose TurnReplySequence names another turn (one an earlier worker started), it
 * records the turn's reply sequence first, before any rollover moves the turn's messages.
 */
export const appendMessages = (
  ctx: TxView,
  storage: MessageStorageOptions,
  state: Wire.AgentState,
  turnId: string,
  messages: ReadonlyArray<FrameworkMessage>,
  createdAt: string
): Wire.AgentState => {
  if (messages.length === 0) return state
  if (state.activeTurnId === turnId) {
    const reply = ctx.get(P.TurnReplySequence)
    if (Option.isNone(reply) || reply.value.turnId !== turnId) {
      ctx.set(P.TurnReplySequence, { turnId, sequence: scanReplySequence(ctx, turnId, state.nextMessageSequence) })
    }
  }
  const built = buildMessages(state, turnId, messages, createdAt)
  storeMessages(ctx, storage, built)
  return { ...state, nextMessageSequence: state.nextMessageSequence + built.length }
}

/** Adds one model call's usage to the session total and writes `usage_recorded`. */
export const recordUsage = (ctx: TxView, events: Emitter, usage: Wire.AgentUsage) => {
  const session = addUsage(
    Option.getOrElse(ctx.get(P.AgentUsage), () => ZERO_USAGE),
    usage
  )
  ctx.set(P.AgentUsage, session)
  return events.usageRecorded({ recorded: usage, session })
}

/**
 * Makes a record final: writes it, publishes its one `ToolCallCompleted`, and writes `tool_call_finished`.
 * Every final status is set only here, and a final record never has `taskAnswerPending` set: no poll will
 * deliver the answer (a poll that failed with a tool error, an exhausted or cancelled task).
 */
export const finalizeRecord = (
  ctx: TxView,
  events: Emitter,
  record: Wire.AgentToolCall,
  patch: {
    readonly status: Wire.AgentToolCallFinalStatus
    readonly output?: string | null
    readonly error?: string | null
    readonly rejectionMessage?: string | null
    readonly cancellationReason?: Wire.CancellationReason | null
  }
) => {
  ctx.setAt(P.AgentToolCalls, record.toolCallId, { ...record, ...patch, taskAnswerPending: false })
  ctx.publish(P.ToolCallResults, { toolCallId: record.toolCallId })
  return events.toolCallFinished({ toolCallId: record.toolCallId, toolName: record.toolName, status: patch.status })
}

/**
 * Starts a turn with the given user messages: stores them, copies SessionSettings into TurnSessionSettings,
 * writes TurnReplySequence and `turn_started`. The caller moves to RunModel.
 */
export const beginTurn = Effect.fnUntraced(function* (
  ctx: ExecuteContext,
  config: SessionConfig,
  runner: AgentFrameworkRunnerShape,
  state: Wire.AgentState,
  texts: ReadonlyArray<string>,
  interactionMode: Wire.InteractionMode = "chat"
) {
  const turnId = Wire.formatTurnId(state.turnCount + 1)
  const now = yield* nowIso
  const first = state.nextMessageSequence
  const userMessages = texts.map((t) => runner.buildUserMessage(t))
  const problem = messagesOversize(state, turnId, userMessages, now, yield* maxValueBytes)
  if (problem !== undefined) {
    // The message fitted the channel but not a stored message: the turn starts and fails at once, unstored.
    ctx.set(P.AgentState, { ...state, status: "running_model", activeTurnId: turnId })
    yield* emitter(ctx, config, turnId).turnStarted({ sequence: first })
    yield* endTurn(ctx, config, state, turnId, `ValueTooLarge: ${problem}`)
    return null
  }
  const appended = appendMessages(
    ctx,
    messageStorageFor(config, yield* maxValueBytes),
    state,
    turnId,
    userMessages,
    now
  )
  ctx.set(P.TurnReplySequence, { turnId, sequence: appended.nextMessageSequence })
  ctx.set(P.TurnSessionSettings, {
    turnId,
    sessionSettings: Option.getOrElse(ctx.get(P.SessionSettings), () => ({}))
  })
  ctx.set(P.AgentState, {
    ...appended,
    status: "running_model",
    activeTurnId: turnId,
    interactionMode,
    // This worker applies steering and cancel_turn, so the turn accepts them (docs/session-contract.md).
    acceptsTurnControl: true
  })
  yield* emitter(ctx, config, turnId).turnStarted({ sequence: first })
  return turnId
})

/** Deletes the turn's records and run state and empties PendingInterrupts. */
export const clearTurn = (ctx: TxView) => {
  for (const key of ctx.keys(P.AgentToolCalls)) ctx.deleteAt(P.AgentToolCalls, key)
  ctx.delete(P.FrameworkRunState)
  ctx.set(P.PendingInterrupts, [])
}

/**
 * Ends the active turn: clears it, counts it, and writes `turn_completed`, or `turn_failed` with `error`.
 * The caller moves to AwaitUserMessage.
 */
export const endTurn = (
  ctx: ExecuteContext,
  config: SessionConfig,
  state: Wire.AgentState,
  turnId: string,
  error: string | null
) => {
  clearTurn(ctx)
  ctx.set(P.AgentState, {
    ...state,
    status: "waiting_for_user_message",
    turnCount: state.turnCount + 1,
    activeTurnId: null,
    lastTurnError: error,
    acceptsTurnControl: false
  })
  const events = emitter(ctx, config, turnId)
  if (error !== null) return events.turnFailed({ error })
  return events.turnCompleted({ messageCount: turnMessageCount(ctx, state, turnId) })
}

/** The messages the turn appended after its user messages ("Message storage", Counts). */
export const turnMessageCount = (ctx: TxView, state: Wire.AgentState, turnId: string): number => {
  const reply = ctx.get(P.TurnReplySequence)
  return Option.isSome(reply) && reply.value.turnId === turnId
    ? state.nextMessageSequence - reply.value.sequence
    : state.nextMessageSequence - scanReplySequence(ctx, turnId, state.nextMessageSequence)
}

/** Whether cancel_turn cancelled this turn (turn IDs never repeat). */
export const isTurnCancelled = (ctx: TxView, turnId: string): boolean =>
  Option.match(ctx.get(P.TurnCancellationRequest), { onNone: () => false, onSome: (r) => r.turnId === turnId })

/** The committed plan, or `null` before the first `write_todos`. */
export const currentPlan = (ctx: TxView): Wire.AgentPlan | null => Option.getOrNull(ctx.get(P.AgentPlan))

/**
 * The mode of a turn that user messages start, one decision for every turn start: `planning` when plan mode
 * is enabled and a message has `plan_mode` or a draft plan exists, else `chat` ("Session Flow contract").
 */
export const turnModeOf = (
  ctx: TxView,
  config: SessionConfig,
  messages: ReadonlyArray<Wire.AgentUserMessage>
): Wire.InteractionMode =>
  config.planModeEnabled && (messages.some((m) => m.planMode) || currentPlan(ctx)?.status === "draft")
    ? "planning"
    : "chat"

/**
 * Starts a turn from queued or steered user messages, blank ones dropped, in the mode `turnModeOf` decides;
 * whether a turn started (none without a message, or when its messages could not be stored).
 */
export const beginTurnFromMessages = Effect.fnUntraced(function* (
  ctx: ExecuteContext,
  config: SessionConfig,
  runner: AgentFrameworkRunnerShape,
  state: Wire.AgentState,
  messages: ReadonlyArray<Wire.AgentUserMessage>
) {
  const kept = messages.filter((m) => !isBlank(m.text))
  if (kept.length === 0) return false
  const turnId = yield* beginTurn(
    ctx,
    config,
    runner,
    state,
    kept.map((m) => m.text),
    turnModeOf(ctx, config, kept)
  )
  return turnId !== null
})

/** Whether a steered message waits to start the next turn. */
export const isTurnSteered = (ctx: TxView): boolean => ctx.channelSize(P.SteeredUserMessages) > 0

/** Why the active turn must end before its next boundary, or `null`: a cancelled turn ends as cancelled. */
export const turnControl = (ctx: TxView, turnId: string): Wire.CancellationReason | null =>
  isTurnCancelled(ctx, turnId) ? "turn_cancelled" : isTurnSteered(ctx) ? "steered" : null

/** The structured rejection of a call that steering or cancel_turn abandoned. */
export const cancellationRejection = (reason: Wire.CancellationReason): string =>
  reason === "steered" ? Wire.STEERED_REJECTION_MESSAGE : Wire.TURN_CANCELLED_REJECTION_MESSAGE

/**
 * Ends a steered or cancelled turn: appends `unfinished` (the runner's unstored items) when there are any,
 * else the steered or cancelled note when the turn has records; deletes the turn's records and run state,
 * counts the turn, clears it and `last_turn_error`, and writes `turn_steered` or `turn_cancelled`. The
 * caller starts the steered turn or moves to AwaitUserMessage.
 */
export const endControlledTurn = Effect.fnUntraced(function* (
  ctx: ExecuteContext,
  config: SessionConfig,
  runner: AgentFrameworkRunnerShape,
  state: Wire.AgentState,
  turnId: string,
  reason: Wire.CancellationReason,
  unfinished: ReadonlyArray<FrameworkMessage> | undefined,
  steeredMessageCount: number
) {
  const now = yield* nowIso
  const limit = yield* maxValueBytes
  let next = state
  const fitting = (unfinished ?? []).filter(
    (message) => messagesOversize(state, turnId, [message], now, limit) === undefined
  )
  const storage = messageStorageFor(config, limit)
  if (fitting.length > 0) {
    next = appendMessages(ctx, storage, next, turnId, fitting, now)
  } else {
    const finals = turnRecords(ctx, turnId).filter(isFinal)
    if (finals.length > 0) {
      const header = reason === "steered" ? Wire.TURN_STEERED_NOTE_HEADER : Wire.TURN_CANCELLED_NOTE_HEADER
      const note = fittingNote(runner, next, turnId, finals, now, limit, header)
      next = appendMessages(ctx, storage, next, turnId, [note], now)
    }
  }
  clearTurn(ctx)
  ctx.set(P.AgentState, {
    ...next,
    status: "waiting_for_user_message",
    turnCount: next.turnCount + 1,
    activeTurnId: null,
    lastTurnError: null,
    acceptsTurnControl: false
  })
  const events = emitter(ctx, config, turnId)
  const messageCount = turnMessageCount(ctx, next, turnId)
  return yield* reason === "steered"
    ? events.turnSteered({ steeredMessageCount, messageCount })
    : events.turnCancelled({ messageCount })
})

/**
 * Fails the active turn: appends `unfinished` (the runner's unstored items), then one turn-failure note when
 * the turn has final records, and ends the turn with `error`.
 */
export const failTurn = Effect.fnUntraced(function* (
  ctx: ExecuteContext,
  config: SessionConfig,
  runner: AgentFrameworkRunnerShape,
  state: Wire.AgentState,
  turnId: string,
  error: string,
  unfinished: ReadonlyArray<FrameworkMessage> = []
) {
  const now = yield* nowIso
  const limit = yield* maxValueBytes
  // A failure route must not fail on size: unfinished messages that do not fit are left out, and the note
  // shortens what it quotes of the calls until it fits.
  const fitting: Array<FrameworkMessage> = []
  for (const message of unfinished) {
    const problem = messagesOversize(
      { ...state, nextMessageSequence: state.nextMessageSequence + fitting.length },
      turnId,
      [message],
      now,
      limit
    )
    if (problem === undefined) fitting.push(message)
    else yield* Effect.logWarning(`an unfinished turn message is left out: ${problem}`)
  }
  const storage = messageStorageFor(config, limit)
  let next = appendMessages(ctx, storage, state, turnId, fitting, now)
  const finals = turnRecords(ctx, turnId).filter(isFinal)
  if (finals.length > 0) {
    const note = fittingNote(runner, next, turnId, finals, now, limit)
    next = appendMessages(ctx, storage, next, turnId, [note], now)
  }
  yield* endTurn(ctx, config, next, turnId, truncateText(error, Math.floor(limit / 4)))
})

/**
 * The turn-failure note as a user message that fits one stored value: the full note when it fits, else the
 * same note with each call's arguments and result cut to an equal share of the room.
 */
const fittingNote = (
  runner: AgentFrameworkRunnerShape,
  state: Wire.AgentState,
  turnId: string,
  finals: ReadonlyArray<Wire.AgentToolCall & { readonly status: Wire.AgentToolCallFinalStatus }>,
  createdAt: string,
  limit: number,
  header: string = Wire.TURN_FAILURE_NOTE_HEADER
): FrameworkMessage => {
  const full = runner.buildUserMessage(Wire.turnNote(header, finals))
  if (messagesOversize(state, turnId, [full], createdAt, limit) === undefined) return full
  for (let share = Math.floor(limit / (4 * finals.length)); share >= 16; share = Math.floor(share / 2)) {
    const cut = finals.map((r) => ({
      ...r,
      arguments: truncateText(r.arguments, share),
      output: r.output === null ? null : truncateText(r.output, share),
      error: r.error === null ? null : truncateText(r.error, share),
      rejectionMessage: r.rejectionMessage === null ? null : truncateText(r.rejectionMessage, share)
    }))
    const message = runner.buildUserMessage(Wire.turnNote(header, cut))
    if (messagesOversize(state, turnId, [message], createdAt, limit) === undefined) return message
  }
  return runner.buildUserMessage(Wire.turnNote(header, []))
}
