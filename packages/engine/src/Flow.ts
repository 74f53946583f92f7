/**
 * The Dex programming model as plain data: Flows, Steps, waits, decisions, persistence schema and
 * RPCs. Definitions are shared by workers and clients; handlers return Effects.
 *
 * Names mirror the Dex TypeScript SDK: `Attribute`, `AttributeMap`, `Channel` (`forOne`, `forN`,
 * `forRange`, `atLeast`, `atMost`), `ChannelMap`, `Timer`, `Wait.anyOf/allOf`, `StepDecision`
 * (`goTo`, `goToMany`, `deadEnd`, `gracefulComplete`, `forceComplete`, `forceFail`,
 * `withCancelingSteps`), `StepOptions`, `RetryPolicy`, `Rpc`, `Flow`.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Schema from "effect/Schema"
import type { RecoveryError } from "./Errors.ts"

/** A schema for values the engine stores as JSON. */
export type Codec<A> = Schema.Codec<A, any, never, never>

/**
 * The annotation key of a schema's own JSON codec. The engine stores a value as the JSON text of
 * `Schema.toCodecJson(schema)`'s encoding and reads it back with its decoding; a schema whose AST carries, under
 * this key, `{ ast, encode, decode }` with `ast` the schema's own AST is encoded with `encode` (value to JSON
 * value) and decoded with `decode` (JSON value to value) instead. Both must give exactly what effect's codec
 * gives and throw where it throws: a library that builds many schemas of one shape compiles them once (the
 * session's wire structs do, `packages/session/src/wire/jsonCodec.ts`). A schema derived from an annotated one
 * (`.annotate`, `.check`, ...) has another AST, so it is stored with effect's codec.
 */
export const JsonCodecAnnotation = "@durable-agent/engine/jsonCodec"

// ---------------------------------------------------------------------------------------------
// Persistence schema
// ---------------------------------------------------------------------------------------------

/** Options of an Attribute or AttributeMap declaration. */
export interface AttributeOptions {
  /**
   * Hard-delete: the engine keeps no superseded value of it (not even for a running Step's view), and
   * deleting it removes every stored version, so its bytes leave storage. For short-lived secrets.
   */
  readonly hardDelete?: boolean | undefined
}

/** A typed durable value of a Flow. */
export interface Attribute<A> {
  readonly _tag: "Attribute"
  readonly name: string
  readonly schema: Codec<A>
  readonly hardDelete?: boolean | undefined
}

/** Declares an Attribute. */
export const Attribute = <A>(name: string, schema: Codec<A>, options?: AttributeOptions): Attribute<A> => ({
  _tag: "Attribute",
  name,
  schema,
  ...(options?.hardDelete ? { hardDelete: true } : {})
})

/** A typed durable map of values, one stored value per instance key. */
export interface AttributeMap<A> {
  readonly _tag: "AttributeMap"
  readonly name: string
  readonly schema: Codec<A>
  readonly hardDelete?: boolean | undefined
}

/** Declares an AttributeMap. */
export const AttributeMap = <A>(name: string, schema: Codec<A>, options?: AttributeOptions): AttributeMap<A> => ({
  _tag: "AttributeMap",
  name,
  schema,
  ...(options?.hardDelete ? { hardDelete: true } : {})
})

/**
 * A channel condition: wait for at least `min` messages and consume up to `max` (`null` = all
 * available). `forOne` = [1,1], `forN(n)` = [n,n], `forRange(a,b)` = [a,b], `atLeast(n)` = [n,∞],
 * `atMost(n)` = [0,n] (never blocks).
 */
export interface ChannelCondition {
  readonly _tag: "Channel"
  readonly channel: string
  readonly key: string
  readonly min: number
  readonly max: number | null
  readonly id?: string | undefined
}

interface ChannelBounds<K extends ReadonlyArray<string>> {
  forOne(...key: K): ChannelCondition
  forN(n: number, ...key: K): ChannelCondition
  forRange(min: number, max: number, ...key: K): ChannelCondition
  atLeast(n: number, ...key: K): ChannelCondition
  atMost(n: number, ...key: K): ChannelCondition
}

