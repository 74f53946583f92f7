// The OpenAI Agents runner as the runner kit's conformance suite builds it: the SDK's ScriptedModel answers
// every call with the suite's player (a `modelResponder` over the request's input items), and each suite tool
// is a gated `openAiAgentsTool` over its JSON Schema (`strict: false`).
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import { Agent, type AgentInputItem, Usage } from "@openai/agents"
import { assistantMessage, functionCall, modelResponder, ScriptedModel } from "@openai/agents/testing"
import { OpenAiAgentsRunner, openAiAgentsTool } from "../src/index.ts"
import { outputText } from "../src/internal/items.ts"

type Loose = { readonly [key: string]: any }

const userText = (item: Loose): string =>
  typeof item.content === "string"
    ? item.content
    : Array.isArray(item.content)
      ? item.content.map((p: Loose) => (typeof p.text === "string" ? p.text : "")).join("")
      : ""

const toolResult = (item: Loose): Conformance.PromptToolResult => ({
  toolCallId: String(item.callId),
  toolName: String(item.name),
  text: outputText(item.output)
})

/** The suite's view of a request: its input items and the tools it offered. */
export const promptView = (
  input: string | ReadonlyArray<AgentInputItem>,
  tools: ReadonlyArray<{ readonly name: string }> | undefined
): Conformance.ModelCallView => {
  const items = (typeof input === "string" ? [{ role: "user", content: input }] : input) as ReadonlyArray<Loose>
  const results = items.filter((i) => i.type === "function_call_result")
  const trailing = items.slice(items.findLastIndex((i) => i.type !== "function_call_result") + 1)
  return {
    userTexts: items.filter((i) => i.role === "user").map(userText),
    toolResults: results.map(toolResult),
    lastToolResults: trailing.map(toolResult),
    offeredTools: (tools ?? []).map((t) => t.name)
  }
}

export const harness: Conformance.RunnerHarness = {
  name: "OpenAI Agents runner",
  make: ({ player, tools }) => {
    const model = new ScriptedModel(
      Array.from({ length: 200 }, () =>
        modelResponder(async (call) => {
          const played = await player.play(promptView(call.request.input, call.request.tools), call.request.signal)
          return {
            usage: new Usage({ inputTokens: played.usage.inputTokens, outputTokens: played.usage.outputTokens }),
            output: [
              ...(played.text !== undefined ? [assistantMessage(played.text)] : []),
              ...played.toolCalls.map((c) =>
                functionCall(c.name, c.arguments as Record<string, unknown>, { callId: c.id })
              )
            ],
            responseId: `scripted-${played.index}`
          }
        })
      )
    )
    const agent = new Agent({
      name: "openai-conformance",
      instructions: "You are a test agent.",
      model,
      tools: tools.map((t) =>
        openAiAgentsTool({
          name: t.name,
          description: t.description,
          parameters: t.parameters as any,
          strict: false,
          effect: t.effect,
          execute: (input, options) => t.execute(input as { readonly [key: string]: unknown }, options)
        })
      )
    })
    return OpenAiAgentsRunner.layer({ agent })
  }
}
