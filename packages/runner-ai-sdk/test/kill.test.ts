// Kill tests for the AI SDK runner: the worker runs as a child process in its own process group and is
// killed with SIGKILL; side effects are counted in a file outside the worker.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { fileLines, spawnNode } from "@durable-agent/engine/testing/ChildProcess"
import { Wire } from "@durable-agent/session"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"

const dir = mkdtempSync(join(tmpdir(), "das-aisdk-kill-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const worker = fileURLToPath(new URL("./fixtures/aisdk-worker.ts", import.meta.url))
let n = 0

const lines = fileLines

/** Starts the worker in its own process group; the scope kills it if it still runs. */
const start = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => spawnNode(worker, args, env)

/** Waits until the side-effect file has `count` lines. */
const awaitLines = (file: string, count: number) =>
  Effect.gen(function* () {
    for (let i = 0; i < 600 && lines(file).length < count; i++) yield* Effect.sleep("50 millis")
    return lines(file)
  })

/** A worker records a side effect before it prints the marker the parent kills on: at the marker, the line is there. */
const recordedBeforeMarker = (file: string, line: string) =>
  assert.include(lines(file), line, `the worker printed the marker before it recorded ${line}`)

const files = () => {
  n++
  return { db: join(dir, `w-${n}.db`), side: join(dir, `side-${n}.log`) }
}

interface Result {
  readonly snapshot: { readonly messages: ReadonlyArray<{ readonly role: string; readonly text: string | null }> }
  readonly steps: ReadonlyArray<{
    readonly stepType: string
    readonly attempts: ReadonlyArray<{ readonly errorType: string | null }>
  }>
}

describe("AI SDK runner: SIGKILL of the worker", () => {
  it.live(
    "5. killed during CallSingleAttemptTool: outcome_unknown, the tool does not run again, the model sees it",
    () =>
      Effect.gen(function* () {
        const { db, side } = files()
        const first = yield* start([db, side, "start", "s", "call charge"], { SLOW_TOOL_MS: "60000" })
        yield* first.waitFor("TOOL_STARTED charge")
        recordedBeforeMarker(side, "charge")
        yield* first.kill()
        const second = yield* start([db, side, "await", "s", "1"])
        const result: Result = JSON.parse(yield* second.waitFor("RESULT"))
        assert.deepStrictEqual(
          lines(side).filter((l) => l === "charge"),
          ["charge"],
          "the tool ran once"
        )
        const answer = result.snapshot.messages[result.snapshot.messages.length - 1]!
        assert.strictEqual(answer.text, `done: charge=${Wire.OUTCOME_UNKNOWN_TEXT}`)
        const shape = result.steps.map((s) => s.stepType)
        assert.deepStrictEqual(shape, [
          "StartAgentSession",
          "RunModel",
          "CallSingleAttemptTool",
          "ResumeTurn",
          "RecordToolOutcomeUnknown",
          "RunModel",
          "AwaitUserMessage"
        ])
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
      const { db, side } = files()
      const first = yield* start([db, side, "start", "s", "call charge"], {
        SLOW_TOOL_MS: "60000",
        STEP_DURABILITY: "async"
      })
      yield* first.waitFor("TOOL_STARTED charge")
      recordedBeforeMarker(side, "charge")
      yield* first.kill()
      const second = yield* start([db, side, "await", "s", "1"])
      const result: Result = JSON.parse(yield* second.waitFor("RESULT"))
      assert.deepStrictEqual(
        lines(side).filter((l) => l === "charge"),
        ["charge"],
        "the write ran once"
      )
      assert.strictEqual(
        result.snapshot.messages[result.snapshot.messages.length - 1]!.text,
        `done: charge=${Wire.OUTCOME_UNKNOWN_TEXT}`
      )
    })
  )

  it.live("6. killed during RunModel: only that model call runs again", () =>
    Effect.gen(function* () {
      const { db, side } = files()
      const first = yield* start([db, side, "start", "s", "call read_file"], { SLOW_MODEL_MS: "60000" })
      yield* first.waitFor("TOOL_STARTED read_file")
      recordedBeforeMarker(side, "read_file")
      // the second model call (after the tool result) hangs: kill it there
      assert.deepStrictEqual(yield* awaitLines(side, 3), ["model", "read_file", "model"])
      yield* first.kill()
      const second = yield* start([db, side, "await", "s", "1"])
      const result: Result = JSON.parse(yield* second.waitFor("RESULT"))
      assert.deepStrictEqual(
        lines(side),
        ["model", "read_file", "model", "model"],
        "one more model call, no tool rerun"
      )
      assert.deepStrictEqual(
        result.steps.map((s) => s.stepType),
        ["StartAgentSession", "RunModel", "CallTool", "ResumeTurn", "RunModel", "AwaitUserMessage"]
      )
      assert.strictEqual(
        result.snapshot.messages[result.snapshot.messages.length - 1]!.text,
        "done: read_file=read_file ran"
      )
    })
  )

  it.live("3. an approval waiting beside a READ tool survives a restart and the write runs once after approval", () =>
    Effect.gen(function* () {
      const { db, side } = files()
      const first = yield* start([db, side, "start", "s", "call send_email read_file"])
      yield* first.waitFor("TOOL_STARTED read_file")
      recordedBeforeMarker(side, "read_file")
      yield* Effect.sleep("500 millis")
      yield* first.kill()
      assert.notInclude(lines(side), "send_email", "nothing ran the write while it waited")
      const approver = yield* start([db, side, "approve", "s", "send_email-1", "1"])
      assert.strictEqual(yield* approver.waitFor("APPROVED"), "true")
      const result: Result = JSON.parse(yield* approver.waitFor("RESULT"))
      const runs = lines(side).filter((l) => l !== "model")
      assert.deepStrictEqual(
        runs.filter((l) => l === "send_email"),
        ["send_email"],
        "the write ran once, after the approval"
      )
      // a READ call may run again when a kill lands before its result commits
      assert.isAtLeast(runs.filter((l) => l === "read_file").length, 1)
      assert.strictEqual(
        result.snapshot.messages[result.snapshot.messages.length - 1]!.text,
        "done: send_email=send_email ran | read_file=read_file ran"
      )
    })
  )
})
