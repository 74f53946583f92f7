import { defineConfig } from "vitest/config"
import { projects } from "./vitest.workspace.ts"

export default defineConfig({
  test: {
    projects: projects.map((root) => ({
      test: {
        name: root.split("/").pop() ?? root,
        root,
        include: ["test/**/*.test.ts"],
        testTimeout: 60_000,
        hookTimeout: 60_000
      }
    })),
    passWithNoTests: true,
    // the JSON report lets .ci/run print a plain "N passed, N failed" line
    reporters: ["default", ["json", { outputFile: ".vitest/report.json" }]]
  }
})
