import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "@effect/vitest"
import { Engine } from "../src/index.ts"
import { conformance } from "../src/testing/Conformance.ts"

const dir = mkdtempSync(join(tmpdir(), "das-conformance-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0

// A fresh SQLite file per test, with a small value limit so size tests stay cheap, and enough task slots for
// the parallel-Step rules (the default is the CPU count).
conformance(
  "embedded (SQLite file)",
  () =>
    Engine.layerEmbedded({
      filename: join(dir, `engine-${++n}.db`),
      maxValueBytes: 64 * 1024,
      maxConcurrentTasks: 32,
      drainTimeout: "1 second"
    }),
  {
    maxValueBytes: 64 * 1024
  }
)
