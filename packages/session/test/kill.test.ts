// Kill tests (spec "Tests", matrix cases 3, 5, 6 and 9): the session worker runs as a child process in its own
// process group (test/fixtures/session-worker.ts), is killed with SIGKILL of the group, and a second worker
// process finishes the turn: on the same SQLite file (embedded), or as a new runner on the same Postgres
// database (cluster). Side effects and model calls are
// counted in files the processes append to; the Step shape comes from the Flow's Step executions and history.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"
import { Wire } from "../src/index.ts"
import { flow } from "./fixtures/session-worker.ts"
import { fileLines, killAt, spawnSessionWorker, type WorkerResult, workerResult } from "./support/child.ts"
import { APPROVED_WRITE_TURN_STEPS } from "./support.ts"

const dir = mkdtempSync(join(tmpdir(), "das-session-kill-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0
/** The database of one test (a SQLite file, or a fresh Postgres database for the cluster engine) and its logs. */
type Database = Effect.Effect<string, unknown, Scope.Scope>
const embedded: Database = Effect.sync(() => join(dir, `kill-${++n}.db`))
const cluster: Database = withTestDatabase
const filesOn = (database: Database) =>
  Effect.map(database, (db) => {
    n++
    return { db, side: join(dir, `side-${n}.log`), models: join(dir, `models-${n}.log`) }
  })

/** One line of the fixture's model log. */
interface ModelCall {
  readonly pid: number
  readonly call: number
  readonly last: string | null
  readonly toolOutputs: ReadonlyArray<string>
}

const modelCalls = (file: string): Array<ModelCall> => fileLines(file).map((l) => JSON.parse(l) as ModelCall)

const attemptsOf = (result: WorkerResult, stepExecutionId: string) =>
  result.steps
    .find((s) => s.stepExecutionId === stepExecutionId)!
    .attempts.map((a) => [a.attempt, a.outcome, a.errorType] as const)

/** How many times each Step execution's attempts were started (AttemptStarted history events). */
const attemptStarts = (result: WorkerResult) => {
  const counts: Record<string, number> = {}
  for (const e of result.history) {
    if (e.kind === "AttemptStarted") counts[e.stepExecutionId!] = (counts[e.stepExecutionId!] ?? 0) + 1
  }
  return counts
}

const toolFinished = (result: WorkerResult) =>
  result.events
    .filter((e) => e.type === "tool_call_finished")
    .map((e) => [e.payload.toolCallId, e.payload.status, e.stepExecutionId])

/** A tool that sleeps this long after its effect: longer than any test, so only the kill ends it. */
const HANG = "600000"

/**
 * Starts session `sessionId` with "call charge" and kills the worker while the write's Step hangs after the write
 * (the worker records the write before it prints the marker, and the side file shows it); returns the killed worker.
 */
const killAfterCharge = (
  { db, side, models }: { readonly db: string; readonly side: string; readonly models: string },
  sessionId: string,
  env: Readonly<Record<string, string>> = {}
) =>
  Effect.gen(function* () {
    const first = yield* spawnSessionWorker(
      { db, side, env: { SLOW_TOOL_MS: HANG, MODEL_LOG: models, ...env } },
      "start",
      sessionId,
      "call charge"
    )
    yield* first.waitFor("TOOL_STARTED charge")
    assert.include(fileLines(side), "charge", "recorded before the marker")
    yield* first.kill()
    return first
  })

const lastText = (result: WorkerResult) => result.snapshot.messages[result.snapshot.messages.length - 1]!.text

const killSuite = (engineName: string, database: Database) =>
  describe(`${engineName}: SIGKILL of the session worker`, () => {
    const files = () => filesOn(database)

    it.live(
      "#5 killed during CallSingleAttemptTool after the tool ran: outcome_unknown, the tool is not run again, and the model sees the unknown outcome",
      () =>
        Effect.gen(function* () {
          const { db, side, models } = yield* files()
          const first = yield* killAfterCharge({ db, side, models }, "k5")
          assert.deepStrictEqual(fileLines(side), ["charge"], "the write took effect before the kill")

          const second = yield* spawnSessionWorker({ db, side, env: { MODEL_LOG: models } }, "await", "k5", "1")
          const result = yield* workerResult(second)
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
          // the attempt heartbeat before the tool ran, so the restarted engine fails it instead of re-running it
          assert.deepStrictEqual(attemptsOf(result, "CallSingleAttemptTool-1"), [[1, "failure", "WorkerLost"]])
          const scheduled = result.history.find(
            (e) => e.kind === "StepScheduled" && e.stepExecutionId === "RecordToolOutcomeUnknown-1"
          )!
          assert.deepStrictEqual(scheduled.data.recovery, { errorType: "WorkerLost", attemptProgress: "not_completed" })
          assert.deepStrictEqual(toolFinished(result), [["charge-1", "outcome_unknown", "RecordToolOutcomeUnknown-1"]])
          assert.deepStrictEqual(fileLines(side), ["charge"], "the tool did not run again")
          // the model's next request carries the unknown outcome
          const calls = modelCalls(models)
          assert.deepStrictEqual(
            calls.map((c) => [c.pid, c.last]),
            [
              [first.pid, "user"],
              [second.pid, "tool"]
            ]
          )
          assert.deepStrictEqual(calls[1]!.toolOutputs, [Wire.OUTCOME_UNKNOWN_TEXT])
          assert.strictEqual(lastText(result), `done: ${Wire.OUTCOME_UNKNOWN_TEXT}`)
          assert.strictEqual(result.snapshot.state?.lastTurnError, null)
        })
    )

    it.live(
      "#6 killed during RunModel before its first heartbeat: the same attempt runs again, and only that model call reruns",
      () =>
        Effect.gen(function* () {
          const { db, side, models } = yield* files()
          const first = yield* spawnSessionWorker(
            { db, side, env: { MODEL_LOG: models, MODEL_HANG_CALL: "2" } },
            "start",
            "k6",
            "call read_file"
          )
          yield* killAt(first, "MODEL_STARTED 2")
          assert.deepStrictEqual(fileLines(side), ["read_file"])
          assert.strictEqual(modelCalls(models).length, 2)

          const second = yield* spawnSessionWorker({ db, side, env: { MODEL_LOG: models } }, "await", "k6", "1")
          const result = yield* workerResult(second)
          assert.deepStrictEqual(
            result.steps.map((s) => s.stepType),
            ["StartAgentSession", "RunModel", "CallTool", "ResumeTurn", "RunModel", "AwaitUserMessage"]
          )
          // no heartbeat (20 s) preceded the kill, so the attempt never produced output: the engine hands the same
          // attempt number out again (history: AttemptStarted twice, the second `redelivered`)
          assert.deepStrictEqual(attemptsOf(result, "RunModel-2"), [[1, "success", null]])
          const reruns = result.history.filter((e) => e.kind === "AttemptStarted" && e.stepExecutionId === "RunModel-2")
          assert.deepStrictEqual(
            reruns.map((e) => [e.attempt, e.data.redelivered ?? false]),
            [
              [1, false],
              [1, true]
            ]
          )
          assert.deepStrictEqual(attemptStarts(result), {
            "StartAgentSession-1": 1,
            "RunModel-1": 1,
            "CallTool-1": 1,
            "ResumeTurn-1": 1,
            "RunModel-2": 2
          })
          // exactly one model call ran again, the second one, and nothing else did
          assert.deepStrictEqual(
            modelCalls(models).map((c) => [c.pid, c.call, c.last, c.toolOutputs]),
            [
              [first.pid, 1, "user", []],
              [first.pid, 2, "tool", ["read_file ran"]],
              [second.pid, 1, "tool", ["read_file ran"]]
            ]
          )
          assert.deepStrictEqual(fileLines(side), ["read_file"], "the READ tool did not run again")
          assert.strictEqual(lastText(result), "done: read_file ran")
          assert.strictEqual(result.snapshot.usage.modelCalls, 2, "usage counts the committed model calls only")
        })
    )

    it.live(
      "#6 killed during RunModel after a heartbeat: attempt 1 fails WorkerLost, attempt 2 makes the one model call again",
      () =>
        Effect.gen(function* () {
          const { db, side, models } = yield* files()
          const first = yield* spawnSessionWorker(
            { db, side, env: { MODEL_LOG: models, MODEL_HANG_CALL: "2", HEARTBEAT_MS: "50" } },
            "start",
            "k6b",
            "call read_file"
          )
          yield* first.waitFor("MODEL_STARTED 2")
          // a few heartbeat intervals, so the attempt has produced output when it dies
          yield* Effect.sleep("1 second")
          yield* first.kill()

          const second = yield* spawnSessionWorker(
            { db, side, env: { MODEL_LOG: models, HEARTBEAT_MS: "50" } },
            "await",
            "k6b",
            "1"
          )
          const result = yield* workerResult(second)
          assert.deepStrictEqual(
            result.steps.map((s) => s.stepType),
            ["StartAgentSession", "RunModel", "CallTool", "ResumeTurn", "RunModel", "AwaitUserMessage"]
          )
          assert.deepStrictEqual(attemptsOf(result, "RunModel-2"), [
            [1, "failure", "WorkerLost"],
            [2, "success", null]
          ])
          assert.deepStrictEqual(attemptStarts(result), {
            "StartAgentSession-1": 1,
            "RunModel-1": 1,
            "CallTool-1": 1,
            "ResumeTurn-1": 1,
            "RunModel-2": 2
          })
          assert.deepStrictEqual(
            result.events.filter((e) => e.stepExecutionId === "RunModel-2").map((e) => [e.type, e.attempt]),
            [
              ["usage_recorded", 2],
              ["turn_completed", 2]
            ],
            "the committed answer is attempt 2's"
          )
          assert.deepStrictEqual(
            modelCalls(models).map((c) => [c.pid, c.last]),
            [
              [first.pid, "user"],
              [first.pid, "tool"],
              [second.pid, "tool"]
            ]
          )
          assert.deepStrictEqual(fileLines(side), ["read_file"])
          assert.strictEqual(lastText(result), "done: read_file ran")
          assert.strictEqual(result.snapshot.state?.lastTurnError, null)
        })
    )

    it.live(
      "#6 killed during RunModel after it streamed text: the attempt fails, the retry has a new attempt number",
      () =>
        Effect.gen(function* () {
          const { db, side, models } = yield* files()
          const first = yield* spawnSessionWorker(
            { db, side, env: { MODEL_LOG: models, MODEL_HANG_CALL: "2", MODEL_HANG_DELTA: "partial answer" } },
            "start",
            "k6d",
            "call read_file"
          )
          yield* killAt(first, "MODEL_STARTED 2")
          const second = yield* spawnSessionWorker({ db, side, env: { MODEL_LOG: models } }, "await", "k6d", "1")
          const result = yield* workerResult(second)
          // the streamed text was output: the lost attempt failed, and attempt 2 answered
          assert.deepStrictEqual(attemptsOf(result, "RunModel-2"), [
            [1, "failure", "WorkerLost"],
            [2, "success", null]
          ])
          const partial = result.events.filter((e) => e.type === "text_delta" && e.stepExecutionId === "RunModel-2")
          assert.deepStrictEqual(
            partial.map((e) => [e.attempt, e.payload.text]),
            [[1, "partial answer"]],
            "the lost attempt's text is told apart by its attempt number"
          )
          assert.deepStrictEqual(fileLines(side), ["read_file"], "the READ tool did not run again")
          assert.strictEqual(lastText(result), "done: read_file ran")
        })
    )

    it.live("#9 a session with an ASYNC Step durability default never reruns a single-attempt write", () =>
      Effect.gen(function* () {
        const { db, side, models } = yield* files()
        yield* killAfterCharge({ db, side, models }, "k9", { STEP_DURABILITY: "async" })
        assert.deepStrictEqual(fileLines(side), ["charge"])

        // the restarted worker finishes turn 1 and runs a second turn that calls the write again
        const second = yield* spawnSessionWorker(
          { db, side, env: { MODEL_LOG: models } },
          "chat",
          "k9",
          "call charge",
          "2"
        )
        const result = yield* workerResult(second)
        const started = result.history.find((e) => e.kind === "FlowStarted")!
        assert.strictEqual(started.data.stepDurability, "async", "the session was started with the ASYNC default")
        for (const step of Object.values(flow.session.steps)) {
          assert.strictEqual(step.options?.execute?.durability, "sync", `${step.type} sets SYNC explicitly`)
        }
        assert.deepStrictEqual(attemptsOf(result, "CallSingleAttemptTool-1"), [[1, "failure", "WorkerLost"]])
        assert.deepStrictEqual(attemptsOf(result, "CallSingleAttemptTool-2"), [[1, "success", null]])
        assert.deepStrictEqual(
          result.history
            .filter((e) => e.kind === "AttemptStarted" && e.stepExecutionId?.startsWith("CallSingleAttemptTool"))
            .map((e) => [e.stepExecutionId, e.attempt]),
          [
            ["CallSingleAttemptTool-1", 1],
            ["CallSingleAttemptTool-2", 1]
          ],
          "each single-attempt Step started exactly once"
        )
        assert.deepStrictEqual(toolFinished(result), [
          ["charge-1", "outcome_unknown", "RecordToolOutcomeUnknown-1"],
          ["charge-2", "succeeded", "CallSingleAttemptTool-2"]
        ])
        assert.deepStrictEqual(fileLines(side), ["charge", "charge"], "one run per call: the killed one was not rerun")
        assert.deepStrictEqual(
          result.snapshot.messages.filter((m) => m.role === "assistant" && m.text !== null).map((m) => m.text),
          [`done: ${Wire.OUTCOME_UNKNOWN_TEXT}`, "done: charge ran"]
        )
      })
    )

    it.live(
      "a worker killed inside RecordToolOutcomeUnknown after it staged tool_call_finished: the killed attempt leaves no event, the attempt that commits writes it once",
      () =>
        Effect.gen(function* () {
          const { db, side, models } = yield* files()
          yield* killAfterCharge({ db, side, models }, "k-rec")
          // the second worker runs RecordToolOutcomeUnknown, which stages tool_call_finished, then hangs in execute:
          // the staged event is never written, and with nothing written before its commit the attempt runs again
          // under the same number
          const second = yield* spawnSessionWorker({ db, side, env: { HANG_AFTER_RECORD: "1" } }, "serve")
          yield* killAt(second, "RECORDED")
          const third = yield* spawnSessionWorker({ db, side, env: { MODEL_LOG: models } }, "await", "k-rec", "1")
          const result = yield* workerResult(third)
          const finished = result.events
            .filter((e) => e.type === "tool_call_finished")
            .map((e) => [e.payload.toolCallId, e.payload.status, e.stepExecutionId, e.attempt])
          assert.deepStrictEqual(finished, [["charge-1", "outcome_unknown", "RecordToolOutcomeUnknown-1", 1]])
          assert.deepStrictEqual(
            Wire.settleEvents(result.events.map((e) => ({ ...e, turnId: null })))
              .filter((e) => e.type === "tool_call_finished")
              .map((e) => [e.stepExecutionId, e.attempt]),
            [["RecordToolOutcomeUnknown-1", 1]]
          )
          const record = result.snapshot.toolCalls.find((c) => c.toolCallId === "charge-1")
          assert.strictEqual(record, undefined, "the turn ended, its records are cleared")
          assert.strictEqual(lastText(result), `done: ${Wire.OUTCOME_UNKNOWN_TEXT}`)
          assert.deepStrictEqual(fileLines(side), ["charge"])
        })
    )

    it.live(
      "#3 an approval waiting in parallel with a READ call survives a SIGKILL; the write runs once after approval",
      () =>
        Effect.gen(function* () {
          const { db, side, models } = yield* files()
          const first = yield* spawnSessionWorker(
            { db, side, env: { MODEL_LOG: models } },
            "startwait",
            "k3",
            "call send_email read_file"
          )
          const waiting: Wire.AgentSnapshot = JSON.parse(yield* first.waitFor("WAITING"))
          assert.deepStrictEqual(
            waiting.toolCalls.map((c) => [c.toolCallId, c.status]),
            [
              ["send_email-1", "awaiting_approval"],
              ["read_file-1", "succeeded"]
            ]
          )
          assert.deepStrictEqual(
            waiting.pendingInterrupts.map((i) => i.interruptId),
            ["send_email-1"]
          )
          yield* first.kill()
          assert.deepStrictEqual(fileLines(side), ["read_file"])

          const second = yield* spawnSessionWorker(
            { db, side, env: { MODEL_LOG: models } },
            "resolve",
            "k3",
            "send_email-1",
            "1"
          )
          const result = yield* workerResult(second)
          assert.deepStrictEqual(
            result.steps.map((s) => s.stepType),
            APPROVED_WRITE_TURN_STEPS
          )
          for (const step of result.steps) {
            assert.isAtMost(step.attempts.length, 1, `${step.stepExecutionId} ran at most once`)
          }
          assert.deepStrictEqual(fileLines(side), ["read_file", "send_email"], "each tool ran once")
          assert.strictEqual(lastText(result), "done: send_email ran | read_file ran")
          assert.deepStrictEqual(
            modelCalls(models).map((c) => [c.pid, c.last]),
            [
              [first.pid, "user"],
              [second.pid, "tool"]
            ]
          )
        })
    )
  })

killSuite("embedded engine", embedded)
// the same kills on the cluster engine: the restarted process is a new runner on the same Postgres database
killSuite("cluster engine", cluster)
