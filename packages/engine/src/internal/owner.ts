// The owner of a Flow: the effect/cluster entity instance that holds the Flow's state in memory, runs its
// Steps as child fibers, and commits every transition as one fenced SQL transaction.
//
// - Requests (start, RPC, publish, timer skip, attribute write, stop) arrive as volatile entity messages (no
//   cluster message row); their transition stores the reply under the request ID, so a request the client
//   sends again after a lost answer is answered from it, not run again. A commit that was refused or failed
//   answers RequestNotServed, which the client retries.
// - A Step's completion is committed directly by its fiber (no message). The next Steps start in memory
//   after COMMIT. Timers and retry backoffs sleep in memory; one persisted `Wake` per timed wait wakes a
//   Flow whose owner died or was evicted.
// - While Steps run, the entity holds a persisted keep-alive (`Entity.keepAlive`), redelivered after a
//   crash or shard move, so the Flow comes back on its new owner, which recovers it (`recover`). The
//   runner's recovery sweep (`sweep.ts`) wakes a Flow with running Steps that has no live owner anyway (an
//   activation here that lost its claim, or could not load the Flow, is not one: `listing`).
// - Ownership is an epoch: an activation claims the Flow (`claimOwnership`, on Postgres only while this
//   runner holds the Flow's shard lock) before it loads it, and every write on the Flow's behalf
//   (transitions with their attempt starts and replies, heartbeats, stream messages) checks the epoch in its
//   own statement or transaction; on Postgres a transaction's last statement also checks that no other runner
//   holds the Flow's shard lock (`requireLease`). A refused write drops the cache and interrupts the Step fibers before
//   any more user code runs; the next request claims again, which succeeds only on the shard's holder.
//   Every transition also compare-and-sets the Flow's version.
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import { Entity, type Sharding } from "effect/cluster"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import { EngineConfig, millis } from "../EngineConfig.ts"
import {
  DefinitionError,
  EngineError,
  FlowAlreadyStarted,
  FlowNotActive,
  FlowNotFound,
  IdempotencyKeyReused,
  InvalidInput,
  RpcFailed,
  RpcLockConflict,
  ValueTooLarge,
  WorkerLost,
  WorkerShutdown
} from "../Errors.ts"
import { FlowStream, type StreamDef } from "../Flow.ts"
import * as Metrics from "../Metrics.ts"
import { runAttempt } from "./attempt.ts"
import { AttrVersions } from "./attrVersions.ts"
import {
  encodeMovement,
  engineFailure,
  errorInfo,
  failureOf,
  ms,
  type Outcome,
  oversized,
  resolveOptions
} from "./decision.ts"
import { pausePoint } from "./faults.ts"
import { Notices } from "./feed.ts"
import { GroupCommit } from "./groupCommit.ts"
import * as KeepAlive from "./keepAlive.ts"
import {
  type ControlPayload,
  FlowEntity,
  type InvokePayload,
  RequestNotServed,
  type StartPayload,
  WakePayload
} from "./protocol.ts"
import { FlowRegistry, type RegisteredFlow } from "./registry.ts"
import { type ActiveAttempt, CurrentTaskSlot, type Lease, RunnerState, type SlotKind } from "./runner.ts"
import {
  type AttrWrite,
  byteLength,
  decodeJson,
  emptyStaged,
  encodeJson,
  type FlowState,
  lockNames,
  makeRpcView,
  type StoredWait
} from "./state.ts"
import { EngineStore } from "./store/EngineStore.ts"
import { attrsAt, type Fence, type FlowRow, type StepRow, type StreamRow } from "./store/rows.ts"
import {
  type CurrentAttempt,
  executionDeadline,
  type FlowCache,
  type RetentionSettings,
  Transition
} from "./transition.ts"

/** How long a leaving owner lets running Steps finish and commit before it interrupts them. */
const GRACE_PERIOD = Duration.seconds(10)

/** An attempt's outcome, waiting to commit. */
interface Finished {
  readonly stepExecutionId: string
  readonly attempt: number
  readonly outcome: Outcome
}

type Loaded = { readonly _tag: "Missing" } | { readonly _tag: "Loaded"; readonly cache: FlowCache }

