// What the chat's runner tests share: a copy of the workspace's tracked seed in a temporary folder, the chat's
// session worker over a runner on the embedded engine, and the demo turn (two reads, a write that waits for
// approval, the answer) driven through the session client.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Client, Engine } from "@durable-agent/engine"
import { AgentSessionClient, AgentSessionFlow, type Runner, type Wire } from "@durable-agent/session"
import { assert } from "@effect/vitest"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { FLOW_TYPE, flow } from "../src/agent.ts"

const SEED = fileURLToPath(new URL("../workspace", import.meta.url))

/**
 * A temporary folder (removed with the scope) holding `chat.db`'s place and `workspace`, a copy of the
 * workspace's tracked seed only: a demo run (`npm start`) leaves its approved summary.md in the folder.
 */
export const seededWorkspace = (prefix: string) =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), prefix))),
      (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
    )
    const workspace = join(dir, "workspace")
    mkdirSync(workspace, { recursive: true })
    for (const file of ["notes.md", "todo.md"]) cpSync(join(SEED, file), join(workspace, file))
    return { database: join(dir, "chat.db"), workspace }
  })

/** The chat's session worker over `runner` and a session client, on the embedded engine at `database`. */
export const chatApp = (runner: Layer.Layer<Runner.AgentFrameworkRunner, unknown>, database: string) =>
  Layer.mergeAll(
    AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(runner)),
    AgentSessionClient.layer(FLOW_TYPE)
  ).pipe(
    Layer.provideMerge(Engine.layerEmbedded({ filename: database, pollInterval: "50 millis", maxConcurrentTasks: 64 }))
  )

/**
 * The demo turn of session `c` ("summarize the notes"): waits for the write_file approval, approves it, waits
 * for the turn to end (each wait `timeout` at most, polled every `interval`), and checks the answer and the
 * written summary.md. Returns the final snapshot and the Step types.
 */
export const demoTurn = (
  workspace: string,
  options: { readonly timeout: Duration.Input; readonly interval: Duration.Input } = {
    timeout: "30 seconds",
    interval: "50 millis"
  }
): Effect.Effect<
  { readonly done: Wire.AgentSnapshot; readonly steps: ReadonlyArray<string> },
  unknown,
  AgentSessionClient.AgentSessionClient | Client.Client
> =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const snapshot = (until: (s: Wire.AgentSnapshot) => boolean) =>
      client
        .getSnapshot("c")
        .pipe(Effect.repeat({ schedule: Schedule.spaced(options.interval), until }), Effect.timeout(options.timeout))
    yield* client.startSession("c", { initialMessage: "summarize the notes" })
    const waiting = yield* snapshot((s) => s.pendingInterrupts.length === 1)
    assert.strictEqual(waiting.pendingInterrupts[0]!.toolName, "write_file")
    assert.isTrue(
      yield* client.resolveInterrupt("c", { interruptId: waiting.pendingInterrupts[0]!.interruptId, approved: true })
    )
    const done = yield* snapshot((s) => (s.state?.turnCount ?? 0) >= 1 && s.state?.activeTurnId === null)
    const answer = done.messages[done.messages.length - 1]!
    assert.match(answer.text ?? "", /^Done: I wrote \d+ bytes to summary.md/)
    assert.include(readFileSync(join(workspace, "summary.md"), "utf8"), "# Summary")
    const steps = (yield* (yield* Client.Client).stepExecutions("c")).map((s) => s.stepType)
    return { done, steps }
  })
