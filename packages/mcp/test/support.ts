// Test support: a session worker whose tools come from McpToolSource, on the session's testing kit (a fresh
// embedded engine per test), with the session's scripted model (the only stand-in: everything MCP is real),
// and helpers to wait for a snapshot and read the events.
import { mkdtempSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import type { Client } from "@durable-agent/engine"
import { AgentSessionClient, ModelClient, type Policy, ToolSource, type Wire } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { McpToolSource } from "../src/index.ts"

const require = createRequire(import.meta.url)

/** The entry script of an installed MCP server package. */
const serverScript = (pkg: string) => join(dirname(require.resolve(`${pkg}/package.json`)), "dist", "index.js")

export const EVERYTHING_SERVER = serverScript("@modelcontextprotocol/server-everything")
export const FILESYSTEM_SERVER = serverScript("@modelcontextprotocol/server-filesystem")

/** A temporary directory removed when the scope closes. */
export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), prefix))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

export interface McpSetup {
  /** The source's options, or a source built earlier (listed before the test changed its servers). */
  readonly source: McpToolSource.McpToolSourceOptions | McpToolSource.McpToolSourceShape
  readonly script: ReadonlyArray<ModelClient.ScriptedStep>
  readonly toolPolicies?: Readonly<Record<string, Policy.ToolPolicy>>
  /** Services the worker is built with, such as a tracing layer. */
  readonly services?: Layer.Layer<any> | undefined
}

export interface McpKit {
  readonly requests: Array<ModelClient.ModelRequest>
  readonly source: McpToolSource.McpToolSourceShape
}

export const FLOW_TYPE = "McpAgent"

/**
 * Runs `body` with a session worker over `setup.source` and a client, on the session's testing kit (a fresh
 * embedded engine), with the scripted model recording each request.
 */
export const withMcpSession = <A, E>(
  setup: McpSetup,
  body: (kit: McpKit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>
) =>
  Effect.gen(function* () {
    const source = "call" in setup.source ? setup.source : yield* McpToolSource.make(setup.source)
    const requests: Array<ModelClient.ModelRequest> = []
    return yield* body({ requests, source }).pipe(
      Effect.provide(
        SessionTesting.layer({
          model: ModelClient.layerScripted(setup.script, {
            onRequest: (request) => void requests.push(request)
          }),
          tools: Layer.succeed(ToolSource.ToolSource, source),
          flow: {
            flowType: FLOW_TYPE,
            ...(setup.toolPolicies === undefined ? {} : { toolPolicies: setup.toolPolicies })
          }
        }).pipe(Layer.provide(setup.services ?? Layer.empty))
      )
    )
  }).pipe(Effect.scoped)

/** The snapshot once `predicate` holds (60 s at most). */
export const awaitSnapshot = (sessionId: string, predicate: (s: Wire.AgentSnapshot) => boolean) =>
  SessionTesting.awaitSnapshot(sessionId, predicate, { timeout: "60 seconds" })

/** The snapshot once `turns` turns ended. */
export const awaitTurns = (sessionId: string, turns: number) =>
  SessionTesting.awaitTurn(sessionId, { turn: turns, timeout: "60 seconds" })

/** The tool results a model request carries, by tool call ID. */
export const toolResults = (request: ModelClient.ModelRequest) =>
  Object.fromEntries(request.messages.flatMap((m) => (m.role === "tool" ? [[m.toolCallId, m.output] as const] : [])))

/** Every event written so far, as type and payload. */
export const sessionEvents = (sessionId: string) =>
  Effect.flatMap(AgentSessionClient.AgentSessionClient, (client) =>
    Effect.map(Stream.runCollect(client.events(sessionId)), (events) =>
      Array.from(events, ({ event }) => ({ type: event.type, payload: event.payload as Record<string, unknown> }))
    )
  )

/** The `tool_call_deferred` and `tool_call_finished` payloads of a session, by tool call ID. */
export const toolCallOutcomes = (sessionId: string) =>
  Effect.map(sessionEvents(sessionId), (events) => {
    const out: Record<string, { effect?: unknown; requiresApproval?: unknown; status?: unknown }> = {}
    for (const e of events) {
      const id = String(e.payload.toolCallId)
      if (e.type === "tool_call_deferred") {
        out[id] = { ...out[id], effect: e.payload.effect, requiresApproval: e.payload.requiresApproval }
      }
      if (e.type === "tool_call_finished") out[id] = { ...out[id], status: e.payload.status }
    }
    return out
  })
