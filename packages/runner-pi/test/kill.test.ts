// Kill tests for the Pi runner (matrix cases 3 with a restart, 5, 6 and 9): the worker runs as a child
// process in its own process group (fixtures/pi-worker.ts), is killed with SIGKILL of the group, and a second
// worker process finishes the turn, on the same SQLite file (embedded) or as a new runner on the same Postgres
// database (cluster). Model calls and tool runs are counted in a file the processes append to.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { Inspect } from "@durable-agent/engine"
import { fileLines, spawnNode } from "@durable-agent/engine/testing/ChildProcess"
import { Wire } from "@durable-agent/session"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"
import { APPROVED_WRITE_TURN_STEPS } from "../../session/test/support.ts"

const dir = mkdtempSync(join(tmpdir(), "das-pi-kill-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const worker = fileURLToPath(new URL("./fixtures/pi-worker.ts", import.meta.url))
let n = 0

/** The database of one test: a SQLite file, or a fresh Postgres database for the cluster engine. */
type Database = Effect.Effect<string, unknown, Scope.Scope>
const embedded: Database = Effect.sync(() => join(dir, `kill-${++n}.db`))
const cluster: Database = withTestDatabase

/** A restarted worker first waits for the engine to declare the killed one lost: allow a loaded machine time. */
const RESULT_WAIT_MS = 90_000
const TEST_TIMEOUT = { timeout: 150_000 }

interface Result {
  readonly snapshot: Wire.AgentSnapshot
  readonly steps: ReadonlyArray<Inspect.StepExecution>
}

const lastText = (result: Result) => result.snapshot.messages[result.snapshot.messages.length - 1]!.text
const shape = (result: Result) => result.steps.map((s) => s.stepType)
const attempts = (result: Result, stepType: string) =>
  result.steps.find((s) => s.stepType === stepType)!.attempts.map((a) => a.errorType)

const killSuite = (engineName: string, database: Database) =>
  describe(`Pi runner on the ${engineName} engine: SIGKILL of the worker`, () => {
    const files = () => Effect.map(database, (db) => ({ db, side: join(dir, `side-${++n}.log`) }))
    const start = (db: string, side: string, args: ReadonlyArray<string>, env?: Record<string, string>) =>
      spawnNode(worker, [db, side, ...args], env)

    it.live(
      "5. killed during CallSingleAttemptTool: outcome_unknown, the tool does not run again, the model sees it",
      () =>
        Effect.gen(function* () {
          const { db, side } = yield* files()
          const first = yield* start(db, side, ["start", "k5", "call charge"], { SLOW_TOOL_MS: "600000" })
          yield* first.waitFor("TOOL_STARTED charge")
          yield* first.kill()
          assert.deepStrictEqual(fileLines(side), ["model", "charge"], "the write took effect before the kill")
          const second = yield* start(db, side, ["await", "k5", "1"])
          const result: Result = JSON.parse(yield* second.waitFor("RESULT", RESULT_WAIT_MS))
          assert.deepStrictEqual(shape(result), [
            "StartAgentSession",
            "RunModel",
            "CallSingleAttemptTool",
            "ResumeTurn",
            "RecordToolOutcomeUnknown",
            "RunModel",
            "AwaitUserMessage"
          ])
          assert.deepStrictEqual(attempts(result, "CallSingleAttemptTool"), ["WorkerLost"], "one attempt, lost")
          assert.deepStrictEqual(fileLines(side), ["model", "charge", "model"], "the tool ran once")
          assert.strictEqual(lastText(result), `done: charge=${Wire.OUTCOME_UNKNOWN_TEXT}`)
        }),
      TEST_TIMEOUT
    )

    it.live(
      "9. a session with an ASYNC Step durability default never reruns a single-attempt write",
      () =>
        Effect.gen(function* () {
          const { db, side } = yield* files()
          const first = yield* start(db, side, ["start", "k9", "call charge"], {
            SLOW_TOOL_MS: "600000",
            STEP_DURABILITY: "async"
          })
          yield* first.waitFor("TOOL_STARTED charge")
          yield* first.kill()
          const second = yield* start(db, side, ["await", "k9", "1"])
          const result: Result = JSON.parse(yield* second.waitFor("RESULT", RESULT_WAIT_MS))
          assert.deepStrictEqual(attempts(result, "CallSingleAttemptTool"), ["WorkerLost"])
          assert.deepStrictEqual(
            fileLines(side).filter((l) => l === "charge"),
            ["charge"],
            "the write ran once"
          )
          assert.strictEqual(lastText(result), `done: charge=${Wire.OUTCOME_UNKNOWN_TEXT}`)
        }),
      TEST_TIMEOUT
    )

    it.live(
      "6. killed during RunModel: only that model call runs again",
      () =>
        Effect.gen(function* () {
          const { db, side } = yield* files()
          const first = yield* start(db, side, ["start", "k6", "call read_file"], { MODEL_HANG_CALL: "2" })
          yield* first.waitFor("MODEL_STARTED 2")
          yield* first.kill()
          assert.deepStrictEqual(fileLines(side), ["model", "read_file", "model"])
          const second = yield* start(db, side, ["await", "k6", "1"])
          const result: Result = JSON.parse(yield* second.waitFor("RESULT", RESULT_WAIT_MS))
          assert.deepStrictEqual(
            fileLines(side),
            ["model", "read_file", "model", "model"],
            "one more model call, no tool rerun"
          )
          assert.deepStrictEqual(shape(result), [
            "StartAgentSession",
            "RunModel",
            "CallTool",
            "ResumeTurn",
            "RunModel",
            "AwaitUserMessage"
          ])
          assert.strictEqual(lastText(result), "done: read_file=read_file ran")
          assert.strictEqual(result.snapshot.usage.modelCalls, 2, "usage counts the committed model calls")
        }),
      TEST_TIMEOUT
    )

    it.live(
      "3. an approval waiting beside a READ tool survives a SIGKILL; the write runs once after approval",
      () =>
        Effect.gen(function* () {
          const { db, side } = yield* files()
          const first = yield* start(db, side, ["startwait", "k3", "call send_email read_file"])
          const waiting: Wire.AgentSnapshot = JSON.parse(yield* first.waitFor("WAITING"))
          assert.deepStrictEqual(
            waiting.toolCalls.map((c) => [c.toolCallId, c.status]),
            [
              ["send_email-1", "awaiting_approval"],
              ["read_file-1", "succeeded"]
            ]
          )
          yield* first.kill()
          assert.deepStrictEqual(fileLines(side), ["model", "read_file"], "nothing ran the write while it waited")
          const second = yield* start(db, side, ["resolve", "k3", "send_email-1", "1"])
          assert.strictEqual(yield* second.waitFor("APPROVED"), "true")
          const result: Result = JSON.parse(yield* second.waitFor("RESULT", RESULT_WAIT_MS))
          assert.deepStrictEqual(fileLines(side), ["model", "read_file", "send_email", "model"], "each tool ran once")
          assert.deepStrictEqual(shape(result), APPROVED_WRITE_TURN_STEPS)
          assert.strictEqual(lastText(result), "done: send_email=send_email ran | read_file=read_file ran")
        }),
      TEST_TIMEOUT
    )
  })

killSuite("embedded", embedded)
// the same kills on the cluster engine: the restarted process is a new runner on the same Postgres database
killSuite("cluster", cluster)
