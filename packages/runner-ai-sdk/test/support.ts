// Test support: a session worker whose runner is the AI SDK runner with a scripted MockLanguageModelV4,
// on a fresh embedded engine; tools count their side effects.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client, Engine } from "@durable-agent/engine"
import * as Conformance from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient, type AgentSessionFlow, type Wire } from "@durable-agent/session"
import type { ModelMessage } from "ai"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { z } from "zod"
import type { ModelProbe } from "../../session/test/support/controls.ts"
import { clusterEngine, type EngineFactory, embeddedEngine } from "../../session/test/support.ts"
import { AiSdkRunner, type AiSdkTool, aiSdkTool, ScriptedModel } from "../src/index.ts"

export { clusterEngine, embeddedEngine }

export const FLOW_TYPE = "AiSdkTestAgent"

const dir = mkdtempSync(join(tmpdir(), "das-aisdk-"))
process.on("exit", () => rmSync(dir, { recursive: true, force: true }))
let n = 0

export interface Kit {
  readonly model: ReturnType<typeof ScriptedModel.make>
  readonly sideEffects: Map<string, number>
  readonly idempotencyKeys: Array<string>
  readonly count: (name: string) => number
}

const bump = (kit: Kit, name: string) => kit.sideEffects.set(name, kit.count(name) + 1)

/** The demo tools: a read, an idempotent write, and a write that runs at most once (approval by default). */
export const tools = (kit: Kit): Record<string, AiSdkTool> => ({
  get_weather: aiSdkTool({
    description: "The weather of a city.",
    inputSchema: z.object({ city: z.string() }),
    effect: "read",
    execute: ({ city }) => {
      bump(kit, "get_weather")
      return { city, temperature: 21 }
    }
  }),
  save_note: aiSdkTool({
    description: "Saves a note (idempotent by key).",
    inputSchema: z.object({ text: z.string() }),
    effect: "idempotent_write",
    execute: ({ text }, { idempotencyKey }) => {
      bump(kit, "save_note")
      kit.idempotencyKeys.push(idempotencyKey)
      return `saved ${text}`
    }
  }),
  send_email: aiSdkTool({
    description: "Sends an email.",
    inputSchema: z.object({ to: z.string() }),
    effect: "non_idempotent_write",
    execute: ({ to }) => {
      bump(kit, "send_email")
      return `sent to ${to}`
    }
  }),
  flaky_write: aiSdkTool({
    description: "A write that fails after it took effect.",
    inputSchema: z.object({}),
    effect: "non_idempotent_write",
    execute: () => {
      bump(kit, "flaky_write")
      throw new Error("the mail server hung up")
    }
  })
})

/** Runs `body` with a worker (AI SDK runner + scripted model) and an AgentSessionClient on a fresh engine. */
export const withAiSdkSession = <A, E>(
  script: ReadonlyArray<ScriptedModel.Step>,
  body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>,
  options?: {
    readonly toolPolicies?: AgentSessionFlow.AgentSessionOptions["toolPolicies"]
    readonly interruptDeadline?: AgentSessionFlow.AgentSessionOptions["interruptDeadline"]
    readonly builtInTools?: AgentSessionFlow.AgentSessionOptions["builtInTools"]
    /** The engine; a fresh embedded one by default. */
    readonly engine?: EngineFactory
    /** Services added to the worker, such as the session's `Tracer` layer. */
    readonly services?: Layer.Layer<any>
  }
) => {
  const kit: Kit = { model: ScriptedModel.make(script), ...Conformance.sideEffects() }
  const engine =
    options?.engine?.({ maxConcurrentTasks: 64 }) ??
    Engine.layerEmbedded({
      filename: join(dir, `aisdk-${process.pid}-${++n}.db`),
      pollInterval: "50 millis",
      maxConcurrentTasks: 64
    })
  return Conformance.withRunnerSession(
    {
      flowType: FLOW_TYPE,
      runner: AiSdkRunner.layer({
        name: "ai-sdk-test",
        model: kit.model,
        instructions: "You are a test agent.",
        tools: tools(kit)
      }),
      engine,
      flow: options,
      services: options?.services
    },
    body(kit)
  )
}

/** Polls until `predicate` holds (20 s at most). */
export const awaitSnapshot = (sessionId: string, predicate: (s: Wire.AgentSnapshot) => boolean, what: string) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const snapshot = client.getSnapshot(sessionId)
    const timeout = Effect.die(new Error(`timed out waiting for ${what}`))
    return yield* snapshot.pipe(
      Effect.repeat({ schedule: Schedule.spaced("30 millis"), until: predicate }),
      Effect.timeoutOrElse({ duration: "20 seconds", orElse: () => timeout })
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

/** The AI SDK prompt of the model call at `index` (what the SDK sent to the provider). */
export const prompt = (kit: Kit, index: number): ReadonlyArray<ModelMessage> =>
  (kit.model.doStreamCalls[index]?.prompt ?? []) as unknown as ReadonlyArray<ModelMessage>

/** Tool results in a prompt, by tool call ID, as text. */
export const toolResultsIn = (messages: ReadonlyArray<ModelMessage>) =>
  Object.fromEntries(
    messages.flatMap((m) =>
      m.role === "tool"
        ? (m.content as Array<any>)
            .filter((p) => p.type === "tool-result")
            .map((p) => [p.toolCallId, p.output?.type === "text" ? p.output.value : JSON.stringify(p.output?.value)])
        : []
    )
  )

/**
 * The scripted AI SDK model (also the provider under Mastra) as the shared control checks read it: its calls,
 * the calls that saw their abort, the tools each call was offered, the tool results in each call's prompt.
 */
export const scriptedModelProbe = (model: ReturnType<typeof ScriptedModel.make>): ModelProbe => ({
  calls: () => model.doStreamCalls.length,
  aborted: () => model.abortedCalls,
  offeredTools: (index) => (model.doStreamCalls[index]?.tools ?? []).map((t) => t.name),
  toolResults: (index) =>
    toolResultsIn((model.doStreamCalls[index]?.prompt ?? []) as unknown as ReadonlyArray<ModelMessage>)
})
