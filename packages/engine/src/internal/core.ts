// The engine core: the Flow entity (one owner per Flow, every state change one SQL transaction)
// and the Step runner entity (one per Step execution, user code outside any transaction).
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import { ClusterSchema, DeliverAt, Entity, Sharding } from "effect/cluster"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PrimaryKey from "effect/PrimaryKey"
import { Rpc } from "effect/rpc"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { SqlClient } from "effect/sql"
import {
  ChannelMessageNotFound,
  DefinitionError,
  EngineError,
  FlowAlreadyStarted,
  FlowNotActive,
  FlowNotFound,
  InvalidInput,
  RecoveryError,
  RpcFailed,
  RpcLockConflict,
  ValueTooLarge
} from "../Errors.ts"
import type { ExecuteContext, FlowDef, StepContext, StepDecision, StepDef, StepOptions, StreamDef } from "../Flow.ts"
import {
  type AttrWrite,
  byteLength,
  channelKey,
  decodeJson,
  emptyStaged,
  encodeJson,
  evaluateWait,
  type FlowState,
  lockNames,
  makeRpcView,
  makeTxView,
  type Publish,
  type Staged,
  type StoredMessage,
  type StoredWait,
  splitChannelKey,
  storeWait,
  validateWait,
  type WaitResult
} from "./state.ts"
import {
  ACTIVE_STEP_STATUSES,
  appendHistory,
  type FlowRow,
  loadAttempt,
  loadFlow,
  loadState,
  loadStep,
  normalizeStep,
  type Sql,
  type StepRow
} from "./store.ts"

// ------------------------------------------------------------------------------------------------
// Configuration and registry
// ------------------------------------------------------------------------------------------------

export interface EngineConfigShape {
  /** Largest stored value (attribute, message, Step input); default 16 MiB. */
  readonly maxValueBytes: number
  /** Largest stream message; default 100 KiB. */
  readonly maxStreamMessageBytes: number
  /** How often a running attempt checks whether it was cancelled from another process; default 1 s. */
  readonly cancellationPollInterval: Duration.Duration
}

export class EngineConfig extends Context.Service<EngineConfig, EngineConfigShape>()(
  "@durable-agent/engine/EngineConfig"
) {
  static readonly defaults: EngineConfigShape = {
    maxValueBytes: 16 * 1024 * 1024,
    maxStreamMessageBytes: 100 * 1024,
    cancellationPollInterval: Duration.seconds(1)
  }
  static readonly layer = (config?: Partial<EngineConfigShape>) =>
    Layer.succeed(EngineConfig, { ...EngineConfig.defaults, ...config })
}

export interface RegisteredFlow {
  readonly def: FlowDef<any, any>
  readonly steps: ReadonlyMap<string, StepDef<any, any>>
  readonly rpcs: ReadonlyMap<string, FlowDef<any, any>["rpcs"][number]>
  readonly streams: ReadonlyMap<string, StreamDef<any>>
  readonly context: Context.Context<any>
}

/** The Flows this process can run, with the services their handlers need. */
export class FlowRegistry extends Context.Service<
  FlowRegistry,
  { readonly flows: Map<string, RegisteredFlow>; readonly running: Map<string, Fiber.Fiber<any, any>> }
>()("@durable-agent/engine/FlowRegistry") {
  static readonly layer = Layer.sync(FlowRegistry, () => ({ flows: new Map(), running: new Map() }))
}

// ------------------------------------------------------------------------------------------------
// Resolved Step options (stored on the Step row)
// ------------------------------------------------------------------------------------------------

export interface ResolvedOptions {
  readonly timeoutMs: number | null
  readonly heartbeatTimeoutMs: number | null
  readonly maxAttempts: number | null
  readonly initialIntervalMs: number
  readonly backoffCoefficient: number
  readonly maximumIntervalMs: number
  readonly totalDurationMs: number | null
  readonly failureRoute: string | null
  readonly waitForFailure: "fail" | "proceed"
  readonly locks: ReadonlyArray<string>
}

const ms = (d: Duration.Input | undefined): number | null =>
  d === undefined ? null : Duration.toMillis(Duration.fromInputUnsafe(d))

export const resolveOptions = (base: StepOptions | undefined, override: StepOptions | undefined): ResolvedOptions => {
  const execute = { ...base?.execute, ...override?.execute }
  const retry = { ...base?.execute?.retry, ...override?.execute?.retry }
  const route = override?.onExecuteFailure ?? base?.onExecuteFailure
  const hb = ms(override?.heartbeatTimeout ?? base?.heartbeatTimeout)
  return {
    timeoutMs: ms(execute.timeout),
    heartbeatTimeoutMs: hb === 0 ? null : hb,
    maxAttempts: retry.maxAttempts ?? null,
    initialIntervalMs: ms(retry.initialInterval) ?? 1000,
    backoffCoefficient: retry.backoffCoefficient ?? 2,
    maximumIntervalMs: ms(retry.maximumInterval) ?? 100_000,
    totalDurationMs: ms(retry.totalDuration),
    failureRoute: route?.type ?? null,
    waitForFailure: override?.waitForFailure ?? base?.waitForFailure ?? "fail",
    locks: lockNames(execute.locks)
  }
}

// ------------------------------------------------------------------------------------------------
// Wire payloads between the Step runner and the Flow entity
// ------------------------------------------------------------------------------------------------

const EncodedMovement = Schema.Struct({ step: Schema.String, input: Schema.String, options: Schema.String })
type EncodedMovement = typeof EncodedMovement.Type

export const EncodedDecision = Schema.Union([
  Schema.Struct({
    _tag: Schema.Literal("Next"),
    movements: Schema.Array(EncodedMovement),
    cancel: Schema.Array(Schema.String)
  }),
  Schema.Struct({ _tag: Schema.Literal("DeadEnd"), cancel: Schema.Array(Schema.String) }),
  Schema.Struct({
    _tag: Schema.Literals(["GracefulComplete", "ForceComplete"]),
    output: Schema.NullOr(Schema.String),
    cancel: Schema.Array(Schema.String)
  }),
  Schema.Struct({ _tag: Schema.Literal("ForceFail"), reason: Schema.String, cancel: Schema.Array(Schema.String) })
])
export type EncodedDecision = typeof EncodedDecision.Type

const AttrWriteSchema = Schema.Struct({ name: Schema.String, key: Schema.String, value: Schema.NullOr(Schema.String) })
const PublishSchema = Schema.Struct({ channel: Schema.String, key: Schema.String, value: Schema.String })

export const Outcome = Schema.Union([
  Schema.Struct({
    _tag: Schema.Literal("Success"),
    writes: Schema.Array(AttrWriteSchema),
    publishes: Schema.Array(PublishSchema),
    decision: EncodedDecision
  }),
  Schema.Struct({
    _tag: Schema.Literal("Failure"),
    errorType: Schema.String,
    detail: Schema.String,
    retryable: Schema.Boolean
  })
])
export type Outcome = typeof Outcome.Type

// ------------------------------------------------------------------------------------------------
// Entities
// ------------------------------------------------------------------------------------------------

class ExecutePayload extends Schema.Class<ExecutePayload>("@durable-agent/engine/Execute")({
  flowId: Schema.String,
  seid: Schema.String,
  attempt: Schema.Number,
  at: Schema.Number
}) {
  [PrimaryKey.symbol]() {
    return `${this.seid}#${this.attempt}`
  }
  [DeliverAt.symbol]() {
    return DateTime.makeUnsafe(this.at)
  }
}

class WakePayload extends Schema.Class<WakePayload>("@durable-agent/engine/Wake")({
  flowId: Schema.String,
  seid: Schema.String,
  at: Schema.Number
}) {
  [PrimaryKey.symbol]() {
    return `wake/${this.seid}@${this.at}`
  }
  [DeliverAt.symbol]() {
    return DateTime.makeUnsafe(this.at)
  }
}

