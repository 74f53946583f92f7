// The cluster runner layer of `layerCluster`: effect/cluster over sockets with its SQL message and runner
// storage (what `NodeClusterSocket.layer({ storage: "sql" })` builds), and one difference, the runner health
// check, which notices a dead runner by its Postgres sessions.
//
// How a runner learns that another one died decides how fast a Flow fails over. effect/cluster drops a runner
// from the shard assignments when its storage heartbeat is older than the shard lock expiration (measured in
// whole seconds), or when the runner health check (a singleton) marks it unhealthy. Its stock check pings the
// runner, five tries 500 ms apart, every minute by default: a killed runner is only noticed by its heartbeat,
// 1.3 to 2 s after the kill with the default 2 s lock, and then its shards move.
//
// A runner's Postgres sessions all carry its identity (`application_name`, see `clusterRunnerId`) and end when
// its process dies: the server sees the sockets close. This check calls a runner alive while one of its
// sessions is open, and otherwise asks the runner itself (one ping, bounded by the lock expiration); it runs
// every `runnerHealthCheckInterval`, on every runner (the stock check runs on one runner, as a singleton, which
// may be the one that died), so a killed runner's shards move within a few hundred milliseconds. A paused runner keeps its sessions and is noticed by its heartbeat, as before (its shard locks stay held by the
// paused lock session until the server ends it after the lock expiration anyway).
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import type { RunnerAddress } from "effect/cluster"
import * as RunnerHealth from "effect/cluster/RunnerHealth"
import * as RunnerStorage from "effect/cluster/RunnerStorage"
import * as Runners from "effect/cluster/Runners"
import * as ShardingConfig from "effect/cluster/ShardingConfig"
import * as SocketRunner from "effect/cluster/SocketRunner"
import * as SqlMessageStorage from "effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "effect/cluster/SqlRunnerStorage"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as RpcSerialization from "effect/rpc/RpcSerialization"
import * as Schedule from "effect/Schedule"
import { make as makeStore } from "./store/EngineStore.ts"

/** The `application_name` prefix of every session of the runner at `address` (see `clusterRunnerId`). */
export const sessionPrefix = (address: { readonly host: string; readonly port: number }) =>
  `${address.host}:${address.port} pid `.slice(0, 63)

/**
 * Runner health from Postgres: alive while a session of the runner is open; with none, alive if it answers
 * one ping within `pingTimeout`.
 */
export const makeSessionHealth = (pingTimeout: Duration.Duration) =>
  Effect.gen(function* () {
    const store = yield* makeStore
    const runners = yield* Runners.Runners
    const ping = (address: RunnerAddress.RunnerAddress) =>
      runners.ping(address).pipe(Effect.timeout(pingTimeout), Effect.isSuccess)
    const isAlive = (address: RunnerAddress.RunnerAddress): Effect.Effect<boolean> =>
      store.runnerSessions(sessionPrefix(address)).pipe(
        Effect.map((n) => n > 0),
        // the database cannot say: the runner itself decides
        Effect.orElseSucceed(() => false),
        Effect.flatMap((open) => (open ? Effect.succeed(true) : ping(address))),
        Effect.withTracerEnabled(false)
      )
    return RunnerHealth.RunnerHealth.of({ isAlive })
  })

/** The runner health layer: session checks, pings over the cluster's own client protocol. */
const layerSessionHealth = (pingTimeout: Duration.Duration) =>
  Layer.effect(RunnerHealth.RunnerHealth, makeSessionHealth(pingTimeout)).pipe(
    Layer.provide(Runners.layerRpc),
    Layer.provide(NodeClusterSocket.layerClientProtocol)
  )

/**
 * Every runner, not only the one running effect/cluster's health check singleton (which may be the runner that
 * died), looks for dead runners as often as `interval` and marks them unhealthy in the runner storage; every
 * runner then drops them from its shard assignments at its next read of the storage. A runner never marks
 * itself, and none is marked while it is the only healthy one.
 */
const layerDeadRunnerWatch = (self: RunnerAddress.RunnerAddress, interval: Duration.Duration) =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const storage = yield* RunnerStorage.RunnerStorage
      const health = yield* RunnerHealth.RunnerHealth
      const once = Effect.gen(function* () {
        const healthy = (yield* storage.getRunners).filter(([, ok]) => ok).map(([r]) => r.address)
        if (healthy.length < 2) return
        for (const address of healthy) {
          if (address.host === self.host && address.port === self.port) continue
          if (yield* health.isAlive(address)) continue
          yield* storage.setRunnerHealth(address, false)
          yield* Effect.logInfo(`runner ${address.host}:${address.port} is gone (no Postgres session, no answer)`)
        }
      })
      yield* once.pipe(
        Effect.catchCause((cause) => Effect.logDebug("dead runner check failed", cause)),
        Effect.repeat(Schedule.spaced(interval)),
        Effect.withTracerEnabled(false),
        Effect.forkScoped
      )
    })
  )

/**
 * A cluster runner on sockets with SQL message and runner storage, as `NodeClusterSocket.layer` builds it, with
 * the session health check, also run by every runner (`layerDeadRunnerWatch`) every
 * `runnerHealthCheckInterval`. `shardingConfig` is merged over the environment's (`ShardingConfig.layerFromEnv`)
 * and must name the runner's address.
 */
export const layerRunner = (
  shardingConfig: Partial<ShardingConfig.ShardingConfig["Service"]> & {
    readonly runnerAddress: Option.Option<RunnerAddress.RunnerAddress>
  }
) => {
  const lockExpiration = Duration.fromInputUnsafe(shardingConfig.shardLockExpiration ?? Duration.seconds(35))
  const interval = Duration.fromInputUnsafe(shardingConfig.runnerHealthCheckInterval ?? Duration.seconds(1))
  const health = layerSessionHealth(lockExpiration)
  const runner = SocketRunner.layer.pipe(
    Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]),
    Layer.provide(health)
  )
  const watch = Option.match(shardingConfig.runnerAddress, {
    onNone: () => Layer.empty,
    onSome: (self) => layerDeadRunnerWatch(self, interval).pipe(Layer.provide(health))
  })
  return Layer.merge(runner, watch).pipe(
    Layer.provideMerge(SqlMessageStorage.layer.pipe(Layer.provide(NodeCrypto.layerDigest))),
    Layer.provide(Layer.orDie(SqlRunnerStorage.layer)),
    Layer.provide(ShardingConfig.layerFromEnv(shardingConfig)),
    Layer.provide(RpcSerialization.layerSchemaBinary({}))
  )
}
