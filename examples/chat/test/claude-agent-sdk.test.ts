// The chat's Claude Agent SDK runner (`--runner claude-agent-sdk`) without the terminal: the demo model's turn
// through the real Claude Code binary against the scripted Messages server (no ANTHROPIC_API_KEY) — two
// parallel reads inline, a write that waits for approval beside a listing, the answer — through a session on
// the embedded engine, with a copy of the workspace.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { claudeAgentSdkRunner } from "../src/claude-agent-sdk.ts"
import { runnerArgument } from "../src/openai-agents.ts"
import { chatApp, demoTurn, seededWorkspace } from "./support.ts"

describe("chat on the Claude Agent SDK runner", () => {
  it("reads --runner claude-agent-sdk from the command line", () => {
    assert.strictEqual(runnerArgument(["--runner", "claude-agent-sdk"]), "claude-agent-sdk")
    assert.strictEqual(runnerArgument(["--runner=claude-agent-sdk"]), "claude-agent-sdk")
    assert.throws(() => runnerArgument(["--runner", "claude"]), /unknown runner claude: .*claude-agent-sdk/)
  })

  it.live(
    "the demo turn on the scripted server: inline reads, an approved write in its own Step, the answer",
    () =>
      Effect.gen(function* () {
        const { database, workspace } = yield* seededWorkspace("chat-claude-")
        const runner = claudeAgentSdkRunner({ database, workspace, model: { _tag: "Demo" } }, {})
        assert.include(runner.label, "Claude Agent SDK runner")
        assert.include(runner.label, "scripted")
        yield* Effect.gen(function* () {
          const { done, steps } = yield* demoTurn(workspace, { timeout: "150 seconds", interval: "100 millis" })
          // a whole-turn harness: the reads ran inside the RunModels, the write in its own Step
          assert.strictEqual(steps.filter((s) => s === "CallSingleAttemptTool").length, 1, "the write in its own Step")
          assert.strictEqual(steps.filter((s) => s === "CallTool").length, 0, "no read has a Step")
          assert.strictEqual(steps.filter((s) => s === "RunModel").length, 2)
          // the stored turn keeps the harness's messages: the reads' calls and results, then the answer
          const reads = done.messages.filter((m) => m.role === "tool" && m.toolName === "read_file")
          assert.strictEqual(reads.length, 2)
        }).pipe(Effect.provide(chatApp(runner.layer, database)))
      }).pipe(Effect.scoped),
    240_000
  )
})