export class StartPayload extends Schema.Class<StartPayload>("@durable-agent/engine/Start")({
  flowId: Schema.String,
  flowType: Schema.String,
  input: Schema.String,
  requestId: Schema.String,
  ignoreAlreadyStarted: Schema.Boolean,
  stepDurability: Schema.Literals(["sync", "async"]),
  initialAttributes: Schema.Array(AttrWriteSchema)
}) {
  [PrimaryKey.symbol]() {
    return `start/${this.requestId}`
  }
}

export class InvokePayload extends Schema.Class<InvokePayload>("@durable-agent/engine/Invoke")({
  flowId: Schema.String,
  rpc: Schema.String,
  input: Schema.String,
  requestId: Schema.String
}) {
  [PrimaryKey.symbol]() {
    return `rpc/${this.requestId}`
  }
}

export class CommitPayload extends Schema.Class<CommitPayload>("@durable-agent/engine/Commit")({
  flowId: Schema.String,
  seid: Schema.String,
  attempt: Schema.Number,
  outcome: Schema.String
}) {
  [PrimaryKey.symbol]() {
    return `commit/${this.seid}#${this.attempt}`
  }
}

const ControlCommand = Schema.Union([
  Schema.Struct({
    _tag: Schema.Literal("Stop"),
    mode: Schema.Literals(["cancel", "terminate", "fail"]),
    reason: Schema.String
  }),
  Schema.Struct({
    _tag: Schema.Literal("SkipTimer"),
    seid: Schema.String,
    timer: Schema.Union([Schema.String, Schema.Number])
  }),
  Schema.Struct({ _tag: Schema.Literal("Publish"), channel: Schema.String, key: Schema.String, value: Schema.String })
])

export class ControlPayload extends Schema.Class<ControlPayload>("@durable-agent/engine/Control")({
  flowId: Schema.String,
  requestId: Schema.String,
  command: ControlCommand
}) {
  [PrimaryKey.symbol]() {
    return `control/${this.requestId}`
  }
}

const StartError = Schema.Union([FlowAlreadyStarted, DefinitionError, EngineError, ValueTooLarge, InvalidInput])
const InvokeError = Schema.Union([
  FlowNotFound,
  FlowNotActive,
  RpcLockConflict,
  ChannelMessageNotFound,
  RpcFailed,
  ValueTooLarge,
  DefinitionError,
  EngineError,
  InvalidInput
])
const ControlError = Schema.Union([FlowNotFound, FlowNotActive, EngineError, ValueTooLarge, DefinitionError])

const persisted = <R extends Rpc.Any>(rpc: R): R =>
  (rpc as any).annotate(ClusterSchema.Persisted, true).annotate(ClusterSchema.WithTransaction, true)

export const FlowEntity = Entity.make("DexFlow", [
  persisted(Rpc.make("Start", { payload: StartPayload, success: Schema.String, error: StartError })),
  persisted(Rpc.make("Invoke", { payload: InvokePayload, success: Schema.String, error: InvokeError })),
  persisted(Rpc.make("Commit", { payload: CommitPayload, error: EngineError })),
  persisted(Rpc.make("Wake", { payload: WakePayload, error: EngineError })),
  persisted(Rpc.make("Control", { payload: ControlPayload, success: Schema.Boolean, error: ControlError }))
])

export const StepEntity = Entity.make("DexStep", [
  Rpc.make("Execute", { payload: ExecutePayload }).annotate(ClusterSchema.Persisted, true)
])

// ------------------------------------------------------------------------------------------------
// The Flow-side transaction
// ------------------------------------------------------------------------------------------------

const errorInfo = (cause: Cause.Cause<unknown>): { errorType: string; detail: string } => {
  const failure = cause.reasons.find(Cause.isFailReason)
  const value: unknown = failure ? failure.error : cause.reasons.find(Cause.isDieReason)?.defect
  if (value !== null && typeof value === "object") {
    const v = value as { _tag?: unknown; name?: unknown; message?: unknown }
    const errorType = typeof v._tag === "string" ? v._tag : typeof v.name === "string" ? v.name : "Error"
    const detail = typeof v.message === "string" && v.message !== "" ? v.message : safeJson(value)
    return { errorType, detail }
  }
  if (value !== undefined) return { errorType: "Error", detail: String(value) }
  return { errorType: "Interrupted", detail: Cause.pretty(cause) }
}

const safeJson = (v: unknown) => {
  try {
    return JSON.stringify(v) ?? String(v)
  } catch {
    return String(v)
  }
}

interface Snapshot {
  readonly attrs: ReadonlyArray<readonly [string, ReadonlyArray<readonly [string, string]>]>
  readonly channels: ReadonlyArray<readonly [string, number]>
}

const toSnapshot = (state: FlowState): string =>
  JSON.stringify({
    attrs: [...state.attrs].map(([name, m]) => [name, [...m]]),
    channels: [...state.channels].map(([k, v]) => [k, typeof v === "number" ? v : v.length])
  } satisfies Snapshot)

const fromSnapshot = (text: string): FlowState => {
  const s = JSON.parse(text) as Snapshot
  return {
    attrs: new Map(s.attrs.map(([name, entries]) => [name, new Map(entries)])),
    channels: new Map(s.channels)
  }
}

/** One Flow-side state change: everything here commits in the handler's SQL transaction. */
class FlowTx {
  readonly interrupts: Array<string> = []
  private stepsCache: Array<StepRow> | undefined
  readonly sql: Sql
  readonly config: EngineConfigShape
  readonly registered: RegisteredFlow
  readonly flow: FlowRow
  readonly state: FlowState
  readonly now: number
  readonly stepClient: (id: string) => any
  readonly flowClient: (id: string) => any
  private counters: Record<string, number>
  constructor(options: {
    readonly sql: Sql
    readonly config: EngineConfigShape
    readonly registered: RegisteredFlow
    readonly flow: FlowRow
    readonly state: FlowState
    readonly now: number
    readonly stepClient: (id: string) => any
    readonly flowClient: (id: string) => any
    readonly counters: Record<string, number>
  }) {
    this.sql = options.sql
    this.config = options.config
    this.registered = options.registered
    this.flow = options.flow
    this.state = options.state
    this.now = options.now
    this.stepClient = options.stepClient
    this.flowClient = options.flowClient
    this.counters = options.counters
  }

  get flowId() {
    return this.flow.flow_id
  }
  get def() {
    return this.registered.def
  }

  history(kind: string, seid: string | null, attempt: number | null, data: unknown) {
    return appendHistory(this.sql, this.flowId, this.now, kind, seid, attempt, data)
  }

  activeSteps = Effect.fnUntraced(function* (this: FlowTx) {
    if (this.stepsCache === undefined) {
      const rows = yield* this.sql`SELECT * FROM dex_steps WHERE flow_id = ${this.flowId}
        AND status IN ('waiting', 'ready', 'running') ORDER BY seq`
      this.stepsCache = rows.map(normalizeStep)
    }
    return this.stepsCache
  })

  updateStep = Effect.fnUntraced(function* (this: FlowTx, seid: string, patch: Partial<StepRow>) {
    const entries = Object.entries(patch)
    const sets = entries.map(([k]) => this.sql`${this.sql(k)} = ${(patch as any)[k]}`)
    yield* this.sql`UPDATE dex_steps SET ${this.sql.csv(sets)} WHERE flow_id = ${this.flowId} AND seid = ${seid}`
    if (this.stepsCache !== undefined) {
      this.stepsCache = this.stepsCache
        .map((s) => (s.seid === seid ? { ...s, ...patch } : s))
        .filter((s) => ACTIVE_STEP_STATUSES.includes(s.status))
    }
  })

