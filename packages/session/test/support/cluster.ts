// The cluster engine for session tests: a fresh Postgres database per engine (dropped when the layer's scope
// closes) and a runner on a free port, with the engine tests' own helpers.
import { Engine } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import { freePort } from "../../../engine/test/support/ports.ts"
import { withTestDatabase } from "../../../engine/test/support/postgres.ts"
import type { EngineOptions } from "../support.ts"

export const clusterEngine = (options: EngineOptions) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const url = yield* withTestDatabase
      const runnerPort = yield* Effect.promise(freePort)
      return Engine.layerCluster({
        url,
        runnerPort,
        pollInterval: "50 millis",
        maxConcurrentTasks: options.maxConcurrentTasks ?? 64,
        drainTimeout: "1 second",
        ...(options.maxValueBytes === undefined ? {} : { maxValueBytes: options.maxValueBytes }),
        ...(options.maxFlowStateBytes === undefined ? {} : { maxFlowStateBytes: options.maxFlowStateBytes })
      })
    })
  ).pipe(
    // the runner logs "Listening on ..." at INFO for every test
    Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn"))
  )
