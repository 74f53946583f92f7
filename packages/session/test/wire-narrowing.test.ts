// AgentEvent narrows by `type` for every session event while adapter events stay open; a decode error names
// the one event type it was decoded as; the client says when it skips an event it cannot decode.
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { AgentSessionClient, EventWriter, ToolSource, Wire } from "../src/index.ts"
import { awaitTurns, withSession } from "./support.ts"

const encoded = (type: string, payload: unknown) => ({
  type,
  turn_id: "turn-1",
  attempt: 1,
  payload: JSON.stringify(payload),
  step_execution_id: "RunModel-1"
})

/** What a reader of `e.payload` sees after checking `e.type`: typed for session events, JSON for adapters'. */
const describeEvent = (e: Wire.AgentEvent): string => {
  if (e.type === "text_delta") {
    expectTypeOf(e.payload.text).toEqualTypeOf<string>()
    return `text ${e.payload.text}`
  }
  if (e.type === "tool_call_finished") return `${e.payload.toolCallId} ${e.payload.status}`
  if (e.type === "usage_recorded") return `calls ${e.payload.session.modelCalls}`
  return e.type
}

describe("AgentEvent narrowing and decoding", () => {
  it.effect("a session event narrows by type; an adapter event keeps a JSON payload", () =>
    Effect.gen(function* () {
      const text = yield* Wire.decodeAgentEvent(encoded("text_delta", { text: "Hi" }))
      assert.strictEqual(describeEvent(text), "text Hi")
      const finished = yield* Wire.decodeAgentEvent(
        encoded("tool_call_finished", { tool_call_id: "c1", tool_name: "t", status: "succeeded" })
      )
      assert.strictEqual(describeEvent(finished), "c1 succeeded")
      const adapter = yield* Wire.decodeAgentEvent(encoded("openai_agents.handoff", { to: "billing" }))
      assert.strictEqual(describeEvent(adapter), "openai_agents.handoff")
      expectTypeOf<Wire.AdapterAgentEvent["type"]>().toEqualTypeOf<`${string}.${string}`>()
      assert.deepStrictEqual(adapter.payload, { to: "billing" })
    })
  )

  it.effect("a decode error names the one event type it was decoded as", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Wire.decodeAgentEvent(encoded("text_delta", { txt: "Hi" })))
      assert.isTrue(Schema.isSchemaError(error))
      assert.include(error.message, '["payload"]["text"]')
      assert.notInclude(error.message, "template literal")
      assert.notInclude(error.message, "turn_started")
      const adapterError = yield* Effect.flip(Wire.decodeAgentEvent(encoded("mine.thing", [1])))
      assert.notInclude(adapterError.message, "turn_started")
      yield* Effect.flip(Wire.decodeAgentEvent(encoded("nonsense", {})))
    })
  )

  it.live("AgentSessionClient.events logs an event it cannot decode instead of dropping it silently", () => {
    const warnings: Array<string> = []
    const collect = Logger.make((options) => {
      if (options.logLevel === "Warn") warnings.push(JSON.stringify(options.message))
    })
    return withSession(
      {
        script: [{ toolCalls: [{ id: "c1", name: "odd", arguments: {} }] }, { text: "Done." }],
        tools: () => [
          ToolSource.tool({
            name: "odd",
            description: "Writes an event with a payload that does not match its type.",
            effect: "read",
            handler: () =>
              Effect.gen(function* () {
                const events = yield* EventWriter.EventWriter
                yield* events.write({ type: "text_delta", payload: { words: "no text field" } })
                return "ok"
              })
          })
        ]
      },
      () =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-odd", { initialMessage: "go" })
          yield* awaitTurns("s-odd", 1)
          const events = Array.from(yield* Stream.runCollect(client.events("s-odd")))
          assert.isFalse(
            events.some((e) => e.event.type === "text_delta" && e.event.stepExecutionId.startsWith("CallTool")),
            "the bad event is not handed out"
          )
          assert.strictEqual(warnings.length, 1)
          assert.include(warnings[0]!, "skipped an undecodable text_delta event")
          assert.include(warnings[0]!, "s-odd")
        })
    ).pipe(Effect.provide(Logger.layer([collect])))
  })
})
