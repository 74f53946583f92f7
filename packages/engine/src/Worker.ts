/**
 * A worker: registers Flow definitions (validated first) and runs their Steps and RPCs on the
 * engine it is given. The services the handlers need (`R`) are captured from the layer's context,
 * so applications provide ModelClient, ToolSource and the like at the edge.
 *
 * When the layer's scope closes (or the process gets SIGTERM under {@link runMain}) the worker drains:
 * it starts no new Step attempt, waits up to `drainTimeout` for the running ones, then cancels what is
 * left (see the engine README, "Graceful drain").
 *
 * @since 0.1.0
 */

import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import type { Sharding } from "effect/cluster"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type { SqlClient } from "effect/sql"
import { EngineConfig, millis, rpcReserveOf } from "./EngineConfig.ts"
import type { DefinitionError } from "./Errors.ts"
import type { FlowDef } from "./Flow.ts"
import { GroupCommit } from "./internal/groupCommit.ts"
import { FlowEntityLayer } from "./internal/owner.ts"
import { type FlowRegistry, registerFlows } from "./internal/registry.ts"
import { RunnerState } from "./internal/runner.ts"
import { EngineStore } from "./internal/store/EngineStore.ts"
import { recoverySweep } from "./internal/sweep.ts"

type Services<Flows extends ReadonlyArray<FlowDef<any, any>>> = Flows[number] extends FlowDef<any, infer R> ? R : never

/**
 * Stops the runner taking Step attempts, waits up to `drainTimeout` for the running ones, then cancels
 * the rest. Attempts still waiting for a slot are cancelled at once (they have not run).
 */
export const drain: Effect.Effect<void, never, RunnerState | EngineConfig> = Effect.gen(function* () {
  const runner = yield* RunnerState
  const config = yield* EngineConfig
  if (runner.draining()) return
  runner.startDraining()
  const running = () => [...runner.attempts].filter((a) => a.phase === "running")
  // A runner with nothing running (a command-line program's layer closing) drains silently.
  const count = running().length
  yield* (count === 0 ? Effect.logDebug : Effect.logInfo)(
    `draining: ${count} running Step attempts, drain timeout ${millis(config.drainTimeout)} ms`
  )
  yield* Effect.forEach(
    [...runner.attempts].filter((a) => a.phase === "waiting"),
    (a) => a.cancel,
    { concurrency: "unbounded", discard: true }
  )
  const deadline = (yield* Clock.currentTimeMillis) + millis(config.drainTimeout)
  while (running().length > 0 && (yield* Clock.currentTimeMillis) < deadline) yield* Effect.sleep("50 millis")
  const left = [...runner.attempts]
  if (left.length > 0) yield* Effect.logWarning(`drain timeout: cancelling ${left.length} Step attempts`)
  yield* Effect.forEach(left, (a) => a.cancel, { concurrency: "unbounded", discard: true })
})

/**
 * Registers the Flows and starts their entities. Registration happens before any message is
 * processed, so redelivered work after a restart always finds its definitions. Closing the layer's
 * scope drains the worker first.
 */
export const layer = <const Flows extends ReadonlyArray<FlowDef<any, any>>>(
  ...flows: Flows
): Layer.Layer<
  never,
  DefinitionError,
  Services<Flows> | Sharding.Sharding | SqlClient.SqlClient | FlowRegistry | EngineConfig | RunnerState
> =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const runner = yield* RunnerState
      const config = yield* EngineConfig
      const store = yield* EngineStore
      runner.markReady()
      yield* Effect.addFinalizer(() => drain)
      // closed-Flow retention: purge what is due, in batches, a few times per retention period (at most
      // once a second, at least once a minute); every runner does it, the deletes are idempotent
      const retention = millis(config.closedFlowRetention)
      const every = Math.min(60_000, Math.max(1_000, Math.floor(retention / 4)))
      const purge = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        while (true) {
          const purged = yield* store.purgeClosedFlows(now - retention, 100)
          runner.counters.flowsPurged += purged.length
          if (purged.length < 100) return
        }
      }).pipe(Effect.catchCause((cause) => Effect.logWarning("closed-Flow purge failed; retrying later", cause)))
      yield* purge.pipe(Effect.delay(every), Effect.forever, Effect.forkScoped)
      // a Flow with running Steps and no owner (its keep-alive answered or lost) is woken where its shard is
      yield* Effect.forkScoped(recoverySweep)
    })
  ).pipe(
    Layer.provideMerge(
      FlowEntityLayer.pipe(Layer.provide(Layer.effectDiscard(registerFlows(flows))), Layer.provide(GroupCommit.layer))
    ),
    // one store for the worker: its owners, group commit, purge and sweep
    Layer.provide(EngineStore.layer)
  )

/**
 * A worker layer's own default slot limits: raises the runner's task slots to `maxConcurrentTasks` when the
 * application left `EngineConfig.maxConcurrentTasks` at the engine's default (the CPU count), and its control
 * slots to `maxControlTasks` (when given) when the application left `EngineConfig.maxControlTasks` unset; a
 * limit the application set is left alone. For workers whose Steps mostly wait on the network (agent workers need
 * more than the CPU count; the agent session worker uses it), and whose control Steps are many short decisions of
 * many Flows at once (a control Step holds its slot until its start is recorded). The RPC reserve follows the new
 * task limit unless `rpcReserve` was set. Build it before the worker takes work (provide it to the worker layer).
 */
export const layerDefaultTasks = (
  maxConcurrentTasks: number,
  maxControlTasks?: number
): Layer.Layer<never, never, RunnerState | EngineConfig> =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const runner = yield* RunnerState
      const config = yield* EngineConfig
      if (config.maxConcurrentTasksDefaulted === true && maxConcurrentTasks > runner.slots.total) {
        runner.slots.resize(maxConcurrentTasks, rpcReserveOf({ ...config, maxConcurrentTasks }))
      }
      if (
        maxControlTasks !== undefined &&
        config.maxControlTasks === undefined &&
        maxControlTasks > runner.slots.controlTotal
      ) {
        runner.slots.resizeControl(maxControlTasks)
      }
    })
  )

/**
 * Runs a runner process: launches `layer` (a worker on an engine, plus anything else such as the health
 * server) until SIGTERM or SIGINT, then closes it, which drains the worker and releases its shards, and
 * exits with code 0 (1 when the layer fails).
 */
export const runMain = <E>(layer: Layer.Layer<never, E>): void =>
  NodeRuntime.runMain(Layer.launch(layer), {
    teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1)
  })
