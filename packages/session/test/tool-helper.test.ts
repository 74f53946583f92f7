// `tool(...)`: a thin helper over effect/ai's Tool.make / Tool.dynamic with typed arguments and handlers
// that use their own services.

import { AgentSessionClient, ToolSource } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import * as AiTool from "effect/ai/Tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

class WeatherApi extends Context.Service<WeatherApi, { readonly current: (city: string) => Effect.Effect<number> }>()(
  "test/WeatherApi"
) {}

const getWeather = ToolSource.tool({
  name: "get_weather",
  description: "The weather of a city.",
  effect: "read",
  parameters: Schema.Struct({ city: Schema.String, unit: Schema.optional(Schema.Literals(["C", "F"])) }),
  handler: ({ city, unit }) =>
    Effect.gen(function* () {
      const api = yield* WeatherApi
      const celsius = yield* api.current(city)
      return { city, temperature: unit === "F" ? celsius * 1.8 + 32 : celsius }
    })
})

describe("tool(...)", () => {
  it("is an effect/ai tool: Tool.make for a Schema, annotated by its effect class, with its JSON Schema", () => {
    assert.isTrue(AiTool.isUserDefined(getWeather.aiTool))
    assert.strictEqual(getWeather.aiTool.name, "get_weather")
    assert.isTrue(Context.get(getWeather.aiTool.annotations, AiTool.Readonly))
    assert.deepStrictEqual(getWeather.parameters, AiTool.getJsonSchema(getWeather.aiTool))
    assert.deepStrictEqual((getWeather.parameters as { required?: unknown }).required, ["city"])
    const plain = ToolSource.tool({
      name: "charge",
      description: "Charges a card.",
      effect: "non_idempotent_write",
      handler: () => Effect.succeed("ok")
    })
    assert.isTrue(AiTool.isDynamic(plain.aiTool))
    assert.isTrue(Context.get(plain.aiTool.annotations, AiTool.Destructive))
    assert.deepStrictEqual(plain.parameters, { type: "object", additionalProperties: true })
  })

  it("types: the handler's arguments are decoded, and ToolSource.layer requires the handler's services", () => {
    expectTypeOf(ToolSource.layer([getWeather])).toEqualTypeOf<Layer.Layer<ToolSource.ToolSource, never, WeatherApi>>()
    ToolSource.tool({
      name: "typed",
      description: "typed arguments",
      parameters: Schema.Struct({ n: Schema.Number }),
      handler: (args) => {
        expectTypeOf(args).toEqualTypeOf<{ readonly n: number }>()
        // @ts-expect-error: `m` is not a parameter of this tool
        return Effect.succeed(args.m)
      }
    })
  })

  it.live(
    "a session calls it with decoded arguments, its own service provided, and bad arguments go to the model",
    () =>
      Effect.gen(function* () {
        const sessions = yield* AgentSessionClient.AgentSessionClient
        yield* sessions.startSession("tool-helper", { initialMessage: "Weather?" })
        const snapshot = yield* SessionTesting.awaitTurn("tool-helper")
        const output = (id: string) =>
          snapshot.messages.find((m) => m.role === "tool" && m.toolCallId === id)?.toolOutput
        assert.deepStrictEqual(JSON.parse(output("good") ?? "null"), { city: "Oslo", temperature: 39.2 })
        assert.include(output("bad") ?? "", "invalid arguments for get_weather")
        assert.strictEqual(snapshot.messages.at(-1)?.text, "Done.")
      }).pipe(
        Effect.provide(
          SessionTesting.layer({
            model: [
              {
                toolCalls: [
                  { id: "good", name: "get_weather", arguments: { city: "Oslo", unit: "F" } },
                  { id: "bad", name: "get_weather", arguments: { town: "Oslo" } }
                ]
              },
              { text: "Done." }
            ],
            tools: ToolSource.layer([getWeather]).pipe(
              Layer.provide(Layer.succeed(WeatherApi, { current: () => Effect.succeed(4) }))
            )
          })
        )
      )
  )
})
