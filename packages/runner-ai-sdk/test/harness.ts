// The AI SDK runner as the runner kit's conformance suite builds it: the scripted AI SDK model plays the
// suite's script, and the suite's tools are the runner's JSON-Schema tools.
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import { AiSdkRunner, ScriptedModel } from "../src/index.ts"

export const harness: Conformance.RunnerHarness = {
  name: "AI SDK runner",
  make: ({ player, tools }) =>
    AiSdkRunner.layer({
      name: "ai-sdk-conformance",
      model: ScriptedModel.fromPlayer(player),
      instructions: "You are a test agent.",
      jsonSchemaTools: tools
    })
}
