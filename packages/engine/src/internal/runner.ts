// What one runner process shares between its Flow owners: the task slots (with the RPC reserve), the
// control slots, the drain state, and the metrics registry the metrics endpoint reads. One per engine layer.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import { controlTasksOf, EngineConfig, rpcReserveOf } from "../EngineConfig.ts"
import * as Metrics from "../Metrics.ts"
import { HeartbeatBatch } from "./heartbeats.ts"
import type { ShardLease } from "./store/rows.ts"
import { StreamBudget } from "./streams.ts"

/** The pool a slot comes from: the task slots (Step bodies and RPC handlers) or the control slots. */
export type SlotPool = "task" | "control"

/** One holder's claim on a slot. */
export interface Lease {
  held: boolean
  /** The pool of the slot it holds (meaningful while `held`). */
  pool: SlotPool
  readonly free: () => void
}

/**
 * Who asks for a slot. Steps take task slots and may not take the reserve; RPC handlers may, and take a
 * control slot when no task slot is free; control Steps (`execute.slot: "control"`) take control slots only.
 */
export type SlotKind = "step" | "rpc" | "control"

interface Waiter {
  readonly kind: SlotKind
  readonly grant: (pool: SlotPool) => void
}

/**
 * The task slots of a runner, in which Steps leave `reserve` slots to RPC handlers, and its control slots:
 * a separate capacity for short control work (control Steps, and RPC handlers when the task slots are full),
 * so a cancellation or a decision never waits behind the Step bodies it would end.
 */
export class TaskSlots {
  total: number
  reserve: number
  inUse = 0
  controlTotal: number
  controlInUse = 0
  /** Step slot requests that found only reserved slots free. */
  reserveDeclines = 0
  private readonly waiters: Array<Waiter> = []

  constructor(total: number, reserve: number, controlTotal = 2) {
    this.total = Math.max(1, total)
    this.reserve = Math.max(0, Math.min(this.total - 1, reserve))
    this.controlTotal = Math.max(1, controlTotal)
  }

  /** The pool a request of `kind` can take a slot from now, if any. */
  private poolFor(kind: SlotKind): SlotPool | undefined {
    if (kind === "control") return this.controlInUse < this.controlTotal ? "control" : undefined
    if (kind === "step") return this.inUse < this.total - this.reserve ? "task" : undefined
    if (this.inUse < this.total) return "task"
    return this.controlInUse < this.controlTotal ? "control" : undefined
  }

  private take(pool: SlotPool, lease: Lease) {
    if (pool === "task") this.inUse++
    else this.controlInUse++
    lease.pool = pool
    lease.held = true
  }

  /** Whether a request of `kind` must queue behind a waiting one (first come, first served per pool). */
  private queuedBehind(kind: SlotKind) {
    return this.waiters.some((w) => w.kind === kind || (kind === "step" && w.kind === "rpc"))
  }

  /** Takes a slot for `lease` now if one is free for `kind` and nobody is queued ahead; false otherwise. */
  tryAcquire(kind: SlotKind, lease: Lease): boolean {
    const pool = this.poolFor(kind)
    if (pool === undefined || this.queuedBehind(kind)) return false
    this.take(pool, lease)
    return true
  }

  /**
   * Waits for a slot (first come, first served within what each kind may take) and marks `lease` as
   * holding it in the same step, so the lease's owner releases it whatever interrupts it. Interruptible.
   */
  acquire(kind: SlotKind, lease: Lease): Effect.Effect<void> {
    return Effect.callback<void>((resume) => {
      if (this.tryAcquire(kind, lease)) {
        resume(Effect.void)
        return
      }
      if (kind === "step" && this.inUse < this.total) this.reserveDeclines++
      const waiter: Waiter = {
        kind,
        grant: (pool) => {
          this.take(pool, lease)
          resume(Effect.void)
        }
      }
      this.waiters.push(waiter)
      return Effect.sync(() => {
        const i = this.waiters.indexOf(waiter)
        if (i >= 0) this.waiters.splice(i, 1)
      })
    })
  }