/** A durable FIFO of messages per Flow. Each message is consumed once, by one winning wait. */
export interface Channel<A> extends ChannelBounds<[]> {
  readonly _tag: "Channel"
  readonly name: string
  readonly schema: Codec<A>
}

/** A family of channels, one FIFO per instance key. */
export interface ChannelMap<A> extends ChannelBounds<[key: string]> {
  readonly _tag: "ChannelMap"
  readonly name: string
  readonly schema: Codec<A>
}

const bounds = (channel: string, key: string, min: number, max: number | null): ChannelCondition => ({
  _tag: "Channel",
  channel,
  key,
  min,
  max
})

/** Declares a Channel. */
export const Channel = <A>(name: string, schema: Codec<A>): Channel<A> => ({
  _tag: "Channel",
  name,
  schema,
  forOne: () => bounds(name, "", 1, 1),
  forN: (n) => bounds(name, "", n, n),
  forRange: (min, max) => bounds(name, "", min, max),
  atLeast: (n) => bounds(name, "", n, null),
  atMost: (n) => bounds(name, "", 0, n)
})

/** Declares a ChannelMap. */
export const ChannelMap = <A>(name: string, schema: Codec<A>): ChannelMap<A> => ({
  _tag: "ChannelMap",
  name,
  schema,
  forOne: (key) => bounds(name, key, 1, 1),
  forN: (n, key) => bounds(name, key, n, n),
  forRange: (min, max, key) => bounds(name, key, min, max),
  atLeast: (n, key) => bounds(name, key, n, null),
  atMost: (n, key) => bounds(name, key, 0, n)
})

/** Gives a condition an ID (used by `skipTimer` and by `anyCombinationOf`-style lookups). */
export const withConditionId = <C extends Condition>(condition: C, id: string): C => ({ ...condition, id })

/**
 * A best-effort, typed message log written by Steps and read by clients with resume tokens. Its
 * byte budget is shared by every Flow of the type.
 */
export interface StreamDef<A> {
  readonly _tag: "Stream"
  readonly name: string
  readonly schema: Codec<A>
  /** Byte budget per (flow type, stream); default 10 MiB. */
  readonly capacityBytes: number
}

/** Declares a Stream (named `FlowStream` so that it does not shadow effect's own `Stream`). */
export const FlowStream = <A>(
  name: string,
  schema: Codec<A>,
  options?: { readonly capacityBytes?: number }
): StreamDef<A> => ({
  _tag: "Stream",
  name,
  schema,
  capacityBytes: options?.capacityBytes ?? 10 * 1024 * 1024
})

// ---------------------------------------------------------------------------------------------
// Waits
// ---------------------------------------------------------------------------------------------

/** A durable timer, in whole seconds (rounded up to a whole-second deadline when the wait is accepted). */
export interface TimerCondition {
  readonly _tag: "Timer"
  readonly seconds: number
  readonly id?: string | undefined
}

/** Timer constructors. Durations that are not whole seconds are rejected when the wait is registered. */
export const Timer = {
  seconds: (seconds: number, id?: string): TimerCondition => ({ _tag: "Timer", seconds, id }),
  byDuration: (duration: Duration.Input, id?: string): TimerCondition => ({
    _tag: "Timer",
    seconds: Duration.toMillis(Duration.fromInputUnsafe(duration)) / 1000,
    id
  })
}

/** A wait condition. */
export type Condition = TimerCondition | ChannelCondition

/** What a Step's `waitFor` returns. */
export type Wait =
  | { readonly _tag: "Skip" }
  | { readonly _tag: "AnyOf"; readonly conditions: ReadonlyArray<Condition> }
  | { readonly _tag: "AllOf"; readonly conditions: ReadonlyArray<Condition> }

/**
 * Wait constructors. In `anyOf`, Timers are selected before Channels, and Channels in argument
 * order; only the winner consumes. In `allOf`, every condition must hold at once.
 */
