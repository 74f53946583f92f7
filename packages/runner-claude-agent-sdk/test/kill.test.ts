// Kill tests of the Claude Agent SDK runner: a worker process (test/fixtures/kill-worker.ts, the real binary
// against its own scripted server, its own config directory, the transcript in SqlSessionStore) is killed
// with SIGKILL (its process group, so the harness dies with it) and a second worker process on the same
// database, with a config directory that never saw the session, finishes the turn: it can only resume the
// harness session from the store. The ledger of side effects is a file outside the workers.
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

const WORKER = fileURLToPath(new URL("./fixtures/kill-worker.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "das-claude-kill-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0

const RESULT_WAIT_MS = 120_000
const TIMEOUT = { timeout: 240_000 }

interface KillResult {
  readonly snapshot: Wire.AgentSnapshot
  readonly steps: ReadonlyArray<{
    readonly stepType: string
    readonly attempts: ReadonlyArray<{ readonly errorType: string | null; readonly runner: string | null }>
  }>
}

/** Where the workers keep the engine: a SQLite file (embedded) or a fresh Postgres database (cluster). */
const targets: Record<string, Effect.Effect<string, unknown, Scope.Scope>> = {
  embedded: Effect.sync(() => join(dir, `kill-${process.pid}-${++n}.db`)),
  cluster: withTestDatabase
}
const start = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => spawnNode(WORKER, args, env)
const resultOf = (line: string): KillResult => JSON.parse(line) as KillResult
const lastText = (r: KillResult) => r.snapshot.messages[r.snapshot.messages.length - 1]?.text ?? null

for (const [engineName, target] of Object.entries(targets)) {
  const files = () => Effect.map(target, (db) => ({ db, ledger: join(dir, `ledger-${++n}.log`) }))
  describe(`Claude Agent SDK runner on the ${engineName} engine: SIGKILL of the worker, the session resumed by a second worker process`, () => {
    it.live(
      "killed during a deferred write Step (CallSingleAttemptTool): the write ran once, outcome_unknown, the model sees it",
      () =>
        Effect.gen(function* () {
          const { db, ledger } = yield* files()
          const first = yield* start([db, ledger, "start", "s", "call charge"], { SLOW_TOOL_MS: "60000" })
          yield* first.waitFor("TOOL_STARTED charge", 120_000)
          assert.include(fileLines(ledger), "charge", "the ledger has the write before the marker")
          yield* first.kill()
          const second = yield* start([db, ledger, "await", "s", "1"])
          const result = resultOf(yield* second.waitFor("RESULT", RESULT_WAIT_MS))
          assert.deepStrictEqual(
            fileLines(ledger).filter((l) => l === "charge"),
            ["charge"],
            "the write ran at most once"
          )
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
            ["WorkerLost"]
          )
          // the second worker resumed the harness session from the store: its model call saw the deferred
          // call and the recorded outcome
          assert.strictEqual(lastText(result), `done: charge=${Wire.OUTCOME_UNKNOWN_TEXT}`)
        }),
      TIMEOUT
    )

    it.live(
      "killed during the harness's turn (RunModel): the RunModel runs again on the second worker; no tool Step ran",
      () =>
        Effect.gen(function* () {
          const { db, ledger } = yield* files()
          const first = yield* start([db, ledger, "start", "s", "call read_file"], { SLOW_MODEL_MS: "60000" })
          yield* first.waitFor("TOOL_STARTED read_file", 120_000)
          // the model call after the inline read's result hangs: kill the worker there
          yield* Effect.gen(function* () {
            while (fileLines(ledger).length < 3) yield* Effect.sleep("50 millis")
          }).pipe(Effect.timeout("120 seconds"))
          assert.deepStrictEqual(fileLines(ledger), ["model 1", "read_file", "model 1"])
          yield* first.kill()
          const second = yield* start([db, ledger, "await", "s", "1"])
          const result = resultOf(yield* second.waitFor("RESULT", RESULT_WAIT_MS))
          assert.deepStrictEqual(
            result.steps.map((s) => s.stepType),
            ["StartAgentSession", "RunModel", "AwaitUserMessage"]
          )
          // the killed attempt produced no output, so the record keeps the second worker's attempt
          const runModel = result.steps.find((s) => s.stepType === "RunModel")!
          assert.isTrue(runModel.attempts.at(-1)?.runner?.endsWith(` pid ${second.pid}`))
          assert.strictEqual(lastText(result), "done: read_file=read_file ran")
          // what a RunModel retry repeats: the query's model calls and its inline reads (at-least-once); not the
          // prompt: the retry cut the store's transcript back to the committed point (nothing, in this first
          // RunModel), so every model call saw the one user text and the retry's call has the same ID
          const ledgerLines = fileLines(ledger)
          assert.isAtLeast(ledgerLines.filter((l) => l === "read_file").length, 2)
          const models = ledgerLines.filter((l) => l.startsWith("model"))
          assert.isAtLeast(models.length, 4)
          assert.deepStrictEqual([...new Set(models)], ["model 1"], "no model call saw the prompt twice")
          assert.deepStrictEqual(
            result.snapshot.messages.map((m) => [m.role, m.toolCallId]),
            [
              ["user", null],
              ["assistant", "read_file-1"],
              ["tool", "read_file-1"],
              ["assistant", null]
            ]
          )
          assert.deepStrictEqual(result.snapshot.toolCalls, [], "an inline read has no record")
        }),
      TIMEOUT
    )

    it.live(
      "killed with an approval waiting: the second worker approves, the write runs once, the model sees both results",
      () =>
        Effect.gen(function* () {
          const { db, ledger } = yield* files()
          const first = yield* start([db, ledger, "start", "s", "call send_email read_file"])
          const interruptId = yield* first.waitFor("INTERRUPT_PENDING", 120_000)
          assert.strictEqual(interruptId, "send_email-1")
          assert.notInclude(fileLines(ledger), "send_email", "nothing ran the write while it waited")
          yield* first.kill()
          const approver = yield* start([db, ledger, "approve", "s", interruptId, "1"])
          assert.strictEqual(yield* approver.waitFor("APPROVED", RESULT_WAIT_MS), "true")
          const result = resultOf(yield* approver.waitFor("RESULT", RESULT_WAIT_MS))
          assert.deepStrictEqual(
            fileLines(ledger).filter((l) => l === "send_email"),
            ["send_email"],
            "the write ran once, after the approval"
          )
          assert.deepStrictEqual(
            fileLines(ledger).filter((l) => l === "read_file"),
            ["read_file"]
          )
          assert.strictEqual(lastText(result), "done: read_file=read_file ran | send_email=send_email ran")
          assert.isTrue(result.steps.some((s) => s.stepType === "CallSingleAttemptTool"))
        }),
      TIMEOUT
    )
  })
}
