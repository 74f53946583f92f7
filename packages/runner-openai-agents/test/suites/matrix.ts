// What the OpenAI Agents runner adds to the runner kit's conformance suite (conformance.test.ts runs the
// spec's matrix, the controls and the kill tests), registered once per engine: text deltas, a tool-use
// behaviour, and the SDK behaviours that would break a Step rule, each with the guard that catches it.
import { READ_TOOL_TURN_STEPS } from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@openai/agents"
import { assistantMessage, functionCall } from "@openai/agents/testing"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import {
  awaitSnapshot,
  awaitTurns,
  type EngineFactory,
  prompt,
  stepShape,
  toolResultsIn,
  tools,
  withOpenAiSession
} from "../support.ts"

const NOT_JSON = `${Wire.TOOL_CALL_FAILED_PREFIX}invalid get_weather arguments: arguments must be a JSON object`

export const matrixSuite = (engineName: string, engine: EngineFactory) =>
  describe(`OpenAI Agents runner on the ${engineName}: the session matrix`, () => {
    it.live("streams the answer as text_delta events of its RunModel attempt", () =>
      withOpenAiSession(engine, [[assistantMessage("Hello "), assistantMessage("there.")]], () =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s1", { initialMessage: "hi" })
          const snapshot = yield* awaitTurns("s1", 1)
          const events = Array.from(yield* Stream.runCollect(client.events("s1")))
          const deltas = events.filter((e) => e.event.type === "text_delta")
          assert.isAbove(deltas.length, 0)
          assert.strictEqual(deltas.map((e) => (e.event.payload as { text: string }).text).join(""), "Hello there.")
          assert.isTrue(deltas.every((e) => e.event.stepExecutionId.startsWith("RunModel")))
          assert.deepStrictEqual(
            snapshot.messages.map((m) => m.text),
            ["hi", "Hello ", "there."]
          )
        })
      )
    )

    it.live(
      "a tool-use behaviour that ends the run on a tool's output: the last RunModel makes no model call and ends the turn",
      () =>
        withOpenAiSession(
          engine,
          [[functionCall("get_weather", { city: "Bern" }, { callId: "g1" })]],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("u", { initialMessage: "weather in Bern" })
              const snapshot = yield* awaitTurns("u", 1)
              assert.deepStrictEqual(yield* stepShape("u"), READ_TOOL_TURN_STEPS)
              assert.strictEqual(kit.model.calls.length, 1)
              assert.strictEqual(snapshot.usage.modelCalls, 1)
              assert.isNull(snapshot.state?.lastTurnError ?? null)
              assert.deepStrictEqual(
                snapshot.messages.map((m) => [m.role, m.toolCallId, m.toolOutput]),
                [
                  ["user", null, null],
                  ["assistant", "g1", null],
                  ["tool", "g1", '{"city":"Bern","temperature":21}']
                ]
              )
            }),
          {
            agent: (kit) =>
              new Agent({
                name: "weather",
                model: kit.model,
                tools: tools(kit).filter((t) => t.name === "get_weather"),
                toolUseBehavior: "stop_on_first_tool"
              })
          }
        )
    )

    describe("SDK behaviours that break a Step rule, and their guards", () => {
      it.live(
        "a handoff would make a second model call in the same run: maxTurns stops it, the next agent answers in the next RunModel",
        () =>
          withOpenAiSession(
            engine,
            [
              [assistantMessage("Passing you on."), functionCall("transfer_to_billing", {}, { callId: "h1" })],
              [functionCall("get_weather", { city: "Lima" }, { callId: "g1" })],
              [assistantMessage("Billing here: 21 degrees.")],
              [assistantMessage("Triage again.")]
            ],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("h", { initialMessage: "billing please" })
                const snapshot = yield* awaitTurns("h", 1)
                assert.deepStrictEqual(yield* stepShape("h"), [
                  "StartAgentSession",
                  "RunModel",
                  "RunModel",
                  "CallTool",
                  "ResumeTurn",
                  "RunModel",
                  "AwaitUserMessage"
                ])
                assert.strictEqual(kit.model.calls.length, 3, "three RunModels, one model call each")
                // the second and third calls are the billing agent's, with its instructions and tools
                assert.strictEqual(kit.model.calls[1]!.request.systemInstructions, "You handle billing.")
                assert.strictEqual(kit.model.calls[2]!.request.systemInstructions, "You handle billing.")
                assert.deepStrictEqual(
                  kit.model.calls[1]!.request.tools.map((t) => t.name),
                  ["get_weather"]
                )
                assert.deepStrictEqual(
                  snapshot.messages.map((m) => [m.role, m.text, m.toolCallId]),
                  [
                    ["user", "billing please", null],
                    ["assistant", "Passing you on.", null],
                    ["assistant", null, "h1"],
                    ["tool", null, "h1"],
                    ["assistant", null, "g1"],
                    ["tool", null, "g1"],
                    ["assistant", "Billing here: 21 degrees.", null]
                  ]
                )
                const events = Array.from(yield* Stream.runCollect(client.events("h")))
                const handoffs = events.filter((e) => e.event.type === "openai_agents.handoff")
                assert.deepStrictEqual(
                  handoffs.map((e) => e.event.payload),
                  [{ from_agent: "triage", to_agent: "billing", tool_call_id: "h1" }]
                )
                // every turn starts with the entry agent
                assert.isTrue(yield* client.sendUserMessage("h", "thanks"))
                yield* awaitTurns("h", 2)
                assert.strictEqual(kit.model.calls[3]!.request.systemInstructions, "You are a test agent.")
              })
          )
      )

      it.live(
        "a response that calls a tool and hands off: the tool runs in its Step, the resumed run hands off and makes the next agent's one call",
        () =>
          withOpenAiSession(
            engine,
            [
              [
                functionCall("get_weather", { city: "Quito" }, { callId: "g1" }),
                functionCall("transfer_to_billing", {}, { callId: "h1" })
              ],
              [assistantMessage("Billing here.")]
            ],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("hg", { initialMessage: "weather, then billing" })
                const snapshot = yield* awaitTurns("hg", 1)
                assert.deepStrictEqual(yield* stepShape("hg"), READ_TOOL_TURN_STEPS)
                assert.strictEqual(kit.model.calls.length, 2, "one model call per RunModel")
                assert.strictEqual(snapshot.usage.modelCalls, 2)
                assert.strictEqual(kit.count("get_weather"), 1)
                assert.strictEqual(kit.model.calls[1]!.request.systemInstructions, "You handle billing.")
                assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), {
                  g1: '{"city":"Quito","temperature":21}',
                  h1: '{"assistant":"billing"}'
                })
                assert.strictEqual(snapshot.messages[snapshot.messages.length - 1]!.text, "Billing here.")
              })
          )
      )

      it.live(
        "argument text that is not JSON skips the approval gate and would make a second model call: maxTurns stops it, the call is recorded failed",
        () =>
          withOpenAiSession(
            engine,
            [
              [
                functionCall("get_weather", "{bad", { callId: "b1" }),
                functionCall("send_email", { to: "dee" }, { callId: "w1" })
              ],
              [functionCall("get_weather", "{also bad", { callId: "b2" })],
              [assistantMessage("Sorry.")]
            ],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("j", { initialMessage: "weather" })
                yield* awaitSnapshot("j", (s) => s.pendingInterrupts.length === 1, "the approval")
                const waiting = yield* client.getSnapshot("j")
                const b1 = waiting.toolCalls.find((c) => c.toolCallId === "b1")!
                assert.strictEqual(b1.status, "failed")
                assert.strictEqual(
                  Wire.modelVisibleResult({ ...b1, status: "failed" }),
                  NOT_JSON,
                  "the spec's text for argument text that is not a JSON object"
                )
                assert.strictEqual(kit.model.calls.length, 1, "no model call after the SDK's own error answer")
                assert.isTrue(yield* client.resolveInterrupt("j", { interruptId: "w1", approved: true }))
                yield* awaitTurns("j", 1)
                assert.deepStrictEqual(yield* stepShape("j"), [
                  "StartAgentSession",
                  "RunModel",
                  "AwaitToolApproval",
                  "ResumeTurn",
                  "CallSingleAttemptTool",
                  "RunModel",
                  "ResumeTurn",
                  "RunModel",
                  "AwaitUserMessage"
                ])
                assert.strictEqual(kit.model.calls.length, 3)
                // the model sees the session's record in place of the SDK's own error text
                assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { b1: NOT_JSON, w1: "sent to dee" })
                assert.deepStrictEqual(toolResultsIn(prompt(kit, 2)), {
                  b1: NOT_JSON,
                  w1: "sent to dee",
                  b2: NOT_JSON
                })
                assert.strictEqual(kit.count("get_weather"), 0)
                assert.strictEqual(kit.count("send_email"), 1)
              })
          )
      )
    })
  })
