// MCP tools through the Claude Agent SDK runner, against @modelcontextprotocol/server-everything over stdio
// (the real server the runner kit's MCP tests use): the source's tools are the runner's JSON-Schema tools
// (`SourceTools.tools(source, policies)`), so each MCP tool is one more in-process MCP tool of the harness
// that calls the source's `callTool` with the session's idempotency key. Adapted from the kit's MCP suite for
// a whole-turn harness: a READ runs inline inside the RunModel (no tool Step, no record), a write is deferred
// to its own Step, whose record keeps the MCP tool's source reference.
import {
  awaitSnapshot,
  awaitTurns,
  embeddedEngine,
  stepShape,
  withSession
} from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { recordedSource, sourceTools } from "../../runner-kit/test/support/mcp-suite.ts"
import { harness } from "./harness.ts"

/** The bound of each wait: the binary is a real process, slow on a loaded machine. */
const WAIT = "150 seconds"
const TIMEOUT = { timeout: 240_000 }

describe("Claude Agent SDK runner: MCP tools from server-everything (JSON-Schema tools)", () => {
  it.live(
    "MCP reads run inline, calling call_tool with the call's idempotency key; arguments the schema refuses never reach the server",
    () =>
      Effect.gen(function* () {
        const requests: Array<{ readonly toolName: string; readonly idempotencyKey: string }> = []
        const source = yield* recordedSource(requests)
        yield* withSession(
          harness,
          embeddedEngine,
          [
            (view) => {
              // offered under their source names, with the schemas the source listed
              assert.includeMembers([...view.offeredTools], ["everything__echo", "everything__get-sum"])
              return {
                toolCalls: [
                  { id: "echo", name: "everything__echo", arguments: { message: "hello MCP" } },
                  { id: "sum", name: "everything__get-sum", arguments: { a: 2, b: 40 } },
                  { id: "bad", name: "everything__get-sum", arguments: { a: "two" } }
                ]
              }
            },
            { text: "done" }
          ],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("mcp1", { initialMessage: "use the tools" })
              const done = yield* awaitTurns("mcp1", 1, WAIT)
              const results = kit.toolResults(1)
              assert.strictEqual(results.echo, "Echo: hello MCP")
              assert.include(results.sum!, "42")
              // the in-process MCP server validates the arguments by the zod form of the tool's JSON Schema
              assert.include(results.bad!, "MCP error -32602: Input validation error")
              assert.include(results.bad!, "expected number, received string")
              const turnId = done.messages[0]!.turnId
              assert.deepStrictEqual(requests, [
                { toolName: "everything__echo", idempotencyKey: `mcp1/${turnId}/echo` },
                { toolName: "everything__get-sum", idempotencyKey: `mcp1/${turnId}/sum` }
              ])
              // adapted: the reads ran inside the one RunModel, without records
              assert.deepStrictEqual(yield* stepShape("mcp1"), ["StartAgentSession", "RunModel", "AwaitUserMessage"])
              assert.deepStrictEqual(done.toolCalls, [])
              assert.strictEqual(done.state?.lastTurnError, null)
              assert.strictEqual(done.messages.at(-1)?.text, "done")
            }),
          { tools: sourceTools(source) }
        )
      }).pipe(Effect.scoped),
    TIMEOUT
  )

  it.live(
    "an application policy makes an MCP tool a write that needs approval: deferred to its own Step, run once after approval",
    () =>
      Effect.gen(function* () {
        const requests: Array<{ readonly toolName: string; readonly idempotencyKey: string }> = []
        const source = yield* recordedSource(requests)
        const reference = source.tools.find((t) => t.name === "everything__echo")?.toolSourceReference
        yield* withSession(
          harness,
          embeddedEngine,
          [{ toolCalls: [{ id: "e1", name: "everything__echo", arguments: { message: "approved" } }] }, { text: "ok" }],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("mcp2", { initialMessage: "echo" })
              const waiting = yield* awaitSnapshot(
                "mcp2",
                (s) => s.pendingInterrupts.length === 1,
                "the approval",
                WAIT
              )
              assert.strictEqual(waiting.pendingInterrupts[0]!.interruptId, "e1")
              // the record keeps the MCP tool's server and name, so the tool Step needs no listing
              assert.isDefined(reference)
              assert.deepStrictEqual(
                waiting.toolCalls.map((c) => [c.toolCallId, c.toolName, c.toolSourceReference]),
                [["e1", "everything__echo", reference]]
              )
              assert.deepStrictEqual(requests, [], "nothing ran before the approval")
              assert.isTrue(yield* client.resolveInterrupt("mcp2", { interruptId: "e1", approved: true }))
              const done = yield* awaitTurns("mcp2", 1, WAIT)
              assert.strictEqual(kit.toolResults(1).e1, "Echo: approved")
              const turnId = done.messages[0]!.turnId
              assert.deepStrictEqual(
                requests,
                [{ toolName: "everything__echo", idempotencyKey: `mcp2/${turnId}/e1` }],
                "the single-attempt write ran once, with the session's key"
              )
              assert.isTrue((yield* stepShape("mcp2")).includes("CallSingleAttemptTool"))
            }),
          {
            tools: sourceTools(source, {
              everything__echo: { effect: "non_idempotent_write", requiresApproval: true }
            })
          }
        )
      }).pipe(Effect.scoped),
    TIMEOUT
  )
})
