// McpToolSource against @modelcontextprotocol/server-everything, a server nobody here wrote, run as a child
// process over stdio and over Streamable HTTP, driven through a real session on the embedded engine (only the
// model is scripted).
import { spawnNode } from "@durable-agent/engine/testing/ChildProcess"
import { AgentSessionClient, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { freePort } from "../../engine/test/support/ports.ts"
import { McpToolSource } from "../src/index.ts"
import {
  awaitSnapshot,
  awaitTurns,
  EVERYTHING_SERVER,
  toolCallOutcomes,
  toolResults,
  withMcpSession
} from "./support.ts"

const stdio = { command: process.execPath, args: [EVERYTHING_SERVER, "stdio"] }

/** The server's own listing, read with the SDK's client directly. */
const rawListing = Effect.promise(async () => {
  const client = new Client({ name: "test", version: "1" })
  await client.connect(new StdioClientTransport({ ...stdio, stderr: "ignore" }))
  const { tools } = await client.listTools()
  await client.close()
  return tools
})

/** The effect the annotation rule gives a raw tool: read-only, else idempotent, else none. */
const expectedEffect = (tool: Tool) =>
  tool.annotations?.readOnlyHint === true
    ? "read"
    : tool.annotations?.idempotentHint === true
      ? "idempotent_write"
      : undefined

describe("server-everything over stdio", () => {
  it.live("lists every tool as everything__<tool>, each with the effect its annotations give", () =>
    Effect.gen(function* () {
      const raw = yield* rawListing
      const source = yield* McpToolSource.make({ servers: { everything: stdio } })
      assert.isAbove(raw.length, 10)
      assert.deepStrictEqual(
        source.tools.map((t) => [t.name, t.effect]),
        raw.map((t) => [`everything__${t.name}`, expectedEffect(t)])
      )
      // the reference server has tools of every kind the rule distinguishes
      const effects = new Map(source.tools.map((t) => [t.mcpName, t.effect]))
      assert.strictEqual(effects.get("echo"), "read")
      assert.strictEqual(effects.get("gzip-file-as-resource"), "idempotent_write")
      assert.strictEqual(effects.get("toggle-simulated-logging"), undefined)
      assert.deepStrictEqual(source.policies.everything__echo, { effect: "read" })
      assert.isUndefined(source.policies["everything__toggle-simulated-logging"])
      // the tool's JSON Schema goes to the model as it is
      const echo = raw.find((t) => t.name === "echo")!
      assert.deepStrictEqual(source.tools.find((t) => t.mcpName === "echo")!.parameters, echo.inputSchema)
      // an explicit policy wins over the annotations
      const merged = source.mergeToolPolicies({ everything__echo: { effect: "non_idempotent_write" } })
      assert.deepStrictEqual(merged.everything__echo, { effect: "non_idempotent_write" })
      assert.deepStrictEqual(merged["everything__get-sum"], { effect: "read" })
    })
  )

  it.live("a turn calls read tools, a long-running tool and a tool with invalid arguments", () =>
    withMcpSession(
      {
        source: { servers: { everything: stdio } },
        script: [
          {
            toolCalls: [
              { id: "echo", name: "everything__echo", arguments: { message: "hello MCP" } },
              { id: "sum", name: "everything__get-sum", arguments: { a: 2, b: 40 } },
              { id: "bad", name: "everything__get-sum", arguments: { a: "two" } },
              {
                id: "long",
                name: "everything__trigger-long-running-operation",
                arguments: { duration: 1, steps: 2 }
              }
            ]
          },
          { text: "done" }
        ]
      },
      (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s1", { initialMessage: "use the tools" })
          yield* awaitTurns("s1", 1)
          const results = toolResults(kit.requests[1]!)
          assert.strictEqual(results.echo, "Echo: hello MCP")
          assert.include(results.sum!, "42")
          assert.isTrue(results.bad!.startsWith(Wire.TOOL_CALL_FAILED_PREFIX), results.bad)
          assert.include(results.bad!, "-32602")
          assert.include(results.long!, "Long running operation completed")
          const outcomes = yield* toolCallOutcomes("s1")
          assert.deepStrictEqual(outcomes.echo, { effect: "read", requiresApproval: false, status: "succeeded" })
          assert.deepStrictEqual(outcomes.bad, { effect: "read", requiresApproval: false, status: "failed" })
          assert.deepStrictEqual(outcomes.long, { effect: "read", requiresApproval: false, status: "succeeded" })
        })
    )
  )

  it.live("an unannotated task tool needs approval and, approved, runs its task to the end in the tool Step", () =>
    withMcpSession(
      {
        source: { servers: { everything: stdio } },
        script: [
          {
            toolCalls: [{ id: "research", name: "everything__simulate-research-query", arguments: { topic: "tides" } }]
          },
          { text: "done" }
        ]
      },
      (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s2", { initialMessage: "research" })
          yield* awaitSnapshot("s2", (s) => s.pendingInterrupts.length === 1)
          yield* client.resolveInterrupt("s2", { interruptId: "research", approved: true })
          yield* awaitTurns("s2", 1)
          const results = toolResults(kit.requests[1]!)
          assert.include(results.research!, "Research Report: tides")
          const outcomes = yield* toolCallOutcomes("s2")
          assert.deepStrictEqual(outcomes.research, {
            effect: "unclassified",
            requiresApproval: true,
            status: "succeeded"
          })
        })
    )
  )
})

describe("server-everything over Streamable HTTP", () => {
  it.live("lists and calls over HTTP, and ends every protocol session it opened with DELETE", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(freePort)
      const server = yield* spawnNode(EVERYTHING_SERVER, ["streamableHttp"], { PORT: String(port) })
      const stdout: Array<string> = []
      server.process.stdout!.on("data", (chunk: Buffer) => stdout.push(...chunk.toString("utf8").split("\n")))
      const url = `http://127.0.0.1:${port}/mcp`
      // the server is up once it answers HTTP at all
      yield* Effect.tryPromise(() => fetch(url, { method: "GET" })).pipe(
        Effect.retry({ schedule: Schedule.spaced("100 millis"), times: 100 })
      )
      yield* withMcpSession(
        {
          source: { servers: { everything: { url } } },
          script: [
            {
              toolCalls: [
                { id: "echo", name: "everything__echo", arguments: { message: "over HTTP" } },
                { id: "bad", name: "everything__get-sum", arguments: {} }
              ]
            },
            { text: "done" }
          ]
        },
        (kit) =>
          Effect.gen(function* () {
            assert.isTrue(kit.source.tools.some((t) => t.name === "everything__simulate-research-query"))
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("h1", { initialMessage: "use the tools" })
            yield* awaitTurns("h1", 1)
            const results = toolResults(kit.requests[1]!)
            assert.strictEqual(results.echo, "Echo: over HTTP")
            assert.isTrue(results.bad!.startsWith(Wire.TOOL_CALL_FAILED_PREFIX))
            assert.notStrictEqual(results.bad, Wire.OUTCOME_UNKNOWN_TEXT)
          })
      )
      const opened = stdout.filter((l) => l.startsWith("Session initialized with ID:")).map((l) => l.split(": ")[1])
      const ended = stdout
        .filter((l) => l.startsWith("Received session termination request for session"))
        .map((l) => l.split(" ").pop())
      // one listing and two calls, each on its own connection and protocol session
      assert.strictEqual(opened.length, 3)
      assert.deepStrictEqual([...ended].sort(), [...opened].sort())
    }).pipe(Effect.scoped)
  )
})
