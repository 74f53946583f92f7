// The spec's test matrix for the OpenAI Agents runner with the SDK's ScriptedModel, registered once per
// engine (cases 3 with a restart, 5, 6 and 9 need process kills: see kill.test.ts), and the SDK
// behaviours that would break a Step rule, each with the guard that catches it.
import { AgentSessionClient, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Usage } from "@openai/agents"
import { assistantMessage, functionCall, modelError, modelResponder } from "@openai/agents/testing"
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
    it.live(
      "1. two model calls and a READ tool: RunModel -> CallTool -> ResumeTurn -> RunModel; the history replays",
      () =>
        withOpenAiSession(
          engine,
          [
            {
              type: "response",
              response: {
                usage: new Usage({ inputTokens: 10, outputTokens: 3 }),
                output: [
                  assistantMessage("Checking."),
                  functionCall("get_weather", { city: "Paris" }, { callId: "call_1", providerData: { x: 1 } })
                ]
              }
            },
            {
              type: "response",
              response: {
                usage: new Usage({ inputTokens: 20, outputTokens: 7 }),
                output: [assistantMessage("It is 21 degrees in Paris.")]
              }
            },
            [assistantMessage("You are welcome.")]
          ],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m1", { initialMessage: "Weather in Paris?" })
              const first = yield* awaitTurns("m1", 1)
              assert.deepStrictEqual(yield* stepShape("m1"), [
                "StartAgentSession",
                "RunModel",
                "CallTool",
                "ResumeTurn",
                "RunModel",
                "AwaitUserMessage"
              ])
              assert.strictEqual(kit.count("get_weather"), 1)
              assert.strictEqual(kit.model.calls.length, 2, "one model call per RunModel")
              assert.deepStrictEqual(
                first.messages.map((m) => [m.role, m.text, m.toolCallId, m.toolOutput]),
                [
                  ["user", "Weather in Paris?", null, null],
                  ["assistant", "Checking.", null, null],
                  ["assistant", null, "call_1", null],
                  ["tool", null, "call_1", '{"city":"Paris","temperature":21}'],
                  ["assistant", "It is 21 degrees in Paris.", null, null]
                ]
              )
              assert.strictEqual(first.usage.modelCalls, 2)
              assert.strictEqual(first.usage.inputTokens, 30)
              assert.strictEqual(first.usage.outputTokens, 10)
              assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { call_1: '{"city":"Paris","temperature":21}' })
              // the next turn replays the stored items as the SDK made them, provider data included
              assert.isTrue(yield* client.sendUserMessage("m1", "Thanks!"))
              yield* awaitTurns("m1", 2)
              const replay = prompt(kit, 2)
              assert.deepStrictEqual(
                replay.map((i) => i.type ?? "message"),
                ["message", "message", "function_call", "function_call_result", "message", "message"]
              )
              const call = replay[2] as { providerData?: unknown; arguments?: string }
              assert.deepStrictEqual(call.providerData, { x: 1 })
              assert.strictEqual(call.arguments, '{"city":"Paris"}')
            })
        )
    )

    it.live("2. parallel tool calls of one response run as parallel Steps, resumed by one model call", () =>
      withOpenAiSession(
        engine,
        [
          [
            functionCall("get_weather", { city: "Oslo" }, { callId: "a" }),
            functionCall("get_weather", { city: "Rome" }, { callId: "b" }),
            functionCall("save_note", { text: "x" }, { callId: "c" })
          ],
          [assistantMessage("Done.")]
        ],
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("m2", { initialMessage: "both" })
            const snapshot = yield* awaitTurns("m2", 1)
            const shape = yield* stepShape("m2")
            assert.deepStrictEqual(shape.slice(0, 2), ["StartAgentSession", "RunModel"])
            assert.deepStrictEqual(shape.slice(2, 5).sort(), ["CallTool", "CallTool", "CallTool"])
            assert.deepStrictEqual(shape.slice(5), ["ResumeTurn", "RunModel", "AwaitUserMessage"])
            assert.strictEqual(kit.count("get_weather"), 2)
            assert.strictEqual(kit.model.calls.length, 2)
            assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), {
              a: '{"city":"Oslo","temperature":21}',
              b: '{"city":"Rome","temperature":21}',
              c: "saved x"
            })
            assert.deepStrictEqual(kit.idempotencyKeys, [`m2/${snapshot.messages[0]!.turnId}/c`])
          })
      )
    )

    it.live(
      "3+7. a write that needs approval waits beside a READ tool, runs once after approval; a second resolve is false",
      () =>
        withOpenAiSession(
          engine,
          [
            [
              functionCall("send_email", { to: "ann" }, { callId: "w1" }),
              functionCall("get_weather", { city: "Oslo" }, { callId: "r1" })
            ],
            [assistantMessage("Sent.")]
          ],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m3", { initialMessage: "email ann" })
              yield* awaitSnapshot(
                "m3",
                (s) =>
                  s.toolCalls.some((c) => c.toolCallId === "r1" && c.status === "succeeded") &&
                  s.pendingInterrupts.length === 1,
                "the read result and the approval"
              )
              assert.strictEqual(kit.count("send_email"), 0)
              assert.strictEqual(kit.model.calls.length, 1)
              assert.isTrue(yield* client.resolveInterrupt("m3", { interruptId: "w1", approved: true }))
              assert.isFalse(yield* client.resolveInterrupt("m3", { interruptId: "w1", approved: true }))
              yield* awaitTurns("m3", 1)
              assert.strictEqual(kit.count("send_email"), 1)
              assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), {
                w1: "sent to ann",
                r1: '{"city":"Oslo","temperature":21}'
              })
              assert.isTrue((yield* stepShape("m3")).includes("CallSingleAttemptTool"))
            })
        )
    )

    it.live(
      '7. an approval deadline rejects the call with "approval deadline passed"; resolving after it is false',
      () =>
        withOpenAiSession(
          engine,
          [[functionCall("send_email", { to: "cy" }, { callId: "w1" })], [assistantMessage("Too late.")]],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m7", { initialMessage: "email cy" })
              yield* awaitTurns("m7", 1)
              assert.isFalse(yield* client.resolveInterrupt("m7", { interruptId: "w1", approved: true }))
              assert.strictEqual(kit.count("send_email"), 0)
              assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { w1: "approval deadline passed" })
            }),
          { interruptDeadline: "1 second" }
        )
    )

    it.live("4. a rejected write never runs, and the model sees the rejection message", () =>
      withOpenAiSession(
        engine,
        [[functionCall("send_email", { to: "bob" }, { callId: "w1" })], [assistantMessage("OK, I will not.")]],
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("m4", { initialMessage: "email bob" })
            yield* awaitSnapshot("m4", (s) => s.pendingInterrupts.length === 1, "the approval")
            assert.isTrue(
              yield* client.resolveInterrupt("m4", {
                interruptId: "w1",
                approved: false,
                rejectionMessage: "Not today."
              })
            )
            yield* awaitTurns("m4", 1)
            assert.strictEqual(kit.count("send_email"), 0)
            assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { w1: "Not today." })
          })
      )
    )

    it.live(
      "a single-attempt write whose tool throws records failed with the error, runs once, the model sees it",
      () =>
        withOpenAiSession(
          engine,
          [[functionCall("flaky_write", {}, { callId: "f1" })], [assistantMessage("It may have gone through.")]],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m5", { initialMessage: "do it" })
              yield* awaitSnapshot("m5", (s) => s.pendingInterrupts.length === 1, "the approval")
              assert.isTrue(yield* client.resolveInterrupt("m5", { interruptId: "f1", approved: true }))
              yield* awaitTurns("m5", 1)
              assert.strictEqual(kit.count("flaky_write"), 1)
              assert.strictEqual(
                toolResultsIn(prompt(kit, 1)).f1,
                `${Wire.TOOL_CALL_FAILED_PREFIX}the mail server hung up`
              )
              assert.notStrictEqual(toolResultsIn(prompt(kit, 1)).f1, Wire.OUTCOME_UNKNOWN_TEXT)
            })
        )
    )

    it.live("8. a turn that fails after a write ran leaves the turn-failure note, and the write is not repeated", () =>
      withOpenAiSession(
        engine,
        [
          [functionCall("save_note", { text: "hello" }, { callId: "n1" })],
          modelError(new Error("provider down 1")),
          modelError(new Error("provider down 2")),
          modelError(new Error("provider down 3")),
          [assistantMessage("Recovered.")]
        ],
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("m8", { initialMessage: "save hello" })
            const failed = yield* awaitTurns("m8", 1)
            assert.strictEqual(kit.count("save_note"), 1)
            assert.include(failed.state?.lastTurnError ?? "", "provider down 3")
            const note = failed.messages[failed.messages.length - 1]!
            assert.isTrue(note.text?.startsWith(Wire.TURN_FAILURE_NOTE_HEADER))
            assert.include(note.text ?? "", "save_note")
            assert.isTrue(yield* client.sendUserMessage("m8", "and now?"))
            yield* awaitTurns("m8", 2)
            const last = prompt(kit, kit.model.calls.length - 1)
            assert.isTrue(
              last.some((i) => i.type !== "function_call" && JSON.stringify(i).includes(Wire.TURN_FAILURE_NOTE_HEADER))
            )
            assert.strictEqual(kit.count("save_note"), 1)
          })
      )
    )

    it.live(
      "10+11. a message sent during a turn is queued and handled after it; the snapshot returns the conversation",
      () =>
        withOpenAiSession(
          engine,
          [
            // the model's latency keeps the first turn running while the second message arrives
            modelResponder(
              () => new Promise((resolve) => setTimeout(() => resolve([assistantMessage("First.")]), 800))
            ),
            [assistantMessage("Second.")]
          ],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m10", { initialMessage: "one" })
              yield* awaitSnapshot("m10", (s) => s.state?.activeTurnId !== null, "the first turn")
              assert.isTrue(yield* client.sendUserMessage("m10", "two"))
              const snapshot = yield* awaitTurns("m10", 2)
              assert.deepStrictEqual(
                snapshot.messages.map((m) => [m.role, m.text]),
                [
                  ["user", "one"],
                  ["assistant", "First."],
                  ["user", "two"],
                  ["assistant", "Second."]
                ]
              )
              assert.strictEqual(kit.model.calls.length, 2)
              assert.isFalse(yield* client.sendUserMessage("m10", "   "), "a blank message is refused")
            })
        )
    )

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
              assert.deepStrictEqual(yield* stepShape("u"), [
                "StartAgentSession",
                "RunModel",
                "CallTool",
                "ResumeTurn",
                "RunModel",
                "AwaitUserMessage"
              ])
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
                assert.deepStrictEqual(yield* stepShape("hg"), [
                  "StartAgentSession",
                  "RunModel",
                  "CallTool",
                  "ResumeTurn",
                  "RunModel",
                  "AwaitUserMessage"
                ])
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