export const Wait = {
  skipImmediately: { _tag: "Skip" } as Wait,
  anyOf: (...conditions: ReadonlyArray<Condition>): Wait => ({ _tag: "AnyOf", conditions }),
  allOf: (...conditions: ReadonlyArray<Condition>): Wait => ({ _tag: "AllOf", conditions }),
  until: (condition: Condition): Wait => ({ _tag: "AllOf", conditions: [condition] })
}

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

/** Retry policy of a Step method. `maxAttempts` includes the first attempt. */
export interface RetryPolicy {
  readonly maxAttempts?: number | undefined
  readonly initialInterval?: Duration.Input | undefined
  readonly backoffCoefficient?: number | undefined
  readonly maximumInterval?: Duration.Input | undefined
  readonly totalDuration?: Duration.Input | undefined
}

/** A lock on an Attribute or on one AttributeMap instance. */
export type LockRef = Attribute<any> | { readonly map: AttributeMap<any>; readonly key: string }

/** Options of one Step method. */
export interface MethodOptions {
  /** Per-attempt timeout (whole seconds). */
  readonly timeout?: Duration.Input | undefined
  readonly retry?: RetryPolicy | undefined
  /**
   * Execute only: `sync` makes the attempt start durable before the body runs, so an attempt lost with its
   * worker after it produced output fails `WorkerLost`; with `async` it is not, and such an attempt runs
   * again with the same number. Without it, the Flow's default (`StartFlowOptions.stepDurability`) applies.
   * Results commit synchronously either way.
   */
  readonly durability?: "sync" | "async" | undefined
  /**
   * Execute only: the capacity the body runs in. `task` (the default) takes one of the runner's task slots
   * (`EngineConfig.maxConcurrentTasks`); `control` takes one of its control slots (`maxControlTasks`), a
   * capacity apart, so the Step never waits behind the Step bodies that fill the task slots. For a short Step
   * that only decides (reads and writes the Flow's state, cancels Steps, moves on), such as one that cancels a
   * sibling; a body that waits on the network keeps `task`. Read from the Step's own options.
   */
  readonly slot?: "task" | "control" | undefined
  /** Locks held from the first dispatch until the Step's result commits. */
  readonly locks?: ReadonlyArray<LockRef> | undefined
}

/** Static options of a Step, or a per-movement override (merged over the static ones). */
export interface StepOptions {
  readonly waitFor?: MethodOptions | undefined
  readonly execute?: MethodOptions | undefined
  /** An attempt that sends no heartbeat for this long fails with `HeartbeatTimeout`; 0 disables. */
  readonly heartbeatTimeout?: Duration.Input | undefined
  /**
   * The Step scheduled with the same input and a recovery error when Execute runs out of attempts. `Step`
   * checks that it recovers every error the failing Step declares (see `Step`).
   */
  readonly onExecuteFailure?: AnyStepDef | undefined
  /** What a failing `waitFor` does: fail the Flow (default) or run Execute with `waitForFailed`. */
  readonly waitForFailure?: "fail" | "proceed" | undefined
}

// ---------------------------------------------------------------------------------------------
// Contexts
// ---------------------------------------------------------------------------------------------

/** Synchronous read/write view over a Flow's state. Writes are staged and commit with the result. */
export interface TxView {
  get<A>(attribute: Attribute<A>): Option.Option<A>
  getAt<A>(map: AttributeMap<A>, key: string): Option.Option<A>
  /** Instance keys of a map, ascending, including staged writes. */
  keys(map: AttributeMap<any>): ReadonlyArray<string>
  set<A>(attribute: Attribute<A>, value: A): void
  setAt<A>(map: AttributeMap<A>, key: string, value: A): void
  delete(attribute: Attribute<any>): void
  deleteAt(map: AttributeMap<any>, key: string): void
  publish<A>(channel: Channel<A>, value: A): void
  publishAt<A>(channel: ChannelMap<A>, key: string, value: A): void
  /** Queued messages (plus this invocation's staged publishes). */
  channelSize(channel: Channel<any> | ChannelMap<any>, key?: string): number
}

/** Context of a Step's `waitFor`. */
export interface StepContext extends TxView {
  readonly flowId: string
  readonly runId: string
  readonly flowType: string
  readonly stepExecutionId: string
  readonly fromStepExecutionId: string | undefined
}

