/**
 * The chat on the OpenAI Agents SDK runner (`npm start -- --runner openai-agents`): the same tools and
 * instructions as the AI SDK agent, as an `@openai/agents` Agent whose function tools each run in their
 * own tool Step. The model is a real OpenAI model when `OPENAI_API_KEY` is set (through the SDK's OpenAI
 * provider), else the same scripted demonstration model, answering the SDK's input items.
 *
 * MCP tools (`--mcp`) are AI SDK tools of the other runner and are not offered here.
 */
import { type AiSdkTool, ToolRetryableError as AiSdkToolRetryableError } from "@durable-agent/runner-ai-sdk"
import { OpenAiAgentsRunner, openAiAgentsTool, ToolRetryableError } from "@durable-agent/runner-openai-agents"
import type { Runner, Wire } from "@durable-agent/session"
import { Agent, type AgentInputItem, OpenAIProvider } from "@openai/agents"
import { assistantMessage, functionCall, modelStreamResponder, ScriptedModel } from "@openai/agents/testing"
import * as Duration from "effect/Duration"
import type { Layer } from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { demoAnswer, INSTRUCTIONS, makeTools } from "./agent.ts"
import type { ChatConfig } from "./config.ts"

/**
 * The runner the command line asks for: `--runner openai-agents`, `mastra`, `pi` or `stepwise`, or the AI SDK
 * runner by default.
 */
export const runnerArgument = (
  argv: ReadonlyArray<string>
): "ai-sdk" | "openai-agents" | "mastra" | "pi" | "claude-agent-sdk" | "stepwise" => {
  const i = argv.indexOf("--runner")
  const value = i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith("--runner="))?.slice("--runner=".length)
  if (value === undefined || value === "ai-sdk") return "ai-sdk"
  if (
    value === "openai-agents" ||
    value === "mastra" ||
    value === "pi" ||
    value === "claude-agent-sdk" ||
    value === "stepwise"
  ) {
    return value
  }
  throw new Error(`unknown runner ${value}: use ai-sdk, openai-agents, mastra, pi, claude-agent-sdk or stepwise`)
}

/** An AI SDK tool of the chat as a gated OpenAI Agents tool with the same schema, effect and function. */
const fromAiSdkTool = (name: string, t: AiSdkTool) =>
  openAiAgentsTool({
    name,
    description: t.description ?? name,
    // the chat's tools declare zod object schemas, which the SDK takes as they are
    parameters: t.inputSchema as any,
    effect: t.effect as Wire.ToolEffect,
    execute: async (input, options) => {
      try {
        return await t.execute(input, options)
      } catch (error) {
        // the same meaning under this runner's error class
        throw error instanceof AiSdkToolRetryableError ? new ToolRetryableError(error.message) : error
      }
    }
  })

/** The demo model's prompt (the AI SDK form it reads) from the SDK's input items. */
const toDemoPrompt = (items: ReadonlyArray<AgentInputItem>): Parameters<typeof demoAnswer>[0] =>
  items.map((item) => {
    if (item.type === "function_call_result") {
      const output = item.output as { type?: string; text?: string } | string
      const value = typeof output === "string" ? output : (output.text ?? JSON.stringify(output))
      return {
        role: "tool" as const,
        content: [
          {
            type: "tool-result" as const,
            toolCallId: item.callId,
            toolName: item.name,
            output: { type: "text", value }
          }
        ]
      }
    }
    if ((item.type === undefined || item.type === "message") && item.role === "user") {
      const text = typeof item.content === "string" ? item.content : JSON.stringify(item.content)
      return { role: "user" as const, content: [{ type: "text" as const, text }] }
    }
    return { role: "assistant" as const, content: [] }
  }) as unknown as Parameters<typeof demoAnswer>[0]

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Model calls one demo process answers. */
const DEMO_CALLS = 10_000

/** The scripted demonstration model on the SDK's `ScriptedModel`: the demo's answers, streamed word by word. */
const demoModel = () =>
  new ScriptedModel(
    Array.from({ length: DEMO_CALLS }, () =>
      modelStreamResponder(async function* (call) {
        const input = typeof call.request.input === "string" ? [] : call.request.input
        const answer = demoAnswer(toDemoPrompt(input))
        if (answer.delay !== undefined) await sleep(Duration.toMillis(answer.delay))
        yield { type: "response_started" }
        for (const delta of answer.textDeltas ?? [answer.text ?? ""]) {
          await sleep(40)
          yield { type: "output_text_delta", delta }
        }
        const output = [
          ...(answer.text ? [assistantMessage(answer.text)] : []),
          ...(answer.toolCalls ?? []).map((c) => functionCall(c.name, c.arguments ?? {}, { callId: c.id }))
        ]
        yield {
          type: "response_done",
          response: {
            id: `demo-${call.index}`,
            usage: { requests: 1, inputTokens: 0, outputTokens: 0, totalTokens: 0 },
            output
          }
        }
      })
    )
  )

/** The runner layer and how the greeting names the model. */
export const openAiAgentsRunner = (
  config: ChatConfig
): { readonly layer: Layer<Runner.AgentFrameworkRunner>; readonly label: string } => {
  const tools = Object.entries(makeTools(config.workspace)).map(([name, t]) => fromAiSdkTool(name, t))
  const real = config.model._tag === "OpenAI" ? config.model : undefined
  const agent = new Agent({
    name: "chat",
    instructions: INSTRUCTIONS,
    model: real === undefined ? demoModel() : real.modelId,
    tools
  })
  return {
    layer: OpenAiAgentsRunner.layer({
      agent,
      ...(real === undefined ? {} : { modelProvider: new OpenAIProvider({ apiKey: Redacted.value(real.apiKey) }) })
    }),
    label:
      real === undefined
        ? "demo (scripted; set OPENAI_API_KEY for a real model), OpenAI Agents SDK runner"
        : `OpenAI ${real.modelId}, OpenAI Agents SDK runner`
  }
}
