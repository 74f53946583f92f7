// One runner process of the cluster: the agent's worker on the cluster engine, plus liveness, readiness and
// metrics over HTTP. SIGTERM drains it (running model calls finish within DRAIN_TIMEOUT_MS) and it exits 0.
//
//   DATABASE_URL=postgres://... RUNNER_PORT=34431 HEALTH_PORT=9464 node --conditions=@durable-agent/source src/runner.ts
//
// Environment: DATABASE_URL (required), RUNNER_HOST (this runner's address as the others reach it; default
// 127.0.0.1), RUNNER_PORT (default 34431), HEALTH_PORT (default 9464), MAX_CONCURRENT_TASKS (default 32),
// DRAIN_TIMEOUT_MS (default 30000), MODEL_DELAY_MS and MODEL_LOG (see agent.ts).
import { Engine, Health, Worker } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { worker } from "./agent.ts"

const url = process.env.DATABASE_URL
if (url === undefined) {
  process.stderr.write("DATABASE_URL is required (postgres://user:password@host:5432/database)\n")
  process.exit(2)
}

const engine = Engine.layerCluster({
  url,
  runnerHost: process.env.RUNNER_HOST ?? "127.0.0.1",
  runnerPort: Number(process.env.RUNNER_PORT ?? "34431"),
  maxConcurrentTasks: Number(process.env.MAX_CONCURRENT_TASKS ?? "32"),
  drainTimeout: Number(process.env.DRAIN_TIMEOUT_MS ?? "30000")
})

const ready = Layer.effectDiscard(Effect.sync(() => process.stdout.write(`READY ${process.pid}\n`)))

// READY is printed once the worker registered its Flows and the health server listens
Worker.runMain(
  ready.pipe(
    Layer.provideMerge(Layer.mergeAll(worker, Health.layer({ port: Number(process.env.HEALTH_PORT ?? "9464") }))),
    Layer.provideMerge(engine)
  )
)
