// What the AI SDK runner adds to the runner kit's conformance suite (conformance.test.ts runs the spec's
// matrix, the controls and the kill tests): the SDK's own message shape replays, providerOptions kept.
import { assertReadToolTurn, READ_TOOL_TURN, READ_TOOL_TURN_STEPS } from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { awaitTurns, prompt, stepShape, toolResultsIn, withAiSdkSession } from "./support.ts"

describe("AI SDK runner: its own message shape", () => {
  it.live(
    "1. two model calls and a READ tool: RunModel -> CallTool -> ResumeTurn -> RunModel; the history replays, providerOptions kept",
    () =>
      withAiSdkSession(
        // the kit's case 1, the first answer with the provider's part metadata
        [{ ...READ_TOOL_TURN[0]!, providerMetadata: { openai: { itemId: "item-1" } } }, ...READ_TOOL_TURN.slice(1)],
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("m1", { initialMessage: "Weather in Paris?" })
            const first = yield* awaitTurns("m1", 1)
            assert.deepStrictEqual(yield* stepShape("m1"), READ_TOOL_TURN_STEPS)
            assert.strictEqual(kit.count("get_weather"), 1)
            assert.strictEqual(kit.model.doStreamCalls.length, 2, "one model call per RunModel")
            assertReadToolTurn(first)
            // the second call saw the tool result as a tool message
            assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { call_1: '{"city":"Paris","temperature":21}' })
            // the next turn replays the stored history, with the provider's part metadata
            assert.isTrue(yield* client.sendUserMessage("m1", "Thanks!"))
            yield* awaitTurns("m1", 2)
            const replay = prompt(kit, 2)
            assert.deepStrictEqual(
              replay.map((m) => m.role),
              ["system", "user", "assistant", "tool", "assistant", "user"]
            )
            const assistant = replay[2] as any
            const toolCall = assistant.content.find((p: any) => p.type === "tool-call")
            assert.deepStrictEqual(toolCall.providerOptions, { openai: { itemId: "item-1" } })
            assert.deepStrictEqual(toolCall.input, { city: "Paris" })
          })
      )
  )
})