/**
 * Context of a Step's `execute`. `RE` is what a failure route recovers: the errors of the Steps that
 * route to it (`Step({ recovers })`); other Steps see only the engine's own failures, and never one.
 */
export interface ExecuteContext<RE = unknown> extends StepContext {
  readonly attempt: number
  readonly firstAttemptAt: number
  /** Whether the timer at `index` (declaration order among the wait's conditions) fired; any timer when omitted. */
  timerFired(index?: number): boolean
  /** Messages consumed by the winning condition(s) on this channel; `[]` when not selected. */
  channelResults<A>(channel: Channel<A> | ChannelMap<A>, key?: string): ReadonlyArray<A>
  readonly waitForFailed: boolean
  /** Set on a failure-route Step: why the failing Step ran out of attempts. */
  readonly recoveryError: Option.Option<RecoveryError<RE>>
  /** The checkpoint saved by the last heartbeat of an earlier attempt. */
  readonly heartbeatCheckpoint: Option.Option<unknown>
  /** A durable heartbeat; resolves once persisted. The first one marks the attempt as having produced output. */
  heartbeat(checkpoint?: unknown): Effect.Effect<void>
  /** Best-effort stream write, now; never fails the Step. */
  emit<A>(stream: StreamDef<A>, value: A): Effect.Effect<void>
  /** Best-effort stream writes of several messages, now, in one write; never fails the Step. */
  emitAll<A>(stream: StreamDef<A>, values: ReadonlyArray<A>): Effect.Effect<void>
  /**
   * Stages a stream message: it is written in the transaction that commits this attempt's success, so no
   * reader sees it before the committed record that makes it true, and an attempt that fails, is cancelled or
   * dies before its commit leaves none. Best effort: an oversized message, or one the stream's budget has no
   * room for at the commit, is dropped (counted). Never fails the Step.
   */
  stage<A>(stream: StreamDef<A>, value: A): Effect.Effect<void>
  /**
   * Writes stream messages together with a durable heartbeat, in one write: what must be visible before the
   * attempt commits (a tool's start, a model call's first text). Resolves once persisted; like every
   * heartbeat it marks the attempt as having produced output. The messages are best effort (the stream's
   * budget may drop them); the heartbeat is not.
   */
  heartbeatWith<A>(stream: StreamDef<A>, values: ReadonlyArray<A>, checkpoint?: unknown): Effect.Effect<void>
}

/** A channel message as an RPC sees it. */
export interface ChannelMessage<A> {
  readonly id: string
  readonly value: A
}

/** Context of an RPC handler. */
export interface RpcContext extends TxView {
  readonly flowId: string
  readonly runId: string
  readonly flowType: string
  /** Queued messages with their IDs, oldest first, without consuming them. */
  messages<A>(channel: Channel<A> | ChannelMap<A>, key?: string): ReadonlyArray<ChannelMessage<A>>
  /** Deletes one queued message by ID at commit; fails the RPC with ChannelMessageNotFound if it is gone. */
  deleteMessage(channel: Channel<any> | ChannelMap<any>, id: string, key?: string): void
  /** Non-empty instance keys of a ChannelMap, including staged publishes. */
  channelKeys(channel: ChannelMap<any>): ReadonlyArray<string>
}

// ---------------------------------------------------------------------------------------------
// Steps and decisions
// ---------------------------------------------------------------------------------------------

/**
 * A Step: an optional `waitFor` (evaluated when the Step is scheduled) and an `execute` whose failure
 * channel is typed. `E` is what `execute` may fail with, declared by the `error` Schema (as effect's
 * `Activity` declares its error): a failed attempt stores it with that Schema and its failure route
 * reads it back typed. `RE` is what this Step recovers as a failure route.
 */
export interface StepDef<I, E = never, R = never, RE = never> {
  readonly type: string
  readonly input: Codec<I>
  /** The Schema of the errors `execute` fails with; anything else it fails with is a `Defect`. */
  readonly error?: Codec<E> | undefined
  readonly options?: StepOptions | undefined
  /** Pure read of state that returns the wait; runs inside the commit that schedules the Step. */
  readonly waitFor?: ((ctx: StepContext, input: I) => Wait) | undefined
  readonly execute: (ctx: ExecuteContext<RE>, input: I) => Effect.Effect<StepDecision, E, R>
}

