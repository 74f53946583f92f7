// Task slots and the RPC reserve with a child process on both engine layers: a runner process with 2 slots
// (one Step slot, one reserved for RPC handlers) runs 5 Flows whose first Step is a slow model call that
// holds its slot until the test creates a release file. The parent invokes an RPC on every Flow through the
// runner's HTTP API while that call provably still runs (for longer than the dispatch wait, which Steps no
// longer fail on), and checks that every single-attempt write ran exactly once per Flow (the child records every
// handler run in a file before it prints anything).
import { writeFileSync } from "node:fs"
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { fileLines } from "../src/testing/ChildProcess.ts"
import { releaseFile, type Status } from "./fixtures/slots-flow.ts"
import {
  type EngineArgs,
  fixtureWorker,
  httpGet as get,
  onBothEngines,
  scratchFiles,
  sigterm
} from "./support/child.ts"
import { freePort } from "./support/ports.ts"

const worker = fixtureWorker("slots-worker.ts", { MAX_CONCURRENT_TASKS: "2", DISPATCH_WAIT_MS: "2000" })
const files = scratchFiles("slots")

interface Closed {
  readonly flow: { readonly status: string; readonly output: { readonly wrote?: boolean; readonly lost?: string } }
  readonly steps: ReadonlyArray<{
    readonly stepType: string
    readonly attempts: ReadonlyArray<{ readonly outcome: string | null; readonly errorType: string | null }>
  }>
}

const ids = ["flow-0", "flow-1", "flow-2", "flow-3", "flow-4"]
const runs = (side: string, kind: string, id: string) => fileLines(side).filter((l) => l.startsWith(`${kind} ${id} `))

/** The scenario, given how to start the runner process (args before `<api port> <health port> ...`). */
const scenario = (target: EngineArgs, side: string) =>
  Effect.gen(function* () {
    const api = yield* Effect.promise(freePort)
    const health = yield* Effect.promise(freePort)
    const args = [...(yield* target), String(api), String(health), side, String(ids.length)]
    const child = yield* worker.startUntil(args, "STARTED")
    // a model call holds the only Step slot (it waits for the release file, which does not exist yet)
    yield* child.waitFor("MODEL", 60_000)

    // RPCs answer on the reserve; keep asking for longer than the dispatch wait (2 s): the model calls that wait
    // for the Step slot consume no attempt meanwhile (the adapters spec, "Known limits")
    const ask = Effect.forEach(ids, (id) =>
      Effect.gen(function* () {
        const r = yield* get(api, `/rpc/${id}`)
        assert.strictEqual(r.status, 200, r.body)
        const status: Status = JSON.parse(r.body)
        assert.strictEqual(status.flowId, id)
        // the slow call runs and holds the Step slot; this handler holds the reserved one
        assert.strictEqual(status.runningSteps, 1)
        assert.strictEqual(status.slotsInUse, 2)
        return status
      })
    )
    const started = Date.now()
    const statuses = yield* ask.pipe(
      Effect.repeat({
        schedule: Schedule.spaced("200 millis"),
        until: (all) => {
          for (const s of all) assert.strictEqual(s.modelNoSlot, 0, "a waiting Step lost no attempt")
          return Date.now() - started > 4_000
        }
      }),
      Effect.timeout("120 seconds")
    )
    // every answer came while the slow call was still running: it has not finished (no release file yet)
    const side1 = fileLines(side)
    assert.strictEqual(side1.filter((l) => l.startsWith("model ")).length, 1, side1.join("\n"))
    assert.isFalse(
      side1.some((l) => l.startsWith("model-done ")),
      side1.join("\n")
    )
    assert.isTrue(
      statuses.every((s) => s.reserveDeclines > 0),
      "Step slot requests that found only the reserve free were counted"
    )

    writeFileSync(releaseFile(side), "go\n")
    const closed: Array<Closed> = []
    for (const id of ids) {
      const r = yield* get(api, `/flow/${id}`)
      assert.strictEqual(r.status, 200, r.body)
      closed.push(JSON.parse(r.body))
    }
    let noSlot = 0
    ids.forEach((id, i) => {
      const c = closed[i]!
      const lines = fileLines(side).join("\n")
      assert.strictEqual(c.flow.status, "completed", `${id}: ${JSON.stringify(c)}`)
      assert.strictEqual(runs(side, "model-done", id).length, 1, lines)
      // every single-attempt write ran exactly once, after its Step waited for a slot
      const writes = runs(side, "write", id)
      assert.strictEqual(c.flow.output.wrote, true, JSON.stringify(c))
      assert.strictEqual(writes.length, 1, lines)
      assert.deepStrictEqual(runs(side, "lost", id), [], lines)
      const model = c.steps.find((s) => s.stepType === "Model")!
      noSlot += model.attempts.filter((a) => a.errorType === "NoTaskSlot").length
      assert.deepStrictEqual(
        model.attempts.map((a) => a.outcome),
        ["success"],
        "one model attempt, which waited for its slot"
      )
    })
    assert.strictEqual(noSlot, 0, "no Step attempt was consumed by the wait for a slot")

    assert.strictEqual(yield* sigterm(child), 0, child.stderr())
  })

onBothEngines(
  "task slots and the RPC reserve in a runner process",
  "2 slots, 5 Flows calling a slow model: RPCs answer while it runs; waiting Steps consume no attempt, each write runs once",
  240_000,
  files,
  scenario
)
