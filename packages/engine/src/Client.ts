/**
 * The engine client: start Flows, invoke RPCs, publish to channels, skip timers, stop Flows, and
 * read state, history and streams. Writes go through the Flow's owner (one transaction each);
 * reads go to the database.
 *
 * @since 0.1.0
 */

import * as Context from "effect/Context"
import { Sharding } from "effect/cluster"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { SqlClient } from "effect/sql"
import { DEFAULT_REQUEST_TIMEOUT, EngineConfig, millis } from "./EngineConfig.ts"
import {
  type ChannelMessageNotFound,
  type DefinitionError,
  EngineError,
  type FlowAlreadyStarted,
  type FlowNotActive,
  FlowNotFound,
  type IdempotencyKeyReused,
  InvalidInput,
  InvalidResumeToken,
  LongPollTimeout,
  type RpcFailed,
  type RpcLockConflict,
  ValueTooLarge
} from "./Errors.ts"
import type { Attribute, AttributeMap, Channel, ChannelMap, FlowDef, RpcDef, StreamDef } from "./Flow.ts"
import * as Inspect from "./Inspect.ts"
import { listenAcrossProcesses, MIN_FALLBACK, Notices } from "./internal/feed.ts"
import {
  ControlPayload,
  FlowEntity,
  InvokePayload,
  keyedRequestId,
  MAX_RESEND_MS,
  StartPayload
} from "./internal/protocol.ts"
import { queryRpc } from "./internal/query.ts"
import { deliver } from "./internal/request.ts"
import { whileWaiting } from "./internal/runner.ts"
import { byteLength, decodeJson, encodeJson } from "./internal/state.ts"
import { make as makeStore } from "./internal/store/EngineStore.ts"
import * as Metrics from "./Metrics.ts"

/** Options of `startFlow`. */
export interface StartFlowOptions {
  /** Makes a repeated start idempotent together with `ignoreAlreadyStarted`. */
  readonly requestId?: string | undefined
  /** With the same `requestId`, a repeated start returns the existing run instead of FlowAlreadyStarted. */
  readonly ignoreAlreadyStarted?: boolean | undefined
  /** Attribute values the Flow starts with, written in the transaction that starts it. */
  readonly initialAttributes?: ReadonlyArray<InitialAttribute> | undefined
  /**
   * The Flow's default Step durability (Dex `configOverride.stepDurability`), for Steps whose
   * `execute.durability` names none. With `async` an attempt's start is not durable before its body runs:
   * an attempt lost with its worker counts as never started and runs again with the same attempt number,
   * even after it produced output (a `sync` Step's fails `WorkerLost` instead). Results still commit
   * synchronously. Recorded in the Flow's `FlowStarted` history event, which the new owner reads.
   */
  readonly stepDurability?: "sync" | "async" | undefined
  /**
   * The Flow's execution timeout, overriding the definition's `executionTimeout.after`: once it has passed, a
   * running Flow fails with error type `ExecutionTimeout`, or runs the definition's timeout handler Step.
   */
  readonly executionTimeout?: Duration.Input | undefined
  /**
   * What a start does with the ID of a Flow that is closed: `reject` (the default: FlowAlreadyStarted, as for
   * a running Flow), `allowIfClosed` (a new run replaces any closed run), `allowIfFailed` (only a failed,
   * cancelled or terminated run is replaced; a completed one is kept). A replaced run's state, Steps,
   * history and stream messages are deleted in the transaction that starts the new run. A running Flow's ID
   * is always FlowAlreadyStarted.
   */
  readonly idReusePolicy?: IdReusePolicy | undefined
}

/** Whether a closed Flow's ID may start a new run; see `StartFlowOptions.idReusePolicy`. */
export type IdReusePolicy = "reject" | "allowIfClosed" | "allowIfFailed"

/** One attribute value a Flow starts with (`key` for an AttributeMap). */
export interface InitialAttribute {
  readonly attribute: Attribute<any> | AttributeMap<any>
  readonly value: unknown
  readonly key?: string | undefined
}

