// What the OpenAI Agents runner adds to the conformance suite's built-in checks, on the embedded and cluster
// engines: the runner adds the built-ins to the agent graph, enabled only in its own runs.
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { type Agent, RunContext } from "@openai/agents"
import { assistantMessage } from "@openai/agents/testing"
import * as Effect from "effect/Effect"
import { awaitTurns, clusterEngine, embeddedEngine, type Kit, testAgent, withOpenAiSession } from "./support.ts"

/** The tool names the model call at `index` was offered. */
const offeredTools = (kit: Kit, index: number) => (kit.model.calls[index]?.request.tools ?? []).map((t) => t.name)

for (const [engineName, engine] of [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
] as const) {
  describe(`OpenAI Agents runner on the ${engineName} engine: built-in tools`, () => {
    it.live("a session without built-ins offers none; outside the runner's runs the built-ins stay disabled", () => {
      let agent: Agent<any, any> | undefined
      return withOpenAiSession(
        engine,
        [[assistantMessage("Hi.")]],
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("b3", { initialMessage: "hello" })
            yield* awaitTurns("b3", 1)
            const own = ["flaky_write", "get_weather", "save_note", "send_email"]
            assert.deepStrictEqual(offeredTools(kit, 0).toSorted(), own)
            // the runner added the built-ins to the agent, enabled only in its own runs
            assert.includeMembers(
              agent!.tools.map((t) => t.name),
              ["ask_user", "durable_wait", "write_todos"]
            )
            const outside = yield* Effect.promise(() => agent!.getAllTools(new RunContext({})))
            assert.deepStrictEqual(outside.map((t) => t.name).toSorted(), own)
          }),
        {
          agent: (kit) => {
            agent = testAgent(kit)
            return agent
          }
        }
      )
    })
  })
}
