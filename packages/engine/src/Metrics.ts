/**
 * The engine's metrics as effect `Metric`s. Each engine layer keeps them in its own `Metric.MetricRegistry`,
 * which it also gives to effect/cluster (so the cluster's own `effect_cluster_*` gauges land beside them) and
 * to the Flows' handlers (so the session's metrics do too). `Health` serves the registry with effect's
 * `PrometheusMetrics`; an application exports it over OTLP with effect's `OtlpMetrics` layer under the same
 * registry. The names and their meanings are listed in the engine README ("Health and metrics").
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as PrometheusMetrics from "effect/observability/PrometheusMetrics"

/**
 * Histogram buckets of latencies, in seconds.
 *
 * @category constants
 * @since 0.1.0
 */
export const LATENCY_BUCKETS: ReadonlyArray<number> = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60
]

const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })
const gauge = (name: string, description: string) => Metric.gauge(name, { description })
const histogram = (name: string, description: string) =>
  Metric.histogram(name, { description, boundaries: LATENCY_BUCKETS })

/** @category metrics @since 0.1.0 */
export const stepsStarted = counter("durable_engine_steps_started_total", "Step attempts that started running.")
/** @category metrics @since 0.1.0 */
export const stepsFailed = counter(
  "durable_engine_steps_failed_total",
  "Step attempts that failed, by Step type and error type (NoTaskSlot: no slot within the dispatch wait)."
)
/** @category metrics @since 0.1.0 */
export const stepAttempts = counter(
  "durable_engine_step_attempts_total",
  "Step attempts that ended, by Step type and outcome (succeeded, failed, interrupted)."
)
/** @category metrics @since 0.1.0 */
export const stepAttemptSeconds = histogram(
  "durable_engine_step_attempt_seconds",
  "Run time of a Step attempt's user code, by Step type and outcome."
)
/** @category metrics @since 0.1.0 */
export const attemptsLost = counter(
  "durable_engine_attempts_lost_total",
  "Attempts with output that lost their worker (found after a crash or a shard move, or cancelled by a drain)."
)
/** @category metrics @since 0.1.0 */
export const transitionSeconds = histogram(
  "durable_engine_transition_seconds",
  "Time to write one Flow transition (one SQL transaction)."
)
/** @category metrics @since 0.1.0 */
export const budgetRejections = counter(
  "durable_engine_run_budget_rejections_total",
  "Step completions refused by the run budget (maxFlowStateBytes)."
)
/** @category metrics @since 0.1.0 */
export const streamTrims = counter("durable_engine_stream_trims_total", "Stream trims (oldest messages removed).")
/** @category metrics @since 0.1.0 */
export const streamRejectedWrites = counter(
  "durable_engine_stream_rejected_writes_total",
  "Stream writes dropped (the stream was full or the message too large)."
)
/** @category metrics @since 0.1.0 */
export const streamBytes = counter(
  "durable_engine_stream_bytes_total",
  "Bytes of stream messages written, by Flow type and stream."
)
/** @category metrics @since 0.1.0 */
export const flowsPurged = counter("durable_engine_flows_purged_total", "Closed Flows purged after their retention.")

/** @category metrics @since 0.1.0 */
export const streamWriteErrors = counter(
  "durable_engine_stream_write_errors_total",
  "Stream writes dropped by a database error (each also logged)."
)

/** @category metrics @since 0.1.0 */
export const fencedWrites = counter(
  "durable_engine_fenced_writes_total",
  "Writes refused by the ownership fence (the runner had lost the Flow); each stopped the Flow's fibers there."
)

/** @category metrics @since 0.1.0 */
export const flowsRecovered = counter(
  "durable_engine_flows_recovered_total",
  "Flows the recovery sweep woke (running Steps and no live owner)."
)
/** @category metrics @since 0.1.0 */
export const flowsCached = gauge(
  "durable_engine_flows_cached",
  "Flows whose owner holds their state in this runner's memory."
)
/** @category metrics @since 0.1.0 */
export const taskSlots = gauge("durable_engine_task_slots", "Task slots of this runner (maxConcurrentTasks).")
/** @category metrics @since 0.1.0 */
export const taskSlotsReserved = gauge(
  "durable_engine_task_slots_reserved",
  "Task slots kept for RPC handlers (the RPC reserve)."
)
/** @category metrics @since 0.1.0 */
export const taskSlotsInUse = gauge(
  "durable_engine_task_slots_in_use",
  "Task slots held by running Step attempts and RPC handlers."
)
/** @category metrics @since 0.1.0 */
export const taskSlotWaiters = gauge(
  "durable_engine_task_slot_waiters",
  "Step attempts and RPCs waiting for a task slot."
)
/** @category metrics @since 0.1.0 */
export const rpcReserveDeclines = counter(
  "durable_engine_rpc_reserve_declines_total",
  "Step slot requests that found only reserved slots free (Steps need more capacity)."
)
/** @category metrics @since 0.1.0 */
export const draining = gauge("durable_engine_draining", "1 while the runner drains (stops taking Steps), else 0.")
/** @category metrics @since 0.1.0 */
export const rpcSeconds = histogram(
  "durable_engine_rpc_seconds",
  "Time of an RPC call through the Client, by Flow type, RPC and outcome."
)

