/**
 * The engine's two layers, one code path. Dex semantics live in the engine's own SQL tables;
 * `effect/cluster` gives each Flow a single owner, persisted messages with a transactional outbox,
 * delayed delivery and failover; `effect/sql` is the database.
 *
 * - `layerEmbedded`: one process on a SQLite file (no server). The file is locked exclusively, so a
 *   second process on the same file fails at start instead of running work twice.
 * - `layerCluster`: N identical runner processes on one Postgres; killing the runner that owns a
 *   Flow moves it to a survivor.
 *
 * @since 0.1.0
 */
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import { PgClient } from "@effect/sql-pg"
import * as Cause from "effect/Cause"
import { RunnerAddress, type Sharding, SingleRunner } from "effect/cluster"
import * as Digest from "effect/crypto/Digest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type { SqlClient } from "effect/sql"
import { Client } from "./Client.ts"
import { EngineConfig, type EngineConfigShape } from "./EngineConfig.ts"
import { EngineError } from "./Errors.ts"
import * as ClusterRunner from "./internal/cluster.ts"
import { FlowRegistry } from "./internal/registry.ts"
import { clusterRunnerId, postgresShardLease, RunnerState } from "./internal/runner.ts"
import { make as makeStore } from "./internal/store/EngineStore.ts"
import * as NodeSqlite from "./NodeSqliteClient.ts"

/** Everything an engine layer provides: the client, the database, the cluster and the registry. */
export type EngineServices =
  | Client
  | SqlClient.SqlClient
  | Sharding.Sharding
  | FlowRegistry
  | EngineConfig
  | RunnerState

export interface CommonOptions extends Partial<EngineConfigShape> {
  /** How often persisted messages (timers, retries, cross-runner work) are polled; default 250 ms. */
  readonly pollInterval?: Duration.Input | undefined
}

const mapLayerError =
  (f: (error: unknown) => string) =>
  <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, EngineError, R> =>
    Layer.catchCause(layer, (cause) => {
      const error = Cause.squash(cause)
      return Layer.effectDiscard(
        Effect.fail(error instanceof EngineError ? error : new EngineError({ reason: f(error) }))
      ) as unknown as Layer.Layer<A, EngineError>
    })

const withEngine = <E, R>(
  cluster: Layer.Layer<Sharding.Sharding, E, SqlClient.SqlClient | R>,
  sql: Layer.Layer<SqlClient.SqlClient, EngineError>,
  options: CommonOptions,
  runner: Layer.Layer<RunnerState, never, EngineConfig> = RunnerState.layer
): Layer.Layer<EngineServices, EngineError | E, Exclude<R, SqlClient.SqlClient>> => {
  const migrations = Layer.effectDiscard(checkDatabase())
  const engine = Layer.mergeAll(cluster, FlowRegistry.layer).pipe(Layer.provide(migrations))
  return Client.layer.pipe(
    Layer.provideMerge(engine),
    Layer.provideMerge(runner),
    Layer.provideMerge(EngineConfig.layer(options)),
    Layer.provideMerge(sql),
    // the layer's own metrics registry: the engine's, effect/cluster's and the handlers' metrics (see Metrics)
    Layer.provideMerge(Layer.sync(Metric.MetricRegistry, () => new Map()))
  )
}

export interface EmbeddedOptions extends CommonOptions {
  /** The SQLite file (created when missing). `":memory:"` gives a throwaway engine for tests. */
  readonly filename: string
  /** `FULL` (default) survives power loss; `NORMAL` survives a process crash and may lose the last commits on power loss. */
  readonly synchronous?: "FULL" | "NORMAL" | undefined
  /**
   * The SQLite page cache in KiB (`PRAGMA cache_size`); default 65,536 (64 MiB), grown only as pages are read.
   * A positive integer; anything else fails the layer with `EngineError`.
   */
  readonly cacheSizeKiB?: number | undefined
  /**
   * Called with the text of every statement the engine runs on the file, `BEGIN` and `COMMIT` included,
   * before it runs (a statement trace for benchmarks and diagnostics; keep it cheap).
   */
  readonly onStatement?: ((sql: string) => void) | undefined
}

/** The embedded engine: one process, one SQLite file, no server. */
export const layerEmbedded = (options: EmbeddedOptions): Layer.Layer<EngineServices, EngineError> => {
  const sql = NodeSqlite.layer({
    filename: options.filename,
    synchronous: options.synchronous ?? "FULL",
    exclusive: true,
    ...(options.cacheSizeKiB === undefined ? {} : { cacheSizeKiB: options.cacheSizeKiB }),
    ...(options.onStatement === undefined ? {} : { onStatement: options.onStatement })
  }).pipe(mapLayerError((e: any) => e?.message ?? String(e)))
  const cluster = SingleRunner.layer({
    runnerStorage: "memory",
    shardingConfig: {
      entityMessagePollInterval: Duration.fromInputUnsafe(options.pollInterval ?? Duration.millis(250)),
      entityRegistrationTimeout: Duration.seconds(10)
    }
  }).pipe(
    Layer.provide(Digest.layerWebCrypto),
    mapLayerError((e) => `cluster configuration: ${String(e)}`)
  )
  return withEngine(cluster, sql, options)
}