  /** A lease for one slot; `free` gives the slot back if the lease holds it (idempotent). */
  lease(): Lease {
    const lease: Lease = {
      held: false,
      pool: "task",
      free: () => {
        if (!lease.held) return
        lease.held = false
        this.release(lease.pool)
      }
    }
    return lease
  }

  /**
   * Sets the number of task slots and the reserve (a worker layer's own default, applied before it runs
   * anything); waiting requests that now fit get their slots.
   */
  resize(total: number, reserve: number) {
    this.total = Math.max(1, total)
    this.reserve = Math.max(0, Math.min(this.total - 1, reserve))
    this.grantWaiters()
  }

  /**
   * Sets the number of control slots (a worker layer's own default, applied before it runs anything); waiting
   * requests that now fit get their slots.
   */
  resizeControl(controlTotal: number) {
    this.controlTotal = Math.max(1, controlTotal)
    this.grantWaiters()
  }

  private release(pool: SlotPool) {
    if (pool === "task") this.inUse--
    else this.controlInUse--
    this.grantWaiters()
  }

  private grantWaiters() {
    for (let i = 0; i < this.waiters.length; ) {
      const w = this.waiters[i]!
      const pool = this.poolFor(w.kind)
      if (pool === undefined) {
        i++
        continue
      }
      this.waiters.splice(i, 1)
      w.grant(pool)
    }
  }

  /** Requests waiting for a slot. */
  get waiting() {
    return this.waiters.length
  }
}

/**
 * The slot of the Step attempt running in this fiber: `release` gives it back and `reacquire` waits for one
 * again. A Step body that waits on the engine (another Flow's end, a Step execution's end) holds no slot
 * meanwhile (see `whileWaiting`), so a child Flow never waits behind the Step that waits for it.
 */
export class CurrentTaskSlot extends Context.Service<
  CurrentTaskSlot,
  { readonly release: Effect.Effect<void>; readonly reacquire: Effect.Effect<void> }
>()("@durable-agent/engine/internal/CurrentTaskSlot") {}

/**
 * Runs `effect` (a wait on the engine) without the current Step attempt's slot, if it runs in one: the slot
 * is released for the wait and taken again before the Step body goes on.
 */
export const whileWaiting = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.serviceOption(CurrentTaskSlot), (slot) =>
    slot._tag === "None"
      ? effect
      : Effect.gen(function* () {
          yield* slot.value.release
          const exit = yield* Effect.exit(effect)
          // taken again interruptibly: a cancelled attempt stops here instead of waiting for a slot
          yield* slot.value.reacquire
          return yield* exit
        })
  )

/** A counter series per key, as a Map-like view over one Metric (keys joined with NUL for two attributes). */
export class CounterSeries {
  private readonly registry: Metrics.Registry
  private readonly metric: Metric.Counter<number>
  private readonly attributesOf: (key: string) => Readonly<Record<string, string>>
  constructor(
    registry: Metrics.Registry,
    metric: Metric.Counter<number>,
    attributesOf: (key: string) => Readonly<Record<string, string>>
  ) {
    this.registry = registry
    this.metric = metric
    this.attributesOf = attributesOf
  }
  /** The count of `key` (undefined when it was never bumped). */
  get(key: string): number | undefined {
    const n = Metrics.count(this.registry, this.metric, this.attributesOf(key))
    return n === 0 ? undefined : n
  }
  bump(key: string): void {
    Metrics.record(this.registry, this.metric, 1, this.attributesOf(key))
  }
}

/** A counter field backed by a Metric: reading gives its count, assigning a larger value adds the difference. */
const counterField = (registry: Metrics.Registry, metric: Metric.Counter<number>) => ({
  get: () => Metrics.count(registry, metric),
  set: (n: number) => {
    const delta = n - Metrics.count(registry, metric)
    if (delta > 0) Metrics.record(registry, metric, delta)
  }
})

/**
 * Counters and gauges of one runner, kept as effect Metrics in the runner's registry (see `Metrics` and the
 * engine README, "Health and metrics"). The fields read like numbers, so each measurement point stays one line.
 */
