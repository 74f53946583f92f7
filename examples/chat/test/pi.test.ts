// The chat's Pi runner (`--runner pi`) without the terminal: the demo model's turn on the scripted pi-ai provider —
// two parallel reads, a write that waits for approval beside a listing, the answer — through a session on
// the embedded engine, with a copy of the workspace.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { runnerArgument } from "../src/openai-agents.ts"
import { piRunner } from "../src/pi.ts"
import { chatApp, demoTurn, seededWorkspace } from "./support.ts"

describe("chat on the Pi runner", () => {
  it("reads --runner from the command line", () => {
    assert.strictEqual(runnerArgument([]), "ai-sdk")
    assert.strictEqual(runnerArgument(["--runner", "pi"]), "pi")
    assert.strictEqual(runnerArgument(["--runner=pi"]), "pi")
    assert.throws(
      () => runnerArgument(["--runner", "nope"]),
      /unknown runner nope: use ai-sdk, openai-agents, mastra, pi/
    )
  })

  it.live("the demo turn: reads, an approved write, the answer", () =>
    Effect.gen(function* () {
      const { database, workspace } = yield* seededWorkspace("chat-pi-")
      const runner = piRunner({ database, workspace, model: { _tag: "Demo" } })
      assert.include(runner.label, "Pi runner")
      yield* Effect.gen(function* () {
        const { done, steps } = yield* demoTurn(workspace)
        assert.deepStrictEqual(steps.filter((s) => s === "RunModel").length, 3, "one model call per RunModel")
        assert.strictEqual(steps.filter((s) => s === "CallSingleAttemptTool").length, 1, "the write in its own Step")
        // the stored turn keeps Pi's messages: the reads' calls and results, then the answer
        const reads = done.messages.filter((m) => m.role === "tool" && m.toolName === "read_file")
        assert.strictEqual(reads.length, 2)
      }).pipe(Effect.provide(chatApp(runner.layer, database)))
    }).pipe(Effect.scoped)
  )
})
