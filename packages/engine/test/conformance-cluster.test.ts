import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Engine } from "../src/index.ts"
import { conformance } from "../src/testing/Conformance.ts"
import { freePort } from "./support/ports.ts"
import { withTestDatabase } from "./support/postgres.ts"

// A fresh Postgres database and a runner on a free port per test, with enough task slots for the parallel-Step
// rules (the default is the CPU count).
conformance(
  "cluster (Postgres)",
  () =>
    Layer.unwrap(
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const runnerPort = yield* Effect.promise(freePort)
        return Engine.layerCluster({
          url,
          runnerPort,
          maxValueBytes: 64 * 1024,
          maxConcurrentTasks: 32,
          drainTimeout: "1 second"
        })
      })
    ),
  { maxValueBytes: 64 * 1024 }
)
