/**
 * The chat on the Mastra runner (`npm start -- --runner mastra`): the same tools, MCP tools included, as
 * Mastra tools (`createTool`) that each run in their own tool Step, the same instructions, and the same
 * model: the scripted demonstration model, or OpenAI when `OPENAI_API_KEY` is set. Mastra takes AI SDK
 * model objects, so the model needs no conversion.
 */
import type { AiSdkTool } from "@durable-agent/runner-ai-sdk"
import { MastraRunner, type MastraTool } from "@durable-agent/runner-mastra"
import type { Runner, Wire } from "@durable-agent/session"
import { createTool } from "@mastra/core/tools"
import type { LanguageModel } from "ai"
import type { Layer } from "effect/Layer"
import { INSTRUCTIONS, makeTools } from "./agent.ts"
import type { ChatConfig } from "./config.ts"

/** An AI SDK runner tool of the chat as a Mastra tool with the same schema and function. */
const fromAiSdkTool = (name: string, t: AiSdkTool): MastraTool =>
  createTool({
    id: name,
    description: t.description ?? name,
    // the chat's tools declare zod object schemas (or JSON schemas for MCP tools), which Mastra takes as they are
    inputSchema: t.inputSchema as any,
    execute: async (input, context) => {
      const call = MastraRunner.durableToolCall(context)
      if (call === undefined) throw new Error(`${name} runs only in a tool Step`)
      // AI SDK runner tools throw the same ToolRetryableError class the Mastra runner reads
      return t.execute(input, { ...call, abortSignal: context.abortSignal ?? new AbortController().signal })
    }
  })

/** The runner layer and how the greeting names the model. */
export const mastraRunner = (
  config: ChatConfig,
  model: LanguageModel,
  modelLabel: string,
  mcpTools: Readonly<Record<string, AiSdkTool>>
): { readonly layer: Layer<Runner.AgentFrameworkRunner>; readonly label: string } => {
  if (typeof model === "string") throw new Error("the Mastra runner takes a model object, not a model name")
  const tools = { ...makeTools(config.workspace), ...mcpTools }
  const toolEffects: Record<string, Wire.ToolEffect> = {}
  for (const [name, t] of Object.entries(tools)) if (t.effect !== undefined) toolEffects[name] = t.effect
  return {
    layer: MastraRunner.layer({
      name: "chat",
      model,
      instructions: INSTRUCTIONS,
      tools: Object.fromEntries(Object.entries(tools).map(([name, t]) => [name, fromAiSdkTool(name, t)])),
      toolEffects
    }),
    label: `${modelLabel}, Mastra runner`
  }
}
