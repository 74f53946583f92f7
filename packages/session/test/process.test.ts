// The session worker runs in a child process (test/fixtures/session-worker.ts), as kill tests need; here the
// worker is stopped between commands, not killed, and a second process continues the same session.
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { nodeFlags } from "@durable-agent/engine/testing/ChildProcess"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, type Wire } from "../src/index.ts"
import { workerLayer } from "./fixtures/session-worker.ts"
import { APPROVED_WRITE_TURN_STEPS, awaitSnapshot, awaitTurns, stepShape } from "./support.ts"

const fixture = fileURLToPath(new URL("./fixtures/session-worker.ts", import.meta.url))

const runChild = (...args: ReadonlyArray<string>) =>
  Effect.callback<string, Error>((resume) => {
    const child = execFile(
      process.execPath,
      [...nodeFlags, fixture, ...args],
      { timeout: 30_000 },
      (error, stdout, stderr) => {
        if (error) resume(Effect.fail(new Error(`${error.message}\n${stdout}\n${stderr}`)))
        else resume(Effect.succeed(stdout))
      }
    )
    return Effect.sync(() => void child.kill("SIGKILL"))
  })

const result = (stdout: string) => {
  const line = stdout.split("\n").find((l) => l.startsWith("RESULT "))
  assert.isDefined(line, stdout)
  return JSON.parse(line!.slice(7)) as {
    readonly snapshot: { readonly messages: ReadonlyArray<{ readonly text: string | null }> } & Record<string, unknown>
    readonly steps: ReadonlyArray<{ readonly stepType: string }>
  }
}

describe("a worker in a child process", () => {
  it.live("runs a turn, and a second process continues the same session from the database", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "das-session-process-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const db = join(dir, "session.db")
      const side = join(dir, "side-effects.txt")
      const first = result(yield* runChild(db, side, "run", "p-1", "call read_file", "1"))
      assert.deepStrictEqual(
        first.steps.map((s) => s.stepType),
        ["StartAgentSession", "RunModel", "CallTool", "ResumeTurn", "RunModel", "AwaitUserMessage"]
      )
      const snapshot = first.snapshot as unknown as { messages: Wire.AgentSnapshot["messages"] }
      assert.deepStrictEqual(
        snapshot.messages.map((m) => m.text),
        ["call read_file", null, null, "done: read_file ran"]
      )
      assert.strictEqual(readFileSync(side, "utf8"), "read_file\n")
      // a new process on the same database continues the session
      const second = result(yield* runChild(db, side, "chat", "p-1", "hello", "2"))
      assert.deepStrictEqual(
        second.snapshot.messages.map((m) => m.text),
        ["call read_file", null, null, "done: read_file ran", "hello", "ok"]
      )
      assert.strictEqual(readFileSync(side, "utf8"), "read_file\n", "the tool did not run again")
    }).pipe(Effect.scoped)
  )
})

describe("a worker restart", () => {
  it.live("an approval waiting in parallel with a READ call survives a worker restart; the write runs once", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "das-session-restart-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const db = join(dir, "session.db")
      const side = join(dir, "side-effects.txt")
      // the first worker: the READ call runs, the write waits for approval; then the worker stops
      yield* Effect.gen(function* () {
        const client = yield* AgentSessionClient.AgentSessionClient
        yield* client.startSession("r-1", { initialMessage: "call send_email read_file" })
        const waiting = yield* awaitSnapshot(
          "r-1",
          (s) => s.toolCalls.some((c) => c.toolName === "read_file" && c.status === "succeeded"),
          "the READ call"
        )
        assert.deepStrictEqual(
          waiting.pendingInterrupts.map((i) => i.interruptId),
          ["send_email-1"]
        )
      }).pipe(Effect.provide(workerLayer(db, side)), Effect.scoped)
      assert.strictEqual(readFileSync(side, "utf8"), "read_file\n")
      // the second worker on the same database: approve, and the turn finishes
      yield* Effect.gen(function* () {
        const client = yield* AgentSessionClient.AgentSessionClient
        assert.isTrue(yield* client.resolveInterrupt("r-1", { interruptId: "send_email-1", approved: true }))
        const done = yield* awaitTurns("r-1", 1)
        assert.strictEqual(done.messages[done.messages.length - 1]!.text, "done: send_email ran | read_file ran")
        assert.deepStrictEqual(yield* stepShape("r-1"), APPROVED_WRITE_TURN_STEPS)
      }).pipe(Effect.provide(workerLayer(db, side)), Effect.scoped)
      assert.strictEqual(readFileSync(side, "utf8"), "read_file\nsend_email\n", "each tool ran once")
    }).pipe(Effect.scoped)
  )
})
