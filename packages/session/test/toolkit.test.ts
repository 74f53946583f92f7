// An effect/ai Toolkit as the session's ToolSource: typed arguments, handlers with their own services, effect
// classes from the annotations (a ToolPolicy first), EventWriter reachable from a handler, typed failures
// shown to the model.

import { Client } from "@durable-agent/engine"
import { AgentSessionClient, EventWriter, ToolkitSource, Wire } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { assert, describe, it } from "@effect/vitest"
import { Tool, Toolkit } from "effect/ai"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

class WeatherApi extends Context.Service<
  WeatherApi,
  { readonly current: (city: string) => Effect.Effect<number>; readonly calls: Array<string> }
>()("test/WeatherApi") {
  static readonly layer = Layer.sync(WeatherApi, () => {
    const calls: Array<string> = []
    return {
      calls,
      current: (city) =>
        Effect.sync(() => {
          calls.push(city)
          return city === "Paris" ? 21 : 15
        })
    }
  })
}

const GetWeather = Tool.make("get_weather", {
  description: "The weather of a city.",
  parameters: Schema.Struct({ city: Schema.String }),
  success: Schema.Struct({ city: Schema.String, temperature: Schema.Number })
}).annotate(Tool.Readonly, true)

const SaveNote = Tool.make("save_note", {
  description: "Saves a note.",
  parameters: Schema.Struct({ text: Schema.String }),
  success: Schema.String,
  dependencies: [EventWriter.EventWriter]
}).annotate(Tool.Idempotent, true)

const Refund = Tool.make("refund", {
  description: "Refunds an order.",
  parameters: Schema.Struct({ order: Schema.String }),
  success: Schema.String,
  failure: Schema.Struct({ reason: Schema.String }),
  failureMode: "return"
})

const Tools = Toolkit.make(GetWeather, SaveNote, Refund)

const handlers = Tools.toLayer(
  Effect.gen(function* () {
    const api = yield* WeatherApi
    return Tools.of({
      get_weather: ({ city }) => Effect.map(api.current(city), (temperature) => ({ city, temperature })),
      save_note: ({ text }) =>
        Effect.gen(function* () {
          const events = yield* EventWriter.EventWriter
          yield* events.write({ type: "test.note_saved", payload: { text } })
          return `saved ${text}`
        }),
      refund: ({ order }) => Effect.fail({ reason: `order ${order} is not refundable` })
    })
  })
)

describe("ToolkitSource", () => {
  it.live("runs an effect/ai toolkit's tools in their Steps, by their annotations", () =>
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const engine = yield* Client.Client
      const api = yield* WeatherApi
      yield* sessions.startSession("s-kit", { initialMessage: "go" })
      const done = yield* SessionTesting.awaitTurn("s-kit")
      assert.strictEqual(done.messages.at(-1)?.text, "Done.")
      assert.deepStrictEqual(api.calls, ["Paris"])
      const steps = yield* engine.stepExecutions("s-kit")
      assert.deepStrictEqual(
        steps.filter((s) => s.stepType.startsWith("Call")).map((s) => s.stepType),
        ["CallTool", "CallTool", "CallTool"],
        "read, idempotent_write, and the refund's ToolPolicy"
      )
      const results = Object.fromEntries(
        done.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m.toolOutput])
      )
      assert.deepStrictEqual(JSON.parse(results.w!), { city: "Paris", temperature: 21 })
      assert.strictEqual(results.n, "saved milk")
      assert.strictEqual(results.r, `${Wire.TOOL_CALL_FAILED_PREFIX}{"reason":"order 42 is not refundable"}`)
      const events = Array.from(yield* Stream.runCollect(sessions.events("s-kit")), (e) => e.event)
      assert.isTrue(events.some((e) => e.type === "test.note_saved" && e.stepExecutionId.startsWith("CallTool")))
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          SessionTesting.layer({
            model: [
              {
                toolCalls: [
                  { id: "w", name: "get_weather", arguments: { city: "Paris" } },
                  { id: "n", name: "save_note", arguments: { text: "milk" } },
                  { id: "r", name: "refund", arguments: { order: "42" } }
                ]
              },
              { text: "Done." }
            ],
            tools: ToolkitSource.layer(Tools).pipe(Layer.provide(handlers), Layer.provide(WeatherApi.layer)),
            flow: { toolPolicies: { refund: { effect: "read", requiresApproval: false } } }
          })
        ).pipe(Layer.provideMerge(WeatherApi.layer))
      )
    )
  )

  it("gives the effect class of the annotations", () => {
    assert.strictEqual(ToolkitSource.effectOf(GetWeather), "read")
    assert.strictEqual(ToolkitSource.effectOf(SaveNote), "idempotent_write")
    assert.strictEqual(ToolkitSource.effectOf(Refund), undefined)
  })
})
