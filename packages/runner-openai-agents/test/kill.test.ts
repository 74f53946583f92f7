// Kill tests for the OpenAI Agents runner (matrix cases 3 with a restart, 5, 6 and 9): the worker runs as a
// child process in its own process group and is killed with SIGKILL; a second worker process finishes the
// turn, on the same SQLite file (embedded) or as a new runner on the same Postgres database (cluster). Side
// effects and model calls are counted in a file the processes append to.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { fileLines, spawnNode } from "@durable-agent/engine/testing/ChildProcess"
import { Wire } from "@durable-agent/session"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"

const dir = mkdtempSync(join(tmpdir(), "das-openai-kill-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const worker = fileURLToPath(new URL("./fixtures/openai-worker.ts", import.meta.url))
let n = 0

/** The engine target of one test: a SQLite file, or a fresh Postgres database for the cluster engine. */
type Database = Effect.Effect<string, unknown, Scope.Scope>
const embedded: Database = Effect.sync(() => join(dir, `w-${++n}.db`))
const cluster: Database = withTestDatabase

const start = (target: string, side: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  spawnNode(worker, [target, side, ...args], env)

interface Result {
  readonly snapshot: { readonly messages: ReadonlyArray<{ readonly role: string; readonly text: string | null }> }
  readonly steps: ReadonlyArray<{
    readonly stepType: string
    readonly attempts: ReadonlyArray<{ readonly errorType: string | null }>
  }>
}

const lastText = (result: Result) => result.snapshot.messages[result.snapshot.messages.length - 1]!.text

const killSuite = (engineName: string, database: Database) =>
  describe(`OpenAI Agents runner on the ${engineName}: SIGKILL of the worker`, () => {
    const files = () => Effect.map(database, (target) => ({ target, side: join(dir, `side-${++n}.log`) }))

    it.live(
      "5. killed during CallSingleAttemptTool: outcome_unknown, the tool does not run again, the model sees it",
      () =>
        Effect.gen(function* () {
          const { target, side } = yield* files()
          const first = yield* start(target, side, ["start", "s", "call charge"], { SLOW_TOOL_MS: "600000" })
          yield* first.waitFor("TOOL_STARTED charge")
          assert.deepStrictEqual(fileLines(side), ["model", "charge"], "the write took effect before the kill")
          yield* first.kill()
          const second = yield* start(target, side, ["await", "s", "1"])
          const result: Result = JSON.parse(yield* second.waitFor("RESULT", 60_000))
          assert.deepStrictEqual(fileLines(side), ["model", "charge", "model"], "the tool ran once")
          assert.strictEqual(lastText(result), `done: charge=${Wire.OUTCOME_UNKNOWN_TEXT}`)
          assert.deepStrictEqual(
            result.steps.map((s) => s.stepType),
            [
              "StartAgentSession",
              "RunModel",
              "CallSingleAttemptTool",
              "ResumeTurn",
              "RecordToolOutcomeUnknown",
              "RunModel",
              "AwaitUserMessage"
            ]
          )
          const call = result.steps.find((s) => s.stepType === "CallSingleAttemptTool")!
          assert.deepStrictEqual(
            call.attempts.map((a) => a.errorType),
            ["WorkerLost"],
            "one attempt, lost with its worker"
          )
        })
    )

    it.live("9. a session started with an ASYNC Step durability default never reruns a single-attempt write", () =>
      Effect.gen(function* () {
        const { target, side } = yield* files()
        const first = yield* start(target, side, ["start", "s", "call charge"], {
          SLOW_TOOL_MS: "600000",
          STEP_DURABILITY: "async"
        })
        yield* first.waitFor("TOOL_STARTED charge")
        assert.include(fileLines(side), "charge")
        yield* first.kill()
        const second = yield* start(target, side, ["await", "s", "1"])
        const result: Result = JSON.parse(yield* second.waitFor("RESULT", 60_000))
        assert.deepStrictEqual(
          fileLines(side).filter((l) => l === "charge"),
          ["charge"],
          "the write ran once"
        )
        assert.strictEqual(lastText(result), `done: charge=${Wire.OUTCOME_UNKNOWN_TEXT}`)
      })
    )

    it.live("6. killed during RunModel: only that model call runs again", () =>
      Effect.gen(function* () {
        const { target, side } = yield* files()
        const first = yield* start(target, side, ["start", "s", "call read_file"], { SLOW_MODEL_MS: "600000" })
        yield* first.waitFor("TOOL_STARTED read_file")
        // the second model call (after the tool result) hangs: kill it there
        yield* first.waitFor("MODEL_CALLED 2")
        assert.deepStrictEqual(fileLines(side), ["model", "read_file", "model"])
        yield* first.kill()
        const second = yield* start(target, side, ["await", "s", "1"])
        const result: Result = JSON.parse(yield* second.waitFor("RESULT", 60_000))
        assert.deepStrictEqual(
          fileLines(side),
          ["model", "read_file", "model", "model"],
          "one more model call, no tool rerun"
        )
        assert.deepStrictEqual(
          result.steps.map((s) => s.stepType),
          ["StartAgentSession", "RunModel", "CallTool", "ResumeTurn", "RunModel", "AwaitUserMessage"]
        )
        assert.strictEqual(lastText(result), "done: read_file=read_file ran")
      })
    )

    it.live("3. an approval waiting beside a READ tool survives a restart and the write runs once after approval", () =>
      Effect.gen(function* () {
        const { target, side } = yield* files()
        const first = yield* start(target, side, ["startwait", "s", "call send_email read_file"])
        yield* first.waitFor("WAITING")
        yield* first.kill()
        assert.deepStrictEqual(fileLines(side), ["model", "read_file"], "nothing ran the write while it waited")
        const approver = yield* start(target, side, ["approve", "s", "send_email-1", "1"])
        assert.strictEqual(yield* approver.waitFor("APPROVED", 60_000), "true")
        const result: Result = JSON.parse(yield* approver.waitFor("RESULT", 60_000))
        assert.deepStrictEqual(fileLines(side), ["model", "read_file", "send_email", "model"])
        assert.strictEqual(lastText(result), "done: send_email=send_email ran | read_file=read_file ran")
      })
    )
  })

killSuite("embedded engine", embedded)
killSuite("cluster engine", cluster)
