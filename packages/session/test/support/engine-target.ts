// The engine of a worker process by its target: a `postgres://` URL is a cluster runner on a free port of this
// machine; anything else is an embedded SQLite file. Shared by the session worker fixture and the soak's worker.
import { Engine } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { freePort } from "../../../engine/test/support/ports.ts"

/** A runner (cluster) or an embedded engine on `target`, polling every 50 ms, with 64 task slots. */
export const engineFor = (target: string) =>
  target.startsWith("postgres://")
    ? Layer.unwrap(
        Effect.map(Effect.promise(freePort), (runnerPort) =>
          Engine.layerCluster({ url: target, runnerPort, pollInterval: "50 millis", maxConcurrentTasks: 64 })
        )
      )
    : Engine.layerEmbedded({ filename: target, pollInterval: "50 millis", maxConcurrentTasks: 64 })
