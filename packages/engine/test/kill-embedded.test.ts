import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { sideEffects } from "./fixtures/kill-flow.ts"
import { closedFlow, killAt, scratchFiles, spawnWorker } from "./support/child.ts"

const files = scratchFiles("kill")

describe("embedded engine: SIGKILL of the worker process", () => {
  it.live(
    "killed during an attempt that already sent a heartbeat: the attempt fails not_completed, the failure route runs, the handler does not run again",
    () =>
      Effect.gen(function* () {
        const { db, side } = files()
        const first = yield* spawnWorker("embedded", db, "start", "f", "heartbeat", side)
        yield* killAt(first, "RUNNING")
        const second = yield* spawnWorker("embedded", db, "await", "f")
        const closed = yield* closedFlow(second)
        assert.deepStrictEqual(closed.flow.output, { recovered: "WorkerLost", progress: "not_completed" })
        assert.deepStrictEqual(
          closed.steps.map((s) => s.stepType),
          ["Work", "Recover"]
        )
        assert.deepStrictEqual(
          closed.steps[0]!.attempts.map((a) => [a.attempt, a.outcome, a.errorType]),
          [[1, "failure", "WorkerLost"]]
        )
        const runs = sideEffects(side)
        assert.strictEqual(runs.filter((l) => l.startsWith("run ")).length, 1, runs.join("\n"))
        assert.deepStrictEqual(runs.slice(1), ["recover WorkerLost not_completed"])
      })
  )

  it.live(
    "killed after staging stream messages and before its commit: none of them is written; the message written with its heartbeat is, and the recovery's commits with it",
    () =>
      Effect.gen(function* () {
        const { db, side } = files()
        const first = yield* spawnWorker("embedded", db, "start", "f", "staged", side)
        yield* killAt(first, "RUNNING")
        const second = yield* spawnWorker("embedded", db, "await", "f")
        const stream = yield* Effect.map(second.waitFor("STREAM"), (line): Array<string> => JSON.parse(line))
        const closed = yield* closedFlow(second)
        assert.deepStrictEqual(closed.flow.output, { recovered: "WorkerLost", progress: "not_completed" })
        assert.deepStrictEqual(stream, ["started (attempt 1)", "recovered (attempt 1)"])
        assert.strictEqual(sideEffects(side).filter((l) => l.startsWith("run ")).length, 1)
      })
  )

  it.live("killed before the attempt produced any output: the same attempt number runs again", () =>
    Effect.gen(function* () {
      const { db, side } = files()
      const first = yield* spawnWorker("embedded", db, "start", "f", "silent", side)
      yield* killAt(first, "RUNNING")
      const second = yield* spawnWorker("embedded", db, "await", "f")
      const closed = yield* closedFlow(second)
      assert.strictEqual(closed.flow.status, "completed")
      assert.deepStrictEqual(closed.flow.output, { attempt: 1, channel: [] })
      const runs = sideEffects(side)
      assert.strictEqual(runs.length, 2)
      assert.isTrue(
        runs.every((l) => l.includes("attempt 1")),
        runs.join("\n")
      )
      assert.notStrictEqual(
        runs[0]!.split(" pid ")[1],
        runs[1]!.split(" pid ")[1],
        "the runs were in different processes"
      )
    })
  )

  it.live("a waiting Step survives a restart untouched and runs once when its message arrives", () =>
    Effect.gen(function* () {
      const { db, side } = files()
      const first = yield* spawnWorker("embedded", db, "start", "f", "wait", side)
      yield* killAt(first, "STARTED")
      assert.deepStrictEqual(sideEffects(side), [])
      const second = yield* spawnWorker("embedded", db, "publish", "f", "hello")
      const closed = yield* closedFlow(second)
      assert.deepStrictEqual(closed.flow.output, { attempt: 1, channel: ["hello"] })
      assert.strictEqual(sideEffects(side).length, 1)
    })
  )

  it.live("a second process on the same file fails at start instead of running work twice", () =>
    Effect.gen(function* () {
      const { db, side } = files()
      const first = yield* spawnWorker("embedded", db, "start", "f", "wait", side)
      yield* first.waitFor("STARTED")
      const second = yield* spawnWorker("embedded", db, "serve", "x")
      const error = yield* second.waitFor("ERROR")
      assert.include(error, "locked")
      yield* first.kill()
    })
  )
})
