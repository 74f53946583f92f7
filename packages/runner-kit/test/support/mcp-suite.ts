// MCP tools in a framework runner (the adapters spec: framework adapters use the source when they accept
// JSON-Schema tools, each MCP tool a framework tool calling call_tool with the adapter's idempotency key,
// mergeToolPolicies feeding the adapter's policies), against @modelcontextprotocol/server-everything over stdio,
// for any runner harness: the harness's JSON-Schema tools are `SourceTools.tools(source, policies)`. A runner
// whose framework is a slow process sets `timeout`; a whole-turn harness that runs reads inline, `readsInline`.

import { SourceTools } from "@durable-agent/runner-kit"
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import {
  awaitSnapshot,
  awaitTurns,
  embeddedEngine,
  stepShape,
  withSession
} from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient, type Policy, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { McpToolSource } from "../../../mcp/src/index.ts"
import { EVERYTHING_SERVER } from "../../../mcp/test/support.ts"

const stdio = { command: process.execPath, args: [EVERYTHING_SERVER, "stdio"] }

/** The everything server as a source whose `callTool` requests are recorded. */
const recordedSource = (requests: Array<{ readonly toolName: string; readonly idempotencyKey: string }>) =>
  Effect.map(
    McpToolSource.make({ servers: { everything: stdio } }),
    (source): SourceTools.Source => ({
      tools: source.tools,
      mergeToolPolicies: source.mergeToolPolicies,
      callTool: (request) =>
        Effect.suspend(() => {
          requests.push({ toolName: request.toolName, idempotencyKey: request.idempotencyKey })
          return source.callTool(request)
        })
    })
  )

/** The harness's tools from the source, each with the effect its annotations (or `policies`) give. */
const sourceTools = (source: SourceTools.Source, policies?: Readonly<Record<string, Policy.ToolPolicy>>) =>
  SourceTools.tools(source, policies).map((t): Conformance.SuiteTool => ({ ...t, effect: t.effect ?? "unclassified" }))

/** The offered name of a source tool: the tool's own name, or the framework's rewrite of it. */
const offered = (view: Conformance.ModelCallView, name: string): string => {
  const plain = (n: string) => n.replaceAll("-", "_")
  const found = view.offeredTools.find((n) => plain(n) === plain(name))
  if (found === undefined) throw new Error(`${name} was not offered: ${view.offeredTools.join(", ")}`)
  return found
}

/** Options of {@link mcpSuite}. */
export interface McpSuiteOptions {
  /** The bound of each wait (the kit's 20 s by default); each test may take it and 90 s more. */
  readonly timeout?: Duration.Input | undefined
  /**
   * The runner is a whole-turn harness that runs a READ inline in its RunModel (the Claude Agent SDK's): the
   * reads have no tool Step and no record, and a call whose arguments the schema refuses gets the framework's
   * validation error instead of a failed record.
   */
  readonly readsInline?: boolean | undefined
}

/** Registers the MCP tests for one runner harness. */
export const mcpSuite = (harness: Conformance.RunnerHarness, options?: McpSuiteOptions) =>
  describe(`${harness.name}: MCP tools from server-everything`, () => {
    const wait = options?.timeout
    const testTimeout = wait === undefined ? undefined : Duration.toMillis(wait) + 90_000
    it.live(
      "each MCP tool is a framework tool calling call_tool with the call's idempotency key; annotations give effects",
      () =>
        Effect.gen(function* () {
          const requests: Array<{ readonly toolName: string; readonly idempotencyKey: string }> = []
          const source = yield* recordedSource(requests)
          yield* withSession(
            harness,
            embeddedEngine,
            [
              // the names the framework offered (a framework may rewrite `-` as `_`)
              (view) => ({
                toolCalls: [
                  { id: "echo", name: offered(view, "everything__echo"), arguments: { message: "hello MCP" } },
                  { id: "sum", name: offered(view, "everything__get-sum"), arguments: { a: 2, b: 40 } },
                  { id: "bad", name: offered(view, "everything__get-sum"), arguments: { a: "two" } }
                ]
              }),
              { text: "done" }
            ],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("mcp1", { initialMessage: "use the tools" })
                const done = yield* awaitTurns("mcp1", 1, wait)
                const results = kit.toolResults(1)
                assert.strictEqual(results.echo, "Echo: hello MCP")
                assert.include(results.sum!, "42")
                if (options?.readsInline === true) {
                  // the reads ran inside the one RunModel, without records; the refused call never reached the
                  // server: the framework's own validation answered it
                  assert.include(results.bad!, "-32602")
                  assert.deepStrictEqual(yield* stepShape("mcp1"), [
                    "StartAgentSession",
                    "RunModel",
                    "AwaitUserMessage"
                  ])
                  assert.deepStrictEqual(done.toolCalls, [])
                  assert.deepStrictEqual(
                    requests.map((r) => r.toolName),
                    ["everything__echo", "everything__get-sum"]
                  )
                } else {
                  assert.isTrue(results.bad!.startsWith(Wire.TOOL_CALL_FAILED_PREFIX), results.bad)
                }
                const turnId = done.messages[0]!.turnId
                assert.deepStrictEqual(
                  requests.filter((r) => r.toolName === "everything__echo"),
                  [{ toolName: "everything__echo", idempotencyKey: `mcp1/${turnId}/echo` }]
                )
                assert.strictEqual(done.state?.lastTurnError, null)
                assert.strictEqual(kit.player.calls().length, 2, "a model call before the tools and one after")
              }),
            { tools: sourceTools(source) }
          )
        }).pipe(Effect.scoped),
      testTimeout
    )

    it.live(
      "mergeToolPolicies feeds the runner's policies: an application policy that asks for approval wins",
      () =>
        Effect.gen(function* () {
          const requests: Array<{ readonly toolName: string; readonly idempotencyKey: string }> = []
          const source = yield* recordedSource(requests)
          yield* withSession(
            harness,
            embeddedEngine,
            [
              { toolCalls: [{ id: "e1", name: "everything__echo", arguments: { message: "approved" } }] },
              { text: "ok" }
            ],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("mcp2", { initialMessage: "echo" })
                const waiting = yield* awaitSnapshot(
                  "mcp2",
                  (s) => s.pendingInterrupts.length === 1,
                  "the approval",
                  wait
                )
                assert.strictEqual(waiting.pendingInterrupts[0]!.interruptId, "e1")
                // the record keeps the MCP tool's server and name, so the tool Step needs no listing
                const reference = source.tools.find((t) => t.name === "everything__echo")?.toolSourceReference
                assert.isDefined(reference)
                assert.deepStrictEqual(
                  waiting.toolCalls.map((c) => [c.toolCallId, c.toolSourceReference]),
                  [["e1", reference]]
                )
                assert.deepStrictEqual(requests, [], "nothing ran before the approval")
                assert.isTrue(yield* client.resolveInterrupt("mcp2", { interruptId: "e1", approved: true }))
                yield* awaitTurns("mcp2", 1, wait)
                assert.strictEqual(kit.toolResults(1).e1, "Echo: approved")
                assert.strictEqual(requests.length, 1, "the single-attempt write ran once")
              }),
            {
              tools: sourceTools(source, {
                everything__echo: { effect: "non_idempotent_write", requiresApproval: true }
              })
            }
          )
        }).pipe(Effect.scoped),
      testTimeout
    )
  })
