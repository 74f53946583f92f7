// Test support: a session worker whose runner is the OpenAI Agents runner with the SDK's ScriptedModel, on a
// fresh engine (embedded SQLite or cluster Postgres, the session tests' engine factories); tools count
// their side effects.
import type { Client } from "@durable-agent/engine"
import * as Conformance from "@durable-agent/runner-kit/Conformance"
import type { AgentSessionClient, AgentSessionFlow } from "@durable-agent/session"
import { Agent, type AgentInputItem } from "@openai/agents"
import { ScriptedModel, type ScriptedModelInput } from "@openai/agents/testing"
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import { z } from "zod"
import type { EngineFactory } from "../../session/test/support.ts"
import { OpenAiAgentsRunner, openAiAgentsTool } from "../src/index.ts"
import { outputText } from "../src/internal/items.ts"

export { clusterEngine, type EngineFactory, embeddedEngine } from "../../session/test/support.ts"

export const FLOW_TYPE = "OpenAiAgentsTestAgent"

export interface Kit {
  readonly model: ScriptedModel
  readonly sideEffects: Map<string, number>
  readonly idempotencyKeys: Array<string>
  readonly count: (name: string) => number
}

const bump = (kit: Kit, name: string) => kit.sideEffects.set(name, kit.count(name) + 1)

/** The demo tools: a read, an idempotent write, a write that runs at most once, and one that throws. */
export const tools = (kit: Kit) => [
  openAiAgentsTool({
    name: "get_weather",
    description: "The weather of a city.",
    parameters: z.object({ city: z.string() }),
    effect: "read",
    execute: ({ city }) => {
      bump(kit, "get_weather")
      return { city, temperature: 21 }
    }
  }),
  openAiAgentsTool({
    name: "save_note",
    description: "Saves a note (idempotent by key).",
    parameters: z.object({ text: z.string() }),
    effect: "idempotent_write",
    execute: ({ text }, { idempotencyKey }) => {
      bump(kit, "save_note")
      kit.idempotencyKeys.push(idempotencyKey)
      return `saved ${text}`
    }
  }),
  openAiAgentsTool({
    name: "send_email",
    description: "Sends an email.",
    parameters: z.object({ to: z.string() }),
    effect: "non_idempotent_write",
    execute: ({ to }) => {
      bump(kit, "send_email")
      return `sent to ${to}`
    }
  }),
  openAiAgentsTool({
    name: "flaky_write",
    description: "A write that fails after it took effect.",
    parameters: z.object({}),
    effect: "non_idempotent_write",
    execute: () => {
      bump(kit, "flaky_write")
      throw new Error("the mail server hung up")
    }
  })
]

/** The test agent: every demo tool, and a handoff to a billing agent that has the weather tool. */
export const testAgent = (kit: Kit) => {
  const all = tools(kit)
  const billing = new Agent({
    name: "billing",
    instructions: "You handle billing.",
    model: kit.model,
    tools: all.filter((t) => t.name === "get_weather")
  })
  return new Agent({
    name: "triage",
    instructions: "You are a test agent.",
    model: kit.model,
    tools: all,
    handoffs: [billing]
  })
}

export interface Options {
  /** The entry agent; {@link testAgent} when omitted. */
  readonly agent?: ((kit: Kit) => Agent<any, any>) | undefined
  readonly toolPolicies?: AgentSessionFlow.AgentSessionOptions["toolPolicies"]
  readonly interruptDeadline?: AgentSessionFlow.AgentSessionOptions["interruptDeadline"]
  readonly builtInTools?: AgentSessionFlow.AgentSessionOptions["builtInTools"]
  /** Services the worker is built with (a `SessionTracer` layer). */
  readonly services?: Layer.Layer<any> | undefined
}

/** Runs `body` with a worker (OpenAI Agents runner + scripted model) and an AgentSessionClient on `engine`. */
export const withOpenAiSession = <A, E>(
  engine: EngineFactory,
  script: ReadonlyArray<ScriptedModelInput>,
  body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>,
  options?: Options
) => {
  const kit: Kit = { model: new ScriptedModel(script), ...Conformance.sideEffects() }
  return Conformance.withRunnerSession(
    {
      flowType: FLOW_TYPE,
      runner: OpenAiAgentsRunner.layer({ agent: (options?.agent ?? testAgent)(kit) }),
      engine: engine({}),
      flow: options,
      services: options?.services
    },
    body(kit)
  )
}

/** Polling helpers and the Step types of a session's executions, from the session's own tests. */
export { awaitSnapshot, awaitTurns, stepShape } from "../../session/test/support.ts"

/** The input items of the model call at `index`. */
export const prompt = (kit: Kit, index: number): ReadonlyArray<AgentInputItem> => {
  const input = kit.model.calls[index]?.request.input
  return typeof input === "string" ? [{ role: "user", content: input }] : (input ?? [])
}

/** Tool results in a prompt, by tool call ID, as text. */
export const toolResultsIn = (items: ReadonlyArray<AgentInputItem>): Record<string, string> =>
  Object.fromEntries(
    items.flatMap((item) => (item.type === "function_call_result" ? [[item.callId, outputText(item.output)]] : []))
  )
