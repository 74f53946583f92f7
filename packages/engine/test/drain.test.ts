// Graceful drain with child processes on both engine layers: SIGTERM to the runner that runs a Step.
// A 2 s model call finishes before the runner exits; a 60 s one is cancelled at the drain timeout, its
// attempt fails WorkerShutdown, and another runner (a second process) runs the retry. The runner exits 0.
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { Inspect } from "../src/index.ts"
import { sideEffects } from "./fixtures/kill-flow.ts"
import { closedFlow, fixtureWorker, scratchFiles, sigterm } from "./support/child.ts"
import { freePort } from "./support/ports.ts"
import { withTestDatabase } from "./support/postgres.ts"

const worker = fixtureWorker("drain-worker.ts", { DRAIN_TIMEOUT_MS: "3000" })
const files = scratchFiles("drain")

/** Starts Flow "f" in `mode` on an embedded runner and sends SIGTERM once its call runs: the runner exits 0. */
const drainEmbedded = (db: string, side: string, mode: string) =>
  Effect.gen(function* () {
    const first = yield* worker.startUntil(["embedded", db, "start", "f", mode, side], "RUNNING")
    const code = yield* sigterm(first)
    assert.strictEqual(code, 0, first.stderr())
    return first
  })

/** The next embedded runner on `db`: it finishes Flow "f" and prints it closed. */
const nextRunner = (db: string) =>
  Effect.gen(function* () {
    const second = yield* worker.spawn(["embedded", db, "await", "f"])
    return { second, closed: yield* closedFlow(second, 60_000) }
  })

describe("embedded engine: graceful drain on SIGTERM", () => {
  it.live(
    "SIGTERM during a 2 s model call: the call finishes and commits, then the runner exits 0",
    () =>
      Effect.gen(function* () {
        const { db, side } = files()
        const first = yield* drainEmbedded(db, side, "short")
        const lines = sideEffects(side)
        assert.deepStrictEqual(
          lines.map((l) => l.split(" ")[0]),
          ["run", "finished"],
          lines.join("\n")
        )
        const { closed } = yield* nextRunner(db)
        assert.strictEqual(closed.flow.status, "completed")
        assert.deepStrictEqual(closed.flow.output, { attempt: 1, pid: first.pid })
        assert.strictEqual(sideEffects(side).length, 2, "nothing ran again")
      }),
    120_000
  )

  it.live(
    "SIGTERM during a 60 s model call: cancelled at the drain timeout, exit 0, the next runner retries it",
    () =>
      Effect.gen(function* () {
        const { db, side } = files()
        const first = yield* drainEmbedded(db, side, "long")
        const { second, closed } = yield* nextRunner(db)
        assert.strictEqual(closed.flow.status, "completed")
        assert.deepStrictEqual(closed.flow.output, { attempt: 2, pid: second.pid })
        const call = closed.steps.find((s) => s.stepType === "Call")!
        assert.deepStrictEqual(
          call.attempts.map((a) => [a.attempt, a.outcome, a.errorType]),
          [
            [1, "failure", "WorkerShutdown"],
            [2, "success", null]
          ]
        )
        const lines = sideEffects(side)
        assert.isFalse(
          lines.some((l) => l.startsWith("finished ") && l.includes(`pid ${first.pid}`)),
          lines.join("\n")
        )
      }),
    120_000
  )

  it.live(
    "SIGTERM during a single-attempt call: cancelled at the drain timeout, its failure route runs on the next runner",
    () =>
      Effect.gen(function* () {
        const { db, side } = files()
        yield* drainEmbedded(db, side, "once")
        const { closed } = yield* nextRunner(db)
        assert.deepStrictEqual(closed.flow.output, { recovered: "WorkerShutdown", progress: "not_completed" })
        const runs = sideEffects(side).filter((l) => l.startsWith("run "))
        assert.strictEqual(runs.length, 1, "the single-attempt call did not run again")
      }),
    120_000
  )
})

describe("cluster engine: graceful drain on SIGTERM", () => {
  const runners = (url: string, side: string, mode: string) =>
    Effect.gen(function* () {
      const ports = [yield* Effect.promise(freePort), yield* Effect.promise(freePort)]
      const a = yield* worker.spawn(["cluster", url, String(ports[0]), "serve"])
      const b = yield* worker.spawn(["cluster", url, String(ports[1]), "serve"])
      yield* a.waitFor("READY", 60_000)
      yield* b.waitFor("READY", 60_000)
      const starter = yield* worker.startUntil(
        ["cluster", url, String(yield* Effect.promise(freePort)), "start", "f", mode, side],
        "STARTED"
      )
      const running = yield* Effect.raceAll([a, b, starter].map((c) => Effect.as(c.waitFor("RUNNING", 60_000), c)))
      return running
    })

  const describeClosed = (url: string) =>
    Inspect.describeFlow("f").pipe(
      Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (d) => d.status !== "running" }),
      Effect.timeout("90 seconds"),
      Effect.provide(PgClient.layer({ url: Redacted.make(url) }))
    )

  it.live(
    "SIGTERM during a 2 s model call: the call finishes and commits, then the runner exits 0",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const { side } = files()
        const running = yield* runners(url, side, "short")
        const code = yield* sigterm(running)
        assert.strictEqual(code, 0, running.stderr())
        const flow = yield* describeClosed(url)
        assert.strictEqual(flow.status, "completed")
        assert.deepStrictEqual(flow.output, { attempt: 1, pid: running.pid })
        const lines = sideEffects(side)
        assert.deepStrictEqual(
          lines.map((l) => l.split(" ")[0]),
          ["run", "finished"],
          lines.join("\n")
        )
      }),
    180_000
  )

  it.live(
    "SIGTERM during a 60 s model call: cancelled at the drain timeout, exit 0, another runner retries it",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const { side } = files()
        const running = yield* runners(url, side, "long")
        const code = yield* sigterm(running)
        assert.strictEqual(code, 0, running.stderr())
        const flow = yield* describeClosed(url)
        assert.strictEqual(flow.status, "completed")
        const output = flow.output as { attempt: number; pid: number }
        assert.strictEqual(output.attempt, 2)
        assert.notStrictEqual(output.pid, running.pid)
        const steps = yield* Inspect.stepExecutions("f").pipe(
          Effect.provide(PgClient.layer({ url: Redacted.make(url) }))
        )
        const call = steps.find((s) => s.stepType === "Call")!
        assert.deepStrictEqual(
          call.attempts.map((a) => [a.attempt, a.outcome, a.errorType]),
          [
            [1, "failure", "WorkerShutdown"],
            [2, "success", null]
          ]
        )
      }),
    180_000
  )
})
