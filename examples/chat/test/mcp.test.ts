// The chat's `--mcp servers.json`: a servers file with @modelcontextprotocol/server-filesystem on a temporary
// folder becomes AI SDK runner tools whose calls reach the server.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { ToolRetryableError } from "@durable-agent/runner-ai-sdk"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { loadMcpTools, mcpFileArgument } from "../src/mcp.ts"

const filesystemServer = join(
  dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/server-filesystem/package.json")),
  "dist",
  "index.js"
)

const folder = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "chat-mcp-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const options = (key: string) => ({
  toolCallId: key,
  idempotencyKey: `session/turn/${key}`,
  attempt: 1,
  abortSignal: new AbortController().signal
})

describe("chat --mcp", () => {
  it("reads the file after --mcp", () => {
    assert.deepStrictEqual(mcpFileArgument(["--mcp", "servers.json"]), Option.some(resolve("servers.json")))
    assert.deepStrictEqual(mcpFileArgument(["--mcp=/etc/mcp.json"]), Option.some("/etc/mcp.json"))
    assert.isTrue(Option.isNone(mcpFileArgument(["--other"])))
  })

  it.live("a servers file's filesystem server: its tools write and read the folder", () =>
    Effect.gen(function* () {
      const dir = yield* folder
      const file = join(dir, "servers.json")
      const data = join(dir, "data")
      yield* Effect.sync(() => {
        writeFileSync(
          file,
          JSON.stringify({ mcpServers: { fs: { command: process.execPath, args: [filesystemServer, dir] } } })
        )
      })
      const loaded = yield* loadMcpTools(file)
      assert.deepStrictEqual(loaded.servers, ["fs"])
      const write = loaded.tools.fs__write_file!
      const read = loaded.tools.fs__read_text_file!
      assert.strictEqual(write.effect, "idempotent_write")
      assert.strictEqual(read.effect, "read")
      const wrote = yield* Effect.promise(async () => write.execute({ path: data, content: "from MCP" }, options("w")))
      assert.include(String(wrote), "Successfully wrote")
      assert.strictEqual(readFileSync(data, "utf8"), "from MCP")
      const content = yield* Effect.promise(async () => read.execute({ path: data }, options("r")))
      assert.strictEqual(content, "from MCP")
      // a tool error reaches the model (a plain error), not a retry
      const missing = yield* Effect.promise(async () =>
        Promise.resolve(read.execute({ path: join(dir, "missing") }, options("m"))).then(
          () => undefined,
          (error: unknown) => error
        )
      )
      assert.instanceOf(missing, Error)
      assert.notInstanceOf(missing, ToolRetryableError)
    }).pipe(Effect.scoped)
  )

  it.live("a servers file that is not the MCP clients' shape is refused", () =>
    Effect.gen(function* () {
      const dir = yield* folder
      const file = join(dir, "servers.json")
      writeFileSync(file, JSON.stringify({ servers: [] }))
      const error = yield* Effect.flip(loadMcpTools(file))
      assert.strictEqual(error._tag, "McpServersFileError")
    }).pipe(Effect.scoped)
  )
})
