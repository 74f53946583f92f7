import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Client, Engine, Flow, Step, StepDecision, Worker } from "../src/index.ts"
import { nodeFlags } from "../src/testing/ChildProcess.ts"
import { freePort } from "./support/ports.ts"

const dir = mkdtempSync(join(tmpdir(), "das-dberr-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const startError = (filename: string) => Effect.flip(Effect.scoped(Layer.build(Engine.layerEmbedded({ filename }))))

const cli = (...args: ReadonlyArray<string>) =>
  Effect.callback<{ code: number; stdout: string; stderr: string }>((resume) => {
    execFile(
      process.execPath,
      [...nodeFlags, fileURLToPath(new URL("../src/bin/durable-engine.ts", import.meta.url)), ...args],
      (error, stdout, stderr) => resume(Effect.succeed({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }))
    )
  })

describe("embedded engine: bad database files", () => {
  it.effect("a file that is not a database fails at start with EngineError", () =>
    Effect.gen(function* () {
      const file = join(dir, "text.db")
      writeFileSync(file, "this is not a database, just some text that is long enough to have a header ".repeat(20))
      const error = yield* startError(file)
      assert.strictEqual(error._tag, "EngineError")
      assert.include(error.message, "not a database")
    })
  )

  it.effect("a SQLite database of another program fails at start and is left unchanged", () =>
    Effect.gen(function* () {
      const file = join(dir, "foreign.db")
      const db = new DatabaseSync(file)
      db.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
      db.close()
      const error = yield* startError(file)
      assert.include(error.message, "not an engine database")
      const check = new DatabaseSync(file)
      const tables = check.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all()
      check.close()
      assert.deepStrictEqual(
        tables.map((t: any) => t.name),
        ["customers"]
      )
    })
  )

  it.effect("an engine database of another schema version fails at start", () =>
    Effect.gen(function* () {
      const file = join(dir, "version.db")
      const db = new DatabaseSync(file)
      db.exec("CREATE TABLE dex_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
      db.exec("INSERT INTO dex_meta VALUES ('engine', 'durable-agent-engine'), ('schema_version', '999')")
      db.close()
      const error = yield* startError(file)
      assert.include(error.message, "schema version 999")
    })
  )

  it.live("the inspection command lists Flows and prints history, and refuses a foreign file", () =>
    Effect.gen(function* () {
      const file = join(dir, "inspect.db")
      const Only = Step({
        type: "Only",
        input: Schema.String,
        execute: () => Effect.succeed(StepDecision.gracefulComplete("ok"))
      })
      const F = Flow({ type: "Inspected", start: Only })
      yield* Effect.gen(function* () {
        const client = yield* Client.Client
        yield* client.startFlow(F, "inspect-me", "x")
        yield* client.waitForFlow("inspect-me")
      }).pipe(Effect.provide(Worker.layer(F).pipe(Layer.provideMerge(Engine.layerEmbedded({ filename: file })))))
      const flows = yield* cli("flows", "--db", file)
      assert.strictEqual(flows.code, 0, flows.stderr)
      assert.include(flows.stdout, "inspect-me")
      assert.include(flows.stdout, "completed")
      const history = yield* cli("history", "inspect-me", "--db", file)
      assert.strictEqual(history.code, 0, history.stderr)
      assert.include(history.stdout, "Only-1")
      assert.include(history.stdout, "StepCompleted")
      assert.include(history.stdout, "FlowCompleted")
      const foreign = yield* cli("flows", "--db", join(dir, "foreign.db"))
      assert.notStrictEqual(foreign.code, 0)
      assert.include(foreign.stderr, "not an engine database")
      const bad = yield* cli("nonsense")
      assert.notStrictEqual(bad.code, 0)
      assert.include(bad.stderr, 'Unknown subcommand "nonsense"')
      const badStatus = yield* cli("flows", "--db", file, "--status", "sleeping")
      assert.notStrictEqual(badStatus.code, 0)
      assert.include(badStatus.stderr, "Invalid value for flag --status")
      const unknownFlow = yield* cli("history", "no-such-flow", "--db", file)
      assert.notStrictEqual(unknownFlow.code, 0)
      assert.include(unknownFlow.stderr, `no Flow no-such-flow in ${file}`)
    })
  )

  it.live("the inspection command explains a missing file, a file a worker holds, and a refused connection", () =>
    Effect.gen(function* () {
      const help = yield* cli("--help")
      assert.strictEqual(help.code, 0, help.stderr)
      assert.include(help.stdout, "flows")
      assert.include(help.stdout, "history")

      const missing = yield* cli("flows", "--db", join(dir, "missing.db"))
      assert.notStrictEqual(missing.code, 0)
      assert.include(missing.stderr, `no such file: ${join(dir, "missing.db")}`)
      assert.notInclude(missing.stderr, "Cause(")

      // A running embedded engine holds its file with an exclusive lock for as long as its layer lives.
      const held = join(dir, "held.db")
      const locked = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.build(Engine.layerEmbedded({ filename: held }))
          return yield* cli("flows", "--db", held)
        })
      )
      assert.notStrictEqual(locked.code, 0)
      assert.include(locked.stderr, "is in use by a running worker")
      assert.notInclude(locked.stderr, "not an engine database")
      // Once the worker is gone the same file reads.
      const after = yield* cli("flows", "--db", held)
      assert.strictEqual(after.code, 0, after.stderr)
      assert.include(after.stdout, "no Flows")

      const port = yield* Effect.promise(freePort)
      const refused = yield* cli("flows", "--db", `postgres://someone:secret@127.0.0.1:${port}/db`)
      assert.notStrictEqual(refused.code, 0)
      assert.include(refused.stderr, "cannot connect to postgres://someone:***@127.0.0.1")
      assert.notInclude(refused.stderr, "secret")
    })
  )
})
