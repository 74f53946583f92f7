// The AI SDK runner as the runner kit's conformance suite builds it: the scripted AI SDK model plays the
// suite's script, and each suite tool is an AI SDK runner tool over its JSON Schema.
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import { jsonSchema } from "ai"
import { AiSdkRunner, aiSdkTool, ScriptedModel } from "../src/index.ts"

export const harness: Conformance.RunnerHarness = {
  name: "AI SDK runner",
  make: ({ player, tools }) =>
    AiSdkRunner.layer({
      name: "ai-sdk-conformance",
      model: ScriptedModel.fromPlayer(player),
      instructions: "You are a test agent.",
      tools: Object.fromEntries(
        tools.map((t) => [
          t.name,
          aiSdkTool({
            description: t.description,
            inputSchema: jsonSchema<{ readonly [key: string]: unknown }>(t.parameters as any),
            effect: t.effect,
            execute: t.execute
          })
        ])
      )
    })
}
