// ModelClient.fromLanguageModel: Stepwise on an effect/ai LanguageModel (scripted with LanguageModel.make):
// streamed text deltas, tool calls left to the session, usage, and the stream interrupted with the call.

import { AgentSessionClient, ModelClient, ToolSource } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { assert, describe, it } from "@effect/vitest"
import { LanguageModel, type Response } from "effect/ai"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"

const usage = (input: number, output: number) => ({
  inputTokens: { total: input, uncached: input, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: output, text: output, reasoning: 0 }
})

/** A LanguageModel whose n-th streamed call emits `script[n]`; the prompts it saw are kept. */
const scriptedLanguageModel = (script: ReadonlyArray<ReadonlyArray<Response.StreamPartEncoded>>) => {
  const prompts: Array<unknown> = []
  const layer = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.die("not used"),
      streamText: (options) => {
        prompts.push(options.prompt)
        return Stream.fromIterable(script[prompts.length - 1] ?? [])
      }
    })
  )
  return { layer, prompts }
}

describe("ModelClient.fromLanguageModel", () => {
  it.live("Stepwise on a scripted effect/ai LanguageModel: deltas, a tool call, usage, the answer", () => {
    const model = scriptedLanguageModel([
      [
        { type: "tool-call", id: "call_1", name: "get_weather", params: { city: "Paris" }, providerExecuted: false },
        { type: "finish", reason: "tool-calls", usage: usage(10, 3), response: undefined }
      ],
      [
        { type: "text-start", id: "t1" },
        { type: "text-delta", id: "t1", delta: "It is " },
        { type: "text-delta", id: "t1", delta: "21 degrees." },
        { type: "text-end", id: "t1" },
        { type: "finish", reason: "stop", usage: usage(20, 5), response: undefined }
      ]
    ] as ReadonlyArray<ReadonlyArray<Response.StreamPartEncoded>>)
    return Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("s-lm", { initialMessage: "Weather in Paris?" })
      const done = yield* SessionTesting.awaitTurn("s-lm")
      assert.strictEqual(done.messages.at(-1)?.text, "It is 21 degrees.")
      assert.deepStrictEqual(
        { calls: done.usage.modelCalls, input: done.usage.inputTokens, output: done.usage.outputTokens },
        { calls: 2, input: 30, output: 8 }
      )
      const deltas = Array.from(yield* Stream.runCollect(sessions.events("s-lm")), (e) => e.event).flatMap((e) =>
        e.type === "text_delta" ? [e.payload.text] : []
      )
      assert.deepStrictEqual(deltas, ["It is ", "21 degrees."])
      const second = JSON.stringify(model.prompts[1])
      assert.include(second, '"tool-result"')
      assert.include(second, "21", "the tool's output went back to the model")
    }).pipe(
      Effect.provide(
        SessionTesting.layer({
          model: ModelClient.layerLanguageModel.pipe(Layer.provide(model.layer)),
          tools: [
            ToolSource.tool({
              name: "get_weather",
              description: "The weather of a city.",
              effect: "read",
              handler: (args) => Effect.succeed({ city: args.city, temperature: 21 })
            })
          ]
        })
      )
    )
  })

  it.live("interrupting the call interrupts the model's stream", () =>
    Effect.gen(function* () {
      let aborted = false
      const language = yield* LanguageModel.make({
        generateText: () => Effect.die("not used"),
        streamText: () =>
          Stream.concat(
            Stream.make({ type: "text-delta", id: "t", delta: "Once upon" } as Response.StreamPartEncoded),
            Stream.never
          ).pipe(
            Stream.ensuring(
              Effect.sync(() => {
                aborted = true
              })
            )
          )
      })
      const seen: Array<string> = []
      const fiber = yield* ModelClient.ModelClient.fromLanguageModel(language)
        .generate({
          instructions: "",
          messages: [{ role: "user", text: "a long story" }],
          tools: [],
          onTextDelta: (text) => Effect.sync(() => void seen.push(text))
        })
        .pipe(Effect.forkChild)
      yield* Effect.yieldNow
      while (seen.length === 0) yield* Effect.sleep("5 millis")
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(seen, ["Once upon"])
      assert.isTrue(aborted, "the stream's finalizer ran")
    })
  )

  it.live("toolChoice reaches the provider options: a named tool, or the default auto", () =>
    Effect.gen(function* () {
      const choices: Array<unknown> = []
      const language = yield* LanguageModel.make({
        generateText: () => Effect.die("not used"),
        streamText: (options) => {
          choices.push(options.toolChoice)
          return Stream.fromIterable([
            { type: "finish", reason: "stop", usage: usage(1, 1), response: undefined }
          ] as ReadonlyArray<Response.StreamPartEncoded>)
        }
      })
      const client = ModelClient.ModelClient.fromLanguageModel(language)
      const tools = [{ name: "write_todos", description: "plan", parameters: { type: "object" } }]
      yield* client.generate({ instructions: "", messages: [], tools, toolChoice: { tool: "write_todos" } })
      yield* client.generate({ instructions: "", messages: [], tools })
      assert.deepStrictEqual(choices, [{ tool: "write_todos" }, "auto"])
    })
  )

  it.live("a failing model call is a ModelCallError", () =>
    Effect.gen(function* () {
      const language = yield* LanguageModel.make({
        generateText: () => Effect.die("not used"),
        streamText: () => Stream.fail(new Error("provider down") as never)
      })
      const error = yield* Effect.flip(
        ModelClient.ModelClient.fromLanguageModel(language).generate({ instructions: "", messages: [], tools: [] })
      ).pipe(Effect.catchDefect((d) => Effect.succeed({ _tag: "defect", d })))
      assert.strictEqual((error as { _tag: string })._tag, "ModelCallError")
    })
  )
})
