// Test support: a session worker whose runner is the Claude Agent SDK runner, running the real Claude Code
// binary against a scripted Anthropic Messages server on 127.0.0.1, on a fresh embedded engine; tools
// count their side effects.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client, Engine } from "@durable-agent/engine"
import { AgentSessionClient, AgentSessionFlow, Runner, type Wire } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { z } from "zod"
import { clusterEngine, type EngineFactory } from "../../session/test/support.ts"
import { ClaudeAgentSdkRunner, ScriptedAnthropic, SqlSessionStore } from "../src/index.ts"

export { clusterEngine }

export const FLOW_TYPE = "ClaudeAgentSdkTestAgent"

const dir = mkdtempSync(join(tmpdir(), "das-claude-"))
process.on("exit", () => rmSync(dir, { recursive: true, force: true }))
let n = 0

export interface Kit {
  readonly server: ScriptedAnthropic.ScriptedAnthropicServer
  readonly sideEffects: Map<string, number>
  readonly idempotencyKeys: Array<string>
  readonly count: (name: string) => number
  readonly stderr: Array<string>
  /** The harness's config directory (set once the worker is built). */
  readonly configDir?: string
}

const bump = (kit: Kit, name: string) => kit.sideEffects.set(name, kit.count(name) + 1)

/** The demo tools: a read, an idempotent write, and a write that runs at most once (approval by default). */
export const tools = (kit: Kit) => ({
  get_weather: ClaudeAgentSdkRunner.claudeTool({
    description: "The weather of a city.",
    inputSchema: { city: z.string() },
    effect: "read",
    execute: ({ city }) => {
      bump(kit, "get_weather")
      return { city, temperature: 21 }
    }
  }),
  save_note: ClaudeAgentSdkRunner.claudeTool({
    description: "Saves a note (idempotent by key).",
    inputSchema: { text: z.string() },
    effect: "idempotent_write",
    execute: ({ text }, { idempotencyKey }) => {
      bump(kit, "save_note")
      kit.idempotencyKeys.push(idempotencyKey)
      return `saved ${text}`
    }
  }),
  send_email: ClaudeAgentSdkRunner.claudeTool({
    description: "Sends an email.",
    inputSchema: { to: z.string() },
    effect: "non_idempotent_write",
    execute: ({ to }) => {
      bump(kit, "send_email")
      return `sent to ${to}`
    }
  })
})

/** The tool results (by tool_use_id, as text) in the last user message of a Messages request. */
export const lastToolResults = (request: ScriptedAnthropic.MessagesRequest): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const m of request.messages) {
    if (m.role !== "user" || !Array.isArray(m.content)) continue
    for (const part of m.content as Array<any>) {
      if (part.type !== "tool_result") continue
      const content = part.content
      out[part.tool_use_id] = Array.isArray(content)
        ? content.map((c: any) => (c.type === "text" ? c.text : "")).join("")
        : String(content ?? "")
    }
  }
  return out
}

/** The user texts of a Messages request, in order. */
export const userTexts = (request: ScriptedAnthropic.MessagesRequest): Array<string> =>
  request.messages.flatMap((m) =>
    m.role !== "user"
      ? []
      : typeof m.content === "string"
        ? [m.content]
        : (m.content as Array<any>).filter((p) => p.type === "text").map((p) => String(p.text))
  )

/** Runs `body` with a worker (Claude Agent SDK runner + scripted server) and a client on a fresh engine. */
export const withClaudeSession = <A, E>(
  reply: (
    request: ScriptedAnthropic.MessagesRequest,
    index: number
  ) => ScriptedAnthropic.ScriptedReply | Promise<ScriptedAnthropic.ScriptedReply>,
  body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>,
  options?: {
    readonly toolPolicies?: AgentSessionFlow.AgentSessionOptions["toolPolicies"]
    /** Mirror transcripts to a `SqlSessionStore` on the engine's database. */
    readonly sessionStore?: boolean
    /** The engine; a fresh embedded one by default. */
    readonly engine?: EngineFactory
    /** Overrides of the agent (such as `builtInTools`). */
    readonly agent?: Partial<ClaudeAgentSdkRunner.ClaudeAgent>
  }
) =>
  Effect.gen(function* () {
    const server = yield* Effect.acquireRelease(
      Effect.promise(() => ScriptedAnthropic.start(reply)),
      (s) => Effect.promise(() => s.close())
    )
    const kit: Kit = {
      server,
      sideEffects: new Map(),
      idempotencyKeys: [],
      count: (name) => kit.sideEffects.get(name) ?? 0,
      stderr: []
    }
    const configDir = mkdtempSync(join(dir, "config-"))
    const flow = AgentSessionFlow.make({
      flowType: FLOW_TYPE,
      retryInitialInterval: "100 millis",
      ...(options?.toolPolicies ? { toolPolicies: options.toolPolicies } : {})
    })
    const engine =
      options?.engine?.({ maxConcurrentTasks: 64 }) ??
      Engine.layerEmbedded({
        filename: join(dir, `claude-${process.pid}-${++n}.db`),
        pollInterval: "50 millis",
        maxConcurrentTasks: 64
      })
    const agent: ClaudeAgentSdkRunner.ClaudeAgent = {
      name: "claude-test",
      model: "claude-scripted-1",
      configDir,
      tools: tools(kit),
      env: offlineEnv(server.url, configDir),
      stderr: (d) => kit.stderr.push(d),
      ...options?.agent
    }
    const runner = options?.sessionStore
      ? Layer.effect(
          Runner.AgentFrameworkRunner,
          Effect.map(SqlSessionStore.make, (store) => ClaudeAgentSdkRunner.make({ ...agent, sessionStore: store }))
        )
      : ClaudeAgentSdkRunner.layer(agent)
    const worker = AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(runner))
    return yield* body({ ...kit, configDir }).pipe(
      Effect.provide(
        Layer.mergeAll(worker, AgentSessionClient.layer(FLOW_TYPE)).pipe(Layer.provideMerge(engine))
      ) as any
    ) as Effect.Effect<A, E>
  }).pipe(Effect.scoped) as Effect.Effect<A, unknown>

/** The harness's environment for running offline against the scripted server. */
export const offlineEnv = (baseUrl: string, home: string): Record<string, string> => ({
  HOME: home,
  ANTHROPIC_BASE_URL: baseUrl,
  ANTHROPIC_API_KEY: "sk-ant-test-dummy",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
  DISABLE_AUTOUPDATER: "1"
})

/** Polls until `predicate` holds (the harness is a real process on a loaded machine: 150 s at most). */
export const awaitSnapshot = (sessionId: string, predicate: (s: Wire.AgentSnapshot) => boolean, what: string) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const timeout = Effect.die(new Error(`timed out waiting for ${what}`))
    return yield* client
      .getSnapshot(sessionId)
      .pipe(
        Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: predicate }),
        Effect.timeoutOrElse({ duration: "150 seconds", orElse: () => timeout })
      )
  })

export const awaitTurns = (sessionId: string, turns: number) =>
  awaitSnapshot(
    sessionId,
    (s) => s.state !== null && s.state.turnCount >= turns && s.state.activeTurnId === null,
    `${turns} finished turns`
  )

export const stepShape = (sessionId: string) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    return (yield* client.stepExecutions(sessionId)).map((s) => s.stepType)
  })
