// What the Mastra runner adds to the runner kit's conformance suite (conformance.test.ts runs the spec's
// matrix, the controls and the kill tests), registered once per engine: sequential rounds, and an unknown
// tool name and arguments that are not a JSON object.
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import {
  awaitTurns,
  type EngineFactory,
  prompt,
  promptShape,
  stepShape,
  toolResultsIn,
  withMastraSession
} from "../support.ts"

export const matrixSuite = (engineName: string, engine: EngineFactory) =>
  describe(`Mastra runner on the ${engineName} engine: the session matrix`, () => {
    it.live("1b. sequential rounds reach the model as separate steps, not as parallel calls", () =>
      withMastraSession(
        [
          { toolCalls: [{ id: "r1", name: "get_weather", arguments: { city: "Oslo" } }] },
          { toolCalls: [{ id: "r2", name: "get_weather", arguments: { city: "Rome" } }] },
          { toolCalls: [{ id: "r3", name: "get_weather", arguments: { city: "Nice" } }] },
          { text: "Three cities." },
          { text: "Bye." }
        ],
        { engine },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("m1b", { initialMessage: "three cities, one by one" })
            yield* awaitTurns("m1b", 1)
            const rounds = ["system", "user", "assistant[r1]", "tool[r1]", "assistant[r2]", "tool[r2]"]
            assert.deepStrictEqual(promptShape(prompt(kit, 3)), [...rounds, "assistant[r3]", "tool[r3]"])
            // and so does the stored history on the next turn
            assert.isTrue(yield* client.sendUserMessage("m1b", "bye"))
            yield* awaitTurns("m1b", 2)
            assert.deepStrictEqual(promptShape(prompt(kit, 4)), [
              ...rounds,
              "assistant[r3]",
              "tool[r3]",
              "assistant[text]",
              "user"
            ])
          })
      )
    )

    it.live("an unknown tool name and arguments that are not a JSON object are recorded failed; nothing runs", () =>
      withMastraSession(
        [
          {
            toolCalls: [
              { id: "u1", name: "launch_rocket", arguments: { now: true } },
              { id: "j1", name: "send_email", arguments: '{"to": "ann"' },
              { id: "j2", name: "get_weather", arguments: "[1]" }
            ]
          },
          { text: "Sorry." }
        ],
        { engine },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("mu", { initialMessage: "go" })
            const snapshot = yield* awaitTurns("mu", 1)
            // the stored tool results are the failures the session recorded
            assert.deepStrictEqual(
              snapshot.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m.toolOutput]),
              [
                ["u1", "The tool call failed: unknown tool launch_rocket"],
                ["j1", "The tool call failed: invalid send_email arguments: arguments must be a JSON object"],
                ["j2", "The tool call failed: invalid get_weather arguments: arguments must be a JSON object"]
              ]
            )
            assert.strictEqual(kit.count("send_email") + kit.count("get_weather"), 0)
            assert.deepStrictEqual(
              toolResultsIn(prompt(kit, 1)),
              Object.fromEntries(
                snapshot.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m.toolOutput])
              )
            )
            assert.isFalse((yield* stepShape("mu")).includes("AwaitToolApproval"), "nothing asked for approval")
          })
      )
    )
  })