export class RunnerCounters {
  /** Steps started, by Step type (attempts that began running user code). */
  readonly stepsStarted: CounterSeries
  /** Step attempts that failed, by Step type and error type (`<type>\u0000<error>`). */
  readonly stepsFailed: CounterSeries
  /** Attempts that lost their worker (found after a crash or cancelled by a drain). */
  declare attemptsLost: number
  /** Step completions or checkpoints refused by the run budget. */
  declare budgetRejections: number
  /** Stream messages dropped (over the size limit or the stream's capacity). */
  declare streamRejectedWrites: number
  /** Stream trims (each trims the oldest messages of a stream). */
  declare streamTrims: number
  /** Stream writes dropped by a database error (each also logged). */
  declare streamWriteErrors: number
  /** Writes refused by the ownership fence (this runner had lost the Flow); each stopped the Flow's fibers here. */
  declare fencedWrites: number
  /** Flows the recovery sweep woke (running Steps, no live owner). */
  declare flowsRecovered: number
  /** Closed Flows purged after their retention. */
  declare flowsPurged: number
  /** Flow owners holding a Flow's state in memory. */
  flowsCached = 0

  readonly registry: Metrics.Registry

  constructor(registry: Metrics.Registry) {
    this.registry = registry
    this.stepsStarted = new CounterSeries(registry, Metrics.stepsStarted, (type) => ({ step_type: type }))
    this.stepsFailed = new CounterSeries(registry, Metrics.stepsFailed, (key) => {
      const [type, error] = key.split("\u0000")
      return { step_type: type!, error_type: error ?? "" }
    })
    Object.defineProperties(this, {
      attemptsLost: counterField(registry, Metrics.attemptsLost),
      budgetRejections: counterField(registry, Metrics.budgetRejections),
      streamRejectedWrites: counterField(registry, Metrics.streamRejectedWrites),
      streamTrims: counterField(registry, Metrics.streamTrims),
      streamWriteErrors: counterField(registry, Metrics.streamWriteErrors),
      fencedWrites: counterField(registry, Metrics.fencedWrites),
      flowsRecovered: counterField(registry, Metrics.flowsRecovered),
      flowsPurged: counterField(registry, Metrics.flowsPurged)
    })
  }

  bump(series: CounterSeries, key: string) {
    series.bump(key)
  }

  observeTransition(seconds: number) {
    Metrics.record(this.registry, Metrics.transitionSeconds, seconds)
  }
}

/** A Step attempt this runner holds: waiting for a slot, or running user code. */
export interface ActiveAttempt {
  phase: "waiting" | "running"
  /** Cancels it for a drain (interrupts its fiber and commits what the rules say). */
  readonly cancel: Effect.Effect<void>
}

/** The shared state of one runner. */
export interface RunnerStateShape {
  /**
   * This runner's identity as attempt rows, history and stream messages record it: `<host>:<port> pid <pid>` in
   * a cluster, `embedded pid <pid>` on the embedded engine. Also the Postgres `application_name` of its sessions.
   */
  readonly runnerId: string
  /**
   * Flow IDs with a live owner on this runner: an entity instance that is claiming the Flow, or holds its claim
   * and has loaded and recovered it (the key its instance registered). One whose write was refused, or whose
   * claim could not be loaded, is not listed: the recovery sweep wakes it (`sweep.ts`).
   */
  readonly activeFlows: Map<string, object>
  /** Where this runner's lock of a shard lives, when claims must check it (cluster runners on Postgres). */
  readonly shardLease: (group: string, shard: number) => ShardLease | undefined
  /** The idle limit of fenced transactions (cluster runners: twice the shard lock expiration). */
  readonly transactionIdleTimeoutMs: number | undefined
  readonly slots: TaskSlots
  readonly counters: RunnerCounters
  /** The byte budgets of the streams this runner writes, kept in memory (`streams.ts`). */
  readonly streams: StreamBudget
  /** The heartbeats with messages of this runner's attempts, batched per event-loop turn (`heartbeats.ts`). */
  readonly heartbeats: HeartbeatBatch
  /** The runner's metrics registry (also effect/cluster's and the Flows' handlers'). */
  readonly metrics: Metrics.Registry
  /** The Step attempts of this runner's owners. */
  readonly attempts: Set<ActiveAttempt>
  /** Whether the runner is draining: no new Step attempts start. */
  readonly draining: () => boolean
  readonly startDraining: () => void
  /** Whether the engine finished starting (readiness). */
  readonly ready: () => boolean
  readonly markReady: () => void
}

