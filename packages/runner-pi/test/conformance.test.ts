// The runner kit's conformance suite for the Pi runner: the spec's matrix, the turn controls and built-in
// tools on both engine layers, and the kill tests (SIGKILL during RunModel, during a single-attempt tool,
// with an approval waiting, with the ASYNC Step durability default) on both engines (a SQLite file, a fresh
// Postgres database).
import { fileURLToPath } from "node:url"
import { embeddedTarget, runnerSuite } from "@durable-agent/runner-kit/Conformance"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"
import { clusterEngine, embeddedEngine } from "../../session/test/support.ts"
import { harness } from "./harness.ts"

runnerSuite(harness, {
  engines: {
    embedded: () => embeddedEngine({ maxConcurrentTasks: 64 }),
    cluster: () => clusterEngine({ maxConcurrentTasks: 64 })
  },
  targets: {
    embedded: embeddedTarget,
    cluster: withTestDatabase
  },
  workerFile: fileURLToPath(new URL("./fixtures/conformance-worker.ts", import.meta.url))
})
