// Readiness during a drain, with a child process on both engine layers: a runner process serves the health
// endpoints; SIGTERM arrives while a slow model call runs (it waits for a release file). /readyz answers 503
// while that call is provably still running, the call finishes once released, and the process exits 0.
// The Flow's next Step was not started by the draining runner; the next runner process finishes the Flow.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { fileLines, spawnNode } from "../src/testing/ChildProcess.ts"
import { releaseFile } from "./fixtures/slots-flow.ts"
import { freePort } from "./support/ports.ts"
import { withTestDatabase } from "./support/postgres.ts"

const workerPath = fileURLToPath(new URL("./fixtures/slots-worker.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "das-readyz-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0
const files = () => {
  n++
  return { db: join(dir, `readyz-${n}.db`), side: join(dir, `side-${n}.log`) }
}
// the drain timeout is far longer than the test needs: the call ends because the test releases it
const env = { MAX_CONCURRENT_TASKS: "2", DRAIN_TIMEOUT_MS: "120000" }

const get = (port: number, path: string) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`)
    return { status: response.status, body: await response.text() }
  })

/** The scenario, given how to start a runner process (args before `<api port> <health port> ...`). */
const scenario = <E, R>(target: Effect.Effect<ReadonlyArray<string>, E, R>, side: string) =>
  Effect.gen(function* () {
    const base = yield* target
    const ports = () => Effect.promise(async () => [String(await freePort()), String(await freePort())])
    const [api, health] = yield* ports()
    const child = yield* spawnNode(workerPath, [...base, api!, health!, side, "1"], env)
    yield* child.waitFor("STARTED", 60_000)
    yield* child.waitFor("MODEL", 60_000)
    const before = yield* get(Number(health), "/readyz")
    assert.strictEqual(before.status, 200, before.body)

    process.kill(child.pid, "SIGTERM")
    const draining = yield* get(Number(health), "/readyz").pipe(
      Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (r) => r.status !== 200 }),
      Effect.timeout("60 seconds")
    )
    assert.strictEqual(draining.status, 503)
    assert.strictEqual(draining.body, "draining\n")
    // the model call is still running: it cannot finish before the release file exists
    const lines = fileLines(side)
    assert.deepStrictEqual(
      lines.map((l) => l.split(" ")[0]),
      ["model"],
      lines.join("\n")
    )
    assert.strictEqual((yield* get(Number(health), "/healthz")).status, 200)

    writeFileSync(releaseFile(side), "go\n")
    assert.strictEqual(yield* Effect.promise(() => child.exited), 0, child.stderr())
    const drained = fileLines(side)
    assert.deepStrictEqual(
      drained.map((l) => l.split(" ")[0]),
      ["model", "model-done"],
      drained.join("\n")
    )

    // the next runner process runs the Flow's next Step (the single-attempt write), once
    const [api2, health2] = yield* ports()
    const next = yield* spawnNode(workerPath, [...base, api2!, health2!, side, "0"], env)
    yield* next.waitFor("STARTED", 60_000)
    const closed = yield* get(Number(api2), "/flow/flow-0")
    assert.strictEqual(closed.status, 200, closed.body)
    assert.strictEqual(JSON.parse(closed.body).flow.status, "completed", closed.body)
    const all = fileLines(side)
    assert.deepStrictEqual(
      all.map((l) => l.split(" ")[0]),
      ["model", "model-done", "write"],
      all.join("\n")
    )
    process.kill(next.pid, "SIGTERM")
    assert.strictEqual(yield* Effect.promise(() => next.exited), 0, next.stderr())
  })

describe("embedded engine: /readyz while a runner drains", () => {
  it.live(
    "SIGTERM during a model call: /readyz answers 503 while it runs, then the runner exits 0",
    () => {
      const { db, side } = files()
      return scenario(Effect.succeed(["embedded", db]), side)
    },
    180_000
  )
})

describe("cluster engine: /readyz while a runner drains", () => {
  it.live(
    "SIGTERM during a model call: /readyz answers 503 while it runs, then the runner exits 0",
    () => {
      const { side } = files()
      return scenario(
        Effect.gen(function* () {
          const url = yield* withTestDatabase
          return ["cluster", url, String(yield* Effect.promise(freePort))]
        }),
        side
      )
    },
    180_000
  )
})
