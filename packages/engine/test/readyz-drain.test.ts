// Readiness during a drain, with a child process on both engine layers: a runner process serves the health
// endpoints; SIGTERM arrives while a slow model call runs (it waits for a release file). /readyz answers 503
// while that call is provably still running, the call finishes once released, and the process exits 0.
// The Flow's next Step was not started by the draining runner; the next runner process finishes the Flow.
import { writeFileSync } from "node:fs"
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { fileLines } from "../src/testing/ChildProcess.ts"
import { releaseFile } from "./fixtures/slots-flow.ts"
import {
  type EngineArgs,
  fixtureWorker,
  httpGet as get,
  onBothEngines,
  scratchFiles,
  sigterm
} from "./support/child.ts"
import { freePort } from "./support/ports.ts"

// the drain timeout is far longer than the test needs: the call ends because the test releases it
const worker = fixtureWorker("slots-worker.ts", { MAX_CONCURRENT_TASKS: "2", DRAIN_TIMEOUT_MS: "120000" })
const files = scratchFiles("readyz")

/** The scenario, given how to start a runner process (args before `<api port> <health port> ...`). */
const scenario = (target: EngineArgs, side: string) =>
  Effect.gen(function* () {
    const base = yield* target
    const ports = () => Effect.promise(async () => [String(await freePort()), String(await freePort())])
    const [api, health] = yield* ports()
    const child = yield* worker.startUntil([...base, api!, health!, side, "1"], "STARTED")
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
    const next = yield* worker.startUntil([...base, api2!, health2!, side, "0"], "STARTED")
    const closed = yield* get(Number(api2), "/flow/flow-0")
    assert.strictEqual(closed.status, 200, closed.body)
    assert.strictEqual(JSON.parse(closed.body).flow.status, "completed", closed.body)
    const all = fileLines(side)
    assert.deepStrictEqual(
      all.map((l) => l.split(" ")[0]),
      ["model", "model-done", "write"],
      all.join("\n")
    )
    assert.strictEqual(yield* sigterm(next), 0, next.stderr())
  })

onBothEngines(
  "/readyz while a runner drains",
  "SIGTERM during a model call: /readyz answers 503 while it runs, then the runner exits 0",
  180_000,
  files,
  scenario
)
