// Both engine layers in this process, with engine options, for tests that run one scenario on each.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Engine } from "../../src/index.ts"
import { freePort } from "./ports.ts"
import { withTestDatabase } from "./postgres.ts"

/** Engine options a test chooses (limits, slots, drain). */
export type TestOptions = Omit<Engine.CommonOptions, "pollInterval">

export interface TestEngine {
  readonly name: "embedded" | "cluster"
  readonly layer: (options: TestOptions) => Layer.Layer<Engine.EngineServices, unknown>
}

/** An embedded engine on a fresh SQLite file in a temporary directory removed afterwards, with its own options. */
export const embeddedLayer = (options: Omit<Engine.EmbeddedOptions, "filename" | "pollInterval">) =>
  Layer.unwrap(
    Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "das-ops-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    ).pipe(
      Effect.map((dir) =>
        Engine.layerEmbedded({ filename: join(dir, "engine.db"), pollInterval: "50 millis", ...options })
      )
    )
  )

/** The embedded engine on a fresh SQLite file in a temporary directory removed afterwards. */
export const embedded: TestEngine = { name: "embedded", layer: embeddedLayer }

/** The cluster engine on a fresh Postgres database with a runner on a free port. */
export const cluster: TestEngine = {
  name: "cluster",
  layer: (options) =>
    Layer.unwrap(
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const runnerPort = yield* Effect.promise(freePort)
        return Engine.layerCluster({ url, runnerPort, pollInterval: "50 millis", ...options })
      })
    )
}

export const engines: ReadonlyArray<TestEngine> = [embedded, cluster]
