// Liveness, readiness and Prometheus metrics (effect's Metric, with effect/cluster's own) over HTTP, on both
// engine layers.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Client, Flow, FlowStream, Health, Step, StepDecision, Worker } from "../src/index.ts"
import { engines } from "./support/engines.ts"
import { freePort } from "./support/ports.ts"

const Events = FlowStream("events", Schema.String, { capacityBytes: 6000 })
const Chatty = Step({
  type: "Chatty",
  input: Schema.Number,
  execute: (ctx, n) =>
    Effect.gen(function* () {
      // more than the stream holds: it trims its oldest messages
      for (let i = 0; i < 20; i++) yield* ctx.emit(Events, "x".repeat(200))
      return StepDecision.gracefulComplete(n)
    })
})
const Failing = Step({
  type: "Failing",
  input: Schema.Number,
  options: { execute: { retry: { maxAttempts: 1 } } },
  execute: () => Effect.die(new Error("boom"))
})
const Metered = Flow({ type: "Metered", start: Chatty, streams: [Events] })
const Broken = Flow({ type: "Broken", start: Failing })

const get = (port: number, path: string) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`)
    return { status: response.status, type: response.headers.get("content-type"), body: await response.text() }
  })

const sample = (body: string, name: string) => {
  const line = body.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1))
}

for (const engine of engines) {
  describe(`${engine.name} engine: health and metrics over HTTP`, () => {
    it.live(
      "/healthz, /readyz and /metrics in the Prometheus text format",
      () =>
        Effect.gen(function* () {
          const port = yield* Effect.promise(freePort)
          return yield* Effect.gen(function* () {
            const client = yield* Client.Client
            assert.strictEqual((yield* get(port, "/healthz")).status, 200)
            const ready = yield* get(port, "/readyz")
            assert.strictEqual(ready.status, 200)
            yield* client.startFlow(Metered, "m", 1)
            yield* client.startFlow(Broken, "b", 1)
            assert.strictEqual((yield* client.waitForFlow("m", { timeout: "30 seconds" })).status, "completed")
            assert.strictEqual((yield* client.waitForFlow("b", { timeout: "30 seconds" })).status, "failed")
            const metrics = yield* get(port, "/metrics")
            assert.strictEqual(metrics.status, 200)
            assert.include(metrics.type ?? "", "text/plain")
            assert.include(metrics.body, "# TYPE durable_engine_steps_started_total counter")
            assert.strictEqual(sample(metrics.body, 'durable_engine_steps_started_total{step_type="Chatty"}'), 1)
            assert.strictEqual(
              sample(metrics.body, 'durable_engine_steps_failed_total{step_type="Failing",error_type="Defect"}'),
              1
            )
            assert.strictEqual(sample(metrics.body, "durable_engine_task_slots"), 4)
            assert.strictEqual(sample(metrics.body, "durable_engine_task_slots_reserved"), 1)
            assert.strictEqual(sample(metrics.body, "durable_engine_task_slots_in_use"), 0)
            assert.isAbove(sample(metrics.body, "durable_engine_stream_trims_total")!, 0)
            assert.isAbove(sample(metrics.body, "durable_engine_transition_seconds_count")!, 0)
            assert.isAtLeast(sample(metrics.body, "durable_engine_flows_cached")!, 1)
            assert.strictEqual(sample(metrics.body, "durable_engine_draining"), 0)
            // on effect's Metric: attempts by outcome with their latency, stream bytes, effect/cluster's own
            assert.strictEqual(
              sample(metrics.body, 'durable_engine_step_attempts_total{step_type="Chatty",outcome="succeeded"}'),
              1
            )
            assert.strictEqual(
              sample(metrics.body, 'durable_engine_step_attempts_total{step_type="Failing",outcome="failed"}'),
              1
            )
            assert.strictEqual(
              sample(metrics.body, 'durable_engine_step_attempt_seconds_count{step_type="Chatty",outcome="succeeded"}'),
              1
            )
            assert.isAbove(
              sample(metrics.body, 'durable_engine_stream_bytes_total{flow_type="Metered",stream="events"}')!,
              0
            )
            assert.include(metrics.body, "# TYPE durable_engine_transition_seconds histogram")
            assert.strictEqual(sample(metrics.body, 'effect_cluster_entities{type="DexFlow"}'), 2)
          }).pipe(
            Effect.provide(
              Layer.mergeAll(Worker.layer(Metered, Broken), Health.layer({ port, host: "127.0.0.1" })).pipe(
                Layer.provideMerge(engine.layer({ maxConcurrentTasks: 4 }))
              )
            )
          )
        }),
      120_000
    )
  })
}