/** Any Step, whatever its errors and services (its input type is checked where it is scheduled). */
export type AnyStepDef = StepDef<any, unknown, unknown, never>

/** Type-level accessors of a StepDef. */
export declare namespace StepDef {
  /** The input of a Step. */
  export type Input<S> = S extends StepDef<infer I, infer _E, infer _R, infer _RE> ? I : never
  /** What a Step's `execute` fails with (its declared errors). */
  export type Error<S> = S extends StepDef<infer _I, infer E, infer _R, infer _RE> ? E : never
  /** The services a Step's `execute` needs. */
  export type Services<S> = S extends StepDef<infer _I, infer _E, infer R, infer _RE> ? R : never
  /** What a failure-route Step recovers (besides the engine's own failures). */
  export type Recovers<S> = S extends StepDef<infer _I, infer _E, infer _R, infer RE> ? RE : never
}

/**
 * Declares a Step. `error` declares what `execute` fails with (default: nothing, so a Step that fails
 * with an undeclared type does not compile); `recovers` declares, for a failure route, the errors of the
 * Steps that route to it. A Step's `onExecuteFailure` must recover every error the Step declares.
 */
export const Step = <I, E = never, R = never, RE = never>(def: {
  readonly type: string
  readonly input: Codec<I>
  readonly error?: Codec<E> | undefined
  readonly recovers?: Codec<RE> | undefined
  readonly options?:
    | (StepOptions & { readonly onExecuteFailure?: StepDef<any, unknown, unknown, NoInfer<E>> | undefined })
    | undefined
  readonly waitFor?: ((ctx: StepContext, input: I) => Wait) | undefined
  readonly execute: (ctx: ExecuteContext<NoInfer<RE>>, input: I) => Effect.Effect<StepDecision, NoInfer<E>, R>
}): StepDef<I, E, R, RE> => def

/** One Step to schedule, with an optional per-execution options override. */
export interface StepMovement {
  readonly step: AnyStepDef
  readonly input: unknown
  readonly options?: StepOptions | undefined
}

/** StepMovement constructor. */
export const StepMovement = {
  of: <I>(step: StepDef<I, unknown, unknown, never>, input: NoInfer<I>, options?: StepOptions): StepMovement => ({
    step,
    input,
    options
  })
}

/** What `execute` returns. `cancel` lists Step types whose current executions are cancelled at commit. */
export type StepDecision =
  | { readonly _tag: "Next"; readonly movements: ReadonlyArray<StepMovement>; readonly cancel: ReadonlyArray<string> }
  | { readonly _tag: "DeadEnd"; readonly cancel: ReadonlyArray<string> }
  | { readonly _tag: "GracefulComplete"; readonly output: unknown; readonly cancel: ReadonlyArray<string> }
  | { readonly _tag: "ForceComplete"; readonly output: unknown; readonly cancel: ReadonlyArray<string> }
  | { readonly _tag: "ForceFail"; readonly reason: string; readonly cancel: ReadonlyArray<string> }

/** StepDecision constructors. */
export const StepDecision = {
  goTo: <I>(step: StepDef<I, unknown, unknown, never>, input: NoInfer<I>, options?: StepOptions): StepDecision => ({
    _tag: "Next",
    movements: [{ step, input, options }],
    cancel: []
  }),
  goToMany: (...movements: ReadonlyArray<StepMovement>): StepDecision => ({ _tag: "Next", movements, cancel: [] }),
  deadEnd: (): StepDecision => ({ _tag: "DeadEnd", cancel: [] }),
  gracefulComplete: (output?: unknown): StepDecision => ({ _tag: "GracefulComplete", output, cancel: [] }),
  forceComplete: (output?: unknown): StepDecision => ({ _tag: "ForceComplete", output, cancel: [] }),
  forceFail: (reason: string): StepDecision => ({ _tag: "ForceFail", reason, cancel: [] }),
  /** Also cancels every current execution of these Step types (queued, waiting or running) at commit. */
  withCancelingSteps: (decision: StepDecision, ...steps: ReadonlyArray<AnyStepDef>): StepDecision => ({
    ...decision,
    cancel: [...decision.cancel, ...steps.map((s) => s.type)]
  })
}

