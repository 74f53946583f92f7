// A session another runner started, continued on the Mastra runner over the same SQLite file: the stored
// messages are runner-neutral, so the Mastra runner rebuilds the other runner's turn from its projection
// (the chat's `--runner mastra` on a session the demo runner started).
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import { ScriptedModel } from "@durable-agent/runner-ai-sdk"
import {
  AgentSessionClient,
  AgentSessionFlow,
  ModelClient,
  type Runner,
  Stepwise,
  ToolSource
} from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { MastraRunner } from "../src/index.ts"
import { awaitTurns, FLOW_TYPE, promptShape } from "./support.ts"

const flow = AgentSessionFlow.make({ flowType: FLOW_TYPE, retryInitialInterval: "100 millis" })

/** The embedded engine on `filename`: each phase opens the same database. */
const engineOn = (filename: string) =>
  Engine.layerEmbedded({ filename, pollInterval: "20 millis", maxConcurrentTasks: 64, drainTimeout: "1 second" })

/** Runs `body` with a worker on `runner` and a client, over the engine on `filename`, then closes both. */
const phase = <A, E>(
  filename: string,
  runner: Layer.Layer<Runner.AgentFrameworkRunner>,
  body: Effect.Effect<A, E, AgentSessionClient.AgentSessionClient>
) =>
  body.pipe(
    Effect.provide(
      Layer.mergeAll(
        AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(runner)),
        AgentSessionClient.layer(FLOW_TYPE)
      ).pipe(Layer.provideMerge(engineOn(filename)))
    ),
    Effect.scoped
  ) as Effect.Effect<A, unknown>

const weather = ToolSource.tool({
  name: "get_weather",
  description: "Read the weather.",
  effect: "read",
  handler: () => Effect.succeed("sunny")
})

describe("Mastra runner: a session another runner started", () => {
  it.live("continues a Stepwise session whose turn called a tool and answered", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "mastra-handover-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const filename = join(dir, "session.db")

      // turn 1 on Stepwise: a tool call, its result, then the answer (four stored messages)
      const stepwise = Stepwise.layer({ name: "demo", instructions: "You are a test agent." }).pipe(
        Layer.provide(
          Layer.mergeAll(
            ModelClient.layerScripted([
              { toolCalls: [{ id: "w1", name: "get_weather", arguments: { city: "Oslo" } }] },
              { text: "It is sunny in Oslo." }
            ]),
            ToolSource.layer([weather])
          )
        )
      )
      yield* phase(
        filename,
        stepwise,
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s1", { initialMessage: "Weather in Oslo?" })
          yield* awaitTurns("s1", 1)
        })
      )

      // turn 2 on Mastra, same database and session
      const model = ScriptedModel.make([{ text: "Still sunny." }])
      const mastra = MastraRunner.layer({ name: "mastra-test", model, instructions: "You are a test agent." })
      const snapshot = yield* phase(
        filename,
        mastra,
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.sendUserMessage("s1", "And now?")
          return yield* awaitTurns("s1", 2)
        })
      )

      assert.strictEqual(snapshot.state!.lastTurnError, null)
      assert.deepStrictEqual(
        snapshot.messages.map((m) => [m.role, m.text ?? m.toolOutput ?? m.toolCallId]),
        [
          ["user", "Weather in Oslo?"],
          ["assistant", "w1"],
          ["tool", "sunny"],
          ["assistant", "It is sunny in Oslo."],
          ["user", "And now?"],
          ["assistant", "Still sunny."]
        ]
      )
      // the model saw the other runner's turn in order: the call, its result, then the answer
      assert.deepStrictEqual(promptShape(model.doStreamCalls[0]!.prompt as never), [
        "system",
        "user",
        "assistant[w1]",
        "tool[w1]",
        "assistant[text]",
        "user"
      ])
    })
  )
})
