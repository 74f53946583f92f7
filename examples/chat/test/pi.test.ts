// The chat's Pi runner (`--runner pi`) without the terminal: the demo model's turn on the scripted pi-ai provider —
// two parallel reads, a write that waits for approval beside a listing, the answer — through a session on
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
import { runnerArgument } from "../src/openai-agents.ts"
import { piRunner } from "../src/pi.ts"

const SEED = fileURLToPath(new URL("../workspace", import.meta.url))

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
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "chat-pi-"))),
        (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
      )
      const workspace = join(dir, "workspace")
      // the tracked seed only: a demo run (`npm start`) leaves its approved summary.md in the folder
      mkdirSync(workspace, { recursive: true })
      for (const file of ["notes.md", "todo.md"]) cpSync(join(SEED, file), join(workspace, file))
      const runner = piRunner({ database: join(dir, "chat.db"), workspace, model: { _tag: "Demo" } })
      assert.include(runner.label, "Pi runner")
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
        const poll = client
          .getSnapshot("c")
          .pipe(
            Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (s) => s.pendingInterrupts.length === 1 })
          )
        yield* client.startSession("c", { initialMessage: "summarize the notes" })
        const waiting = yield* poll.pipe(Effect.timeout("30 seconds"))
        assert.strictEqual(waiting.pendingInterrupts[0]!.toolName, "write_file")
        assert.isTrue(
          yield* client.resolveInterrupt("c", {
            interruptId: waiting.pendingInterrupts[0]!.interruptId,
            approved: true
          })
        )
        const done = yield* client.getSnapshot("c").pipe(
          Effect.repeat({
            schedule: Schedule.spaced("50 millis"),
            until: (s) => (s.state?.turnCount ?? 0) >= 1 && s.state?.activeTurnId === null
          }),
          Effect.timeout("30 seconds")
        )
        const answer = done.messages[done.messages.length - 1]!
        assert.match(answer.text ?? "", /^Done: I wrote \d+ bytes to summary.md/)
        assert.include(readFileSync(join(workspace, "summary.md"), "utf8"), "# Summary")
        const steps = (yield* (yield* Client.Client).stepExecutions("c")).map((s) => s.stepType)
        assert.deepStrictEqual(steps.filter((s) => s === "RunModel").length, 3, "one model call per RunModel")
        assert.strictEqual(steps.filter((s) => s === "CallSingleAttemptTool").length, 1, "the write in its own Step")
        // the stored turn keeps Pi's messages: the reads' calls and results, then the answer
        const reads = done.messages.filter((m) => m.role === "tool" && m.toolName === "read_file")
        assert.strictEqual(reads.length, 2)
      }).pipe(Effect.provide(app))
    }).pipe(Effect.scoped)
  )
})