/** Options of `invokeRpc`. */
export interface InvokeRpcOptions {
  /**
   * The caller's idempotency key (1 to 200 characters): makes a retry after an ambiguous failure (a timeout, a
   * dropped connection, a crash of the owner between its commit and its reply) safe. The reply is stored with
   * the RPC's transition under the key and the call's fingerprint (the RPC's name and encoded input), so a
   * repeat with the same key and arguments returns the first call's output and commits nothing, on whichever
   * runner owns the Flow then; the same key with another RPC or input fails with `IdempotencyKeyReused`. A call
   * that failed committed nothing, so its key may be retried. Keys are scoped to the Flow and kept as long as
   * its stored replies (until the Flow is purged).
   */
  readonly requestId?: string | undefined
}

/** The longest `InvokeRpcOptions.requestId`. */
export const MAX_REQUEST_ID_LENGTH = 200

/** How `stopFlow` ends a Flow. */
export type StopMode = "cancel" | "terminate" | "fail"

/** One stream message with its resume token. */
export interface StreamMessage<A> {
  readonly token: string
  readonly value: A
  readonly stepExecutionId: string
  readonly attempt: number
  readonly at: number
}

/** Where a stream read starts. */
export type StreamPosition = "oldest" | { readonly after: string }

type ClusterError = EngineError

