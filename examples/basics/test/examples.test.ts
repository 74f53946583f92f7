// The examples run as a user runs them: the README's quickstart twice on one database file, the worker, and
// the browser client, bundled for the browser and fed the events of a real session.
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { nodeFlags } from "@durable-agent/engine/testing/ChildProcess"
import { AgentSessionClient, ToolkitSource } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { AgentEvent } from "@durable-agent/session/wire"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import { rolldown } from "rolldown"
import { render } from "../src/browser-client.ts"
import { Inventory, ShopHandlers, ShopTools, script } from "../src/worker.ts"

const run = promisify(execFile)
const dir = mkdtempSync(join(tmpdir(), "das-examples-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const source = (name: string) => fileURLToPath(new URL(`../src/${name}`, import.meta.url))
const node = (file: string, ...args: Array<string>) =>
  Effect.promise(() => run(process.execPath, [...nodeFlags, source(file), ...args], { cwd: dir, timeout: 60_000 }))

describe("examples/basics", () => {
  it.live("the quickstart prints the answer, and a second run continues the same session", () =>
    Effect.gen(function* () {
      const db = join(dir, "quickstart.db")
      const first = yield* node("quickstart.ts", db)
      assert.strictEqual(first.stdout, "It is 21 degrees in Paris.\n")
      const second = yield* node("quickstart.ts", db)
      assert.strictEqual(second.stdout, "It is 21 degrees in Paris.\n")
      assert.strictEqual(second.stderr, "")
    })
  )

  it.live("the worker runs a turn with its toolkit and service", () =>
    Effect.gen(function* () {
      const { stdout } = yield* node("worker.ts", join(dir, "shop.db"))
      assert.strictEqual(stdout, "Reserved: R-1\n")
    })
  )

  it.live("the browser client bundles for the browser without node: modules and renders a session's events", () =>
    Effect.gen(function* () {
      const imports: Array<string> = []
      yield* Effect.promise(async () => {
        const build = await rolldown({
          input: source("browser-client.ts"),
          platform: "browser",
          resolve: { conditionNames: ["@durable-agent/source", "import", "browser", "default"] },
          logLevel: "silent",
          plugins: [{ name: "imports", resolveId: (id) => void imports.push(id) }]
        })
        await build.generate({ format: "esm" })
        await build.close()
      })
      assert.deepStrictEqual(
        imports.filter((i) => i.startsWith("node:") || i.includes("engine")),
        []
      )
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("order-1", { initialMessage: "Two packs of tea, please." })
      yield* SessionTesting.awaitTurn("order-1")
      // what a server sends: every event in its wire form
      const wire = Array.from(yield* Stream.runCollect(sessions.events("order-1")), (e) =>
        Schema.encodeUnknownSync(AgentEvent)(e.event)
      )
      const lines = yield* render(JSON.parse(JSON.stringify(wire)))
      assert.deepStrictEqual(lines, [
        "— turn turn-1",
        "running check_stock",
        "check_stock: succeeded",
        "running reserve",
        "reserve: succeeded",
        "Reserved: R-1",
        "— done (5 messages)"
      ])
    }).pipe(
      Effect.provide(
        SessionTesting.layer({
          model: script,
          tools: ToolkitSource.layer(ShopTools).pipe(Layer.provide(ShopHandlers), Layer.provide(Inventory.layer))
        })
      )
    )
  )
})
