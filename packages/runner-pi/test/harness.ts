// The Pi runner as the runner kit's conformance suite builds it: the scripted pi-ai provider (pi-ai's faux
// provider) plays the suite's script, and each suite tool is a Pi AgentTool over its JSON Schema (TypeBox
// schemas are JSON Schema) with the suite's effect class.
import { ToolCall } from "@durable-agent/runner-kit"
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import type { TSchema } from "@mariozechner/pi-ai"
import { currentToolCall, PiRunner, type PiTool, ScriptedProvider } from "../src/index.ts"

/** A suite tool as a Pi tool: its function gets the durable call the tool Step runs. */
export const piTool = (t: Conformance.SuiteTool): PiTool => ({
  name: t.name,
  label: t.name,
  description: t.description,
  parameters: t.parameters as unknown as TSchema,
  effect: t.effect,
  execute: async (toolCallId, params, signal) => {
    const call = currentToolCall()
    const value = await t.execute(params as { readonly [key: string]: unknown }, {
      toolCallId,
      idempotencyKey: call?.idempotencyKey ?? "",
      attempt: call?.attempt ?? 0,
      abortSignal: signal ?? new AbortController().signal
    })
    return { content: [{ type: "text", text: ToolCall.outputText(value) }], details: undefined }
  }
})

export const harness: Conformance.RunnerHarness = {
  name: "Pi runner",
  make: ({ player, tools }) =>
    PiRunner.layer({
      name: "pi-conformance",
      model: ScriptedProvider.fromPlayer(player).model,
      systemPrompt: "You are a test agent.",
      tools: tools.map(piTool)
    })
}
