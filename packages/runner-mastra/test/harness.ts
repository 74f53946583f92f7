// The Mastra runner as the runner kit's conformance suite builds it: the scripted AI SDK model (the provider
// under Mastra) plays the suite's script, and the suite's tools are the runner's JSON-Schema tools.

import { ScriptedModel } from "@durable-agent/runner-ai-sdk"
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import { MastraRunner } from "../src/index.ts"

export const harness: Conformance.RunnerHarness = {
  name: "Mastra runner",
  make: ({ player, tools }) =>
    MastraRunner.layer({
      name: "mastra-conformance",
      model: ScriptedModel.fromPlayer(player),
      instructions: "You are a test agent.",
      jsonSchemaTools: tools
    })
}