/** The identity of an embedded engine's runner. */
export const embeddedRunnerId = () => `embedded pid ${process.pid}`

/** The identity of a cluster runner (at most 63 bytes: it is also the sessions' `application_name`). */
export const clusterRunnerId = (host: string, port: number) => `${host}:${port} pid ${process.pid}`.slice(0, 63)

/**
 * The lease of effect/cluster's `SqlRunnerStorage` on Postgres (table prefix `cluster`, the default shard
 * group): the advisory lock `(namespace, 1000000 + shard)` held by the runner's lock session, whose
 * `application_name` is the runner's identity. Other shard groups are not checked.
 *
 * This mirrors `SqlRunnerStorage` (effect 4.1, `node_modules/effect/src/cluster/SqlRunnerStorage.ts`), which
 * does not export it: the namespace is `postgresLockNamespace(prefix)`, the FNV-1a hash of
 * `effect-cluster:<prefix>` (a signed int4, which `pg_locks.classid` shows unsigned), and a shard's lock number is
 * `(i + 1) * 1000000 + shard` for the `i`-th of `availableShardGroups` (`["default"]`: `1000000 + shard`), taken
 * with `objsubid` 2 (the two-key form). `test/shard-lease.test.ts` checks it against the locks a real runner
 * takes: it fails when an upgrade of effect changes the numbering.
 */
export const postgresShardLease =
  (runnerId: string) =>
  (group: string, shard: number): ShardLease | undefined =>
    group === "default"
      ? { applicationName: runnerId, classId: CLUSTER_LOCK_NAMESPACE, objId: 1_000_000 + shard }
      : undefined

/** `SqlRunnerStorage`'s advisory-lock namespace for the prefix `cluster` (FNV-1a of `effect-cluster:cluster`). */
const CLUSTER_LOCK_NAMESPACE = (() => {
  const bytes = new TextEncoder().encode("effect-cluster:cluster")
  let hash = 0x811c9dc5
  for (let i = 0; i < bytes.length; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193)
  return hash >>> 0
})()

/** The runner's shared state service. */
export class RunnerState extends Context.Service<RunnerState, RunnerStateShape>()(
  "@durable-agent/engine/internal/RunnerState"
) {
  /**
   * The runner state of a runner with identity `runnerId` (default: `embedded pid <pid>`) whose shard locks,
   * if any, `shardLease` locates.
   */
  static readonly layerWith = (
    runnerId: string = embeddedRunnerId(),
    shardLease: RunnerStateShape["shardLease"] = () => undefined,
    transactionIdleTimeoutMs?: number
  ) =>
    Layer.effect(
      RunnerState,
      Effect.gen(function* () {
        const config = yield* EngineConfig
        const metrics: Metrics.Registry = {
          context: Context.make(Metric.MetricRegistry, yield* Metric.MetricRegistry)
        }
        let draining = false
        let ready = false
        return RunnerState.of({
          runnerId,
          activeFlows: new Map(),
          shardLease,
          transactionIdleTimeoutMs,
          slots: new TaskSlots(config.maxConcurrentTasks, rpcReserveOf(config), controlTasksOf(config)),
          counters: new RunnerCounters(metrics),
          streams: new StreamBudget(),
          heartbeats: new HeartbeatBatch(),
          metrics,
          attempts: new Set(),
          draining: () => draining,
          startDraining: () => {
            draining = true
          },
          ready: () => ready && !draining,
          markReady: () => {
            ready = true
          }
        })
      })
    )
  static readonly layer = RunnerState.layerWith()
}
