// The chat's OpenAI Agents runner (`--runner openai-agents`) without the terminal: the demo model's turn —
// two parallel reads, a write that waits for approval beside a listing, the answer — through a session on
// the embedded engine, with a copy of the workspace.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { openAiAgentsRunner, runnerArgument } from "../src/openai-agents.ts"
import { chatApp, demoTurn, seededWorkspace } from "./support.ts"

describe("chat on the OpenAI Agents runner", () => {
  it("reads --runner from the command line", () => {
    assert.strictEqual(runnerArgument([]), "ai-sdk")
    assert.strictEqual(runnerArgument(["--runner", "openai-agents"]), "openai-agents")
    assert.strictEqual(runnerArgument(["--runner=openai-agents"]), "openai-agents")
    assert.strictEqual(runnerArgument(["--runner", "stepwise"]), "stepwise")
    assert.throws(() => runnerArgument(["--runner", "nope"]), /unknown runner nope/)
  })

  it.live("the demo turn: reads, an approved write, the answer", () =>
    Effect.gen(function* () {
      const { database, workspace } = yield* seededWorkspace("chat-openai-")
      const runner = openAiAgentsRunner({ database, workspace, model: { _tag: "Demo" } })
      assert.include(runner.label, "OpenAI Agents SDK runner")
      yield* Effect.gen(function* () {
        const { steps } = yield* demoTurn(workspace)
        assert.deepStrictEqual(steps.filter((s) => s === "RunModel").length, 3, "one model call per RunModel")
      }).pipe(Effect.provide(chatApp(runner.layer, database)))
    }).pipe(Effect.scoped)
  )
})