  /** Checks sizes, then applies attribute writes, publishes and deletes to SQL and to `state`. */
  applyWrites = Effect.fnUntraced(function* (
    this: FlowTx,
    writes: ReadonlyArray<AttrWrite>,
    publishes: ReadonlyArray<Publish>,
    deletes: Staged["deletes"]
  ) {
    for (const d of deletes) {
      const res = yield* this.sql`DELETE FROM dex_messages WHERE flow_id = ${this.flowId} AND id = ${Number(d.id)}
        AND channel = ${d.channel} RETURNING id`
      if (res.length === 0) {
        return yield* new ChannelMessageNotFound({ flowId: this.flowId, channel: d.channel, messageId: d.id })
      }
      const k = channelKey(d.channel, d.key)
      const list = this.state.channels.get(k)
      if (Array.isArray(list))
        this.state.channels.set(
          k,
          (list as Array<StoredMessage>).filter((m) => m.id !== d.id)
        )
    }
    for (const w of writes) {
      if (w.value === null) {
        yield* this.sql`DELETE FROM dex_attrs WHERE flow_id = ${this.flowId} AND name = ${w.name} AND key = ${w.key}`
        this.state.attrs.get(w.name)?.delete(w.key)
      } else {
        yield* this
          .sql`INSERT INTO dex_attrs (flow_id, name, key, value) VALUES (${this.flowId}, ${w.name}, ${w.key}, ${w.value})
          ON CONFLICT (flow_id, name, key) DO UPDATE SET value = excluded.value`
        let m = this.state.attrs.get(w.name)
        if (m === undefined) {
          m = new Map()
          this.state.attrs.set(w.name, m)
        }
        m.set(w.key, w.value)
      }
    }
    for (const p of publishes) {
      const rows = yield* this.sql<{
        id: unknown
      }>`INSERT INTO dex_messages (flow_id, channel, key, value, published_at)
        VALUES (${this.flowId}, ${p.channel}, ${p.key}, ${p.value}, ${this.now}) RETURNING id`
      const k = channelKey(p.channel, p.key)
      const list = [...((this.state.channels.get(k) as ReadonlyArray<StoredMessage> | undefined) ?? [])]
      list.push({ id: String(rows[0]!.id), value: p.value })
      this.state.channels.set(k, list)
    }
  })

  /** Schedules one Step execution: evaluates its waitFor against the current state. */
  scheduleStep = Effect.fnUntraced(function* (
    this: FlowTx,
    movement: EncodedMovement,
    fromSeid: string | null,
    recovery: RecoveryError | null
  ) {
    const step = this.registered.steps.get(movement.step)
    if (step === undefined) {
      return yield* new DefinitionError({ flowType: this.def.type, reason: `unknown Step type ${movement.step}` })
    }
    const n = (this.counters[step.type] ?? 0) + 1
    this.counters[step.type] = n
    const seid = `${step.type}-${n}`
    const seq = (this.counters["\u0000seq"] ?? 0) + 1
    this.counters["\u0000seq"] = seq
    let wait: StoredWait | null = null
    let waitFailed = 0
    const options = JSON.parse(movement.options) as ResolvedOptions
    if (step.waitFor !== undefined) {
      const staged = emptyStaged()
      const ctx: StepContext = {
        ...makeTxView(this.def, this.state, staged),
        flowId: this.flowId,
        runId: this.flow.run_id,
        flowType: this.def.type,
        stepExecutionId: seid,
        fromStepExecutionId: fromSeid ?? undefined
      }
      const result = yield* Effect.exit(
        Effect.suspend(() => {
          const input = decodeJson(step.input, movement.input)
          const w = step.waitFor!(ctx, input)
          const problem = validateWait(this.def, w)
          return problem === undefined
            ? Effect.succeed(w)
            : Effect.fail(new DefinitionError({ flowType: this.def.type, reason: `${step.type}.waitFor: ${problem}` }))
        })
      )
      if (Exit.isSuccess(result)) {
        yield* this.applyWrites([...staged.attrWrites.values()], staged.publishes, [])
        if (result.value._tag !== "Skip") wait = storeWait(result.value, this.now)
      } else if (options.waitForFailure === "proceed") {
        waitFailed = 1
      } else {
        const info = errorInfo(result.cause)
        yield* this.history("WaitForFailed", seid, null, info)
        yield* this.insertStep(seid, step.type, movement, fromSeid, recovery, null, 0, seq, "failed")
        return yield* this.closeFlow("failed", null, `${seid}.waitFor failed: ${info.errorType}: ${info.detail}`)
      }
    }
    yield* this.insertStep(
      seid,
      step.type,
      movement,
      fromSeid,
      recovery,
      wait,
      waitFailed,
      seq,
      wait ? "waiting" : "ready"
    )
    yield* this.history("StepScheduled", seid, null, {
      stepType: step.type,
      from: fromSeid,
      wait: wait === null ? null : wait.kind,
      recovery: recovery === null ? null : { errorType: recovery.errorType, attemptProgress: recovery.attemptProgress }
    })
    if (wait !== null) {
      for (const c of wait.conditions) {
        if (c._tag === "Timer" && c.deadline > this.now) {
          yield* this.flowClient(this.flowId).Wake(new WakePayload({ flowId: this.flowId, seid, at: c.deadline }), {
            discard: true
          })
        }
      }
    }
    return seid
  })

  insertStep = Effect.fnUntraced(function* (
    this: FlowTx,
    seid: string,
    stepType: string,
    movement: EncodedMovement,
    fromSeid: string | null,
    recovery: RecoveryError | null,
    wait: StoredWait | null,
    waitFailed: number,
    seq: number,
    status: StepRow["status"]
  ) {
    const locks = (JSON.parse(movement.options) as ResolvedOptions).locks
    const row: StepRow = {
      flow_id: this.flowId,
      seid,
      step_type: stepType,
      status,
      input: movement.input,
      options: movement.options,
      from_seid: fromSeid,
      wait: wait === null ? null : JSON.stringify(wait),
      wait_result: null,
      wait_failed: waitFailed,
      waiting_since: wait === null ? null : this.now,
      attempt: 0,
      first_attempt_at: null,
      snapshot: null,
      recovery: recovery === null ? null : JSON.stringify(Schema.encodeSync(RecoveryError)(recovery)),
      locks: JSON.stringify(locks),
      created_at: this.now,
      seq
    }
    yield* this.sql`INSERT INTO dex_steps ${this.sql.insert(row as any)}`
    if (this.stepsCache !== undefined && ACTIVE_STEP_STATUSES.includes(status)) this.stepsCache.push(row)
  })

  /** Re-evaluates every waiting Step (oldest wait first), then dispatches ready Steps whose locks are free. */
  settle = Effect.fnUntraced(function* (this: FlowTx) {
    if (this.flow.status !== "running") return
    const steps = yield* this.activeSteps()
    const waiting = steps
      .filter((s) => s.status === "waiting")
      .sort((a, b) => (a.waiting_since ?? 0) - (b.waiting_since ?? 0) || a.seq - b.seq)
    for (const step of waiting) {
      const wait = JSON.parse(step.wait!) as StoredWait
      const result = evaluateWait(wait, this.now, (channel, key) => {
        const v = this.state.channels.get(channelKey(channel, key))
        return Array.isArray(v) ? (v as ReadonlyArray<StoredMessage>).map((m) => m.id) : []
      })
      if (result === undefined) continue
      const values: Record<string, Array<string>> = {}
      for (const [k, ids] of Object.entries(result.consumed)) {
        if (ids.length === 0) continue
        const list = this.state.channels.get(k) as ReadonlyArray<StoredMessage>
        const set = new Set(ids)
        values[k] = list.filter((m) => set.has(m.id)).map((m) => m.value)
        this.state.channels.set(
          k,
          list.filter((m) => !set.has(m.id))
        )
        const [channel] = splitChannelKey(k)
        yield* this.sql`DELETE FROM dex_messages WHERE flow_id = ${this.flowId} AND channel = ${channel}
          AND id IN ${this.sql.in(ids.map(Number))}`
      }
      yield* this.updateStep(step.seid, {
        status: "ready",
        wait_result: JSON.stringify({ timers: result.timers, values } satisfies StoredWaitResult)
      })
      yield* this.history("WaitSatisfied", step.seid, null, {
        timers: result.timers,
        consumed: Object.fromEntries(Object.entries(values).map(([k, v]) => [splitChannelKey(k).join("/"), v.length]))
      })
    }
    yield* this.dispatchReady()
  })

