/**
 * Liveness, readiness and metrics of a runner over HTTP (`effect/http`), in the Prometheus text format.
 *
 * - `GET /healthz`: 200 while the process answers (liveness).
 * - `GET /readyz`: 200 once the worker registered its Flows and while it is not draining; 503 otherwise.
 * - `GET /metrics`: the runner's metrics (names and meanings in the engine README, "Health and metrics").
 *
 * @since 0.1.0
 */
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Effect from "effect/Effect"
import type { HttpServerError } from "effect/http"
import { HttpRouter, HttpServerResponse } from "effect/http"
import * as Layer from "effect/Layer"
import { EngineConfig, type EngineConfigShape } from "./EngineConfig.ts"
import { LATENCY_BUCKETS, RunnerState, type RunnerStateShape } from "./internal/runner.ts"
import { drain } from "./Worker.ts"

/** Where the health server listens. */
export interface HealthOptions {
  /** The TCP port (`0` picks a free one). */
  readonly port: number
  /** The interface; default `0.0.0.0`. */
  readonly host?: string | undefined
}

/** The Prometheus text content type. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

const escapeLabel = (v: string) => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')
const labels = (l: Record<string, string>) => {
  const entries = Object.entries(l)
  return entries.length === 0 ? "" : `{${entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`
}

/** The runner's metrics in the Prometheus text format. */
export const renderMetrics = (runner: RunnerStateShape, config: EngineConfigShape): string => {
  const out: Array<string> = []
  const metric = (
    name: string,
    type: "counter" | "gauge",
    help: string,
    samples: ReadonlyArray<readonly [Record<string, string>, number]>
  ) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    for (const [l, v] of samples) out.push(`${name}${labels(l)} ${v}`)
  }
  const c = runner.counters
  metric("durable_engine_task_slots", "gauge", "Task slots of this runner (maxConcurrentTasks).", [
    [{}, runner.slots.total]
  ])
  metric("durable_engine_task_slots_reserved", "gauge", "Task slots kept for RPC handlers (the RPC reserve).", [
    [{}, runner.slots.reserve]
  ])
  metric("durable_engine_task_slots_in_use", "gauge", "Task slots held by running Step attempts and RPC handlers.", [
    [{}, runner.slots.inUse]
  ])
  metric("durable_engine_task_slot_waiters", "gauge", "Step attempts and RPCs waiting for a task slot.", [
    [{}, runner.slots.waiting]
  ])
  metric(
    "durable_engine_rpc_reserve_declines_total",
    "counter",
    "Step slot requests that found only reserved slots free (Steps need more capacity).",
    [[{}, runner.slots.reserveDeclines]]
  )
  metric(
    "durable_engine_steps_started_total",
    "counter",
    "Step attempts that started running, by Step type.",
    [...c.stepsStarted].map(([type, n]) => [{ step_type: type }, n] as const)
  )
  metric(
    "durable_engine_steps_failed_total",
    "counter",
    "Step attempts that failed, by Step type and error type.",
    [...c.stepsFailed].map(([key, n]) => {
      const [type, error] = key.split("\u0000")
      return [{ step_type: type!, error_type: error! }, n] as const
    })
  )
  metric(
    "durable_engine_attempts_lost_total",
    "counter",
    "Attempts with output that lost their worker (found after a crash or a shard move, or cancelled by a drain).",
    [[{}, c.attemptsLost]]
  )
  metric("durable_engine_stream_trims_total", "counter", "Stream trims (oldest messages removed at 90 % usage).", [
    [{}, c.streamTrims]
  ])
  metric(
    "durable_engine_stream_rejected_writes_total",
    "counter",
    "Stream writes dropped (the stream was full or the message too large).",
    [[{}, c.streamRejectedWrites]]
  )
  metric(
    "durable_engine_stream_write_errors_total",
    "counter",
    "Stream writes dropped by a database error (each is also logged).",
    [[{}, c.streamWriteErrors]]
  )
  metric(
    "durable_engine_fenced_writes_total",
    "counter",
    "Writes refused by the ownership fence (another runner had taken the Flow); each stopped the Flow's fibers here.",
    [[{}, c.fencedWrites]]
  )
  metric(
    "durable_engine_flows_recovered_total",
    "counter",
    "Flows with running Steps and no owner that the recovery sweep woke.",
    [[{}, c.flowsRecovered]]
  )
  metric(
    "durable_engine_run_budget_rejections_total",
    "counter",
    `Step completions refused by the run budget (maxFlowStateBytes = ${config.maxFlowStateBytes}).`,
    [[{}, c.budgetRejections]]
  )
  metric("durable_engine_flows_purged_total", "counter", "Closed Flows purged after their retention.", [
    [{}, c.flowsPurged]
  ])
  metric("durable_engine_flows_cached", "gauge", "Flows whose owner holds their state in this runner's memory.", [
    [{}, c.flowsCached]
  ])
  metric("durable_engine_draining", "gauge", "1 while the runner drains (stops taking Steps), else 0.", [
    [{}, runner.draining() ? 1 : 0]
  ])
  out.push(
    "# HELP durable_engine_transition_seconds Time to write one Flow transition (one SQL transaction).",
    "# TYPE durable_engine_transition_seconds histogram"
  )
  LATENCY_BUCKETS.forEach((le, i) => {
    out.push(`durable_engine_transition_seconds_bucket{le="${le}"} ${c.latencyBuckets[i]}`)
  })
  out.push(
    `durable_engine_transition_seconds_bucket{le="+Inf"} ${c.latencyCount}`,
    `durable_engine_transition_seconds_sum ${c.latencySum}`,
    `durable_engine_transition_seconds_count ${c.latencyCount}`
  )
  return `${out.join("\n")}\n`
}

/** The routes: `/healthz`, `/readyz`, `/metrics`. */
export const routes: Layer.Layer<never, never, HttpRouter.HttpRouter | RunnerState | EngineConfig> = Layer.unwrap(
  Effect.gen(function* () {
    const runner = yield* RunnerState
    const config = yield* EngineConfig
    return Layer.mergeAll(
      HttpRouter.add("GET", "/healthz", HttpServerResponse.text("ok\n")),
      HttpRouter.add(
        "GET",
        "/readyz",
        Effect.sync(() =>
          runner.ready()
            ? HttpServerResponse.text("ready\n")
            : HttpServerResponse.text(runner.draining() ? "draining\n" : "starting\n", { status: 503 })
        )
      ),
      HttpRouter.add(
        "GET",
        "/metrics",
        Effect.sync(() => HttpServerResponse.text(renderMetrics(runner, config), { contentType: CONTENT_TYPE }))
      )
    )
  })
)

/**
 * Serves the routes on `options.port`. Needs the engine's services (give it the engine layer); add it to the
 * runner's layer next to the worker. When its scope closes it drains the runner (see `Worker.drain`) before
 * the server stops, so `/readyz` answers 503 for the whole drain whichever of the two layers closes first.
 */
export const layer = (
  options: HealthOptions
): Layer.Layer<never, HttpServerError.ServeError, RunnerState | EngineConfig> =>
  Layer.effectDiscard(Effect.addFinalizer(() => drain)).pipe(
    Layer.provide(
      HttpRouter.serve(routes, { disableListenLog: true, disableLogger: true }).pipe(
        Layer.provide(NodeHttpServer.layer(createServer, { port: options.port, host: options.host ?? "0.0.0.0" }))
      )
    )
  )
