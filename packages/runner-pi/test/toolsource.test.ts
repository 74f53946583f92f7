// Pi tools as a session ToolSource under the built-in Stepwise runner: the TypeBox schema is what the model is
// offered, a call runs the AgentTool in its CallTool Step (validated by pi-ai, with the durable call), and a
// call that fails the schema is recorded failed without running.
import { AgentSessionClient, AgentSessionFlow, ModelClient, Stepwise } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { Type } from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { currentToolCall, PiToolSource, piTool } from "../src/index.ts"
import { awaitTurns, embeddedEngine, stepShape } from "./support.ts"

describe("PiToolSource under Stepwise", () => {
  it.live("offers the TypeBox schema, runs the Pi tool in CallTool, and refuses arguments the schema rejects", () => {
    const keys: Array<string> = []
    const requests: Array<ModelClient.ModelRequest> = []
    const weather = piTool({
      name: "get_weather",
      label: "Weather",
      description: "The weather of a city.",
      parameters: Type.Object({ city: Type.String() }),
      effect: "read",
      execute: async (_id, { city }) => {
        keys.push(currentToolCall()?.idempotencyKey ?? "none")
        return { content: [{ type: "text", text: `${city}: 21 degrees` }], details: {} }
      }
    })
    const flow = AgentSessionFlow.make({ flowType: "PiToolSourceAgent" })
    const model = ModelClient.layerScripted(
      [
        {
          toolCalls: [
            { id: "c1", name: "get_weather", arguments: { city: "Oslo" } },
            { id: "c2", name: "get_weather", arguments: { town: "Rome" } }
          ]
        },
        { text: "Oslo is 21 degrees." }
      ],
      { onRequest: (request) => void requests.push(request) }
    )
    const worker = AgentSessionFlow.layerWorker(flow).pipe(
      Layer.provide(Stepwise.layer({ name: "pi-tools", instructions: "Use the tools." })),
      Layer.provide(Layer.mergeAll(model, PiToolSource.layer([weather])))
    )
    return Effect.gen(function* () {
      const client = yield* AgentSessionClient.AgentSessionClient
      yield* client.startSession("ts1", { initialMessage: "weather" })
      const done = yield* awaitTurns("ts1", 1)
      assert.deepStrictEqual(
        requests[0]!.tools.map((t) => [t.name, t.parameters]),
        [["get_weather", { type: "object", properties: { city: { type: "string" } }, required: ["city"] }]]
      )
      const results = Object.fromEntries(
        done.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m.toolOutput])
      )
      assert.strictEqual(results.c1, "Oslo: 21 degrees")
      assert.isTrue(results.c2?.startsWith("The tool call failed: invalid get_weather arguments: "))
      assert.deepStrictEqual(keys, [`ts1/${done.messages[0]!.turnId}/c1`], "only the valid call ran")
      assert.deepStrictEqual((yield* stepShape("ts1")).filter((s) => s === "CallTool").length, 2)
    }).pipe(
      Effect.provide(
        Layer.mergeAll(worker, AgentSessionClient.layer(flow.type)).pipe(Layer.provideMerge(embeddedEngine({})))
      ),
      Effect.scoped
    )
  })
})
