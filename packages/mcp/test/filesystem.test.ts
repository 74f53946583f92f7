// McpToolSource against @modelcontextprotocol/server-filesystem on a temporary directory, through a session on
// the embedded engine: a write the user approves, then a read in the next turn that sees it.
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import {
  awaitSnapshot,
  awaitTurns,
  FILESYSTEM_SERVER,
  tempDir,
  toolCallOutcomes,
  toolResults,
  withMcpSession
} from "./support.ts"

describe("server-filesystem over stdio", () => {
  it.live("an approved write, then a read that sees it", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir("das-mcp-fs-")
      const file = join(dir, "notes.txt")
      yield* withMcpSession(
        {
          source: { servers: { fs: { command: process.execPath, args: [FILESYSTEM_SERVER, dir] } } },
          // write_file is idempotent_write by its annotations; this application also wants to approve it
          toolPolicies: { fs__write_file: { effect: "idempotent_write", requiresApproval: true } },
          script: [
            { toolCalls: [{ id: "w1", name: "fs__write_file", arguments: { path: file, content: "buy milk" } }] },
            { text: "written" },
            { toolCalls: [{ id: "r1", name: "fs__read_text_file", arguments: { path: file } }] },
            { text: "read" }
          ]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            assert.strictEqual(kit.source.tools.find((t) => t.name === "fs__read_text_file")!.effect, "read")
            assert.strictEqual(kit.source.tools.find((t) => t.name === "fs__write_file")!.effect, "idempotent_write")
            yield* client.startSession("f1", { initialMessage: "write a note" })
            const waiting = yield* awaitSnapshot("f1", (s) => s.pendingInterrupts.length === 1)
            assert.strictEqual(waiting.pendingInterrupts[0]!.toolName, "fs__write_file")
            assert.throws(() => readFileSync(file, "utf8"))
            yield* client.resolveInterrupt("f1", { interruptId: "w1", approved: true })
            yield* awaitTurns("f1", 1)
            assert.strictEqual(readFileSync(file, "utf8"), "buy milk")
            yield* client.sendUserMessage("f1", "read it back")
            yield* awaitTurns("f1", 2)
            assert.include(toolResults(kit.requests[1]!).w1!, "Successfully wrote")
            assert.strictEqual(toolResults(kit.requests[3]!).r1, "buy milk")
            const outcomes = yield* toolCallOutcomes("f1")
            assert.deepStrictEqual(outcomes.w1, {
              effect: "idempotent_write",
              requiresApproval: true,
              status: "succeeded"
            })
            assert.deepStrictEqual(outcomes.r1, { effect: "read", requiresApproval: false, status: "succeeded" })
          })
      )
    }).pipe(Effect.scoped)
  )
})
