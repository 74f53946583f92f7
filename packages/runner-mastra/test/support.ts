// Test support: a session worker whose runner is the Mastra runner with a scripted MockLanguageModelV4, on a
// fresh engine (embedded SQLite or cluster Postgres, the session tests' factories); tools count their side
// effects.
import type { Client } from "@durable-agent/engine"
import { ScriptedModel } from "@durable-agent/runner-ai-sdk"
import * as Conformance from "@durable-agent/runner-kit/Conformance"
import type { AgentSessionClient, AgentSessionFlow } from "@durable-agent/session"
import { createTool } from "@mastra/core/tools"
import type { ModelMessage } from "ai"
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import { z } from "zod"
import type { EngineFactory } from "../../session/test/support.ts"
import { durableToolCall, MastraRunner, type MastraTool } from "../src/index.ts"

export { toolResultsIn } from "../../runner-ai-sdk/test/support.ts"
export {
  awaitSnapshot,
  awaitTurns,
  clusterEngine,
  type EngineFactory,
  embeddedEngine,
  stepShape
} from "../../session/test/support.ts"

export const FLOW_TYPE = "MastraTestAgent"

export interface Kit {
  readonly model: ReturnType<typeof ScriptedModel.make>
  readonly sideEffects: Map<string, number>
  readonly idempotencyKeys: Array<string>
  readonly count: (name: string) => number
}

const bump = (kit: Kit, name: string) => kit.sideEffects.set(name, kit.count(name) + 1)

/** The test tools, as Mastra tools: a read, an idempotent write, and two writes that run at most once. */
export const tools = (kit: Kit): Record<string, MastraTool> => ({
  get_weather: createTool({
    id: "get_weather",
    description: "The weather of a city.",
    inputSchema: z.object({ city: z.string() }),
    mcp: { annotations: { readOnlyHint: true } },
    execute: async ({ city }) => {
      bump(kit, "get_weather")
      return { city, temperature: 21 }
    }
  }),
  save_note: createTool({
    id: "save_note",
    description: "Saves a note (idempotent by key).",
    inputSchema: z.object({ text: z.string() }),
    mcp: { annotations: { idempotentHint: true } },
    execute: async ({ text }, context) => {
      bump(kit, "save_note")
      kit.idempotencyKeys.push(durableToolCall(context)?.idempotencyKey ?? "none")
      return `saved ${text}`
    }
  }),
  send_email: createTool({
    id: "send_email",
    description: "Sends an email.",
    inputSchema: z.object({ to: z.string() }),
    execute: async ({ to }) => {
      bump(kit, "send_email")
      return `sent to ${to}`
    }
  }),
  flaky_write: createTool({
    id: "flaky_write",
    description: "A write that fails after it took effect.",
    inputSchema: z.object({}),
    execute: async () => {
      bump(kit, "flaky_write")
      throw new Error("the mail server hung up")
    }
  })
})

/** Options of {@link withMastraSession}. */
export interface SessionOptions {
  readonly engine: EngineFactory
  readonly toolPolicies?: AgentSessionFlow.AgentSessionOptions["toolPolicies"]
  readonly interruptDeadline?: AgentSessionFlow.AgentSessionOptions["interruptDeadline"]
  readonly builtInTools?: AgentSessionFlow.AgentSessionOptions["builtInTools"]
  readonly agent?: Partial<MastraRunner.MastraAgent>
  /** Services the worker is built with (a `SessionTracer` layer). */
  readonly services?: Layer.Layer<any> | undefined
}

/** Runs `body` with a worker (Mastra runner + scripted model) and an AgentSessionClient on a fresh engine. */
export const withMastraSession = <A, E>(
  script: ReadonlyArray<ScriptedModel.Step>,
  options: SessionOptions,
  body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>
) => {
  const kit: Kit = { model: ScriptedModel.make(script), ...Conformance.sideEffects() }
  return Conformance.withRunnerSession(
    {
      flowType: FLOW_TYPE,
      runner: MastraRunner.layer({
        name: "mastra-test",
        model: kit.model,
        instructions: "You are a test agent.",
        tools: tools(kit),
        ...options.agent
      }),
      engine: options.engine({}),
      flow: options,
      services: options.services
    },
    body(kit)
  )
}

/** The prompt of the model call at `index` (what Mastra sent to the provider). */
export const prompt = (kit: Kit, index: number): ReadonlyArray<ModelMessage> =>
  (kit.model.doStreamCalls[index]?.prompt ?? []) as unknown as ReadonlyArray<ModelMessage>

/** The roles of a prompt, with the tool call IDs of assistant and tool messages: `assistant[a,b]`, `tool[a,b]`. */
export const promptShape = (messages: ReadonlyArray<ModelMessage>) =>
  messages.map((m) =>
    typeof m.content === "string" || m.role === "user" || m.role === "system"
      ? m.role
      : `${m.role}[${(m.content as Array<any>)
          .flatMap((p) =>
            p.type === "tool-call" || p.type === "tool-result" ? [p.toolCallId] : p.type === "text" ? ["text"] : []
          )
          .join(",")}]`
  )