// ---------------------------------------------------------------------------------------------
// RPCs and Flows
// ---------------------------------------------------------------------------------------------

/** What an RPC handler returns. */
export interface RpcResult<O> {
  readonly output: O
  readonly nextSteps?: ReadonlyArray<StepMovement> | undefined
  readonly cancelSteps?: ReadonlyArray<AnyStepDef> | undefined
}

/**
 * An RPC on a Flow. With `locks` it runs in locking mode (takes all locks or fails at once with
 * RpcLockConflict); without, it is transactional (reads a snapshot, commits atomically, last writer wins).
 */
export interface RpcDef<I, O, R = never> {
  readonly _tag: "Rpc"
  readonly name: string
  readonly input: Codec<I>
  readonly output: Codec<O>
  readonly locks?: ReadonlyArray<LockRef> | undefined
  readonly handler: (ctx: RpcContext, input: I) => Effect.Effect<RpcResult<O>, unknown, R>
}

/** Declares an RPC (named `FlowRpc` so that it does not shadow effect's own `Rpc`). */
export const FlowRpc = <I, O, R = never>(def: Omit<RpcDef<I, O, R>, "_tag">): RpcDef<I, O, R> => ({
  _tag: "Rpc",
  ...def
})

/**
 * A Flow's execution timeout: once `after` has passed since the start, a running Flow fails with error type
 * `ExecutionTimeout`; with a `handler`, its active Steps are cancelled instead and the handler Step runs
 * with the Flow's input (it decides how the Flow ends).
 */
export interface FlowTimeout<I, R = never> {
  readonly after: Duration.Input
  readonly handler?: StepDef<I, unknown, R, never> | undefined
}

/** A Flow type: its Steps, persistence schema, streams and RPCs. */
export interface FlowDef<I, R = never> {
  readonly type: string
  readonly start: StepDef<I, unknown, R, never>
  readonly steps: ReadonlyArray<StepDef<any, unknown, R, never>>
  readonly attributes: ReadonlyArray<Attribute<any> | AttributeMap<any>>
  readonly channels: ReadonlyArray<Channel<any> | ChannelMap<any>>
  readonly streams: ReadonlyArray<StreamDef<any>>
  readonly rpcs: ReadonlyArray<RpcDef<any, any, R>>
  /** The default execution timeout and its policy; `startFlow(..., { executionTimeout })` overrides `after`. */
  readonly executionTimeout?: FlowTimeout<I, R> | undefined
}

/** Declares a Flow. `steps` may omit the start Step and the timeout handler; they are added. */
export const Flow = <I, R = never>(def: {
  readonly type: string
  readonly start: StepDef<I, unknown, R, never>
  readonly steps?: ReadonlyArray<StepDef<any, unknown, R, never>>
  readonly attributes?: ReadonlyArray<Attribute<any> | AttributeMap<any>>
  readonly channels?: ReadonlyArray<Channel<any> | ChannelMap<any>>
  readonly streams?: ReadonlyArray<StreamDef<any>>
  readonly rpcs?: ReadonlyArray<RpcDef<any, any, R>>
  readonly executionTimeout?: FlowTimeout<I, R>
}): FlowDef<I, R> => {
  const steps = def.steps?.includes(def.start) ? def.steps : [def.start, ...(def.steps ?? [])]
  const handler = def.executionTimeout?.handler
  return {
    type: def.type,
    start: def.start,
    steps: handler === undefined || steps.includes(handler) ? steps : [...steps, handler],
    attributes: def.attributes ?? [],
    channels: def.channels ?? [],
    streams: def.streams ?? [],
    rpcs: def.rpcs ?? [],
    ...(def.executionTimeout === undefined ? {} : { executionTimeout: def.executionTimeout })
  }
}

/** The services a Flow's handlers need. */
export type FlowServices<F> = F extends FlowDef<any, infer R> ? R : never