export interface ClientShape {
  readonly startFlow: <I>(
    flow: FlowDef<I, any>,
    flowId: string,
    input: I,
    options?: StartFlowOptions
  ) => Effect.Effect<string, FlowAlreadyStarted | DefinitionError | ValueTooLarge | InvalidInput | ClusterError>
  readonly invokeRpc: <I, O>(
    flow: FlowDef<any, any>,
    rpc: RpcDef<I, O, any>,
    flowId: string,
    input: I,
    options?: InvokeRpcOptions
  ) => Effect.Effect<
    O,
    | FlowNotFound
    | FlowNotActive
    | IdempotencyKeyReused
    | RpcLockConflict
    | ChannelMessageNotFound
    | RpcFailed
    | ValueTooLarge
    | DefinitionError
    | InvalidInput
    | ClusterError
  >
  /**
   * Whether an `invokeRpc` call with this `requestId` (idempotency key) committed on the Flow, whatever its RPC
   * and input: a caller about to retry tells a replay from a new request with it (the UI stream does).
   */
  readonly requestCommitted: (flowId: string, requestId: string) => Effect.Effect<boolean, EngineError>
  /**
   * Runs a read-only RPC's handler on the Flow's committed state, read from the database: no cluster message,
   * no history row, no stored reply, no task slot, no wait for a running Step, and no write. It returns what
   * {@link invokeRpc} would return at that commit (the same handler on the same state, the output through the
   * same codec), and fails as it does for a missing (FlowNotFound) or closed (FlowNotActive) Flow. A handler
   * that stages a write, schedules or cancels Steps fails with RpcFailed (errorType `ReadOnlyViolation`), and so
   * do a handler that fails and a read the database refuses (errorType `DatabaseError`). `flow` must declare
   * what the handler reads.
   *
   * The state is read in one statement, except the AttributeMaps named in `readLazily` (say, a long history
   * of which the handler reads the newest entries): their values are read as the handler asks for them, in one
   * more statement per run of the handler that asked for values not read yet (the handler runs again), each
   * checked to be the value of the first statement's commit (when one changed in between, the read starts
   * again; after three starts it reads the state whole). The state read is held in the process by the Flow's
   * run and version: a read of a Flow that has not committed since reads the Flow's row alone.
   */
  readonly queryRpc: <I, O>(
    flow: FlowDef<any, any>,
    rpc: RpcDef<I, O, never>,
    flowId: string,
    input: I,
    options?: {
      /** AttributeMaps of `flow` whose values are read only as the handler reads them. */
      readonly readLazily?: ReadonlyArray<AttributeMap<any>> | undefined
    }
  ) => Effect.Effect<O, FlowNotFound | FlowNotActive | RpcFailed | InvalidInput>
  readonly publish: <A>(
    flowId: string,
    channel: Channel<A> | ChannelMap<A>,
    value: A,
    key?: string
  ) => Effect.Effect<void, FlowNotFound | FlowNotActive | ValueTooLarge | DefinitionError | InvalidInput | ClusterError>
  /** Makes one waiting Timer ready as if it fired; `false` when no such waiting Timer exists. */
  readonly skipTimer: (
    flowId: string,
    stepExecutionId: string,
    timer: number | string
  ) => Effect.Effect<boolean, FlowNotFound | FlowNotActive | DefinitionError | ValueTooLarge | ClusterError>
  /**
   * Sets an Attribute (or one AttributeMap key) of a running Flow; `null` deletes it. The write is one
   * transition of its own, ordered with Step results by the Flow's owner: Steps dispatched after it read the
   * value, a Step already running keeps the view it was dispatched with (and its own later write of the same
   * value wins), and a write to a value a running Step holds a lock on fails at once with RpcLockConflict.
   */
  readonly setAttribute: <A>(
    flowId: string,
    attribute: Attribute<A> | AttributeMap<A>,
    value: A | null,
    key?: string
  ) => Effect.Effect<
    void,
    FlowNotFound | FlowNotActive | RpcLockConflict | InvalidInput | ValueTooLarge | DefinitionError | ClusterError
  >
  readonly stopFlow: (
    flowId: string,
    options: { readonly mode: StopMode; readonly reason?: string | undefined }
  ) => Effect.Effect<void, FlowNotFound | FlowNotActive | DefinitionError | ValueTooLarge | ClusterError>
  readonly describeFlow: (flowId: string) => Effect.Effect<Inspect.FlowDescription, FlowNotFound | EngineError>
  readonly listFlows: (
    options?: Parameters<typeof Inspect.listFlows>[0]
  ) => Effect.Effect<ReadonlyArray<Inspect.FlowDescription>, EngineError>
  readonly getAttribute: <A>(
    flowId: string,
    attribute: Attribute<A> | AttributeMap<A>,
    key?: string
  ) => Effect.Effect<Option.Option<A>, FlowNotFound | EngineError>
  readonly history: (flowId: string) => Effect.Effect<ReadonlyArray<Inspect.HistoryEvent>, EngineError>
  readonly stepExecutions: (flowId: string) => Effect.Effect<ReadonlyArray<Inspect.StepExecution>, EngineError>
  /**
   * The Step executions of the Flow that have not ended (`waiting`, `ready`, `running`), in scheduling order, in
   * one statement without attempts: what a reader waiting for the Flow to settle checks, at a cost that does not
   * grow with the executions that closed. An unknown Flow has none.
   */
  readonly openStepExecutions: (flowId: string) => Effect.Effect<ReadonlyArray<OpenStepExecution>, EngineError>
  /**
   * Where the retained part of a running Flow's Step executions, history and streams starts, once its retention
   * (`retainedStepExecutions`, `historyWindowEvents`, `retainedStreamMessages`) deleted older ones.
   */
  readonly retention: (flowId: string) => Effect.Effect<Inspect.FlowRetention, FlowNotFound | EngineError>
  /**
   * Which runner owns the Flow now: the runner that last claimed it (`<host>:<port> pid <pid>` in a cluster,
   * `embedded pid <pid>`), its ownership epoch and when it claimed the Flow. Attempt rows and history events
   * carry the same runner identity, so writes of an earlier owner can be told from the current one's. A Flow
   * nobody has touched since its owner died names that owner until another runner loads it (at most a few
   * seconds for a Flow with running Steps: the recovery sweep). `FlowNotFound` for an ID no runner ever owned.
   */
  readonly flowOwner: (flowId: string) => Effect.Effect<Inspect.FlowOwner, FlowNotFound | EngineError>
  /** Waits until the Flow is closed (polling the database). */
  readonly waitForFlow: (
    flowId: string,
    options?: {
      readonly pollInterval?: Duration.Input
      /** Gives up with `LongPollTimeout` when the Flow is still running after this long. */
      readonly timeout?: Duration.Input
    }
  ) => Effect.Effect<Inspect.FlowDescription, FlowNotFound | LongPollTimeout | EngineError>
  /**
   * Waits until a Step execution ended (completed, failed or cancelled), polling the database; gives up with
   * `LongPollTimeout` after `timeout`. An ID not scheduled yet is waited for as well.
   */
  readonly waitForStepExecution: (
    flowId: string,
    stepExecutionId: string,
    options?: { readonly pollInterval?: Duration.Input; readonly timeout?: Duration.Input }
  ) => Effect.Effect<Inspect.StepExecution, FlowNotFound | LongPollTimeout | EngineError>
  /**
   * Reads a stream from the oldest retained message or after a resume token. With `follow`, keeps reading
   * new messages until the Flow closes: it waits for the Flow's commit notices (see `watchCommits`), and reads
   * again after `pollInterval` (at least 1 s, the default) for a notice it missed.
   */
  readonly readStream: <A>(
    flowId: string,
    stream: StreamDef<A>,
    options?: {
      readonly from?: StreamPosition | undefined
      readonly follow?: boolean | undefined
      readonly pollInterval?: Duration.Input | undefined
    }
  ) => Stream.Stream<StreamMessage<A>, InvalidResumeToken | EngineError>
  /**
   * Watches a Flow's commits while the scope is open: `next` waits for a commit notice (a transition or a
   * stream write of the Flow) that came since the last `next`, or for the fallback (at least 1 s) when none
   * comes. Notices come from this process's owners at once, and on Postgres from every process (LISTEN/NOTIFY).
   * A reader reads, then calls `next`: a commit between the two is not missed.
   */
  readonly watchCommits: (flowId: string) => Effect.Effect<CommitWatch, never, Scope.Scope>
}

