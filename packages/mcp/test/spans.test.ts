// The exported span tree of a traced turn whose tools come from McpToolSource (spec "Tracing"): a worker whose
// Effect tracer is the OpenTelemetry tracer the session's Tracer uses too, a call to server-everything's echo
// (CallTool) and a task of the own task server (CallTool, then PollToolTask Steps). Each tool Step attempt is one
// `execute_tool` span under the turn's root; the tool source makes no span of its own.
import { Client } from "@durable-agent/engine"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { assertSpanContract, countAttempts, installedTracing, TOOL_STEPS } from "../../session/test/support/spans.ts"
import { serveTaskServer } from "./fixtures/task-server.ts"
import { awaitSnapshot, awaitTurns, EVERYTHING_SERVER, toolResults, withMcpSession } from "./support.ts"

const taskServer = Effect.acquireRelease(Effect.promise(serveTaskServer), (s) => Effect.promise(() => s.close()))

describe("McpToolSource: the exported span tree", () => {
  it.live(
    "a call and a polled task export execute_tool spans under the root, no span of the tool source",
    () =>
      Effect.gen(function* () {
        const server = yield* taskServer
        const { exporter, layer } = installedTracing()
        yield* withMcpSession(
          {
            source: {
              servers: {
                everything: { command: process.execPath, args: [EVERYTHING_SERVER, "stdio"] },
                own: { url: server.url }
              }
            },
            script: [
              {
                toolCalls: [
                  { id: "e1", name: "everything__echo", arguments: { message: "hi" } },
                  { id: "j1", name: "own__job", arguments: { size: 1 } }
                ]
              },
              { text: "done" }
            ],
            services: layer
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("mcp-spans", { initialMessage: "echo and run the job" })
              const waiting = yield* awaitSnapshot("mcp-spans", (s) =>
                s.toolCalls.some((c) => c.toolCallId === "j1" && c.status === "waiting_for_task")
              )
              const taskId = waiting.toolCalls.find((c) => c.toolCallId === "j1")!.taskId!
              // at least one PollToolTask saw the task running before it finishes
              yield* Effect.sync(() => server.polls.length).pipe(
                Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (n) => n >= 1 }),
                Effect.timeoutOrElse({ duration: "60 seconds", orElse: () => Effect.die(new Error("no poll")) })
              )
              yield* Effect.promise(() => server.finish(taskId, "job finished"))
              yield* awaitTurns("mcp-spans", 1)
              assert.deepStrictEqual(toolResults(kit.requests[1]!), { e1: "Echo: hi", j1: "job finished" })

              const steps = yield* Effect.flatMap(Client.Client, (c) => c.stepExecutions("mcp-spans"))
              const tree = assertSpanContract(exporter.getFinishedSpans(), "mcp-spans", assert)
              assert.strictEqual(tree.roots.length, 1)
              assert.strictEqual(tree.chats.length, countAttempts(steps, ["RunModel"]))
              assert.strictEqual(tree.tools.length, countAttempts(steps, TOOL_STEPS), "an execute_tool per attempt")
              const polls = tree.tools.filter((t) => t.attributes["dex.step.type"] === "PollToolTask")
              assert.isAtLeast(polls.length, 1)
              assert.isTrue(polls.every((t) => t.name === "execute_tool own__job"))
              assert.deepStrictEqual(
                tree.tools
                  .filter((t) => t.attributes["dex.step.type"] === "CallTool")
                  .map((t) => t.name)
                  .sort(),
                ["execute_tool everything__echo", "execute_tool own__job"]
              )
              assert.deepStrictEqual(tree.framework, [], "Stepwise records no framework span")
            })
        )
      }).pipe(Effect.scoped),
    120_000
  )
})
