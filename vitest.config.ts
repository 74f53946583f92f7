import { defaultClientConditions, defaultServerConditions } from "vite"
import { defineConfig } from "vitest/config"
import { projects, sourceCondition } from "./vitest.workspace.ts"

// Tests run the packages from their TypeScript sources, never from a build: the `@durable-agent/source`
// export condition (see CONTRIBUTING.md) comes first, for the node (ssr) and the browser (client) resolver.
const resolve = { conditions: [sourceCondition, ...defaultClientConditions] }
const ssr = { resolve: { conditions: [sourceCondition, ...defaultServerConditions] } }

export default defineConfig({
  test: {
    projects: projects.map((root) => ({
      resolve,
      ssr,
      test: {
        name: root.split("/").pop() ?? root,
        root,
        include: ["test/**/*.test.ts"],
        testTimeout: 60_000,
        hookTimeout: 60_000
      }
    })),
    passWithNoTests: true,
    // Most test files wait on child processes, Postgres and timers rather than the CPU: two files at a time
    // (vitest's default on 2 cores is one) halves the suite's wall time, and every test must hold on a
    // machine this busy anyway.
    maxWorkers: 2,
    // the JSON report lets .ci/run print a plain "N passed, N failed" line
    reporters: ["default", ["json", { outputFile: ".vitest/report.json" }]]
  }
})
