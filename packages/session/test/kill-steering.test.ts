// Kill tests of steering and cancel_turn: the session worker (test/fixtures/session-worker.ts) runs as a child
// process in its own process group and is killed with SIGKILL of the group while a steer and a cancel race with
// a running tool Step, during FinishTurnCancellation, and during ApplyTurnControl; a new worker process (on the
// same SQLite file, or a new runner on the same Postgres database) finishes. Afterwards every record became
// final exactly once, no non-idempotent tool ran twice, no user message is lost, and a new message gets an
// answer.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"
import { Wire } from "../src/index.ts"
import { fileLines, killAt, spawnSessionWorker, type WorkerResult, workerResult } from "./support/child.ts"

const dir = mkdtempSync(join(tmpdir(), "das-session-kill-steer-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0
type Database = Effect.Effect<string, unknown, Scope.Scope>
const embedded: Database = Effect.sync(() => join(dir, `kill-${++n}.db`))
const files = (database: Database) =>
  Effect.map(database, (db) => {
    n++
    return { db, side: join(dir, `side-${n}.log`) }
  })

/** The events a reader keeps (the highest attempt of each Step execution, one outcome per key). */
const settled = (result: WorkerResult) => Wire.settleEvents(result.events.map((e) => ({ ...e, turnId: null })))

const finished = (result: WorkerResult) =>
  settled(result)
    .filter((e) => e.type === "tool_call_finished")
    .map((e) => [e.payload.toolCallId, e.payload.status])

const count = (result: WorkerResult, type: string) => settled(result).filter((e) => e.type === type).length

/** A final check on every test's session: a new message gets an answer from a third worker. */
const answersNext = (db: string, side: string, sessionId: string, turns: number) =>
  Effect.gen(function* () {
    const third = yield* spawnSessionWorker({ db, side }, "chat", sessionId, "anyone there?", String(turns))
    const result = yield* workerResult(third)
    assert.deepStrictEqual(
      result.snapshot.messages.slice(-2).map((m) => [m.role, m.text]),
      [
        ["user", "anyone there?"],
        ["assistant", "ok"]
      ]
    )
    assert.strictEqual(result.snapshot.state?.status, "waiting_for_user_message")
  })

const killSuite = (engineName: string, database: Database) =>
  describe(`${engineName}: SIGKILL while a turn is steered or cancelled`, () => {
    it.live(
      "killed while a steer and a cancel race with a running tool Step",
      () =>
        Effect.gen(function* () {
          const { db, side } = yield* files(database)
          const first = yield* spawnSessionWorker(
            { db, side, env: { SLOW_TOOL_MS: "600000" } },
            "race",
            "kr",
            "call charge",
            "new direction"
          )
          yield* killAt(first, "CONTROLLED")
          assert.deepStrictEqual(fileLines(side), ["charge", "control steer=true cancel=true"])

          const second = yield* spawnSessionWorker({ db, side }, "await", "kr", "2")
          const result = yield* workerResult(second)
          assert.deepStrictEqual(
            fileLines(side).filter((l) => l === "charge"),
            ["charge"],
            "the single-attempt write did not run again"
          )
          // the started call was never cancelled: the crash left its outcome unknown, recorded once
          assert.deepStrictEqual(finished(result), [["charge-1", "outcome_unknown"]])
          assert.strictEqual(count(result, "turn_cancelled"), 1, "cancelled wins over steered")
          assert.strictEqual(count(result, "turn_steered"), 0)
          const messages = result.snapshot.messages.map((m) => [m.turnId, m.role, m.text])
          assert.deepStrictEqual(
            messages.filter((m) => m[2] === "new direction"),
            [["turn-2", "user", "new direction"]],
            "the steered message started the next turn, once"
          )
          // the cancelled turn keeps its transcript (Stepwise builds it): the call's result, once
          const results = result.snapshot.messages.filter((m) => m.role === "tool" && m.toolCallId === "charge-1")
          assert.deepStrictEqual(
            results.map((m) => [m.turnId, m.toolOutput]),
            [["turn-1", Wire.OUTCOME_UNKNOWN_TEXT]]
          )
          assert.isFalse(messages.some((m) => m[2]?.startsWith(Wire.TURN_CANCELLED_NOTE_HEADER) === true))
          assert.deepStrictEqual(messages.at(-1), ["turn-2", "assistant", "ok"])
          assert.deepStrictEqual(result.snapshot.toolCalls, [])
          assert.deepStrictEqual(result.snapshot.pendingInterrupts, [])
          yield* answersNext(db, side, "kr", 3)
        }),
      120_000
    )

    it.live(
      "killed during FinishTurnCancellation: it runs again and records the waiting call once",
      () =>
        Effect.gen(function* () {
          const { db, side } = yield* files(database)
          const first = yield* spawnSessionWorker(
            { db, side, env: { HANG_IN_STEP: "FinishTurnCancellation" } },
            "cancelwait",
            "kf",
            "call send_email read_file"
          )
          yield* killAt(first, "IN_STEP FinishTurnCancellation")

          const second = yield* spawnSessionWorker({ db, side }, "await", "kf", "1")
          const result = yield* workerResult(second)
          assert.deepStrictEqual(fileLines(side), ["read_file"], "the waiting write never ran")
          assert.deepStrictEqual(finished(result).sort(), [
            ["read_file-1", "succeeded"],
            ["send_email-1", "rejected"]
          ])
          assert.strictEqual(count(result, "turn_cancelled"), 1)
          // the cancelled turn keeps its transcript (Stepwise builds it): one result per call
          const results = result.snapshot.messages.filter((m) => m.role === "tool")
          assert.deepStrictEqual(results.map((m) => [m.toolCallId, m.toolOutput]).sort(), [
            ["read_file-1", "read_file ran"],
            ["send_email-1", Wire.TURN_CANCELLED_REJECTION_MESSAGE]
          ])
          assert.isFalse(
            result.snapshot.messages.some((m) => m.text?.startsWith(Wire.TURN_CANCELLED_NOTE_HEADER) === true)
          )
          const finish = result.steps.filter((s) => s.stepType === "FinishTurnCancellation")
          assert.strictEqual(finish.length, 1)
          assert.strictEqual(finish[0]!.status, "completed")
          yield* answersNext(db, side, "kf", 2)
        }),
      120_000
    )

    it.live(
      "killed during ApplyTurnControl: the steered message starts the next turn exactly once",
      () =>
        Effect.gen(function* () {
          const { db, side } = yield* files(database)
          const first = yield* spawnSessionWorker(
            { db, side, env: { HANG_IN_STEP: "ApplyTurnControl" } },
            "steerwait",
            "ka",
            "call send_email",
            "hello there"
          )
          yield* killAt(first, "IN_STEP ApplyTurnControl")

          const second = yield* spawnSessionWorker({ db, side }, "await", "ka", "2")
          const result = yield* workerResult(second)
          assert.deepStrictEqual(fileLines(side), [], "the abandoned write never ran")
          assert.deepStrictEqual(finished(result), [["send_email-1", "rejected"]])
          assert.strictEqual(count(result, "turn_steered"), 1)
          const messages = result.snapshot.messages.map((m) => [m.turnId, m.role, m.text])
          assert.deepStrictEqual(messages.slice(-2), [
            ["turn-2", "user", "hello there"],
            ["turn-2", "assistant", "ok"]
          ])
          assert.strictEqual(
            messages.filter((m) => m[2] === "hello there").length,
            1,
            "no steered message lost or doubled"
          )
          // the steered turn keeps its transcript (Stepwise builds it): the abandoned call's result, once
          assert.deepStrictEqual(
            result.snapshot.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m.toolOutput]),
            [["send_email-1", Wire.STEERED_REJECTION_MESSAGE]]
          )
          assert.isFalse(messages.some((m) => m[2]?.startsWith(Wire.TURN_STEERED_NOTE_HEADER) === true))
          yield* answersNext(db, side, "ka", 3)
        }),
      120_000
    )
  })

killSuite("embedded engine", embedded)
killSuite("cluster engine", withTestDatabase)
