// The Mastra runner as the runner kit's conformance suite builds it: the scripted AI SDK model (the provider
// under Mastra) plays the suite's script, and each suite tool is a Mastra tool over its JSON Schema with the
// suite's effect class in `toolEffects`.

import { ScriptedModel } from "@durable-agent/runner-ai-sdk"
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import { createTool } from "@mastra/core/tools"
import { jsonSchema } from "ai"
import { durableToolCall, MastraRunner, type MastraTool } from "../src/index.ts"

export const harness: Conformance.RunnerHarness = {
  name: "Mastra runner",
  make: ({ player, tools }) =>
    MastraRunner.layer({
      name: "mastra-conformance",
      model: ScriptedModel.fromPlayer(player),
      instructions: "You are a test agent.",
      toolEffects: Object.fromEntries(tools.map((t) => [t.name, t.effect])),
      tools: Object.fromEntries(
        tools.map((t): [string, MastraTool] => [
          t.name,
          createTool({
            id: t.name,
            description: t.description,
            inputSchema: jsonSchema(t.parameters as any),
            execute: async (input: unknown, context: any) => {
              const call = durableToolCall(context)
              return t.execute(input as { readonly [key: string]: unknown }, {
                toolCallId: call?.toolCallId ?? "",
                idempotencyKey: call?.idempotencyKey ?? "",
                attempt: call?.attempt ?? 0,
                abortSignal: context?.abortSignal ?? new AbortController().signal
              })
            }
          }) as MastraTool
        ])
      )
    })
}