export interface ClusterOptions extends CommonOptions {
  /** The Postgres connection URL shared by every runner. */
  readonly url: string
  /** This runner's address for runner-to-runner traffic (must be reachable by the others). */
  readonly runnerHost?: string | undefined
  readonly runnerPort: number
  /** Shards per group; every runner must use the same number (default 300). */
  readonly shardsPerGroup?: number | undefined
  /**
   * How long a runner's shard lock outlives its last refresh (refreshed every third of it, at most every
   * second); default 2 s. A runner that is paused for longer loses its Flows to a survivor; a killed runner is
   * noticed sooner, when its Postgres sessions close. A fenced transaction checks the lock just before COMMIT,
   * so none commits after another runner took the lock; one left idle (its process paused) for twice the
   * expiration is ended by the server (see the engine README, "Ownership" and "Failover").
   */
  readonly shardLockExpiration?: Duration.Input | undefined
}

/** The default shard lock expiration of a cluster runner. */
export const DEFAULT_SHARD_LOCK_EXPIRATION = Duration.seconds(2)

/** The distributed engine: a runner process of a cluster on Postgres. */
export const layerCluster = (options: ClusterOptions): Layer.Layer<EngineServices, EngineError> => {
  const host = options.runnerHost ?? "127.0.0.1"
  const runnerId = clusterRunnerId(host, options.runnerPort)
  const lockExpiration = Duration.fromInputUnsafe(options.shardLockExpiration ?? DEFAULT_SHARD_LOCK_EXPIRATION)
  // A fenced transaction commits only if no other runner holds the Flow's shard lock at its last statement
  // (the lease check before COMMIT), so a runner paused inside one cannot commit after it lost the Flow. The
  // server's idle limit on these transactions only bounds how long a new owner's claim waits on the owner row
  // a paused transaction holds: twice the lock expiration, so no legitimate transaction of a slow runner is
  // ended (one idle longer than the expiration belongs to a runner stalled past its lock).
  const transactionIdleTimeoutMs = Math.max(1000, 2 * Math.floor(Duration.toMillis(lockExpiration)))
  const sql = PgClient.layer({
    url: Redacted.make(options.url),
    // the lock session is one of these: claims find this runner's shard locks by it
    applicationName: runnerId
  }).pipe(mapLayerError((e: any) => `cannot connect to Postgres: ${e?.message ?? String(e)}`))
  const pollInterval = Duration.fromInputUnsafe(options.pollInterval ?? Duration.millis(250))
  const cluster = ClusterRunner.layerRunner({
    runnerAddress: Option.some(RunnerAddress.make(host, options.runnerPort)),
    entityMessagePollInterval: pollInterval,
    // A dead runner is noticed when its shard locks expire: refreshed every third of the expiration, they
    // expire after 2 s by default (effect/cluster's defaults are 10 s and 35 s). A killed runner is noticed
    // sooner, by the health check (its Postgres sessions closed; see internal/cluster.ts), run as often as the
    // assignments are read. A runner paused longer than the expiration loses its Flows; every write on a
    // Flow's behalf is fenced by the owner's epoch, so a paused runner that resumes commits nothing and stops
    // its fibers at its first refused write.
    shardLockRefreshInterval: Duration.min(Duration.seconds(1), Duration.divideUnsafe(lockExpiration, 3)),
    shardLockExpiration: lockExpiration,
    refreshAssignmentsInterval: Duration.millis(250),
    runnerHealthCheckInterval: Duration.millis(250),
    // A request to an entity of this runner is handed over in memory as it is, not encoded and decoded again
    // first (effect/cluster's default, a check that messages survive the wire): every request and reply of
    // the engine is a Schema value that other runners' tests send over the wire anyway, and the copy is
    // a tenth of a millisecond of a local publish's path (the engine README, "The request path").
    simulateRemoteSerialization: false,
    ...(options.shardsPerGroup ? { shardsPerGroup: options.shardsPerGroup } : {})
  }).pipe(mapLayerError((e) => `cluster runner: ${String(e)}`))
  return withEngine(
    cluster,
    sql,
    options,
    RunnerState.layerWith(runnerId, postgresShardLease(runnerId), transactionIdleTimeoutMs)
  )
}

export interface ClusterClientOptions extends CommonOptions {
  /** The Postgres connection URL shared by every runner. */
  readonly url: string
  /** Shards per group; must match the runners (default 300). */
  readonly shardsPerGroup?: number | undefined
}

/**
 * A client-only member of a cluster: the `Client` (start Flows, RPCs, reads) without running any Flow. Use it
 * in processes that serve users but do no agent work; the runners do the work. Registering a worker on it
 * is not supported.
 */
export const layerClusterClient = (options: ClusterClientOptions): Layer.Layer<EngineServices, EngineError> => {
  const sql = PgClient.layer({ url: Redacted.make(options.url) }).pipe(
    mapLayerError((e: any) => `cannot connect to Postgres: ${e?.message ?? String(e)}`)
  )
  const cluster = NodeClusterSocket.layer({
    clientOnly: true,
    storage: "sql",
    shardingConfig: {
      entityMessagePollInterval: Duration.fromInputUnsafe(options.pollInterval ?? Duration.millis(250)),
      refreshAssignmentsInterval: Duration.seconds(1),
      ...(options.shardsPerGroup ? { shardsPerGroup: options.shardsPerGroup } : {})
    }
  }).pipe(mapLayerError((e) => `cluster client: ${String(e)}`))
  return withEngine(cluster, sql, options)
}

/** Re-exported so applications can read the configured limits. */
export { EngineConfig, FlowRegistry, RunnerState }

/**
 * Creates the engine's tables, or fails with EngineError when they belong to something else or another schema
 * version.
 */
export const checkDatabase = (): Effect.Effect<void, EngineError, SqlClient.SqlClient> =>
  Effect.flatMap(makeStore, (store) => store.migrate)
