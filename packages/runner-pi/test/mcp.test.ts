// MCP tools in this runner against @modelcontextprotocol/server-everything (the runner kit's shared MCP tests):
// the source's tools are the runner's `jsonSchemaTools`, offered to the Pi model with their JSON Schemas.
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import { mcpSuite } from "../../runner-kit/test/support/mcp-suite.ts"
import { PiRunner, ScriptedProvider } from "../src/index.ts"

const jsonSchemaHarness: Conformance.RunnerHarness = {
  name: "Pi runner (JSON-Schema tools)",
  make: ({ player, tools }) =>
    PiRunner.layer({
      name: "pi-mcp",
      model: ScriptedProvider.fromPlayer(player).model,
      systemPrompt: "You are a test agent.",
      jsonSchemaTools: tools
    })
}

mcpSuite(jsonSchemaHarness)
