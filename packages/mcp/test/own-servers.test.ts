// McpToolSource against servers written here with the SDK, for what the reference servers do not show: the
// idempotency key a server receives, name collisions, a server restarted between listing and calling, and
// servers that die (stdio) or drop the connection (HTTP) in the middle of a call.
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { fileLines } from "@durable-agent/engine/testing/ChildProcess"
import { AgentSessionClient, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import { McpToolSource } from "../src/index.ts"
import { type HttpTestServer, listing, makeServer, serveHttp, text } from "./fixtures/servers.ts"
import { awaitSnapshot, awaitTurns, tempDir, toolCallOutcomes, toolResults, withMcpSession } from "./support.ts"

const KEY = McpToolSource.IDEMPOTENCY_KEY_META

/** An HTTP test server for the scope. */
const httpServer = (build: Parameters<typeof serveHttp>[0], port?: number) =>
  Effect.acquireRelease(
    Effect.promise(() => serveHttp(build, port)),
    (s) => Effect.promise(() => s.close())
  )

const dyingServer = fileURLToPath(new URL("./fixtures/dying-stdio-server.ts", import.meta.url))

describe("own servers", () => {
  it.live("annotations decide effects, and tools/call carries the idempotency key in _meta", () =>
    Effect.gen(function* () {
      const seen: Array<{ readonly tool: string; readonly key: unknown }> = []
      const record = (tool: string) => (_args: unknown, meta: Record<string, unknown> | undefined) => {
        seen.push({ tool, key: meta?.[KEY] })
        return text(`${tool} done`)
      }
      const server: HttpTestServer = yield* httpServer(() =>
        makeServer([
          { tool: listing("lookup", { readOnlyHint: true }), run: record("lookup") },
          { tool: listing("upsert", { idempotentHint: true, destructiveHint: true }), run: record("upsert") },
          { tool: listing("launch", { destructiveHint: false }), run: record("launch") }
        ])
      )
      yield* withMcpSession(
        {
          source: { servers: { own: { url: server.url } } },
          script: [
            {
              toolCalls: [
                { id: "l1", name: "own__lookup" },
                { id: "u1", name: "own__upsert" },
                { id: "x1", name: "own__launch" }
              ]
            },
            { text: "done" }
          ]
        },
        () =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("k1", { initialMessage: "go" })
            // launch has no annotation, so it is unclassified and waits for approval
            const waiting = yield* awaitSnapshot("k1", (s) => s.pendingInterrupts.length === 1)
            assert.strictEqual(waiting.pendingInterrupts[0]!.toolName, "own__launch")
            yield* client.resolveInterrupt("k1", { interruptId: "x1", approved: true })
            const snapshot = yield* awaitTurns("k1", 1)
            const turnId = snapshot.messages[0]!.turnId
            assert.deepStrictEqual(
              [...seen].sort((a, b) => a.tool.localeCompare(b.tool)),
              [
                { tool: "launch", key: `k1/${turnId}/x1` },
                { tool: "lookup", key: `k1/${turnId}/l1` },
                { tool: "upsert", key: `k1/${turnId}/u1` }
              ]
            )
            const outcomes = yield* toolCallOutcomes("k1")
            assert.deepStrictEqual(
              [outcomes.l1!.effect, outcomes.u1!.effect, outcomes.x1!.effect],
              ["read", "idempotent_write", "unclassified"]
            )
          })
      )
      // the listing and each call had their own protocol session, each ended with DELETE
      assert.strictEqual(server.opened.length, 4)
      assert.deepStrictEqual([...server.deleted].sort(), [...server.opened].sort())
    }).pipe(Effect.scoped)
  )

  it.live("a server that cannot be listed and a tool whose name is taken are left out", () =>
    Effect.gen(function* () {
      const first = yield* httpServer(() => makeServer([{ tool: listing("x__y", undefined), run: () => text("a") }]))
      const second = yield* httpServer(() =>
        makeServer([
          { tool: listing("y", undefined), run: () => text("b") },
          { tool: listing("z", { readOnlyHint: true }), run: () => text("c") }
        ])
      )
      const source = yield* McpToolSource.make({
        servers: {
          a: { url: first.url },
          a__x: { url: second.url },
          gone: { command: process.execPath, args: ["-e", "process.exit(3)"] }
        },
        handshakeTimeout: "10 seconds"
      })
      // a__x__y is taken by server a's x__y, so server a__x's y is left out; its z stays
      assert.deepStrictEqual(
        source.tools.map((t) => [t.name, t.server, t.mcpName]),
        [
          ["a__x__y", "a", "x__y"],
          ["a__x__z", "a__x", "z"]
        ]
      )
      const result = yield* source.callTool({ toolName: "a__x__y", arguments: {}, idempotencyKey: "k" })
      assert.strictEqual(result.output, "a")
    }).pipe(Effect.scoped)
  )

  it.live("JSON-RPC errors: -32603 and -32700 are sent without a result, other codes are tool errors", () =>
    Effect.gen(function* () {
      const thrower = (error: Error) => () => {
        throw error
      }
      const server = yield* httpServer(() =>
        makeServer([
          { tool: listing("invalid", undefined), run: thrower(new McpError(ErrorCode.InvalidParams, "bad input")) },
          { tool: listing("internal", undefined), run: thrower(new Error("kaboom")) },
          { tool: listing("parse", undefined), run: thrower(new McpError(ErrorCode.ParseError, "unreadable")) },
          {
            tool: listing("reported", undefined),
            run: () => ({ isError: true, content: [{ type: "text", text: "no" }] })
          }
        ])
      )
      const source = yield* McpToolSource.make({ servers: { own: { url: server.url } } })
      const call = (name: string) =>
        Effect.flip(source.callTool({ toolName: `own__${name}`, arguments: {}, idempotencyKey: "k" }))
      const invalid = yield* call("invalid")
      assert.strictEqual(invalid._tag, "ToolExecutionError")
      assert.include(invalid.message, "bad input")
      assert.strictEqual((yield* call("internal"))._tag, "McpToolCallInterruptedError")
      assert.strictEqual((yield* call("parse"))._tag, "McpToolCallInterruptedError")
      const reported = yield* call("reported")
      assert.deepStrictEqual([reported._tag, reported.message], ["ToolExecutionError", "no"])
      // a server that is down: the request was never sent
      yield* Effect.promise(() => server.close())
      const down = yield* call("invalid")
      assert.strictEqual(down._tag, "ToolExecutionError")
      assert.include(down.message, "could not connect")
    }).pipe(Effect.scoped)
  )

  it.live("a server restarted between listing and calling answers the call on a new connection", () =>
    Effect.gen(function* () {
      const generation = (name: string) => () =>
        makeServer([{ tool: listing("whoami", { readOnlyHint: true }), run: () => text(name) }])
      const before = yield* Effect.promise(() => serveHttp(generation("before restart")))
      const source = yield* McpToolSource.make({ servers: { own: { url: before.url } } })
      yield* Effect.promise(() => before.close())
      const after = yield* httpServer(generation("after restart"), before.port)
      yield* withMcpSession(
        {
          source,
          script: [{ toolCalls: [{ id: "w1", name: "own__whoami" }] }, { text: "done" }]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("r1", { initialMessage: "who?" })
            yield* awaitTurns("r1", 1)
            assert.strictEqual(toolResults(kit.requests[1]!).w1, "after restart")
          })
      )
      assert.strictEqual(after.opened.length, 1)
    }).pipe(Effect.scoped)
  )

  it.live("a stdio server that dies mid-call: a read is called again, an unannotated write is outcome_unknown", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir("das-mcp-dying-")
      const side = join(dir, "side.log")
      yield* withMcpSession(
        {
          source: { servers: { dying: { command: process.execPath, args: [dyingServer], env: { SIDE_FILE: side } } } },
          toolPolicies: { dying__charge: { effect: "non_idempotent_write", requiresApproval: false } },
          script: [
            {
              toolCalls: [
                { id: "r1", name: "dying__flaky_read" },
                { id: "c1", name: "dying__charge" }
              ]
            },
            { text: "done" }
          ]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("d1", { initialMessage: "go" })
            yield* awaitTurns("d1", 1)
            const results = toolResults(kit.requests[1]!)
            assert.strictEqual(results.r1, "read after a crash")
            assert.strictEqual(results.c1, Wire.OUTCOME_UNKNOWN_TEXT)
            const outcomes = yield* toolCallOutcomes("d1")
            assert.strictEqual(outcomes.r1!.status, "succeeded")
            assert.strictEqual(outcomes.c1!.status, "outcome_unknown")
          })
      )
      const lines = fileLines(side)
      // the read ran twice (the first run died), the write once (never called again)
      assert.strictEqual(lines.filter((l) => l === "flaky_read").length, 2)
      assert.strictEqual(lines.filter((l) => l === "charge").length, 1)
    }).pipe(Effect.scoped)
  )

  it.live(
    "an HTTP server that drops the connection mid-call: an idempotent write is sent again with the same key",
    () =>
      Effect.gen(function* () {
        const keys: Array<unknown> = []
        let server: HttpTestServer | undefined
        server = yield* httpServer(() =>
          makeServer([
            {
              tool: listing("upsert", { idempotentHint: true }),
              run: (_args, meta) => {
                keys.push(meta?.[KEY])
                // the first call's connection drops before any answer: the server ran it, the client cannot know
                if (keys.length === 1) server!.http.closeAllConnections()
                return text(`upserted ${keys.length}`)
              }
            }
          ])
        )
        yield* withMcpSession(
          {
            source: { servers: { own: { url: server.url } } },
            script: [{ toolCalls: [{ id: "u1", name: "own__upsert" }] }, { text: "done" }]
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("p1", { initialMessage: "go" })
              yield* awaitTurns("p1", 1)
              assert.strictEqual(toolResults(kit.requests[1]!).u1, "upserted 2")
            })
        )
        assert.strictEqual(keys.length, 2)
        assert.strictEqual(keys[0], keys[1])
      }).pipe(Effect.scoped)
  )
})