const build = Effect.gen(function* () {
  const address = yield* Entity.CurrentAddress
  const flowId = address.entityId
  const store = yield* EngineStore
  const registry = yield* FlowRegistry
  const config = yield* EngineConfig
  const flowClient = yield* FlowEntity.client
  const groupCommit = yield* GroupCommit
  const notices = yield* Notices
  const runner = yield* RunnerState
  const dispatchWaitMs = millis(config.dispatchWait)
  // (a config made without `resolve` may leave these out: the defaults apply)
  const retention: RetentionSettings = {
    stepExecutions: config.retainedStepExecutions ?? EngineConfig.defaults.retainedStepExecutions,
    streamMessages: config.retainedStreamMessages ?? EngineConfig.defaults.retainedStreamMessages,
    replyMs: millis(config.replyRetention ?? EngineConfig.defaults.replyRetention),
    processedMessageMs: millis(config.processedMessageRetention ?? EngineConfig.defaults.processedMessageRetention),
    entityType: FlowEntity.type
  }
  const clusterContext = yield* Effect.context<Sharding.Sharding | Entity.CurrentAddress>()
  const entityScope = yield* Scope.Scope
  // Step fibers live in a child scope, closed after the grace period when the entity stops
  const attemptScope = yield* Scope.fork(entityScope)
  const lock = yield* Semaphore.make(1)
  const fibers = new Map<string, Fiber.Fiber<void>>()
  let loaded: Loaded | undefined
  /** This activation's ownership of the Flow; `undefined` until claimed, and again after a refused write. */
  let fence: Fence | undefined
  let keptAlive = false
  /** The keep-alive's pending release (`KEEP_ALIVE_LINGER` after the Flow's last running Step ended). */
  let lingering: Fiber.Fiber<void> | undefined
  let timer: { readonly at: number; readonly fiber: Fiber.Fiber<void> } | undefined

  runner.counters.flowsCached++
  /**
   * This activation's key in `runner.activeFlows`, listed while it claims the Flow or holds a claim it loaded
   * and recovered; not while it has no claim (after a refused write) or its load failed. The recovery sweep
   * wakes a Flow with running Steps that no activation here lists, so a superseded activation that no request
   * reaches claims and recovers the Flow again instead of leaving its Steps `running` with nobody running them.
   * (Another activation of the Flow in this process, one winding down, has its own key.)
   */
  const listing = {}
  const list = () => {
    runner.activeFlows.set(flowId, listing)
  }
  const unlist = () => {
    if (runner.activeFlows.get(flowId) === listing) runner.activeFlows.delete(flowId)
  }
  yield* Scope.addFinalizer(
    entityScope,
    Effect.gen(function* () {
      runner.counters.flowsCached--
      unlist()
      const running = [...fibers.values()]
      if (running.length > 0) yield* Effect.timeoutOption(Fiber.awaitAll(running), GRACE_PERIOD)
    })
  )

  const registered = (flowType: string): Effect.Effect<RegisteredFlow, DefinitionError> => {
    const r = registry.flows.get(flowType)
    return r === undefined
      ? Effect.fail(new DefinitionError({ flowType, reason: "this Flow type is not registered with the worker" }))
      : Effect.succeed(r)
  }

  const sqlDefect = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.mapError(
      effect,
      (e) => new EngineError({ reason: `database: ${String((e as { message?: unknown }).message ?? e)}` })
    )

  // --- loading ------------------------------------------------------------------------------------

  const load = Effect.fnUntraced(function* () {
    const flow = yield* store.loadFlow(flowId)
    if (flow === undefined) return { _tag: "Missing" } as const
    if (flow.status !== "running") {
      const cache: FlowCache = {
        flow,
        state: { attrs: new Map(), channels: new Map() },
        steps: new Map(),
        views: new Map(),
        attempts: new Map(),
        reached: new Set(),
        attrVersions: new AttrVersions(),
        stateBytes: 0
      }
      return { _tag: "Loaded", cache } as const
    }
    const versions = yield* store.loadAttrVersions(flowId)
    const channels = yield* store.loadMessages(flowId)
    const steps = yield* store.loadActiveSteps(flowId)
    const open = yield* store.loadOpenAttempts(flowId)
    const attempts = new Map<string, CurrentAttempt>()
    const views = new Map<string, FlowState>()
    for (const s of steps) {
      if (s.status !== "running") continue
      const a = open.find((r) => r.step_execution_id === s.step_execution_id && r.attempt === s.attempt)
      if (a !== undefined) attempts.set(s.step_execution_id, { attempt: a.attempt, startedAt: a.started_at })
      const counts = s.view_channels === null ? [] : (JSON.parse(s.view_channels) as Array<[string, number]>)
      views.set(s.step_execution_id, {
        attrs: attrsAt(versions, s.view_version ?? flow.version),
        channels: new Map(counts)
      })
    }
    const attrVersions = AttrVersions.fromRows(versions)
    const state: FlowState = { attrs: attrsAt(versions, flow.version), channels }
    // running Steps an earlier attempt of which reached the Step's code (their attempt progress)
    const reached = new Set<string>()
    if (steps.some((s) => s.status === "running" && s.attempt > 1)) {
      for (const id of yield* store.loadReachedSteps(flowId)) reached.add(id)
    }
    const cache: FlowCache = {
      flow,
      state,
      steps: new Map(steps.map((s) => [s.step_execution_id, s])),
      views,
      attempts,
      reached,
      attrVersions,
      stateBytes: stateBytesOf(state)
    }
    return { _tag: "Loaded", cache, openAttempts: open } as const
  })

  /**
   * The cache, read again when it holds a closed Flow: the retention purge may have deleted it meanwhile
   * (then the Flow ID is unknown, and a new Flow may start under it).
   */
  const fresh: Effect.Effect<Loaded, EngineError> = Effect.suspend(() => {
    if (loaded?._tag === "Loaded" && loaded.cache.flow.status !== "running") loaded = undefined
    return current
  })

  const shardLease = runner.shardLease(address.shardId.group, address.shardId.id)

  /**
   * Claims the Flow: a new ownership epoch. Where the claim needs the shard lock (Postgres) and this runner
   * does not hold it (it lost the shard and does not know yet), it waits: effect/cluster then stops this
   * activation, and the Flow's requests go to the shard's holder.
   */
  const claim: Effect.Effect<Fence, EngineError> = Effect.gen(function* () {
    let warned = false
    while (true) {
      const now = yield* Clock.currentTimeMillis
      const epoch = yield* sqlDefect(store.claimOwnership(flowId, runner.runnerId, now, shardLease))
      if (epoch !== undefined) {
        return { epoch, runner: runner.runnerId, idleTimeoutMs: runner.transactionIdleTimeoutMs, lease: shardLease }
      }
      if (!warned) {
        warned = true
        yield* Effect.logWarning(`Flow ${flowId}: this runner does not hold the Flow's shard lock; not claiming it`)
      }
      yield* Effect.sleep(Duration.millis(200))
    }
  })

  /** The cache, loaded (and the Flow claimed and recovered) on first use and after a failed or refused commit. */
  const current: Effect.Effect<Loaded, EngineError> = Effect.suspend(() => {
    if (loaded !== undefined && fence !== undefined) return Effect.succeed(loaded)
    return Effect.gen(function* () {
      // claiming or (re)loading: this activation recovers the Flow, the sweep need not wake it
      list()
      if (fence === undefined) {
        loaded = undefined
        fence = yield* claim
      }
      const result = yield* sqlDefect(load())
      loaded = result._tag === "Missing" ? result : { _tag: "Loaded", cache: result.cache }
      if (result._tag === "Loaded" && result.cache.flow.status === "running") {
        yield* recover(result.cache, result.openAttempts ?? [])
      }
      // a keep-alive redelivered to this activation (a crash or a shard move) of a Flow with nothing running
      // is answered now (a Flow with running Steps holds its own from the recovery's commit)
      if (!keptAlive) yield* KeepAlive.release.pipe(Effect.provideContext(clusterContext))
      return loaded
    }).pipe(
      // a load or recovery that failed leaves the Flow to the sweep (a failed commit also reloads it at once)
      Effect.onError(() => Effect.sync(unlist))
    )
  })

  /**
   * The Flow's default Step durability, from the latest FlowStarted record of its history; `sync` when that
   * record was pruned or cannot be read (the side that never runs an attempt twice).
   */
  const defaultDurability: Effect.Effect<"sync" | "async"> = store.loadFlowStarted(flowId).pipe(
    Effect.map((text) => {
      const data = text === undefined ? undefined : (JSON.parse(text) as { stepDurability?: unknown })
      return data?.stepDurability === "async" ? ("async" as const) : ("sync" as const)
    }),
    Effect.orElseSucceed(() => "sync" as const)
  )

  /**
   * Applies the rules to running Steps that have no fiber here (this owner just acquired the Flow): an
   * attempt that produced output failed with WorkerLost (for a SYNC Step); one with no output, or of an
   * ASYNC Step, runs again with the same number; a retry in its backoff waits out the rest. Waits are re-evaluated and timers re-armed.
   */
  const recover = (
    cache: FlowCache,
    open: ReadonlyArray<{ step_execution_id: string; attempt: number; output_at: number | null }>
  ): Effect.Effect<void, EngineError> =>
    Effect.gen(function* () {
      const reg = yield* registered(cache.flow.flow_type).pipe(
        Effect.catchTag("DefinitionError", (e) => Effect.fail(new EngineError({ reason: e.message })))
      )
      const now = yield* Clock.currentTimeMillis
      const tx = new Transition(reg, now, cache)
      const lost: Array<{ stepExecutionId: string; attempt: number }> = []
      // ASYNC Step durability: the attempt start is not durable before the body runs, so an attempt lost with
      // its worker counts as never started and runs again with the same number, output or not. A Step's own
      // `execute.durability` wins over the Flow's default (`StartFlowOptions.stepDurability`).
      const flowDefault = open.some((r) => r.output_at !== null) ? yield* defaultDurability : "sync"
      const durabilityOf = (stepType: string) => reg.steps.get(stepType)?.options?.execute?.durability ?? flowDefault
      for (const s of cache.steps.values()) {
        if (s.status !== "running" || fibers.has(s.step_execution_id)) continue
        const a = open.find((r) => r.step_execution_id === s.step_execution_id && r.attempt === s.attempt)
        if (a !== undefined && a.output_at !== null && durabilityOf(s.step_type) === "async") {
          tx.startAttempt(s.step_execution_id, s.attempt, { redelivered: true })
        } else if (a === undefined) {
          tx.starts.push({
            stepExecutionId: s.step_execution_id,
            attempt: s.attempt,
            delayMs: Math.max(0, (s.retry_at ?? now) - now),
            recorded: false
          })
        } else if (a.output_at !== null) {
          lost.push({ stepExecutionId: s.step_execution_id, attempt: s.attempt })
        } else {
          tx.startAttempt(s.step_execution_id, s.attempt, { redelivered: true })
        }
      }
      runner.counters.attemptsLost += lost.length
      for (const l of lost) {
        yield* Effect.orDie(
          tx.finishAttempt(
            l.stepExecutionId,
            l.attempt,
            engineFailure(
              new WorkerLost({ detail: "the worker running this attempt stopped after the attempt produced output" }),
              true
            )
          )
        )
      }
      tx.settle()
      yield* commit(tx, cache)
    })

  // --- committing ---------------------------------------------------------------------------------

  const visibleVersions = (views: ReadonlyMap<string, StepRow>) =>
    new Set([...views.values()].flatMap((s) => (s.view_version === null ? [] : [s.view_version])))

  /**
   * Writes the transition in one SQL transaction, then replaces the cache and starts, interrupts and
   * arms what the transition decided. A commit the fence refuses drops this owner's state.
   */
  const commit = (
    tx: Transition,
    cache: FlowCache | undefined,
    options?: { readonly completion?: string }
  ): Effect.Effect<void, EngineError> =>
    Effect.uninterruptible(
      Effect.gen(function* () {
        let claimed: ReadonlyMap<string, Lease> = noClaims
        if (tx.dirty) {
          const startedAt = performance.now()
          const owner = fence
          if (owner === undefined) {
            loaded = undefined
            return yield* new EngineError({ reason: `Flow ${flowId}: this runner does not own it` })
          }
          tx.historyWindow = config.historyWindowEvents
          tx.retention = retention
          claimed = claimSlots(tx)
          // the keep-alive this transition starts (its Flow has running Steps now and had none) is written in the
          // transition's own transaction (effect/cluster's outbox, as `Wake` is): no commit of its own, and the
          // Steps the transition starts do not wait for one
          const holdKeepAlive = !keptAlive && tx.running && hasRunning(tx.steps)
          const { batch, versions } = tx.batch(visibleVersions, cache, owner)
          const written = yield* groupCommit
            .run(
              Effect.gen(function* () {
                if (tx.replacesRun) yield* store.deleteRun(flowId)
                const ok = yield* store.writeTransition(batch)
                if (!ok) return false
                if (options?.completion !== undefined) yield* pausePoint("commit", options.completion)
                for (const w of tx.wakes) {
                  yield* flowClient(flowId).Wake(
                    new WakePayload({ flowId, stepExecutionId: w.stepExecutionId, at: w.at }),
                    {
                      discard: true
                    }
                  )
                }
                if (holdKeepAlive) yield* KeepAlive.hold.pipe(Effect.provideContext(clusterContext))
                // the lease, checked last (a runner that lost the shard lock meanwhile rolls back), in one
                // statement with the commit notice to other processes (Postgres: delivered after COMMIT)
                yield* store.requireLeaseAndNotify(flowId, owner)
                return true
              }),
              flowId
            )
            .pipe(
              Effect.catchTag("LeaseLost", () => Effect.succeed(false)),
              // the request was served before (its answer was lost): nothing of this transition is written
              Effect.catchTag("AlreadyAnswered", () => Effect.succeed("answered" as const)),
              Effect.catchCause((cause) => {
                // a failed or rolled-back commit: reload (and recover what runs without a fiber) at once
                freeClaimed(claimed)
                loaded = undefined
                const { errorType, detail } = errorInfo(cause)
                return Effect.logWarning(`Flow ${flowId}: commit failed (${errorType}: ${detail}); reloading`).pipe(
                  Effect.andThen(reloadSoon),
                  Effect.andThen(Effect.fail(new EngineError({ reason: `commit failed: ${errorType}: ${detail}` })))
                )
              })
            )
          if (written === "answered") {
            freeClaimed(claimed)
            tx.alreadyAnswered = true
            return
          }
          if (!written) {
            freeClaimed(claimed)
            yield* Effect.logWarning(
              `Flow ${flowId}: commit refused (another owner changed it, or this runner lost its shard lock); dropping this owner`
            )
            yield* supersede(owner)
            return yield* new EngineError({
              reason: `Flow ${flowId} was changed by another owner; this runner no longer owns it`
            })
          }
          if (holdKeepAlive) keptAlive = true
          loaded = { _tag: "Loaded", cache: tx.result(versions) }
          // the Flow's readers in this process look again
          notices.notify(flowId)
          runner.counters.observeTransition((performance.now() - startedAt) / 1000)
        }
        yield* afterCommit(tx, claimed)
      })
    )

  /**
   * A write under `lost` was refused: another owner holds the Flow. Stops every Step fiber here, forgets the
   * cache and the epoch. The keep-alive is left alone: its persisted request is shared by every activation of
   * the Flow, and the current owner depends on it; this activation's own hold ends when effect/cluster stops
   * it (the shard is gone) or when a later claim here succeeds and a commit releases it.
   */
  const supersede = (lost: Fence) =>
    Effect.sync(() => {
      if (fence !== lost) return
      runner.counters.fencedWrites++
      fence = undefined
      loaded = undefined
      // no claim here now: the sweep wakes the Flow if nobody else runs it (the next claim succeeds only on
      // the shard's holder)
      unlist()
      const all = [...fibers.values()]
      fibers.clear()
      if (timer !== undefined) {
        all.push(timer.fiber)
        timer = undefined
      }
      for (const f of all) Effect.runFork(Fiber.interrupt(f))
    })

  /** After a failed commit: reload the Flow (and recover its running Steps) without waiting for a request. */
  const reloadSoon = Effect.asVoid(Effect.forkIn(Effect.ignore(lock.withPermits(1)(current)), attemptScope))

  /** The slot kind of a Step's body: its `execute.slot` option (control Steps take control slots). */
  const slotKindOf = (reg: RegisteredFlow, stepExecutionId: string): SlotKind =>
    reg.steps.get(stepTypeOf(stepExecutionId))?.options?.execute?.slot === "control" ? "control" : "step"

  /**
   * Attempts this commit starts that can have a slot at once get it now, and their start record in this
   * commit (one transaction for a dispatch and its start); the others record their start once they have one.
   */
  const claimSlots = (tx: Transition): ReadonlyMap<string, Lease> => {
    if (runner.draining() || !tx.starts.some((s) => !s.recorded && s.delayMs === 0)) return noClaims
    const claimed = new Map<string, Lease>()
    for (const s of tx.starts) {
      if (s.recorded || s.delayMs > 0 || fibers.has(s.stepExecutionId)) continue
      const lease = runner.slots.lease()
      if (!runner.slots.tryAcquire(slotKindOf(tx.registered, s.stepExecutionId), lease)) continue
      tx.startRetry(s.stepExecutionId, s.attempt)
      claimed.set(s.stepExecutionId, lease)
    }
    return claimed
  }

  const afterCommit = Effect.fnUntraced(function* (tx: Transition, claimed: ReadonlyMap<string, Lease> = noClaims) {
    for (const stepExecutionId of tx.interrupts) {
      const f = fibers.get(stepExecutionId)
      if (f === undefined) continue
      fibers.delete(stepExecutionId)
      yield* Effect.forkDetach(Fiber.interrupt(f))
    }
    for (const s of tx.starts) {
      yield* launch(
        tx.registered,
        s.stepExecutionId,
        s.attempt,
        s.delayMs,
        s.recorded,
        s.fresh === true,
        claimed.get(s.stepExecutionId)
      )
    }
    const cache = loaded?._tag === "Loaded" ? loaded.cache : undefined
    const running = cache !== undefined && cache.flow.status === "running" && hasRunning(cache.steps)
    // a commit that starts running Steps holds the keep-alive in its transaction; the release waits for the
    // linger (keepAlive.ts), and a Flow that runs again meanwhile keeps it
    if (running) {
      if (lingering !== undefined) {
        const f = lingering
        lingering = undefined
        yield* Effect.forkDetach(Fiber.interrupt(f))
      }
      if (!keptAlive) {
        // (a Flow with running Steps whose commit did not hold it)
        keptAlive = true
        yield* KeepAlive.hold.pipe(Effect.provideContext(clusterContext), Effect.orDie)
      }
    } else if (keptAlive && lingering === undefined) {
      lingering = yield* Effect.sleep(KeepAlive.KEEP_ALIVE_LINGER).pipe(
        Effect.andThen(lock.withPermits(1)(releaseKeepAlive)),
        Effect.forkIn(attemptScope)
      )
    }
    yield* armTimer(cache)
  })

  /**
   * The keep-alive's release once its linger ran out: only by an activation that still owns the Flow, while it has
   * no running Step (a superseded one leaves it to the current owner, see `supersede`).
   */
  const releaseKeepAlive = Effect.suspend(() => {
    lingering = undefined
    const cache = loaded?._tag === "Loaded" ? loaded.cache : undefined
    if (!keptAlive || fence === undefined || cache === undefined) return Effect.void
    if (cache.flow.status === "running" && hasRunning(cache.steps)) {
      return Effect.void
    }
    keptAlive = false
    return KeepAlive.release.pipe(Effect.provideContext(clusterContext))
  })

  /** One in-memory timer: the earliest deadline of a waiting Step. */
  const armTimer = Effect.fnUntraced(function* (cache: FlowCache | undefined) {
    let next: number | undefined
    if (cache !== undefined && cache.flow.status === "running") {
      next = executionDeadline(cache.flow)
      for (const s of cache.steps.values()) {
        if (s.status !== "waiting") continue
        for (const c of (JSON.parse(s.wait!) as StoredWait).conditions) {
          if (c._tag === "Timer" && !c.skipped && (next === undefined || c.deadline < next)) next = c.deadline
        }
      }
    }
    if (timer !== undefined && timer.at === next) return
    if (timer !== undefined) {
      const old = timer.fiber
      timer = undefined
      yield* Effect.forkDetach(Fiber.interrupt(old))
    }
    if (next === undefined) return
    const now = yield* Clock.currentTimeMillis
    const at = next
    const fiber = yield* Effect.sleep(Duration.millis(Math.max(0, at - now))).pipe(
      Effect.andThen(
        Effect.suspend(() => {
          if (timer?.at === at) timer = undefined
          return wake
        })
      ),
      Effect.ignore,
      Effect.forkIn(attemptScope)
    )
    timer = { at, fiber }
  })

  // --- Steps ----------------------------------------------------------------------------------------

  /**
   * Starts an attempt's fiber: after a retry's backoff, it waits for its slot (unless the commit that started
   * it already gave it one, `held`) and writes its start record once it has one, when not yet written.
   */
  const launch = (
    reg: RegisteredFlow,
    stepExecutionId: string,
    attempt: number,
    delayMs: number,
    recorded: boolean,
    fresh: boolean,
    held?: Lease
  ): Effect.Effect<void> =>
    Effect.gen(function* () {
      if (fibers.has(stepExecutionId)) {
        held?.free()
        return
      }
      const kind = slotKindOf(reg, stepExecutionId)
      const run = Effect.gen(function* () {
        if (delayMs > 0) yield* Effect.sleep(Duration.millis(delayMs))
        // a draining runner starts nothing: the attempt's start record, if written, stays, and the Flow's next
        // owner runs it (an attempt without output is handed out again with the same number)
        if (runner.draining()) return
        // A Step waits in the queue for a slot for as long as it takes, without consuming an attempt (the
        // adapters spec, "Known limits"; the deploy guide's older rule, failing it with NoTaskSlot after the
        // dispatch wait, is not followed). The slot is released whatever ends this fiber (`lease.free` below).
        if (held === undefined) yield* runner.slots.acquire(kind, lease)
        if (runner.draining()) return
        if (!recorded && held === undefined) {
          // the attempt's start (attempt 1's too) is recorded only now that it has a slot
          const started = yield* withCache((cache) =>
            Effect.gen(function* () {
              const step = cache.steps.get(stepExecutionId)
              if (step === undefined || step.status !== "running" || step.attempt !== attempt) return false
              const now = yield* Clock.currentTimeMillis
              const tx = new Transition(reg, now, cache)
              tx.startRetry(stepExecutionId, attempt)
              yield* commit(tx, cache)
              return true
            })
          )
          if (!started) return
        }
        const outcome = yield* Effect.gen(function* () {
          active.phase = "running"
          const cache = loaded?._tag === "Loaded" ? loaded.cache : undefined
          const step = cache?.steps.get(stepExecutionId)
          const view = cache?.views.get(stepExecutionId)
          if (cache === undefined || step === undefined || view === undefined || step.attempt !== attempt) return
          runner.counters.bump(runner.counters.stepsStarted, step.step_type)
          const owner = fence
          if (owner === undefined) return
          return yield* runAttempt({
            fence: owner,
            onFenced: Effect.andThen(
              Effect.logWarning(
                `Flow ${flowId}: a write of ${stepExecutionId}#${attempt} was refused, another owner holds the Flow; stopping its fibers here`
              ),
              supersede(owner)
            ),
            store,
            config,
            registered: reg,
            flow: cache.flow,
            step,
            attempt,
            view,
            // only attempt 1's first run (started when the Step was dispatched) cannot find a checkpoint
            mayHaveCheckpoint: !(fresh && attempt === 1),
            counters: runner.counters,
            budget: runner.streams,
            beats: runner.heartbeats,
            transact: groupCommit.run,
            notices
          }).pipe(
            Metrics.measureAttempt(runner.metrics, step.step_type),
            // a body that waits on the engine (another Flow's end) gives its slot back meanwhile
            Effect.provideService(CurrentTaskSlot, {
              release: Effect.sync(lease.free),
              reacquire: runner.slots.acquire(kind, lease)
            })
          )
        }).pipe(Effect.ensuring(Effect.sync(lease.free)))
        if (outcome === undefined) return
        if (outcome._tag === "Failure") {
          runner.counters.bump(runner.counters.stepsFailed, `${stepTypeOf(stepExecutionId)}\u0000${outcome.errorType}`)
        }
        runner.attempts.delete(active)
        yield* finish(stepExecutionId, attempt, outcome)
      }).pipe(
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.interrupt
            : Effect.logError(`Step ${stepExecutionId} of Flow ${flowId}`, cause)
        ),
        Effect.ensuring(
          Effect.sync(() => {
            lease.free()
            runner.attempts.delete(active)
            if (fibers.get(stepExecutionId) === self) fibers.delete(stepExecutionId)
          })
        )
      )
      let self: Fiber.Fiber<void> | undefined
      const lease = held ?? runner.slots.lease()
      const active: ActiveAttempt = {
        phase: "waiting",
        cancel: Effect.suspend(() => (self === undefined ? Effect.void : drainCancel(stepExecutionId, attempt, self)))
      }
      self = yield* Effect.forkIn(run, attemptScope, { startImmediately: false })
      // the slot goes back however the fiber ends, also when it is interrupted before it starts (a supersede
      // right after this commit), where `run`'s own finalizers never run
      self.addObserver(() => lease.free())
      fibers.set(stepExecutionId, self)
      runner.attempts.add(active)
    })

  /**
   * A drain ran out of time: interrupts the attempt. One that produced output fails `WorkerShutdown` (its
   * retry policy and failure route apply, as for a lost worker); one without output is left as it is, and
   * the Flow's next owner runs the same attempt again.
   */
  const drainCancel = (stepExecutionId: string, attempt: number, fiber: Fiber.Fiber<void>) =>
    Effect.gen(function* () {
      if (fibers.get(stepExecutionId) === fiber) fibers.delete(stepExecutionId)
      yield* Fiber.interrupt(fiber)
      const row = yield* Effect.orElseSucceed(store.loadAttempt(flowId, stepExecutionId, attempt), () => undefined)
      if (row === undefined || row.output_at === null || row.finished_at !== null) return
      runner.counters.attemptsLost++
      yield* finish(
        stepExecutionId,
        attempt,
        engineFailure(
          new WorkerShutdown({
            detail: "the runner stopped (drain timeout) while the attempt was running, after it produced output"
          }),
          true
        )
      )
    })

  /** Completions waiting for the owner's lock: those that arrive together commit in one transition. */
  let finishing: Array<Finished> = []

  /** Whether a completion still applies: its attempt was not cancelled or superseded meanwhile. */
  const applies = (cache: FlowCache, f: Finished) => {
    const step = cache.steps.get(f.stepExecutionId)
    return (
      cache.flow.status === "running" && step !== undefined && step.status === "running" && step.attempt === f.attempt
    )
  }

  /**
   * Commits an attempt's outcome, unless the attempt was cancelled or superseded meanwhile. Completions of the
   * Flow's attempts that arrive together (a turn's parallel tool calls) commit in one transition, as if they
   * had ended at the same instant; one whose result cannot be applied, or that passes the run budget, makes
   * each of them commit on its own.
   */
  const finish = (stepExecutionId: string, attempt: number, outcome: Outcome) =>
    Effect.suspend(() => {
      finishing.push({ stepExecutionId, attempt, outcome })
      // the first of a group lets the others of this event-loop turn join before it takes the lock
      return Effect.andThen(Effect.yieldNow, withCache(finishBatch))
    }).pipe(Effect.ignore)

  const finishBatch = (cache: FlowCache) =>
    Effect.gen(function* () {
      const batch = finishing
      finishing = []
      const live = batch.filter((f) => applies(cache, f))
      if (live.length <= 1) {
        if (live.length === 1) yield* finishOne(cache, live[0]!)
        return
      }
      const reg = yield* registered(cache.flow.flow_type).pipe(Effect.orDie)
      const now = yield* Clock.currentTimeMillis
      const tx = new Transition(reg, now, cache)
      let together = true
      for (const f of live) {
        if (Exit.isFailure(yield* Effect.exit(tx.finishAttempt(f.stepExecutionId, f.attempt, f.outcome)))) {
          together = false
          break
        }
      }
      if (together && tx.stateBytesDelta > 0 && tx.stateBytes > config.maxFlowStateBytes) together = false
      if (!together) {
        // one at a time, each on the cache the one before committed
        for (const f of live) {
          yield* Effect.flatMap(current, (l) =>
            l._tag === "Loaded" && applies(l.cache, f) ? finishOne(l.cache, f) : Effect.void
          )
        }
        return
      }
      for (const f of live) fibers.delete(f.stepExecutionId)
      tx.settle()
      const admitted: Array<Effect.Success<ReturnType<typeof admitStaged>>> = []
      for (const f of live) {
        const staged = f.outcome._tag === "Success" ? (f.outcome.streams ?? []) : []
        if (staged.length > 0) admitted.push(yield* admitStaged(reg, f.stepExecutionId, f.attempt, staged, now))
      }
      tx.streamRows = admitted.flatMap((a) => a.rows)
      const first = live[0]!
      yield* commit(tx, cache, { completion: `${first.stepExecutionId}#${first.attempt} of Flow ${flowId}` }).pipe(
        Effect.onExit((exit) =>
          Effect.forEach(admitted, (a) => (exit._tag === "Success" ? a.written : a.release), { discard: true })
        )
      )
    })

  /** Commits one attempt's outcome (it applies: the caller checked). */
  const finishOne = (cache: FlowCache, { stepExecutionId, attempt, outcome }: Finished) =>
    Effect.gen(function* () {
      const reg = yield* registered(cache.flow.flow_type).pipe(Effect.orDie)
      const now = yield* Clock.currentTimeMillis
      const tx = new Transition(reg, now, cache)
      fibers.delete(stepExecutionId)
      const applied = yield* Effect.exit(tx.finishAttempt(stepExecutionId, attempt, outcome))
      if (
        Exit.isSuccess(applied) &&
        outcome._tag === "Success" &&
        tx.stateBytesDelta > 0 &&
        tx.stateBytes > config.maxFlowStateBytes
      ) {
        // the run budget: a completion that adds storage past it fails the Step without retry
        runner.counters.budgetRejections++
        const over = new Transition(reg, now, cache)
        yield* Effect.orDie(
          over.finishAttempt(stepExecutionId, attempt, {
            // a typed ValueTooLarge for the failure route, with the budget's own words as the detail
            ...engineFailure(
              new ValueTooLarge({
                name: `Flow run state of ${flowId}`,
                bytes: tx.stateBytes,
                limit: config.maxFlowStateBytes
              }),
              false
            ),
            detail: `Flow run state of ${tx.stateBytes} bytes is over the run budget of ${config.maxFlowStateBytes} bytes (maxFlowStateBytes)`
          })
        )
        over.settle()
        return yield* commit(over, cache)
      }
      if (Exit.isFailure(applied)) {
        // the result could not be applied (a consumed message, an unknown Step): the attempt fails
        const retry = new Transition(reg, now, cache)
        yield* Effect.orDie(
          retry.finishAttempt(stepExecutionId, attempt, { ...failureOf(applied.cause, undefined), retryable: true })
        )
        retry.settle()
        return yield* commit(retry, cache)
      }
      tx.settle()
      const staged = outcome._tag === "Success" ? (outcome.streams ?? []) : []
      if (staged.length === 0) {
        return yield* commit(tx, cache, { completion: `${stepExecutionId}#${attempt} of Flow ${flowId}` })
      }
      // the attempt's staged stream messages commit with the transition that makes them true
      const admitted = yield* admitStaged(reg, stepExecutionId, attempt, staged, now)
      tx.streamRows = admitted.rows
      yield* commit(tx, cache, { completion: `${stepExecutionId}#${attempt} of Flow ${flowId}` }).pipe(
        Effect.onExit((exit) => (exit._tag === "Success" ? admitted.written : admitted.release))
      )
    })

  /**
   * The runner's stream budget admits an attempt's staged messages (in order, per stream); the rest are
   * dropped. `release` gives the admitted bytes back when the commit fails, `written` follows a commit.
   */
  const admitStaged = (
    reg: RegisteredFlow,
    stepExecutionId: string,
    attempt: number,
    staged: ReadonlyArray<{ readonly stream: string; readonly value: string; readonly bytes: number }>,
    now: number
  ) =>
    Effect.gen(function* () {
      const byStream = new Map<string, Array<(typeof staged)[number]>>()
      for (const m of staged) {
        const list = byStream.get(m.stream)
        if (list === undefined) byStream.set(m.stream, [m])
        else list.push(m)
      }
      const rows: Array<StreamRow> = []
      const streams: Array<readonly [StreamDef<any>, number]> = []
      for (const [name, messages] of byStream) {
        const def = reg.def.streams.find((d) => d.name === name) ?? FlowStream(name, Schema.Unknown)
        const kept = yield* runner.streams.admit(store, reg.def.type, def, messages, runner.counters)
        streams.push([def, kept.reduce((n, m) => n + m.bytes, 0)])
        for (const m of kept) {
          rows.push({
            flow_type: reg.def.type,
            stream: name,
            flow_id: flowId,
            step_execution_id: stepExecutionId,
            attempt,
            value: m.value,
            bytes: m.bytes,
            at: now,
            runner: runner.runnerId
          })
        }
      }
      // within each stream the rows keep the order the attempt staged them in (readers read one stream)
      return {
        rows,
        release: Effect.sync(() => {
          for (const [def, bytes] of streams) runner.streams.release(reg.def.type, def.name, bytes)
        }),
        written: Effect.forEach(streams, ([def]) => runner.streams.written(store, reg.def.type, def, runner.counters), {
          discard: true
        })
      }
    })

  /** Runs `f` on the loaded cache under the owner's lock; `undefined` when the Flow does not exist. */
  const withCache = <A, E>(
    f: (cache: FlowCache) => Effect.Effect<A, E>
  ): Effect.Effect<A | undefined, E | EngineError> =>
    lock.withPermits(1)(Effect.flatMap(current, (l) => (l._tag === "Missing" ? Effect.succeed(undefined) : f(l.cache))))

  const wake = withCache((cache) =>
    Effect.gen(function* () {
      if (cache.flow.status !== "running") return
      const reg = yield* registered(cache.flow.flow_type).pipe(Effect.orDie)
      const tx = new Transition(reg, yield* Clock.currentTimeMillis, cache)
      tx.settle()
      yield* commit(tx, cache)
    })
  )

  // --- requests from other processes ----------------------------------------------------------------

  /**
   * The stored reply of a request, if it committed (one primary-key read): a request sent again after its answer
   * was lost gets it and runs once.
   */
  const replyOf = (requestId: string) => sqlDefect(store.loadReply(flowId, requestId))

  /**
   * A request's commit that was refused (another owner) or failed committed nothing the owner knows of: the
   * client sends the request again, to the Flow's owner then, which answers from the stored reply if the commit
   * did land after all.
   */
  const served = <A>(effect: Effect.Effect<A, EngineError>) =>
    Effect.mapError(effect, (e) => new RequestNotServed({ flowId, reason: e.reason }))

  const Start = (p: StartPayload) =>
    lock.withPermits(1)(
      Effect.gen(function* () {
        const l = yield* fresh
        let replaces = false
        if (l._tag === "Loaded") {
          // the same request again (a redelivery after a crash or a shard move, or a repeat the caller allows)
          if (l.cache.flow.request_id === p.requestId) return l.cache.flow.run_id
          const status = l.cache.flow.status
          const policy = p.idReusePolicy ?? "reject"
          replaces =
            status !== "running" &&
            (policy === "allowIfClosed" || (policy === "allowIfFailed" && status !== "completed"))
          if (!replaces) return yield* new FlowAlreadyStarted({ flowId, runId: l.cache.flow.run_id })
        }
        const reg = yield* registered(p.flowType)
        for (const a of p.initialAttributes) {
          const declared = reg.def.attributes.find((d) => d.name === a.name)
          if (declared === undefined || (declared._tag === "Attribute" && a.key !== "")) {
            return yield* new InvalidInput({
              what: `initial attribute ${a.name}`,
              detail: `Flow ${p.flowType} declares no ${a.key === "" ? "Attribute" : "AttributeMap"} of that name`
            })
          }
          if (a.value !== null && byteLength(a.value) > config.maxValueBytes) {
            return yield* new ValueTooLarge({ name: a.name, bytes: byteLength(a.value), limit: config.maxValueBytes })
          }
        }
        if (byteLength(p.input) > config.maxValueBytes) {
          return yield* new ValueTooLarge({
            name: "flow input",
            bytes: byteLength(p.input),
            limit: config.maxValueBytes
          })
        }
        const now = yield* Clock.currentTimeMillis
        const runId = crypto.randomUUID()
        const flow: FlowRow = {
          flow_id: flowId,
          flow_type: p.flowType,
          run_id: runId,
          status: "running",
          input: p.input,
          output: null,
          outputs: null,
          reason: null,
          error_type: null,
          request_id: p.requestId,
          counters: "{}",
          version: 1,
          started_at: now,
          closed_at: null
        }
        const tx = new Transition(reg, now, { flow, isNew: true })
        tx.replacesRun = replaces
        tx.record("FlowStarted", null, null, { flowType: p.flowType, runId, stepDurability: p.stepDurability })
        const timeoutMs = p.executionTimeoutMs ?? ms(reg.def.executionTimeout?.after)
        if (timeoutMs !== null) tx.setDeadline(now + timeoutMs)
        yield* Effect.orDie(tx.applyWrites(p.initialAttributes, [], []))
        yield* tx.scheduleStep(
          {
            step: reg.def.start.type,
            input: p.input,
            options: JSON.stringify(resolveOptions(reg.def.start.options, undefined))
          },
          null,
          null
        )
        tx.settle()
        loaded = undefined
        yield* served(commit(tx, undefined))
        yield* pausePoint("reply", `Start of Flow ${flowId}`)
        return runId
      })
    )

  const Invoke = (p: InvokePayload) =>
    lock.withPermits(1)(
      Effect.gen(function* () {
        const l = yield* fresh
        if (l._tag === "Missing") return yield* new FlowNotFound({ flowId })
        const cache = l.cache
        const stored = yield* replyOf(p.requestId)
        if (stored !== undefined) return stored
        if (p.idempotencyKey !== undefined) {
          // the key committed with other arguments: another request, not a retry of this one
          const used = yield* sqlDefect(store.loadKeyedRequestIds(flowId, p.idempotencyKey))
          if (used.length > 0) {
            return yield* new IdempotencyKeyReused({ flowId, rpc: p.rpc, requestId: p.idempotencyKey })
          }
        }
        if (cache.flow.status !== "running") return yield* new FlowNotActive({ flowId, status: cache.flow.status })
        const reg = yield* registered(cache.flow.flow_type)
        const rpc = reg.rpcs.get(p.rpc)
        if (rpc === undefined)
          return yield* new DefinitionError({ flowType: reg.def.type, reason: `unknown RPC ${p.rpc}` })
        const wanted = lockNames(rpc.locks)
        if (wanted.length > 0) {
          const held = new Set(
            [...cache.steps.values()]
              .filter((s) => s.status === "running")
              .flatMap((s) => JSON.parse(s.locks) as Array<string>)
          )
          const conflicts = wanted.filter((x) => held.has(x))
          if (conflicts.length > 0) return yield* new RpcLockConflict({ flowId, rpc: p.rpc, locks: conflicts })
        }
        const input = yield* Effect.try({
          try: () => decodeJson(rpc.input, p.input),
          catch: (e) => new InvalidInput({ what: `input of RPC ${p.rpc}`, detail: String(e) })
        })
        const now = yield* Clock.currentTimeMillis
        const tx = new Transition(reg, now, cache)
        const staged = emptyStaged()
        const ctx = makeRpcView(reg.def, cache.state, staged, { flowId, runId: cache.flow.run_id })
        // the handler holds a task slot; RPCs may take the reserve that Steps leave free
        const lease = runner.slots.lease()
        const slot = yield* Effect.timeoutOption(runner.slots.acquire("rpc", lease), dispatchWaitMs).pipe(
          Effect.onInterrupt(() => Effect.sync(lease.free))
        )
        if (slot._tag === "None") {
          lease.free()
          return yield* new RpcFailed({
            flowId,
            rpc: p.rpc,
            errorType: "NoTaskSlot",
            detail: `no task slot of this runner was free within ${dispatchWaitMs} ms`
          })
        }
        const exit = yield* Effect.exit(
          Effect.suspend(() => rpc.handler(ctx, input)).pipe(
            Effect.provideContext(reg.context),
            Effect.ensuring(Effect.sync(lease.free))
          )
        )
        if (Exit.isFailure(exit)) return yield* new RpcFailed({ flowId, rpc: p.rpc, ...errorInfo(exit.cause) })
        const result = exit.value
        const encoded = yield* Effect.try({
          try: () => ({
            output: encodeJson(rpc.output, result.output),
            movements: (result.nextSteps ?? []).map((m) =>
              encodeMovement(m.step, m.input, m.options, config.maxValueBytes)
            )
          }),
          catch: (e) =>
            e instanceof ValueTooLarge
              ? e
              : new RpcFailed({ flowId, rpc: p.rpc, errorType: "EncodeError", detail: String(e) })
        })
        const writes: Array<AttrWrite> = [...staged.attrWrites.values()]
        const tooLarge = oversized(
          { _tag: "Success", writes, publishes: staged.publishes, decision: { _tag: "DeadEnd", cancel: [] } },
          config.maxValueBytes
        )
        if (tooLarge) return yield* tooLarge
        if (wanted.length > 0) {
          const outside = writes.filter((w) => !wanted.includes(w.key === "" ? w.name : `${w.name}[${w.key}]`))
          if (outside.length > 0) {
            return yield* new RpcFailed({
              flowId,
              rpc: p.rpc,
              errorType: "LockViolation",
              detail: `a locking RPC may write only what it locked; it wrote ${outside.map((w) => w.name).join(", ")}`
            })
          }
        }
        yield* tx.applyWrites(writes, staged.publishes, staged.deletes)
        tx.record("RpcCompleted", null, null, { rpc: p.rpc })
        yield* tx.applyDecision(null, {
          _tag: "Next",
          movements: encoded.movements,
          cancel: (result.cancelSteps ?? []).map((s) => s.type)
        })
        tx.settle()
        tx.reply = { requestId: p.requestId, reply: encoded.output, at: now }
        yield* served(commit(tx, cache))
        if (tx.alreadyAnswered) return (yield* replyOf(p.requestId)) ?? encoded.output
        yield* pausePoint("reply", `Invoke ${p.rpc} of Flow ${flowId}`)
        return encoded.output
      })
    )

  const Control = (p: ControlPayload) =>
    lock.withPermits(1)(
      Effect.gen(function* () {
        const l = yield* fresh
        if (l._tag === "Missing") return yield* new FlowNotFound({ flowId })
        const cache = l.cache
        // A request sent again after its answer was lost gets its stored reply. The reply is read only when this
        // request would not commit (each answer below that does not commit); a commit finds it itself, as the
        // conflict of its reply's insert, and writes nothing (`tx.alreadyAnswered`): no read before a commit.
        const unlessAnswered = <E>(answer: Effect.Effect<boolean, E>): Effect.Effect<boolean, E | EngineError> =>
          Effect.flatMap(replyOf(p.requestId), (stored) =>
            stored !== undefined ? Effect.succeed(stored === "true") : answer
          )
        if (cache.flow.status !== "running") {
          return yield* unlessAnswered(new FlowNotActive({ flowId, status: cache.flow.status }))
        }
        const reg = yield* registered(cache.flow.flow_type)
        const now = yield* Clock.currentTimeMillis
        const tx = new Transition(reg, now, cache)
        const c = p.command
        switch (c._tag) {
          case "Stop": {
            const status = c.mode === "cancel" ? "cancelled" : c.mode === "terminate" ? "terminated" : "failed"
            tx.closeFlow(status, null, c.reason)
            break
          }
          case "Publish": {
            if (byteLength(c.value) > config.maxValueBytes) {
              return yield* unlessAnswered(
                new ValueTooLarge({
                  name: c.channel,
                  bytes: byteLength(c.value),
                  limit: config.maxValueBytes
                })
              )
            }
            yield* Effect.orDie(tx.applyWrites([], [c], []))
            tx.record("Published", null, null, { channel: c.channel, key: c.key })
            break
          }
          case "SetAttribute": {
            const declared = reg.def.attributes.find((d) => d.name === c.name)
            if (declared === undefined || (declared._tag === "Attribute") !== (c.key === "")) {
              return yield* unlessAnswered(
                new InvalidInput({
                  what: `attribute ${c.name}`,
                  detail: `Flow ${reg.def.type} declares no ${c.key === "" ? "Attribute" : "AttributeMap"} of that name`
                })
              )
            }
            if (c.value !== null && byteLength(c.value) > config.maxValueBytes) {
              return yield* unlessAnswered(
                new ValueTooLarge({ name: c.name, bytes: byteLength(c.value), limit: config.maxValueBytes })
              )
            }
            const lockName = c.key === "" ? c.name : `${c.name}[${c.key}]`
            const held = [...cache.steps.values()].some(
              (s) => s.status === "running" && (JSON.parse(s.locks) as Array<string>).includes(lockName)
            )
            if (held) {
              return yield* unlessAnswered(new RpcLockConflict({ flowId, rpc: "setAttribute", locks: [lockName] }))
            }
            yield* Effect.orDie(tx.applyWrites([{ name: c.name, key: c.key, value: c.value }], [], []))
            tx.record("AttributeSet", null, null, { name: c.name, key: c.key, deleted: c.value === null })
            break
          }
          case "SkipTimer": {
            const step = tx.steps.get(c.stepExecutionId)
            if (step === undefined || step.status !== "waiting") return yield* unlessAnswered(Effect.succeed(false))
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
            if (!skipped) return yield* unlessAnswered(Effect.succeed(false))
            tx.setStep({ ...step, wait: JSON.stringify({ ...wait, conditions }) })
            tx.record("TimerSkipped", step.step_execution_id, null, { timer: c.timer })
            break
          }
        }
        tx.settle()
        tx.reply = { requestId: p.requestId, reply: "true", at: now }
        yield* served(commit(tx, cache))
        // served before: a Control request's stored reply is `true` (one that answers `false` commits nothing)
        if (tx.alreadyAnswered) return true
        yield* pausePoint("reply", `Control ${c._tag} of Flow ${flowId}`)
        return true
      })
    )

  // An activation by a redelivered keep-alive (a crash or a shard move) has no request to answer:
  // recover the Flow now instead of at its next request.
  yield* Effect.forkIn(Effect.ignore(lock.withPermits(1)(current)), attemptScope)

  return FlowEntity.of({
    Start: ({ payload }) => surface(Start(payload), "Start"),
    Invoke: ({ payload }) => surface(Invoke(payload), "Invoke"),
    Wake: () => surface(wake.pipe(Effect.asVoid), "Wake"),
    Control: ({ payload }) => surface(Control(payload), "Control")
  })
})

