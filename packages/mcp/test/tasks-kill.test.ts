// Kill tests of MCP tasks: the session worker runs as a child process (test/fixtures/mcp-worker.ts) on an
// embedded SQLite file and is killed with SIGKILL of its process group; the next worker process continues on
// the same file. The MCP task server runs in this test process, so it outlives every worker and records each
// tools/call, task and poll before it answers.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { Inspect } from "@durable-agent/engine"
import { spawnNode } from "@durable-agent/engine/testing/ChildProcess"
import type { Wire } from "@durable-agent/session"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { serveTaskServer, type TaskServer } from "./fixtures/task-server.ts"

const worker = fileURLToPath(new URL("./fixtures/mcp-worker.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "das-mcp-kill-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0

interface Result {
  readonly snapshot: Wire.AgentSnapshot
  readonly steps: ReadonlyArray<Inspect.StepExecution>
}

const taskServer = Effect.acquireRelease(Effect.promise(serveTaskServer), (s) => Effect.promise(() => s.close()))

const spawnWorker = (db: string, server: TaskServer, args: ReadonlyArray<string>, env?: Record<string, string>) =>
  spawnNode(worker, [db, server.url, ...args], env)

/** Waits until the server has answered `count` polls. */
const awaitPolls = (server: TaskServer, count: number) =>
  Effect.sync(() => server.polls.length).pipe(
    Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (c) => c >= count }),
    Effect.timeoutOrElse({ duration: "60 seconds", orElse: () => Effect.die(new Error(`no ${count} polls`)) })
  )

const lastText = (result: Result) => result.snapshot.messages[result.snapshot.messages.length - 1]?.text

describe("SIGKILL of a worker with an MCP task", () => {
  it.live("killed after tools/call of a task, before its tool Step commits: the retry returns the same task", () =>
    Effect.gen(function* () {
      const server = yield* taskServer
      const db = join(dir, `kill-${++n}.db`)
      const first = yield* spawnWorker(db, server, ["start", "s1", "call own__job"], { HANG_AFTER_TASK_SAVED: "1" })
      const taskId = yield* first.waitFor("TASK_SAVED")
      // the task exists on the server, and its handle is a durable checkpoint of the tool Step's attempt
      assert.deepStrictEqual(
        server.created.map((t) => t.taskId),
        [taskId]
      )
      yield* first.kill()
      const second = yield* spawnWorker(db, server, ["await", "s1", "1"])
      // the restarted worker polls the same task; the task then finishes
      yield* awaitPolls(server, 1)
      yield* Effect.promise(() => server.finish(taskId, "job finished"))
      const result = JSON.parse(yield* second.waitFor("RESULT", 60_000)) as Result
      assert.strictEqual(lastText(result), "done: job finished")
      // no second tools/call, no second task
      assert.strictEqual(server.calls.length, 1)
      assert.strictEqual(server.created.length, 1)
      assert.deepStrictEqual([...new Set(server.polls)], [taskId])
      const callTool = result.steps.filter((s) => s.stepType === "CallTool")
      assert.strictEqual(callTool.length, 1)
      // the killed attempt failed; the retry returned the task from the checkpoint
      assert.deepStrictEqual(
        callTool[0]!.attempts.map((a) => a.outcome),
        ["failure", "success"]
      )
      assert.isAtLeast(result.steps.filter((s) => s.stepType === "PollToolTask").length, 1)
    }).pipe(Effect.scoped)
  )

  it.live("a task that outlives two worker restarts finishes, polled by the third worker", () =>
    Effect.gen(function* () {
      const server = yield* taskServer
      const db = join(dir, `kill-${++n}.db`)
      const first = yield* spawnWorker(db, server, ["start", "s2", "call own__job"])
      yield* first.waitFor("POLLED pending")
      const taskId = server.created[0]!.taskId
      yield* first.kill()
      const pollsBefore = server.polls.length
      const second = yield* spawnWorker(db, server, ["serve"])
      yield* second.waitFor("POLLED pending", 60_000)
      assert.isAbove(server.polls.length, pollsBefore)
      yield* second.kill()
      yield* Effect.promise(() => server.finish(taskId, "job finished"))
      const third = yield* spawnWorker(db, server, ["await", "s2", "1"])
      const result = JSON.parse(yield* third.waitFor("RESULT", 60_000)) as Result
      assert.strictEqual(lastText(result), "done: job finished")
      assert.strictEqual(server.calls.length, 1)
      assert.strictEqual(server.created.length, 1)
      assert.deepStrictEqual([...new Set(server.polls)], [taskId])
      // one poll by each of the three workers at least, each a PollToolTask Step
      assert.isAtLeast(server.polls.length, 3)
      const callTool = result.steps.filter((s) => s.stepType === "CallTool")
      assert.deepStrictEqual(
        callTool.map((s) => s.attempts.map((a) => a.outcome)),
        [["success"]]
      )
    }).pipe(Effect.scoped)
  )
})
