// The command line: `--db` picks the database, and a flag without its value or an unknown flag is an error,
// never silently ignored.
import { resolve } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Option from "effect/Option"
import { checkArguments, withArguments } from "../src/config.ts"
import { mcpFileArgument } from "../src/mcp.ts"

const config = { database: "/data/chat.db", workspace: "/ws", model: { _tag: "Demo" } } as const

describe("chat arguments", () => {
  it("--db <file> (or --db=<file>) replaces the database", () => {
    assert.strictEqual(withArguments(config, ["--db", "other.db"]).database, resolve("other.db"))
    assert.strictEqual(withArguments(config, ["--db=/tmp/x.db", "--runner", "mastra"]).database, "/tmp/x.db")
    assert.strictEqual(withArguments(config, []).database, "/data/chat.db")
  })

  it("a bare --mcp, --db or --runner is an error", () => {
    assert.throws(() => mcpFileArgument(["--mcp"]), /--mcp needs a value: --mcp <servers.json>/)
    assert.throws(() => checkArguments(["--mcp"]), /--mcp needs a value/)
    assert.throws(() => checkArguments(["--mcp", "--runner", "mastra"]), /--mcp needs a value/)
    assert.throws(() => checkArguments(["--db"]), /--db needs a value: --db <file.db>/)
    assert.throws(() => checkArguments(["--db="]), /--db needs a value/)
    assert.throws(() => checkArguments(["--runner"]), /--runner needs a value/)
  })

  it("an unknown argument is an error; the known ones pass", () => {
    assert.throws(() => checkArguments(["--database", "x.db"]), /unknown argument --database/)
    assert.throws(() => checkArguments(["servers.json"]), /unknown argument servers.json/)
    checkArguments(["--db", "a.db", "--mcp=servers.json", "--runner", "stepwise"])
    assert.deepStrictEqual(mcpFileArgument(["--db", "a.db", "--mcp", "s.json"]), Option.some(resolve("s.json")))
  })
})