  dispatchReady = Effect.fnUntraced(function* (this: FlowTx) {
    const steps = yield* this.activeSteps()
    const held = new Set(
      steps.filter((s) => s.status === "running").flatMap((s) => JSON.parse(s.locks) as Array<string>)
    )
    for (const step of steps.filter((s) => s.status === "ready")) {
      const locks = JSON.parse(step.locks) as Array<string>
      if (locks.some((l) => held.has(l))) continue
      for (const l of locks) held.add(l)
      yield* this.updateStep(step.seid, {
        status: "running",
        attempt: 1,
        first_attempt_at: this.now,
        snapshot: toSnapshot(this.state)
      })
      yield* this.sendExecute(step.seid, 1, this.now)
    }
  })

  sendExecute(seid: string, attempt: number, at: number) {
    return this.stepClient(`${this.flowId}/${seid}`).Execute(
      new ExecutePayload({ flowId: this.flowId, seid, attempt, at }),
      { discard: true }
    ) as Effect.Effect<void>
  }

  /** Cancels every current execution of the given Step types, except `exclude`. */
  cancelTypes = Effect.fnUntraced(function* (
    this: FlowTx,
    types: ReadonlyArray<string>,
    exclude: ReadonlySet<string>,
    reason: string
  ) {
    if (types.length === 0) return
    const steps = yield* this.activeSteps()
    for (const s of [...steps]) {
      if (!types.includes(s.step_type) || exclude.has(s.seid)) continue
      yield* this.cancelStep(s, reason)
    }
  })

  cancelStep = Effect.fnUntraced(function* (this: FlowTx, s: StepRow, reason: string) {
    yield* this.updateStep(s.seid, { status: "cancelled" })
    if (s.status === "running") {
      yield* this.sql`UPDATE dex_attempts SET finished_at = ${this.now}, outcome = 'cancelled'
        WHERE flow_id = ${this.flowId} AND seid = ${s.seid} AND finished_at IS NULL`
      this.interrupts.push(`${this.flowId}/${s.seid}`)
    }
    yield* this.history("StepCancelled", s.seid, s.status === "running" ? s.attempt : null, {
      previousStatus: s.status,
      reason
    })
  })

  closeFlow = Effect.fnUntraced(function* (
    this: FlowTx,
    status: "completed" | "failed" | "cancelled" | "terminated",
    output: string | null,
    reason: string | null
  ) {
    const steps = yield* this.activeSteps()
    for (const s of [...steps]) yield* this.cancelStep(s, `flow ${status}`)
    yield* this
      .sql`UPDATE dex_flows SET status = ${status}, output = ${output}, reason = ${reason}, closed_at = ${this.now}
      WHERE flow_id = ${this.flowId}`
    ;(this.flow as { status: string }).status = status
    yield* this.history(
      status === "completed" ? "FlowCompleted" : status === "failed" ? "FlowFailed" : "FlowStopped",
      null,
      null,
      { status, reason }
    )
  })

  /** Applies a decision committed by a Step or an RPC. */
  applyDecision = Effect.fnUntraced(function* (this: FlowTx, from: string | null, decision: EncodedDecision) {
    const scheduled = new Set<string>()
    if (decision._tag === "Next") {
      for (const m of decision.movements) {
        const seid = yield* this.scheduleStep(m, from, null)
        if (seid !== undefined) scheduled.add(seid)
        if (this.flow.status !== "running") return
      }
    }
    yield* this.cancelTypes(decision.cancel, scheduled, from === null ? "rpc" : `cancelled by ${from}`)
    switch (decision._tag) {
      case "ForceComplete":
        return yield* this.closeFlow("completed", decision.output, null)
      case "ForceFail":
        return yield* this.closeFlow("failed", null, decision.reason)
      case "GracefulComplete": {
        const steps = yield* this.activeSteps()
        if (steps.length === 0) return yield* this.closeFlow("completed", decision.output, null)
        return
      }
      default:
        return
    }
  })

  saveCounters() {
    return this.sql`UPDATE dex_flows SET counters = ${JSON.stringify(this.counters)} WHERE flow_id = ${this.flowId}`
  }

  /** Interrupts local attempts of cancelled Steps once the commit is visible. */
  interruptCancelled(registry: FlowRegistry["Service"]) {
    if (this.interrupts.length === 0) return Effect.void
    const keys = [...this.interrupts]
    const sql = this.sql
    return Effect.forkDetach(
      Effect.gen(function* () {
        for (const key of keys) {
          const fiber = registry.running.get(key)
          if (fiber === undefined) continue
          const [flowId, seid] = [key.slice(0, key.indexOf("/")), key.slice(key.indexOf("/") + 1)]
          // wait until the cancellation is committed (the SQLite connection is held by the transaction until then)
          for (let i = 0; i < 40; i++) {
            const step = yield* Effect.orDie(loadStep(sql, flowId, seid))
            if (step?.status === "cancelled") {
              yield* Fiber.interrupt(fiber)
              break
            }
            yield* Effect.sleep(Duration.millis(25))
          }
        }
      }).pipe(Effect.ignore)
    )
  }
}

interface StoredWaitResult {
  readonly timers: ReadonlyArray<boolean>
  readonly values: Record<string, ReadonlyArray<string>>
}

export const encodeMovement = (
  step: StepDef<any, any>,
  input: unknown,
  override: StepOptions | undefined,
  maxValueBytes: number
): EncodedMovement => {
  const inputJson = encodeJson(step.input, input)
  if (byteLength(inputJson) > maxValueBytes) {
    throw new ValueTooLarge({ name: `${step.type} input`, bytes: byteLength(inputJson), limit: maxValueBytes })
  }
  return { step: step.type, input: inputJson, options: JSON.stringify(resolveOptions(step.options, override)) }
}

export const encodeDecision = (decision: StepDecision, maxValueBytes: number): EncodedDecision => {
  switch (decision._tag) {
    case "Next":
      return {
        _tag: "Next",
        movements: decision.movements.map((m) => encodeMovement(m.step, m.input, m.options, maxValueBytes)),
        cancel: decision.cancel
      }
    case "DeadEnd":
      return { _tag: "DeadEnd", cancel: decision.cancel }
    case "GracefulComplete":
    case "ForceComplete":
      return {
        _tag: decision._tag,
        output: decision.output === undefined ? null : safeJson(decision.output),
        cancel: decision.cancel
      }
    case "ForceFail":
      return { _tag: "ForceFail", reason: decision.reason, cancel: decision.cancel }
  }
}

/** Size checks of a Step result: the first oversized value, if any. */
const oversized = (outcome: Outcome & { _tag: "Success" }, limit: number): ValueTooLarge | undefined => {
  for (const w of outcome.writes) {
    if (w.value !== null && byteLength(w.value) > limit) {
      return new ValueTooLarge({ name: `${w.name}${w.key ? `[${w.key}]` : ""}`, bytes: byteLength(w.value), limit })
    }
  }
  for (const p of outcome.publishes) {
    if (byteLength(p.value) > limit) return new ValueTooLarge({ name: p.channel, bytes: byteLength(p.value), limit })
  }
  if (outcome.decision._tag === "Next") {
    for (const m of outcome.decision.movements) {
      if (byteLength(m.input) > limit)
        return new ValueTooLarge({ name: `${m.step} input`, bytes: byteLength(m.input), limit })
    }
  }
  return undefined
}

