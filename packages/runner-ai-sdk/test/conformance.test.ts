// The runner kit's conformance suite for the AI SDK runner: the spec's matrix, the turn controls and
// built-in tools on both engine layers, and the kill tests.
import { fileURLToPath } from "node:url"
import { runnerSuite } from "@durable-agent/runner-kit/Conformance"
import { clusterEngine, embeddedEngine } from "../../session/test/support.ts"
import { harness } from "./harness.ts"

runnerSuite(harness, {
  engines: {
    embedded: () => embeddedEngine({ maxConcurrentTasks: 64 }),
    cluster: () => clusterEngine({ maxConcurrentTasks: 64 })
  },
  workerFile: fileURLToPath(new URL("./fixtures/conformance-worker.ts", import.meta.url))
})
