// Lost acks: the worker that owns a session is SIGKILLed after the transition of a keyed send_user_message
// committed and before its caller had the reply; a new process retries with the same requestId and gets the first
// call's result, and the session has exactly one such message and one turn. The worker records the commit (the
// stored reply, read from the database) in the side-effect file before it prints the marker the parent kills on.
//
// Embedded: one worker process on a SQLite file (owner and caller die together; the retry comes from the next
// process on the file). Cluster: the owner stops at the engine's `reply` fault point for send_user_message (its
// transition committed, its answer not sent), so the caller cannot have had the reply when the owner dies; a new
// runner takes the Flow over and a client in it retries.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"
import { fileLines, killAt, spawnSessionWorker, type WorkerResult, workerResult } from "./support/child.ts"

const dir = mkdtempSync(join(tmpdir(), "das-session-ack-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0

/** The checks both engines share, on the retrying worker's result. */
const assertAnsweredOnce = (result: WorkerResult, side: string, key: string) => {
  assert.include(fileLines(side), `committed ${key}`, "the first send committed before the kill")
  assert.include(fileLines(side), `retried ${key} true`, "the retry got the first call's result")
  assert.deepStrictEqual(
    result.snapshot.messages.map((m) => [m.role, m.text]),
    [
      ["user", "hello"],
      ["assistant", "ok"]
    ],
    "one message, answered once"
  )
  assert.strictEqual(result.snapshot.state?.turnCount, 1)
  assert.strictEqual(result.snapshot.queuedMessageCount, 0, "no second message waits")
  const sends = result.history.filter((e) => e.kind === "RpcCompleted" && e.data.rpc === "send_user_message")
  assert.strictEqual(sends.length, 1, "send_user_message committed once")
}

describe("a keyed send_user_message retried after a SIGKILL of the owner between commit and reply", () => {
  it.live("embedded: the next process's retry returns true and queues nothing", () =>
    Effect.gen(function* () {
      const db = join(dir, `ack-${++n}.db`)
      const side = join(dir, `side-${n}.log`)
      const first = yield* spawnSessionWorker({ db, side }, "sendkeyed", "a1", "hello", "key-a1")
      yield* killAt(first, "COMMITTED key-a1")
      assert.include(fileLines(side), "committed key-a1")
      const second = yield* spawnSessionWorker({ db, side }, "chatkeyed", "a1", "hello", "key-a1", "1")
      assert.strictEqual(yield* second.waitFor("SENT"), "true")
      const result = yield* workerResult(second)
      assertAnsweredOnce(result, side, "key-a1")
    })
  )

  it.live("cluster: a new runner's retry returns true; the reply never reached the killed caller", () =>
    Effect.gen(function* () {
      const db = yield* withTestDatabase
      n++
      const side = join(dir, `side-${n}.log`)
      const held = {
        DURABLE_ENGINE_PAUSE_AT: "reply",
        DURABLE_ENGINE_PAUSE_DETAIL: "send_user_message",
        DURABLE_ENGINE_PAUSE_RELEASE: join(dir, `never-${n}`)
      }
      const first = yield* spawnSessionWorker({ db, side, env: held }, "sendkeyed", "c1", "hello", "key-c1")
      yield* killAt(first, "COMMITTED key-c1")
      const lines = fileLines(side)
      assert.include(lines, "committed key-c1")
      assert.isFalse(
        lines.some((l) => l.startsWith("acked")),
        "the caller never had the reply"
      )
      const second = yield* spawnSessionWorker({ db, side }, "chatkeyed", "c1", "hello", "key-c1", "1")
      assert.strictEqual(yield* second.waitFor("SENT", 60_000), "true")
      const result = yield* workerResult(second)
      assertAnsweredOnce(result, side, "key-c1")
    })
  )
})