// ------------------------------------------------------------------------------------------------
// Flow entity handlers
// ------------------------------------------------------------------------------------------------

const toDefect = <A, E, R>(effect: Effect.Effect<A, E, R>, what: string) =>
  // A defect inside a WithTransaction handler is retried forever with the caller waiting; surface it instead.
  Effect.catchCause(effect, (cause) => {
    if (cause.reasons.every(Cause.isFailReason)) return Effect.failCause(cause)
    const { errorType, detail } = errorInfo(cause)
    return Effect.fail(new EngineError({ reason: `${what}: ${errorType}: ${detail}` }) as E | EngineError)
  })

const flowHandlers = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const registry = yield* FlowRegistry
  const config = yield* EngineConfig
  const stepClient = yield* StepEntity.client
  const flowClient = yield* FlowEntity.client

  const registered = (flowType: string) => {
    const r = registry.flows.get(flowType)
    return r === undefined
      ? Effect.fail(new DefinitionError({ flowType, reason: "this Flow type is not registered with the worker" }))
      : Effect.succeed(r)
  }

  const openTx = Effect.fnUntraced(function* (flowId: string, loaded?: FlowRow) {
    const flow = loaded ?? (yield* Effect.orDie(loadFlow(sql, flowId)))
    if (flow === undefined) return yield* new FlowNotFound({ flowId })
    const reg = yield* registered(flow.flow_type)
    const state = yield* Effect.orDie(loadState(sql, flowId))
    const now = yield* Clock.currentTimeMillis
    return new FlowTx({
      sql,
      config,
      registered: reg,
      flow,
      state,
      now,
      stepClient,
      flowClient,
      counters: JSON.parse(flow.counters)
    })
  })

  const sharding = yield* Sharding.Sharding
  // Messages sent inside the transaction are invisible to a storage read that runs before the commit
  // (Postgres reads on another connection); poll again right after, instead of at the next interval.
  const pollAfterCommit = Effect.forkDetach(
    Effect.sleep(Duration.millis(2)).pipe(
      Effect.andThen(sharding.pollStorage),
      Effect.andThen(Effect.sleep(Duration.millis(20))),
      Effect.andThen(sharding.pollStorage)
    )
  )

  const finish = Effect.fnUntraced(function* (tx: FlowTx) {
    yield* tx.settle()
    yield* tx.saveCounters()
    yield* tx.interruptCancelled(registry)
    yield* pollAfterCommit
  })

  const Start = Effect.fnUntraced(function* (p: {
    flowId: string
    flowType: string
    input: string
    requestId: string
    ignoreAlreadyStarted: boolean
    stepDurability: "sync" | "async"
    initialAttributes: ReadonlyArray<AttrWrite>
  }) {
    const existing = yield* Effect.orDie(loadFlow(sql, p.flowId))
    if (existing !== undefined) {
      if (p.ignoreAlreadyStarted && existing.request_id === p.requestId) return existing.run_id
      return yield* new FlowAlreadyStarted({ flowId: p.flowId, runId: existing.run_id })
    }
    const reg = yield* registered(p.flowType)
    const now = yield* Clock.currentTimeMillis
    const runId = crypto.randomUUID()
    for (const a of p.initialAttributes) {
      if (a.value !== null && byteLength(a.value) > config.maxValueBytes) {
        return yield* new ValueTooLarge({ name: a.name, bytes: byteLength(a.value), limit: config.maxValueBytes })
      }
    }
    if (byteLength(p.input) > config.maxValueBytes) {
      return yield* new ValueTooLarge({ name: "flow input", bytes: byteLength(p.input), limit: config.maxValueBytes })
    }
    const flow: FlowRow = {
      flow_id: p.flowId,
      flow_type: p.flowType,
      run_id: runId,
      status: "running",
      input: p.input,
      output: null,
      reason: null,
      request_id: p.requestId,
      counters: "{}",
      started_at: now,
      closed_at: null
    }
    yield* Effect.orDie(sql`INSERT INTO dex_flows ${sql.insert(flow as any)}`)
    const tx = new FlowTx({
      sql,
      config,
      registered: reg,
      flow,
      state: { attrs: new Map(), channels: new Map() },
      now,
      stepClient,
      flowClient,
      counters: {}
    })
    yield* Effect.orDie(
      tx.history("FlowStarted", null, null, { flowType: p.flowType, runId, stepDurability: p.stepDurability })
    )
    yield* tx.applyWrites(p.initialAttributes, [], [])
    yield* tx.scheduleStep(
      {
        step: reg.def.start.type,
        input: p.input,
        options: JSON.stringify(resolveOptions(reg.def.start.options, undefined))
      },
      null,
      null
    )
    yield* finish(tx)
    return runId
  })

  const Invoke = Effect.fnUntraced(function* (p: { flowId: string; rpc: string; input: string }) {
    const tx = yield* openTx(p.flowId)
    if (tx.flow.status !== "running") return yield* new FlowNotActive({ flowId: p.flowId, status: tx.flow.status })
    const rpc = tx.registered.rpcs.get(p.rpc)
    if (rpc === undefined) {
      return yield* new DefinitionError({ flowType: tx.def.type, reason: `unknown RPC ${p.rpc}` })
    }
    const wanted = lockNames(rpc.locks)
    if (wanted.length > 0) {
      const steps = yield* tx.activeSteps()
      const held = new Set(
        steps.filter((s) => s.status === "running").flatMap((s) => JSON.parse(s.locks) as Array<string>)
      )
      const conflicts = wanted.filter((l) => held.has(l))
      if (conflicts.length > 0) return yield* new RpcLockConflict({ flowId: p.flowId, rpc: p.rpc, locks: conflicts })
    }
    const input = yield* Effect.try({
      try: () => decodeJson(rpc.input, p.input),
      catch: (e) => new InvalidInput({ what: `input of RPC ${p.rpc}`, detail: String(e) })
    })
    const staged = emptyStaged()
    const ctx = makeRpcView(tx.def, tx.state, staged, { flowId: p.flowId, runId: tx.flow.run_id })
    const exit = yield* Effect.exit(
      Effect.suspend(() => rpc.handler(ctx, input)).pipe(Effect.provideContext(tx.registered.context))
    )
    if (Exit.isFailure(exit)) {
      const info = errorInfo(exit.cause)
      return yield* new RpcFailed({ flowId: p.flowId, rpc: p.rpc, ...info })
    }
    const result = exit.value
    const encoded = yield* Effect.try({
      try: () => ({
        output: encodeJson(rpc.output, result.output),
        movements: (result.nextSteps ?? []).map((m) => encodeMovement(m.step, m.input, m.options, config.maxValueBytes))
      }),
      catch: (e) =>
        e instanceof ValueTooLarge
          ? e
          : new RpcFailed({ flowId: p.flowId, rpc: p.rpc, errorType: "EncodeError", detail: String(e) })
    })
    const writes = [...staged.attrWrites.values()]
    const tooLarge = oversized(
      { _tag: "Success", writes, publishes: staged.publishes, decision: { _tag: "DeadEnd", cancel: [] } },
      config.maxValueBytes
    )
    if (tooLarge) return yield* tooLarge
    if (wanted.length > 0) {
      const outside = writes.filter((w) => !wanted.includes(w.key === "" ? w.name : `${w.name}[${w.key}]`))
      if (outside.length > 0) {
        return yield* new RpcFailed({
          flowId: p.flowId,
          rpc: p.rpc,
          errorType: "LockViolation",
          detail: `a locking RPC may write only what it locked; it wrote ${outside.map((w) => w.name).join(", ")}`
        })
      }
    }
    yield* tx.applyWrites(writes, staged.publishes, staged.deletes)
    yield* Effect.orDie(tx.history("RpcCompleted", null, null, { rpc: p.rpc }))
    yield* tx.applyDecision(null, {
      _tag: "Next",
      movements: encoded.movements,
      cancel: (result.cancelSteps ?? []).map((s) => s.type)
    })
    yield* finish(tx)
    return encoded.output
  })

  const Commit = Effect.fnUntraced(function* (p: { flowId: string; seid: string; attempt: number; outcome: string }) {
    const flow = yield* Effect.orDie(loadFlow(sql, p.flowId))
    if (flow === undefined || flow.status !== "running") return
    const step = yield* Effect.orDie(loadStep(sql, p.flowId, p.seid))
    // a late result of a cancelled or superseded attempt is dropped
    if (step === undefined || step.status !== "running" || step.attempt !== p.attempt) return
    const tx = yield* Effect.catchTag(openTx(p.flowId, flow), "FlowNotFound", () => Effect.die("flow vanished"))
    let outcome = Schema.decodeUnknownSync(Outcome)(JSON.parse(p.outcome))
    if (outcome._tag === "Success") {
      const tooLarge = oversized(outcome, config.maxValueBytes)
      if (tooLarge)
        outcome = { _tag: "Failure", errorType: "ValueTooLarge", detail: tooLarge.message, retryable: false }
    }
    const options = JSON.parse(step.options) as ResolvedOptions
    if (outcome._tag === "Success") {
      yield* sql`UPDATE dex_attempts SET finished_at = ${tx.now}, outcome = 'success'
        WHERE flow_id = ${p.flowId} AND seid = ${p.seid} AND attempt = ${p.attempt}`
      yield* tx.updateStep(p.seid, { status: "completed" })
      yield* tx.applyWrites(outcome.writes, outcome.publishes, [])
      yield* tx.history("StepCompleted", p.seid, p.attempt, {
        decision: outcome.decision._tag,
        next: outcome.decision._tag === "Next" ? outcome.decision.movements.map((m) => m.step) : [],
        cancel: outcome.decision.cancel
      })
      yield* tx.applyDecision(p.seid, outcome.decision)
      return yield* finish(tx)
    }
    // failure of this attempt
    yield* sql`UPDATE dex_attempts SET finished_at = ${tx.now}, outcome = 'failure', error_type = ${outcome.errorType},
        detail = ${outcome.detail} WHERE flow_id = ${p.flowId} AND seid = ${p.seid} AND attempt = ${p.attempt}`
    yield* tx.history("AttemptFailed", p.seid, p.attempt, { errorType: outcome.errorType, detail: outcome.detail })
    const elapsed = tx.now - (step.first_attempt_at ?? tx.now)
    const delay = Math.min(
      options.initialIntervalMs * options.backoffCoefficient ** (p.attempt - 1),
      options.maximumIntervalMs
    )
    const attemptsLeft = options.maxAttempts === null || p.attempt < options.maxAttempts
    const withinTotal = options.totalDurationMs === null || elapsed + delay <= options.totalDurationMs
    if (outcome.retryable && attemptsLeft && withinTotal) {
      yield* tx.updateStep(p.seid, { attempt: p.attempt + 1 })
      yield* tx.sendExecute(p.seid, p.attempt + 1, tx.now + delay)
      yield* tx.history("RetryScheduled", p.seid, p.attempt + 1, { delayMs: delay })
      return yield* finish(tx)
    }
    yield* tx.updateStep(p.seid, { status: "failed" })
    const started = yield* sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM dex_attempts
      WHERE flow_id = ${p.flowId} AND seid = ${p.seid}`
    const recovery = new RecoveryError({
      errorType: outcome.errorType,
      detail: outcome.detail,
      attemptProgress: Number(started[0]?.n ?? 0) > 0 ? "not_completed" : "not_started"
    })
    yield* tx.history("StepFailed", p.seid, p.attempt, {
      errorType: recovery.errorType,
      attemptProgress: recovery.attemptProgress,
      failureRoute: options.failureRoute
    })
    if (options.failureRoute === null) {
      yield* tx.closeFlow("failed", null, `${p.seid} failed: ${outcome.errorType}: ${outcome.detail}`)
      return yield* finish(tx)
    }
    const route = tx.registered.steps.get(options.failureRoute)!
    yield* tx.scheduleStep(
      { step: route.type, input: step.input, options: JSON.stringify(resolveOptions(route.options, undefined)) },
      p.seid,
      recovery
    )
    return yield* finish(tx)
  })

  const Wake = Effect.fnUntraced(function* (p: { flowId: string }) {
    const flow = yield* Effect.orDie(loadFlow(sql, p.flowId))
    if (flow === undefined || flow.status !== "running") return
    const tx = yield* Effect.orDie(openTx(p.flowId, flow))
    yield* finish(tx)
  })

  const Control = Effect.fnUntraced(function* (p: {
    flowId: string
    command:
      | { _tag: "Stop"; mode: "cancel" | "terminate" | "fail"; reason: string }
      | { _tag: "SkipTimer"; seid: string; timer: string | number }
      | { _tag: "Publish"; channel: string; key: string; value: string }
  }) {
    const tx = yield* openTx(p.flowId)
    if (tx.flow.status !== "running") return yield* new FlowNotActive({ flowId: p.flowId, status: tx.flow.status })
    const c = p.command
    switch (c._tag) {
      case "Stop": {
        const status = c.mode === "cancel" ? "cancelled" : c.mode === "terminate" ? "terminated" : "failed"
        yield* tx.closeFlow(status, null, c.reason)
        yield* finish(tx)
        return true
      }
      case "Publish": {
        if (byteLength(c.value) > config.maxValueBytes) {
          return yield* new ValueTooLarge({ name: c.channel, bytes: byteLength(c.value), limit: config.maxValueBytes })
        }
        yield* tx.applyWrites([], [c], [])
        yield* tx.history("Published", null, null, { channel: c.channel, key: c.key })
        yield* finish(tx)
        return true
      }
      case "SkipTimer": {
        const step = (yield* tx.activeSteps()).find((s) => s.seid === c.seid && s.status === "waiting")
        if (step === undefined) return false
        const wait = JSON.parse(step.wait!) as StoredWait
        let index = -1
        let skipped = false
        const conditions = wait.conditions.map((cond) => {
          if (cond._tag !== "Timer") return cond
          index++
          if (skipped || !(c.timer === index || c.timer === cond.id)) return cond
          skipped = true
          return { ...cond, skipped: true }
        })
        if (!skipped) return false
        yield* tx.updateStep(step.seid, { wait: JSON.stringify({ ...wait, conditions }) })
        yield* tx.history("TimerSkipped", step.seid, null, { timer: c.timer })
        yield* finish(tx)
        return true
      }
    }
  })

  return FlowEntity.of({
    Start: ({ payload }) => toDefect(Start(payload as any), "Start") as any,
    Invoke: ({ payload }) => toDefect(Invoke(payload as any), "Invoke") as any,
    Commit: ({ payload }) => toDefect(Commit(payload as any), "Commit") as any,
    Wake: ({ payload }) => toDefect(Wake(payload as any), "Wake") as any,
    Control: ({ payload }) => toDefect(Control(payload as any), "Control") as any
  })
})

/** The Flow entity: one owner per Flow; every message is one SQL transaction. */
export const FlowEntityLayer = FlowEntity.toLayer(flowHandlers, {
  maxIdleTime: "1 minute",
  defectRetryPolicy: Schedule.recurs(5)
})

// ------------------------------------------------------------------------------------------------
// Step runner
// ------------------------------------------------------------------------------------------------

class HeartbeatTimeout extends Schema.TaggedError<HeartbeatTimeout>()("HeartbeatTimeout", { ms: Schema.Number }) {
  override get message() {
    return `no heartbeat for ${this.ms} ms`
  }
}
class MethodTimeout extends Schema.TaggedError<MethodTimeout>()("MethodTimeout", { ms: Schema.Number }) {
  override get message() {
    return `the attempt ran longer than ${this.ms} ms`
  }
}

const stepHandlers = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const sharding = yield* Sharding.Sharding
  const registry = yield* FlowRegistry
  const config = yield* EngineConfig
  const flowClient = yield* FlowEntity.client

  const commit = (flowId: string, seid: string, attempt: number, outcome: Outcome) =>
    (flowClient(flowId).Commit as any)(
      new CommitPayload({ flowId, seid, attempt, outcome: JSON.stringify(outcome) })
    ).pipe(
      Effect.retry({ schedule: Schedule.exponential("100 millis"), times: 8 }),
      Effect.orDie,
      // the reply means the Flow's transaction committed: read the Steps it dispatched now
      Effect.andThen(sharding.pollStorage)
    ) as Effect.Effect<void>

  const Execute = Effect.fnUntraced(function* (p: { flowId: string; seid: string; attempt: number }) {
    const flow = yield* loadFlow(sql, p.flowId)
    const step = yield* loadStep(sql, p.flowId, p.seid)
    if (flow === undefined || flow.status !== "running") return
    if (step === undefined || step.status !== "running" || step.attempt !== p.attempt) return
    const reg = registry.flows.get(flow.flow_type)
    const def = reg?.steps.get(step.step_type)
    if (reg === undefined || def === undefined) {
      return yield* commit(p.flowId, p.seid, p.attempt, {
        _tag: "Failure",
        errorType: "DefinitionError",
        detail: `this worker does not know Step ${step.step_type} of Flow ${flow.flow_type}`,
        retryable: true
      })
    }
    const now = yield* Clock.currentTimeMillis
    const previous = yield* loadAttempt(sql, p.flowId, p.seid, p.attempt)
    if (previous?.finished_at != null) return
    if (previous !== undefined && previous.output_at !== null) {
      // the worker that ran this attempt died after the attempt produced output
      return yield* commit(p.flowId, p.seid, p.attempt, {
        _tag: "Failure",
        errorType: "WorkerLost",
        detail: "the worker running this attempt stopped after the attempt produced output",
        retryable: true
      })
    }
    // the durable "attempt started" record, written before user code runs (one transaction, one fsync)
    yield* sql.withTransaction(
      previous === undefined
        ? Effect.andThen(
            sql`INSERT INTO dex_attempts (flow_id, seid, attempt, started_at)
              VALUES (${p.flowId}, ${p.seid}, ${p.attempt}, ${now})`,
            appendHistory(sql, p.flowId, now, "AttemptStarted", p.seid, p.attempt, {})
          )
        : Effect.andThen(
            sql`UPDATE dex_attempts SET started_at = ${now} WHERE flow_id = ${p.flowId} AND seid = ${p.seid}
              AND attempt = ${p.attempt}`,
            appendHistory(sql, p.flowId, now, "AttemptStarted", p.seid, p.attempt, { redelivered: true })
          )
    )
    const options = JSON.parse(step.options) as ResolvedOptions
    // only a retry or a redelivered attempt can find a checkpoint an earlier run saved
    const checkpointRow =
      p.attempt === 1 && previous === undefined
        ? []
        : yield* sql<{ checkpoint: string | null }>`SELECT checkpoint FROM dex_attempts
            WHERE flow_id = ${p.flowId} AND seid = ${p.seid} AND checkpoint IS NOT NULL ORDER BY attempt DESC LIMIT 1`
    const state = fromSnapshot(step.snapshot ?? toSnapshot({ attrs: new Map(), channels: new Map() }))
    const waitResult =
      step.wait_result === null ? { timers: [], values: {} } : (JSON.parse(step.wait_result) as StoredWaitResult)
    const staged = emptyStaged()
    let lastBeat = now
    const heartbeat = (checkpoint?: unknown) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        lastBeat = at
        const cp = checkpoint === undefined ? null : JSON.stringify(checkpoint)
        yield* sql`UPDATE dex_attempts SET heartbeat_at = ${at}, output_at = COALESCE(output_at, ${at}),
          checkpoint = COALESCE(${cp}, checkpoint) WHERE flow_id = ${p.flowId} AND seid = ${p.seid} AND attempt = ${p.attempt}`
      }).pipe(Effect.orDie)
    const ctx: ExecuteContext = {
      ...makeTxView(reg.def, state, staged),
      flowId: p.flowId,
      runId: flow.run_id,
      flowType: flow.flow_type,
      stepExecutionId: p.seid,
      fromStepExecutionId: step.from_seid ?? undefined,
      attempt: p.attempt,
      firstAttemptAt: step.first_attempt_at ?? now,
      timerFired: (index) =>
        index === undefined ? waitResult.timers.some((t) => t) : waitResult.timers[index] === true,
      channelResults: (channel, key = "") =>
        (waitResult.values[channelKey(channel.name, key)] ?? []).map((v) => decodeJson(channel.schema, v)),
      waitForFailed: step.wait_failed === 1,
      recoveryError:
        step.recovery === null
          ? Option.none()
          : Option.some(Schema.decodeUnknownSync(RecoveryError)(JSON.parse(step.recovery))),
      heartbeatCheckpoint: Option.fromNullishOr(checkpointRow[0]?.checkpoint).pipe(Option.map((c) => JSON.parse(c))),
      heartbeat,
      emit: (stream, value) => emitStream(sql, config, reg.def.type, stream, p.flowId, p.seid, p.attempt, value)
    }
    const body = Effect.suspend(() => def.execute(ctx, decodeJson(def.input, step.input))).pipe(
      Effect.provideContext(reg.context)
    )
    const timed =
      options.timeoutMs === null
        ? body
        : body.pipe(
            Effect.timeoutOrElse({
              duration: Duration.millis(options.timeoutMs),
              orElse: () => Effect.fail(new MethodTimeout({ ms: options.timeoutMs! }))
            })
          )
    const key = `${p.flowId}/${p.seid}`
    const watchdog = Effect.gen(function* () {
      const tick = Math.min(
        Duration.toMillis(config.cancellationPollInterval),
        options.heartbeatTimeoutMs === null ? Number.POSITIVE_INFINITY : Math.max(50, options.heartbeatTimeoutMs / 4)
      )
      while (true) {
        yield* Effect.sleep(Duration.millis(tick))
        const at = yield* Clock.currentTimeMillis
        if (options.heartbeatTimeoutMs !== null && at - lastBeat > options.heartbeatTimeoutMs) {
          return yield* new HeartbeatTimeout({ ms: options.heartbeatTimeoutMs })
        }
        const current = yield* Effect.orDie(loadStep(sql, p.flowId, p.seid))
        if (current === undefined || current.status !== "running" || current.attempt !== p.attempt) {
          return yield* Effect.interrupt
        }
      }
    })
    const fiber = yield* Effect.forkChild(Effect.raceFirst(timed, watchdog), { startImmediately: true })
    registry.running.set(key, fiber)
    const exit = yield* Fiber.await(fiber).pipe(Effect.ensuring(Effect.sync(() => registry.running.delete(key))))
    if (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) return // cancelled: the late result is dropped
    let outcome: Outcome
    if (Exit.isSuccess(exit)) {
      const encoded = Effect.try({
        try: () => encodeDecision(exit.value, config.maxValueBytes),
        catch: (e) => e
      })
      const decision = yield* Effect.exit(encoded)
      outcome = Exit.isSuccess(decision)
        ? {
            _tag: "Success",
            writes: [...staged.attrWrites.values()],
            publishes: staged.publishes,
            decision: decision.value
          }
        : {
            _tag: "Failure",
            ...errorInfo(decision.cause),
            retryable: !(Cause.squash(decision.cause) instanceof ValueTooLarge)
          }
    } else {
      const info = errorInfo(exit.cause)
      outcome = { _tag: "Failure", ...info, retryable: info.errorType !== "ValueTooLarge" }
    }
    yield* commit(p.flowId, p.seid, p.attempt, outcome)
  })

  return StepEntity.of({
    Execute: ({ payload }) => Effect.orDie(Execute(payload))
  })
})

/** The Step runner entity: one per Step execution; runs the user's `execute` outside any transaction. */
export const StepEntityLayer = StepEntity.toLayer(stepHandlers, { maxIdleTime: "10 seconds" })

// ------------------------------------------------------------------------------------------------
// Streams
// ------------------------------------------------------------------------------------------------

const emitStream = <A>(
  sql: Sql,
  config: EngineConfigShape,
  flowType: string,
  stream: StreamDef<A>,
  flowId: string,
  seid: string,
  attempt: number,
  value: A
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const text = encodeJson(stream.schema, value)
    const size = byteLength(text)
    if (size > config.maxStreamMessageBytes) return
    const charge = size + byteLength(flowId) + byteLength(seid) + 512
    const now = yield* Clock.currentTimeMillis
    yield* sql.withTransaction(
      Effect.gen(function* () {
        const usage = yield* sql<{ used: unknown }>`SELECT used FROM dex_stream_usage
          WHERE flow_type = ${flowType} AND stream = ${stream.name}`
        let used = usage.length === 0 ? 0 : Number(usage[0]!.used)
        if (usage.length === 0) {
          yield* sql`INSERT INTO dex_stream_usage (flow_type, stream, used, trimmed_through)
            VALUES (${flowType}, ${stream.name}, 0, 0)`
        }
        if (used + charge > stream.capacityBytes) return // full: the write is rejected, the Step goes on
        yield* sql`INSERT INTO dex_stream (flow_type, stream, flow_id, seid, attempt, value, bytes, at)
          VALUES (${flowType}, ${stream.name}, ${flowId}, ${seid}, ${attempt}, ${text}, ${charge}, ${now})`
        used += charge
        let trimmedThrough: number | undefined
        if (used > stream.capacityBytes * 0.9) {
          const oldest = yield* sql<{ seq: unknown; bytes: unknown }>`SELECT seq, bytes FROM dex_stream
            WHERE flow_type = ${flowType} AND stream = ${stream.name} ORDER BY seq LIMIT 10000`
          for (const row of oldest) {
            if (used <= stream.capacityBytes * 0.8) break
            used -= Number(row.bytes)
            trimmedThrough = Number(row.seq)
          }
          if (trimmedThrough !== undefined) {
            yield* sql`DELETE FROM dex_stream WHERE flow_type = ${flowType} AND stream = ${stream.name}
              AND seq <= ${trimmedThrough}`
          }
        }
        if (trimmedThrough === undefined) {
          yield* sql`UPDATE dex_stream_usage SET used = ${used} WHERE flow_type = ${flowType} AND stream = ${stream.name}`
        } else {
          yield* sql`UPDATE dex_stream_usage SET used = ${used}, trimmed_through = ${trimmedThrough}
            WHERE flow_type = ${flowType} AND stream = ${stream.name}`
        }
      })
    )
  }).pipe(Effect.ignoreCause)

// ------------------------------------------------------------------------------------------------
// Registration
// ------------------------------------------------------------------------------------------------

const sameSchema = (a: Schema.Top, b: Schema.Top): boolean => {
  if (a === b) return true
  try {
    return JSON.stringify(Schema.toJsonSchemaDocument(a)) === JSON.stringify(Schema.toJsonSchemaDocument(b))
  } catch {
    return false
  }
}

/** Validates Flow definitions; the first problem is a DefinitionError. */
export const validateFlows = (flows: ReadonlyArray<FlowDef<any, any>>): DefinitionError | undefined => {
  const types = new Set<string>()
  for (const flow of flows) {
    const fail = (reason: string) => new DefinitionError({ flowType: flow.type, reason })
    if (flow.type === "") return fail("the Flow type is empty")
    if (types.has(flow.type)) return fail("duplicate Flow type")
    types.add(flow.type)
    const names = (items: ReadonlyArray<{ name: string }>, what: string) => {
      const seen = new Set<string>()
      for (const i of items) {
        if (i.name === "") return `${what} with an empty name`
        if (seen.has(i.name)) return `duplicate ${what} ${i.name}`
        seen.add(i.name)
      }
      return undefined
    }
    const dup =
      names(flow.attributes, "attribute") ??
      names(flow.channels, "channel") ??
      names(flow.streams, "stream") ??
      names(flow.rpcs, "RPC") ??
      names(
        flow.steps.map((s) => ({ name: s.type })),
        "Step type"
      )
    if (dup) return fail(dup)
    const stepTypes = new Map(flow.steps.map((s) => [s.type, s]))
    const attrs = new Map(flow.attributes.map((a) => [a.name, a]))
    const checkLocks = (locks: ReadonlyArray<any> | undefined, where: string) => {
      for (const l of locks ?? []) {
        const def = "_tag" in l ? l : l.map
        if (attrs.get(def.name) !== def) return `${where} locks ${def.name}, which the Flow does not declare`
      }
      return undefined
    }
    for (const step of flow.steps) {
      if (step.type.includes("/")) return fail(`Step type ${step.type} contains '/'`)
      const o = step.options
      const lockProblem =
        checkLocks(o?.execute?.locks, `Step ${step.type}`) ?? checkLocks(o?.waitFor?.locks, `Step ${step.type}`)
      if (lockProblem) return fail(lockProblem)
      for (const [what, d] of [
        ["execute timeout", o?.execute?.timeout],
        ["heartbeat timeout", o?.heartbeatTimeout],
        ["waitFor timeout", o?.waitFor?.timeout]
      ] as const) {
        const v = ms(d)
        if (v !== null && (v < 0 || v % 1000 !== 0)) return fail(`Step ${step.type}: ${what} must be whole seconds`)
      }
      const max = o?.execute?.retry?.maxAttempts
      if (max !== undefined && (!Number.isInteger(max) || max < 1)) {
        return fail(`Step ${step.type}: maxAttempts must be a positive integer`)
      }
      const route = o?.onExecuteFailure
      if (route !== undefined) {
        if (stepTypes.get(route.type) !== route) {
          return fail(`Step ${step.type}: failure route ${route.type} is not a Step of this Flow`)
        }
        if (!sameSchema(route.input, step.input)) {
          return fail(`Step ${step.type}: failure route ${route.type} takes a different input type`)
        }
      }
    }
    for (const rpc of flow.rpcs) {
      const lockProblem = checkLocks(rpc.locks, `RPC ${rpc.name}`)
      if (lockProblem) return fail(lockProblem)
    }
    for (const s of flow.streams) {
      if (!Number.isInteger(s.capacityBytes) || s.capacityBytes <= 0) {
        return fail(`stream ${s.name}: capacity must be a positive whole number of bytes`)
      }
    }
  }
  return undefined
}

export const registerFlows = (flows: ReadonlyArray<FlowDef<any, any>>) =>
  Effect.gen(function* () {
    const problem = validateFlows(flows)
    if (problem) return yield* problem
    const registry = yield* FlowRegistry
    const context = yield* Effect.context<any>()
    for (const def of flows) {
      registry.flows.set(def.type, {
        def,
        steps: new Map(def.steps.map((s) => [s.type, s])),
        rpcs: new Map(def.rpcs.map((r) => [r.name, r])),
        streams: new Map(def.streams.map((s) => [s.name, s])),
        context
      })
    }
  })

export type { WaitResult }