type Attributes = Readonly<Record<string, string>>

const tagged = new WeakMap<Metric.Metric<any, any>, Map<string, Metric.Metric<any, any>>>()

/**
 * `metric` with `attributes` (`Metric.withAttributes`), cached by metric and attribute values, so a hot path
 * builds each series once instead of on every update.
 *
 * @category recording
 * @since 0.1.0
 */
export const withAttributes = <I, S>(
  metric: Metric.Metric<I, S>,
  attributes: Attributes | undefined
): Metric.Metric<I, S> => {
  if (attributes === undefined) return metric
  let byKey = tagged.get(metric)
  if (byKey === undefined) {
    byKey = new Map()
    tagged.set(metric, byKey)
  }
  const key = JSON.stringify(attributes)
  let found = byKey.get(key) as Metric.Metric<I, S> | undefined
  if (found === undefined) {
    found = Metric.withAttributes(metric, attributes)
    byKey.set(key, found)
  }
  return found
}

/**
 * A registry of one engine layer: where its metrics live.
 *
 * @category models
 * @since 0.1.0
 */
export interface Registry {
  /** A context holding the layer's `Metric.MetricRegistry`. */
  readonly context: Context.Context<never>
}

/**
 * A new, empty registry.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeRegistry = (): Registry => ({
  context: Context.make(Metric.MetricRegistry, new Map()) as Context.Context<never>
})

/**
 * Adds to a counter, sets a gauge or records a histogram sample, synchronously, in `registry`.
 *
 * @category recording
 * @since 0.1.0
 */
export const record = <I>(registry: Registry, metric: Metric.Metric<I, any>, value: I, attributes?: Attributes) =>
  withAttributes(metric, attributes).updateUnsafe(value, registry.context)

/**
 * The current count of a counter series in `registry` (0 when it was never updated).
 *
 * @category reading
 * @since 0.1.0
 */
export const count = (registry: Registry, metric: Metric.Counter<number>, attributes?: Attributes): number =>
  Number(withAttributes(metric, attributes).valueUnsafe(registry.context).count)

/**
 * The metrics of `registry` (the engine's, effect/cluster's and the Flows' own) in the Prometheus text
 * format.
 *
 * @category reading
 * @since 0.1.0
 */
export const prometheus = (registry: Registry): string => PrometheusMetrics.formatUnsafe(registry.context)

const secondsSince = (start: number) => (performance.now() - start) / 1000

/**
 * Times a Step attempt's run and counts it by outcome (`succeeded`, `failed`, `interrupted`) in
 * `durable_engine_step_attempts_total` and `durable_engine_step_attempt_seconds`.
 *
 * @category recording
 * @since 0.1.0
 */
export const measureAttempt =
  (registry: Registry, stepType: string) =>
  <A extends { readonly _tag: string } | undefined, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const start = performance.now()
      return Effect.onExit(self, (exit) =>
        Effect.sync(() => {
          if (Exit.isSuccess(exit) && exit.value === undefined) return
          const outcome = Exit.isSuccess(exit)
            ? exit.value!._tag === "Success"
              ? "succeeded"
              : "failed"
            : Cause.hasInterruptsOnly(exit.cause)
              ? "interrupted"
              : "failed"
          const attributes = { step_type: stepType, outcome }
          record(registry, stepAttempts, 1, attributes)
          record(registry, stepAttemptSeconds, secondsSince(start), attributes)
        })
      )
    })

/**
 * Times an RPC call in `durable_engine_rpc_seconds` by Flow type, RPC and outcome (`ok`, `error`).
 *
 * @category recording
 * @since 0.1.0
 */
export const measureRpc =
  (registry: Registry, flowType: string, rpc: string) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const start = performance.now()
      return Effect.onExit(self, (exit) =>
        Effect.sync(() =>
          record(registry, rpcSeconds, secondsSince(start), {
            flow_type: flowType,
            rpc,
            outcome: Exit.isSuccess(exit) ? "ok" : "error"
          })
        )
      )
    })

/**
 * The registry of the current engine layer, from the context (each engine layer provides its own).
 *
 * @category constructors
 * @since 0.1.0
 */
export const currentRegistry: Effect.Effect<Registry> = Effect.map(Effect.service(Metric.MetricRegistry), (map) => ({
  context: Context.make(Metric.MetricRegistry, map) as Context.Context<never>
}))