/**
 * A Step execution that has not ended (`Client.openStepExecutions`).
 *
 * @category models
 * @since 0.1.0
 */
export interface OpenStepExecution {
  readonly stepExecutionId: string
  readonly stepType: string
  readonly status: "waiting" | "ready" | "running"
}

/**
 * A watch of a Flow's commits (`Client.watchCommits`).
 *
 * @category models
 * @since 0.1.0
 */
export interface CommitWatch {
  /** Waits for a commit notice since the last call, or `fallback` (at least 1 s, the default) when none comes. */
  readonly next: (fallback?: Duration.Input) => Effect.Effect<void>
}

/** The control errors only a SetAttribute command fails with: another command never does. */
const setAttributeOnly = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
  Effect.catchIf(
    effect,
    (e): e is Extract<E, RpcLockConflict | InvalidInput> => e._tag === "RpcLockConflict" || e._tag === "InvalidInput",
    (e) => Effect.die(e)
  )

const tokenFor = (flowId: string, stream: string, seq: number) =>
  `v1.${Buffer.from(JSON.stringify([flowId, stream, seq])).toString("base64url")}`

const parseToken = (token: string, flowId: string, stream: string) =>
  Effect.try({
    try: () => {
      if (!token.startsWith("v1.")) throw new Error("unknown token format")
      const [f, s, seq] = JSON.parse(Buffer.from(token.slice(3), "base64url").toString("utf8"))
      if (f !== flowId || s !== stream) throw new Error("the token belongs to another Flow or stream")
      if (!Number.isSafeInteger(seq) || seq < 0) throw new Error("bad position")
      return seq as number
    },
    catch: (e) => new InvalidResumeToken({ token, reason: e instanceof Error ? e.message : String(e) })
  })

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const store = yield* makeStore
  const config = yield* EngineConfig
  const flows = yield* FlowEntity.client
  const metrics = yield* Metrics.currentRegistry
  const sharding = yield* Sharding.Sharding
  const shuttingDown = sharding.isShutdown
  const timeoutMs = Math.min(millis(config.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT), MAX_RESEND_MS)
  const provideSql = <A, E>(e: Effect.Effect<A, E, SqlClient.SqlClient>) =>
    Effect.provideService(e, SqlClient.SqlClient, sql)
  const requestId = () => crypto.randomUUID()

  const encodeInput = <A>(schema: any, value: A, what: string) =>
    Effect.try({
      try: () => encodeJson(schema, value),
      catch: (e) => new InvalidInput({ what, detail: e instanceof Error ? e.message : String(e) })
    }).pipe(
      Effect.filterOrFail(
        (text) => byteLength(text) <= config.maxValueBytes,
        (text) => new ValueTooLarge({ name: what, bytes: byteLength(text), limit: config.maxValueBytes })
      )
    )

  const notices = yield* Notices
  // Postgres: hear the commits of every process (the feed, `internal/feed.ts`)
  yield* listenAcrossProcesses(notices)

  const control = (flowId: string, command: ControlPayload["command"]) =>
    Effect.suspend(() => {
      const payload = new ControlPayload({ flowId, requestId: requestId(), command })
      return deliver(flows(flowId).Control(payload), `${command._tag} on Flow ${flowId}`, timeoutMs, shuttingDown)
    })

  const shape: ClientShape = {
    startFlow: (flow, flowId, input, options) =>
      Effect.gen(function* () {
        const text = yield* encodeInput(flow.start.input, input, `input of Flow ${flow.type}`)
        const attributes: Array<{ name: string; key: string; value: string | null }> = []
        for (const a of options?.initialAttributes ?? []) {
          const value = yield* encodeInput(a.attribute.schema, a.value, `initial value of ${a.attribute.name}`)
          attributes.push({ name: a.attribute.name, key: a.key ?? "", value })
        }
        const payload = new StartPayload({
          flowId,
          flowType: flow.type,
          input: text,
          requestId: options?.requestId ?? requestId(),
          ignoreAlreadyStarted: options?.ignoreAlreadyStarted ?? false,
          stepDurability: options?.stepDurability ?? "sync",
          initialAttributes: attributes,
          ...(options?.idReusePolicy === undefined ? {} : { idReusePolicy: options.idReusePolicy }),
          ...(options?.executionTimeout === undefined
            ? {}
            : { executionTimeoutMs: Duration.toMillis(Duration.fromInputUnsafe(options.executionTimeout)) })
        })
        return yield* deliver(flows(flowId).Start(payload), `start of Flow ${flowId}`, timeoutMs, shuttingDown)
      }),
    invokeRpc: (_flow, rpc, flowId, input, options) =>
      Effect.gen(function* () {
        const text = yield* encodeInput(rpc.input, input, `input of RPC ${rpc.name}`)
        const key = options?.requestId
        if (key !== undefined && (key.length === 0 || key.length > MAX_REQUEST_ID_LENGTH)) {
          return yield* new InvalidInput({
            what: `request ID of RPC ${rpc.name}`,
            detail: `a request ID has 1 to ${MAX_REQUEST_ID_LENGTH} characters; this one has ${key.length}`
          })
        }
        const payload =
          key === undefined
            ? new InvokePayload({ flowId, rpc: rpc.name, input: text, requestId: requestId() })
            : new InvokePayload({
                flowId,
                rpc: rpc.name,
                input: text,
                requestId: keyedRequestId(key, rpc.name, text),
                idempotencyKey: key
              })
        const output = yield* deliver(
          flows(flowId).Invoke(payload),
          `RPC ${rpc.name} of Flow ${flowId}`,
          timeoutMs,
          shuttingDown
        )
        return decodeJson(rpc.output, output)
      }).pipe(Metrics.measureRpc(metrics, _flow.type, rpc.name)),
    requestCommitted: (flowId, key) =>
      Effect.map(
        store.loadKeyedRequestIds(flowId, key).pipe(Effect.mapError((e) => new EngineError({ reason: e.message }))),
        (ids) => ids.length > 0
      ),
    queryRpc: (flow, rpc, flowId, input, options) => queryRpc(store, flow, rpc, flowId, input, options),
    publish: (flowId, channel, value, key = "") =>
      Effect.gen(function* () {
        const text = yield* encodeInput(channel.schema, value, `message of ${channel.name}`)
        yield* setAttributeOnly(control(flowId, { _tag: "Publish", channel: channel.name, key, value: text }))
      }),
    skipTimer: (flowId, stepExecutionId, timer) =>
      setAttributeOnly(control(flowId, { _tag: "SkipTimer", stepExecutionId, timer })),
    setAttribute: (flowId, attribute, value, key = "") =>
      Effect.gen(function* () {
        const text = value === null ? null : yield* encodeInput(attribute.schema, value, `value of ${attribute.name}`)
        yield* control(flowId, { _tag: "SetAttribute", name: attribute.name, key, value: text })
      }),
    stopFlow: (flowId, options) =>
      Effect.asVoid(
        setAttributeOnly(control(flowId, { _tag: "Stop", mode: options.mode, reason: options.reason ?? "" }))
      ),
    describeFlow: (flowId) => provideSql(Inspect.describeFlow(flowId)),
    listFlows: (options) => provideSql(Inspect.listFlows(options)),
    getAttribute: (flowId, attribute, key = "") =>
      provideSql(
        Effect.gen(function* () {
          const value = yield* store
            .loadAttribute(flowId, attribute.name, key)
            .pipe(Effect.mapError((e) => new EngineError({ reason: e.message })))
          if (value !== undefined) return Option.some(decodeJson(attribute.schema, value))
          // no value: an unknown Flow is FlowNotFound, like every other client call
          yield* Inspect.describeFlow(flowId)
          return Option.none()
        })
      ),
    history: (flowId) => provideSql(Inspect.history(flowId)),
    stepExecutions: (flowId) => provideSql(Inspect.stepExecutions(flowId)),
    openStepExecutions: (flowId) =>
      store.loadOpenSteps(flowId).pipe(
        Effect.map((rows) =>
          rows.map(
            (r): OpenStepExecution => ({
              stepExecutionId: r.step_execution_id,
              stepType: r.step_type,
              status: r.status as OpenStepExecution["status"]
            })
          )
        ),
        Effect.mapError((e) => new EngineError({ reason: e.message }))
      ),
    retention: (flowId) => provideSql(Inspect.retention(flowId)),
    flowOwner: (flowId) => provideSql(Inspect.flowOwner(flowId)),
    // a Step body that waits on the engine holds no slot meanwhile (`whileWaiting`): a child Flow it waits
    // for never waits behind it
    waitForFlow: (flowId, options) => {
      const waiting = provideSql(Inspect.describeFlow(flowId)).pipe(
        Effect.repeat({
          schedule: Schedule.spaced(options?.pollInterval ?? Duration.millis(50)),
          until: (d) => d.status !== "running"
        })
      )
      if (options?.timeout === undefined) return whileWaiting(waiting)
      const timeout = Duration.fromInputUnsafe(options.timeout)
      return whileWaiting(
        Effect.timeoutOrElse(waiting, {
          duration: timeout,
          orElse: () => Effect.fail(new LongPollTimeout({ flowId, waitedMs: Duration.toMillis(timeout) }))
        })
      )
    },
    waitForStepExecution: (flowId, stepExecutionId, options) =>
      whileWaiting(
        Effect.gen(function* () {
          yield* provideSql(Inspect.describeFlow(flowId))
          const ended = provideSql(Inspect.stepExecutions(flowId)).pipe(
            Effect.map((steps) => steps.find((s) => s.stepExecutionId === stepExecutionId)),
            // an execution that was scheduled and is gone closed and was deleted by the Flow's retention
            Effect.tap((s) =>
              s === undefined ? provideSql(Inspect.deletedStepExecution(flowId, stepExecutionId)) : Effect.void
            ),
            Effect.repeat({
              schedule: Schedule.spaced(options?.pollInterval ?? Duration.millis(50)),
              until: (s) => s !== undefined && s.status !== "waiting" && s.status !== "ready" && s.status !== "running"
            }),
            Effect.map((s) => s!)
          )
          if (options?.timeout === undefined) return yield* ended
          const timeout = Duration.fromInputUnsafe(options.timeout)
          return yield* Effect.timeoutOrElse(ended, {
            duration: timeout,
            orElse: () =>
              Effect.fail(new LongPollTimeout({ flowId, stepExecutionId, waitedMs: Duration.toMillis(timeout) }))
          })
        })
      ),
    watchCommits: (flowId) => notices.watch(flowId),
    readStream: (flowId, stream, options) =>
      Stream.unwrap(
        Effect.gen(function* () {
          const from = options?.from ?? "oldest"
          let after = from === "oldest" ? 0 : yield* parseToken(from.after, flowId, stream.name)
          // one statement: that the Flow exists, and how far its stream was trimmed (by the stream's byte budget
          // of the Flow type, and by the Flow's own retention, `retainedStreamMessages`)
          const start = yield* store
            .loadStreamStart(flowId, stream.name)
            .pipe(Effect.mapError((e) => new EngineError({ reason: e.message })))
          if (start === undefined) return yield* new EngineError({ reason: new FlowNotFound({ flowId }).message })
          if (from !== "oldest") {
            if (start.trimmedThrough !== undefined && after < start.trimmedThrough) {
              return yield* new InvalidResumeToken({ token: from.after, reason: "the messages after it were trimmed" })
            }
            if (start.keptFrom !== undefined && after < start.keptFrom) {
              return yield* new InvalidResumeToken({ token: from.after, reason: "the messages after it were trimmed" })
            }
          }
          const page = () =>
            store
              .readStreamPage(flowId, stream.name, after)
              .pipe(Effect.mapError((e) => new EngineError({ reason: e.message })))
          // a follower waits for the Flow's commit notices, and reads again after the fallback for a missed one
          const fallback = options?.pollInterval ?? MIN_FALLBACK
          const watch = options?.follow ? yield* notices.watch(flowId) : undefined
          const wait = watch === undefined ? Effect.void : watch.next(fallback)
          return Stream.paginate(true as boolean, (first) =>
            Effect.gen(function* () {
              if (!first) yield* wait
              while (true) {
                // closed first: a Flow seen closed committed everything before, so the page read after has it all
                const closed = options?.follow
                  ? (yield* store.loadFlow(flowId).pipe(Effect.orElseSucceed(() => undefined)))?.status !== "running"
                  : true
                const rows = yield* page()
                if (rows.length > 0) {
                  after = rows[rows.length - 1]!.seq
                  const messages = rows.map(
                    (r): StreamMessage<any> => ({
                      token: tokenFor(flowId, stream.name, r.seq),
                      value: decodeJson(stream.schema, r.value),
                      stepExecutionId: r.step_execution_id,
                      attempt: r.attempt,
                      at: r.at
                    })
                  )
                  return [
                    messages,
                    rows.length === 500 || !closed ? Option.some(rows.length === 500) : Option.none()
                  ] as const
                }
                if (closed) return [[], Option.none()] as const
                yield* wait
              }
            })
          )
        })
      )
  }
  return shape
})

/** The engine client as a service. */
export class Client extends Context.Service<Client, ClientShape>()("@durable-agent/engine/Client") {
  /** Needs the cluster's Sharding (from an engine layer), the database and the engine config. */
  static readonly layer: Layer.Layer<Client, never, Sharding.Sharding | SqlClient.SqlClient | EngineConfig> =
    Layer.effect(Client, make)
}
