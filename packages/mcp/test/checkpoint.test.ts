// MCP checkpoint ownership (issue 27, item 8): a tool Step's retried attempt reuses a saved task checkpoint only
// when this source wrote it for the same server and tool; another tool's, another server's or another writer's
// checkpoint reads as none, and the tool is called. Against @modelcontextprotocol/server-everything over stdio.
import { EventWriter, Heartbeat, Runner, type ToolSource } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { McpToolSource } from "../src/index.ts"
import { EVERYTHING_SERVER } from "./support.ts"

const stdio = { command: process.execPath, args: [EVERYTHING_SERVER, "stdio"] }

const request: ToolSource.ToolCallRequest = {
  flowId: "f",
  turnId: "t",
  toolCallId: "c1",
  toolName: "everything__echo",
  arguments: { message: "hi" },
  argumentsText: '{"message":"hi"}',
  idempotencyKey: "f/t/c1",
  attempt: 2,
  toolSourceReference: null,
  supportsToolTasks: true
}

const checkpoint = (fields: { readonly kind?: string; readonly server: string; readonly tool: string }) => ({
  kind: fields.kind ?? "@durable-agent/mcp/task",
  server: fields.server,
  tool: fields.tool,
  taskId: "task-9",
  pollIntervalSeconds: 2
})

describe("McpToolSource: checkpoint ownership", () => {
  it.live("a retried attempt reuses only its own tool's task checkpoint; any other is ignored and the tool runs", () =>
    Effect.gen(function* () {
      const source = yield* McpToolSource.make({ servers: { everything: stdio } })
      const callWith = (saved: unknown) =>
        source.call(request).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerTest([], saved))))
      // its own checkpoint: the task an earlier attempt started, not a second call
      const own = yield* callWith(checkpoint({ server: "everything", tool: "echo" }))
      assert.isTrue(Runner.isToolTaskStarted(own as Runner.DeferredToolOutcome))
      assert.deepStrictEqual(
        [(own as Runner.ToolTaskStarted).taskId, (own as Runner.ToolTaskStarted).pollIntervalSeconds],
        ["task-9", 2]
      )
      for (const other of [
        checkpoint({ server: "everything", tool: "get-sum" }),
        checkpoint({ server: "elsewhere", tool: "echo" }),
        checkpoint({ kind: "another-writer", server: "everything", tool: "echo" }),
        { some: "unrelated checkpoint" }
      ]) {
        const result = yield* callWith(other)
        assert.isFalse(Runner.isToolTaskStarted(result as Runner.DeferredToolOutcome), JSON.stringify(other))
        assert.strictEqual((result as Runner.ToolExecutionResult).output, "Echo: hi", JSON.stringify(other))
      }
    }).pipe(Effect.scoped)
  )
})
