/**
 * The chat on the Pi runner (`npm start -- --runner pi`): the same tools and instructions as the AI SDK
 * agent, as Pi `AgentTool`s (their zod schemas as JSON Schema, which Pi validates like TypeBox schemas) that
 * each run in their own tool Step. The model is pi-ai's OpenAI model when `OPENAI_API_KEY` is set, else the
 * same scripted demonstration model on the scripted pi-ai provider (pi-ai's faux provider), streaming its
 * answers.
 *
 * MCP tools (`--mcp`) are AI SDK tools of the other runner and are not offered here.
 */
import type { AiSdkTool } from "@durable-agent/runner-ai-sdk"
import { currentToolCall, PiRunner, type PiTool, ScriptedProvider } from "@durable-agent/runner-pi"
import type { Runner } from "@durable-agent/session"
import { type Context, getModel, type Model, type TSchema } from "@mariozechner/pi-ai"
import type { Layer } from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { z } from "zod"
import { demoAnswer, INSTRUCTIONS, makeTools } from "./agent.ts"
import type { ChatConfig } from "./config.ts"

/** An AI SDK tool of the chat as a Pi tool with the same schema (as JSON Schema), effect and function. */
const fromAiSdkTool = (name: string, t: AiSdkTool): PiTool => ({
  name,
  label: name,
  description: t.description ?? name,
  parameters: z.toJSONSchema(t.inputSchema as z.ZodType) as unknown as TSchema,
  effect: t.effect,
  execute: async (toolCallId, params, signal) => {
    const call = currentToolCall()
    if (call === undefined) throw new Error(`${name} runs only in a tool Step`)
    // the chat's tools throw the runner kit's ToolRetryableError, which the Pi runner reads too
    const value = await t.execute(params, { ...call, toolCallId, abortSignal: signal ?? new AbortController().signal })
    return { content: [{ type: "text", text: typeof value === "string" ? value : JSON.stringify(value) }], details: {} }
  }
})

/** The demo model's prompt (the AI SDK form it reads) from Pi's context. */
const toDemoPrompt = (context: Context): Parameters<typeof demoAnswer>[0] =>
  context.messages.map((m) => {
    if (m.role === "toolResult") {
      const value = m.content.map((b) => (b.type === "text" ? b.text : "")).join("")
      return {
        role: "tool" as const,
        content: [
          {
            type: "tool-result" as const,
            toolCallId: m.toolCallId,
            toolName: m.toolName,
            output: { type: "text", value }
          }
        ]
      }
    }
    if (m.role === "user") {
      const text =
        typeof m.content === "string" ? m.content : m.content.map((b) => (b.type === "text" ? b.text : "")).join("")
      return { role: "user" as const, content: [{ type: "text" as const, text }] }
    }
    return { role: "assistant" as const, content: [] }
  }) as unknown as Parameters<typeof demoAnswer>[0]

/** Model calls one demo process answers. */
const DEMO_CALLS = 10_000

/** The scripted demonstration model on the scripted pi-ai provider: the demo's answers, streamed. */
const demoModel = (): Model<string> =>
  ScriptedProvider.make(
    Array.from({ length: DEMO_CALLS }, () => (context: Context) => demoAnswer(toDemoPrompt(context))),
    { modelId: "demo", provider: "demo", tokensPerSecond: 100 }
  ).model

/** The runner layer and how the greeting names the model. */
export const piRunner = (
  config: ChatConfig
): { readonly layer: Layer<Runner.AgentFrameworkRunner>; readonly label: string } => {
  const tools = Object.entries(makeTools(config.workspace)).map(([name, t]) => fromAiSdkTool(name, t))
  const real = config.model._tag === "OpenAI" ? config.model : undefined
  return {
    layer: PiRunner.layer({
      name: "chat",
      model: real === undefined ? demoModel() : getModel("openai", real.modelId as "gpt-4.1-mini"),
      systemPrompt: INSTRUCTIONS,
      tools,
      ...(real === undefined ? {} : { streamOptions: { apiKey: Redacted.value(real.apiKey) } })
    }),
    label:
      real === undefined
        ? "demo (scripted; set OPENAI_API_KEY for a real model), Pi runner"
        : `OpenAI ${real.modelId}, Pi runner`
  }
}
