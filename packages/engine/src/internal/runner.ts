// What one runner process shares between its Flow owners: the task slots (with the RPC reserve), the
// drain state, and the counters the metrics endpoint reads. One per engine layer.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { EngineConfig, rpcReserveOf } from "../EngineConfig.ts"
import type { ShardLease } from "./store.ts"

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

/** Fixed histogram buckets for transition latency, in seconds. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] as const

/** Counters and gauges of one runner (see the engine README, "Health and metrics", for their names). */
export class RunnerCounters {
  /** Steps started, by Step type (attempts that began running user code). */
  readonly stepsStarted = new Map<string, number>()
  /** Step attempts that failed, by Step type and error type. */
  readonly stepsFailed = new Map<string, number>()
  /** Attempts that lost their worker (found after a crash or cancelled by a drain). */
  attemptsLost = 0
  /** Step completions or checkpoints refused by the run budget. */
  budgetRejections = 0
  /** Stream messages dropped (over the size limit or the stream's capacity). */
  streamRejectedWrites = 0
  /** Stream trims (each trims the oldest messages of a stream). */
  streamTrims = 0
  /** Stream writes dropped by a database error (each also logged). */
  streamWriteErrors = 0
  /** Writes refused by the ownership fence (this runner had lost the Flow); each stopped the Flow's fibers here. */
  fencedWrites = 0
  /** Flows the recovery sweep woke (running Steps, no live owner). */
  flowsRecovered = 0
  /** Closed Flows purged after their retention. */
  flowsPurged = 0
  /** Flow owners holding a Flow's state in memory. */
  flowsCached = 0
  readonly latencyBuckets: Array<number> = LATENCY_BUCKETS.map(() => 0)
  latencyCount = 0
  latencySum = 0

  bump(map: Map<string, number>, key: string) {
    map.set(key, (map.get(key) ?? 0) + 1)
  }

  observeTransition(seconds: number) {
    this.latencyCount++
    this.latencySum += seconds
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) if (seconds <= LATENCY_BUCKETS[i]!) this.latencyBuckets[i]!++
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
  /** The idle limit of fenced transactions (cluster runners: half the shard lock expiration). */
  readonly transactionIdleTimeoutMs: number | undefined
  readonly slots: TaskSlots
  readonly counters: RunnerCounters
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
        let draining = false
        let ready = false
        return RunnerState.of({
          runnerId,
          activeFlows: new Set(),
          shardLease,
          transactionIdleTimeoutMs,
          slots: new TaskSlots(config.maxConcurrentTasks, rpcReserveOf(config)),
          counters: new RunnerCounters(),
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