/** The run state of a Flow in bytes: its current attribute values and queued messages. */
const stateBytesOf = (state: FlowState): number => {
  let bytes = 0
  for (const m of state.attrs.values()) for (const v of m.values()) bytes += byteLength(v)
  for (const list of state.channels.values()) {
    if (Array.isArray(list)) for (const msg of list as ReadonlyArray<{ value: string }>) bytes += byteLength(msg.value)
  }
  return bytes
}

/** Whether any of a Flow's Step executions is running. */
const hasRunning = (steps: ReadonlyMap<string, StepRow>): boolean => {
  for (const s of steps.values()) if (s.status === "running") return true
  return false
}

/** No slots claimed by a commit. */
const noClaims: ReadonlyMap<string, Lease> = new Map()

/** Gives back the slots a failed commit claimed for the attempts it would have started. */
const freeClaimed = (claimed: ReadonlyMap<string, Lease>) => {
  for (const lease of claimed.values()) lease.free()
}

/** The Step type of a Step execution ID (`<type>-<n>`). */
const stepTypeOf = (stepExecutionId: string) => stepExecutionId.slice(0, stepExecutionId.lastIndexOf("-"))

/** A defect in a handler would be retried forever with the caller waiting: surface it as an EngineError. */
const surface = <A, E>(effect: Effect.Effect<A, E>, what: string): Effect.Effect<A, E | EngineError> =>
  Effect.catchCause(effect, (cause): Effect.Effect<never, E | EngineError> => {
    if (cause.reasons.every(Cause.isFailReason)) return Effect.failCause(cause)
    const { errorType, detail } = errorInfo(cause)
    return Effect.fail(new EngineError({ reason: `${what}: ${errorType}: ${detail}` }))
  })

/** The Flow entity: one owner per Flow (effect/cluster), idle owners evicted after a minute. */
export const FlowEntityLayer = FlowEntity.toLayer(build, {
  maxIdleTime: "1 minute",
  defectRetryPolicy: Schedule.recurs(5)
})
