// Test support: a session worker whose runner is the Pi runner on the scripted pi-ai provider (pi-ai's faux
// provider), on a fresh engine (embedded SQLite or cluster Postgres, the session tests' factories); the Pi
// tools count their side effects.
import type { Client } from "@durable-agent/engine"
import * as Conformance from "@durable-agent/runner-kit/Conformance"
import type { AgentSessionClient, AgentSessionFlow } from "@durable-agent/session"
import { type Context, Type } from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"
import type { ModelProbe } from "../../session/test/support/controls.ts"
import type { EngineFactory } from "../../session/test/support.ts"
import { currentToolCall, PiRunner, type PiTool, ScriptedProvider, ToolRetryableError } from "../src/index.ts"

export {
  awaitSnapshot,
  awaitTurns,
  clusterEngine,
  type EngineFactory,
  embeddedEngine,
  stepShape
} from "../../session/test/support.ts"

export const FLOW_TYPE = "PiTestAgent"

export interface Kit {
  readonly provider: ScriptedProvider.ScriptedProvider
  readonly sideEffects: Map<string, number>
  readonly idempotencyKeys: Array<string>
  readonly count: (name: string) => number
}

const bump = (kit: Kit, name: string) => kit.sideEffects.set(name, kit.count(name) + 1)

/** A 1x1 PNG, base64. */
export const TINY_PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

const text = (value: string) => ({ content: [{ type: "text" as const, text: value }], details: {} })

/** The test tools, as Pi AgentTools with TypeBox schemas: a read, an idempotent write, two single-attempt writes. */
export const tools = (kit: Kit): Array<PiTool<any>> => [
  {
    name: "get_weather",
    label: "Weather",
    description: "The weather of a city.",
    parameters: Type.Object({ city: Type.String() }),
    effect: "read",
    execute: async (_id, params) => {
      const { city } = params as { city: string }
      bump(kit, "get_weather")
      return text(JSON.stringify({ city, temperature: 21 }))
    }
  },
  {
    name: "save_note",
    label: "Save note",
    description: "Saves a note (idempotent by key).",
    parameters: Type.Object({ text: Type.String() }),
    effect: "idempotent_write",
    execute: async (_id, params) => {
      const args = params as { text: string }
      bump(kit, "save_note")
      kit.idempotencyKeys.push(currentToolCall()?.idempotencyKey ?? "none")
      return text(`saved ${args.text}`)
    }
  },
  {
    name: "send_email",
    label: "Send email",
    description: "Sends an email.",
    parameters: Type.Object({ to: Type.String() }),
    execute: async (_id, params) => {
      const { to } = params as { to: string }
      bump(kit, "send_email")
      return text(`sent to ${to}`)
    }
  },
  {
    name: "flaky_write",
    label: "Flaky write",
    description: "A write that fails after it took effect.",
    parameters: Type.Object({}),
    execute: async () => {
      bump(kit, "flaky_write")
      throw new Error("the mail server hung up")
    }
  },
  {
    name: "screenshot",
    label: "Screenshot",
    description: "A screenshot of a page: a caption, the PNG, and the page's size as details.",
    parameters: Type.Object({ url: Type.String() }),
    effect: "read",
    execute: async (_id, params) => {
      const { url } = params as { url: string }
      bump(kit, "screenshot")
      return {
        content: [
          { type: "text", text: `screenshot of ${url}` },
          { type: "image", data: TINY_PNG, mimeType: "image/png" }
        ],
        details: { url, width: 1, height: 1 }
      }
    }
  },
  {
    name: "busy_read",
    label: "Busy read",
    description: "A read whose first two attempts find the service busy.",
    parameters: Type.Object({}),
    effect: "read",
    execute: async () => {
      bump(kit, "busy_read")
      if ((currentToolCall()?.attempt ?? 1) < 3) throw new ToolRetryableError("503 busy")
      return text("finally")
    }
  }
]

/** Options of {@link withPiSession}. */
export interface SessionOptions {
  readonly engine: EngineFactory
  readonly toolPolicies?: AgentSessionFlow.AgentSessionOptions["toolPolicies"]
  readonly interruptDeadline?: AgentSessionFlow.AgentSessionOptions["interruptDeadline"]
  readonly builtInTools?: AgentSessionFlow.AgentSessionOptions["builtInTools"]
  readonly provider?: ScriptedProvider.ScriptedProviderOptions
  readonly agent?: Partial<PiRunner.PiAgent>
}

/** Runs `body` with a worker (Pi runner + scripted provider) and an AgentSessionClient on a fresh engine. */
export const withPiSession = <A, E>(
  script: ReadonlyArray<ScriptedProvider.Step>,
  options: SessionOptions,
  body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>
) => {
  const kit: Kit = { provider: ScriptedProvider.make(script, options.provider), ...Conformance.sideEffects() }
  return Conformance.withRunnerSession(
    {
      flowType: FLOW_TYPE,
      runner: PiRunner.layer({
        name: "pi-test",
        model: kit.provider.model,
        systemPrompt: "You are a test agent.",
        tools: tools(kit),
        ...options.agent
      }),
      engine: options.engine({}),
      flow: options
    },
    body(kit)
  ).pipe(Effect.ensuring(Effect.sync(() => kit.provider.unregister())))
}

/** The Pi context of the model call at `index` (what the runner gave pi-ai). */
export const prompt = (kit: Kit, index: number): Context =>
  kit.provider.calls[index] ?? { systemPrompt: "", messages: [] }

/** The roles of a context, with the tool call IDs of assistant and tool result messages: `assistant[text,a]`. */
export const promptShape = (context: Context): Array<string> =>
  context.messages.map((m) =>
    m.role === "user"
      ? "user"
      : m.role === "toolResult"
        ? `toolResult[${m.toolCallId}]`
        : `assistant[${m.content.map((b) => (b.type === "toolCall" ? b.id : b.type)).join(",")}]`
  )

/** The tool results a context carries, by tool call ID (their text). */
export const toolResultsIn = (context: Context): Record<string, string> =>
  Object.fromEntries(
    context.messages.flatMap((m) =>
      m.role === "toolResult"
        ? [[m.toolCallId, m.content.map((b) => (b.type === "text" ? b.text : "")).join("")] as const]
        : []
    )
  )

/** The session's control checks read the scripted provider through this probe. */
export const providerProbe = (provider: ScriptedProvider.ScriptedProvider): ModelProbe => ({
  calls: () => provider.calls.length,
  aborted: () => provider.abortedCalls,
  offeredTools: (index) => (provider.calls[index]?.tools ?? []).map((t) => t.name),
  toolResults: (index) => toolResultsIn(provider.calls[index] ?? { messages: [] })
})
