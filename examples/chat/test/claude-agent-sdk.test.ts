// The chat's Claude Agent SDK runner (`--runner claude-agent-sdk`) without the terminal: the demo model's turn
// through the real Claude Code binary against the scripted Messages server (no ANTHROPIC_API_KEY) — two
// parallel reads inline, a write that waits for approval beside a listing, the answer — through a session on
// the embedded engine, with a copy of the workspace.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Client, Engine } from "@durable-agent/engine"
import { AgentSessionClient, AgentSessionFlow } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { FLOW_TYPE, flow } from "../src/agent.ts"
import { claudeAgentSdkRunner } from "../src/claude-agent-sdk.ts"
import { runnerArgument } from "../src/openai-agents.ts"

const SEED = fileURLToPath(new URL("../workspace", import.meta.url))

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
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => mkdtempSync(join(tmpdir(), "chat-claude-"))),
          (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
        )
        const workspace = join(dir, "workspace")
        // the tracked seed only: a demo run (`npm start`) leaves its approved summary.md in the folder
        mkdirSync(workspace, { recursive: true })
        for (const file of ["notes.md", "todo.md"]) cpSync(join(SEED, file), join(workspace, file))
        const runner = claudeAgentSdkRunner({ database: join(dir, "chat.db"), workspace, model: { _tag: "Demo" } }, {})
        assert.include(runner.label, "Claude Agent SDK runner")
        assert.include(runner.label, "scripted")
        const app = Layer.mergeAll(
          AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(runner.layer)),
          AgentSessionClient.layer(FLOW_TYPE)
        ).pipe(
          Layer.provideMerge(
            Engine.layerEmbedded({ filename: join(dir, "chat.db"), pollInterval: "50 millis", maxConcurrentTasks: 64 })
          )
        )
        yield* Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("c", { initialMessage: "summarize the notes" })
          const waiting = yield* client.getSnapshot("c").pipe(
            Effect.repeat({
              schedule: Schedule.spaced("100 millis"),
              until: (s) => s.pendingInterrupts.length === 1
            }),
            Effect.timeout("150 seconds")
          )
          assert.strictEqual(waiting.pendingInterrupts[0]!.toolName, "write_file")
          assert.isTrue(
            yield* client.resolveInterrupt("c", {
              interruptId: waiting.pendingInterrupts[0]!.interruptId,
              approved: true
            })
          )
          const done = yield* client.getSnapshot("c").pipe(
            Effect.repeat({
              schedule: Schedule.spaced("100 millis"),
              until: (s) => (s.state?.turnCount ?? 0) >= 1 && s.state?.activeTurnId === null
            }),
            Effect.timeout("150 seconds")
          )
          const answer = done.messages[done.messages.length - 1]!
          assert.match(answer.text ?? "", /^Done: I wrote \d+ bytes to summary.md/)
          assert.include(readFileSync(join(workspace, "summary.md"), "utf8"), "# Summary")
          const steps = (yield* (yield* Client.Client).stepExecutions("c")).map((s) => s.stepType)
          // a whole-turn harness: the reads ran inside the RunModels, the write in its own Step
          assert.strictEqual(steps.filter((s) => s === "CallSingleAttemptTool").length, 1, "the write in its own Step")
          assert.strictEqual(steps.filter((s) => s === "CallTool").length, 0, "no read has a Step")
          assert.strictEqual(steps.filter((s) => s === "RunModel").length, 2)
          // the stored turn keeps the harness's messages: the reads' calls and results, then the answer
          const reads = done.messages.filter((m) => m.role === "tool" && m.toolName === "read_file")
          assert.strictEqual(reads.length, 2)
        }).pipe(Effect.provide(app))
      }).pipe(Effect.scoped),
    240_000
  )
})
