// What one runner process shares between its Flow owners: the task slots (with the RPC reserve), the
// drain state, and the metrics registry the metrics endpoint reads. One per engine layer.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import { EngineConfig, rpcReserveOf } from "../EngineConfig.ts"
import * as Metrics from "../Metrics.ts"
import type { ShardLease } from "./store.ts"
import { StreamBudget } from "./streams.ts"

/** One holder's claim on a slot. */
export interface Lease {
  held: boolean
  readonly free: () => void
}

/** Who asks for a slot: Steps may not take the reserve, RPC handlers may. */
export type SlotKind = "step" | "rpc"

interface Waiter {
  readonly kind: SlotKind
  readonly grant: () => void
}

/** A counting pool of task slots in which Steps leave `reserve` slots to RPC handlers. */
export class TaskSlots {
  readonly total: number
  readonly reserve: number
  inUse = 0
  /** Step slot requests that found only reserved slots free. */
  reserveDeclines = 0
  private readonly waiters: Array<Waiter> = []

  constructor(total: number, reserve: number) {
    this.total = Math.max(1, total)
    this.reserve = Math.max(0, Math.min(this.total - 1, reserve))
  }

  private fits(kind: SlotKind) {
    return this.inUse < (kind === "rpc" ? this.total : this.total - this.reserve)
  }

  /**
   * Waits for a slot (first come, first served within what each kind may take) and marks `lease` as
   * holding it in the same step, so the lease's owner releases it whatever interrupts it. Interruptible.
   */
  acquire(kind: SlotKind, lease: Lease): Effect.Effect<void> {
    return Effect.callback<void>((resume) => {
      if (this.fits(kind) && !this.waiters.some((w) => w.kind === kind || kind === "step")) {
        this.inUse++
        lease.held = true
        resume(Effect.void)
        return
      }
      if (kind === "step" && this.inUse < this.total) this.reserveDeclines++
      const waiter: Waiter = {
        kind,
        grant: () => {
          this.inUse++
          lease.held = true
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
      free: () => {
        if (!lease.held) return
        lease.held = false
        this.release()
      }
    }
    return lease
  }

  private release() {
    this.inUse--
    for (let i = 0; i < this.waiters.length; ) {
      const w = this.waiters[i]!
      if (!this.fits(w.kind)) {
        i++
        continue
      }
      this.waiters.splice(i, 1)
      w.grant()
    }
  }

  /** Requests waiting for a slot. */
  get waiting() {
    return this.waiters.length
  }
}

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
  /** Flow IDs with a live owner (entity instance) on this runner. */
  readonly activeFlows: Set<string>
  /** Where this runner's lock of a shard lives, when claims must check it (cluster runners on Postgres). */
  readonly shardLease: (group: string, shard: number) => ShardLease | undefined
  /** The idle limit of fenced transactions (cluster runners: twice the shard lock expiration). */
  readonly transactionIdleTimeoutMs: number | undefined
  readonly slots: TaskSlots
  readonly counters: RunnerCounters
  /** The byte budgets of the streams this runner writes, kept in memory (`streams.ts`). */
  readonly streams: StreamBudget
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
          activeFlows: new Set(),
          shardLease,
          transactionIdleTimeoutMs,
          slots: new TaskSlots(config.maxConcurrentTasks, rpcReserveOf(config)),
          counters: new RunnerCounters(metrics),
          streams: new StreamBudget(),
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
