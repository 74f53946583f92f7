// The spec's test matrix for the AI SDK runner, with MockLanguageModelV4 behind the scripted model
// (cases 3-restart, 5, 6 and 9 need process kills: see kill.test.ts).
import { AgentSessionClient, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { awaitSnapshot, awaitTurns, prompt, stepShape, toolResultsIn, withAiSdkSession } from "./support.ts"

describe("AI SDK runner: the session matrix", () => {
  it.live(
    "1. two model calls and a READ tool: RunModel -> CallTool -> ResumeTurn -> RunModel; the history replays, providerOptions kept",
    () =>
      withAiSdkSession(
        [
          {
            text: "Checking.",
            toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
            providerMetadata: { openai: { itemId: "item-1" } },
            usage: { inputTokens: 10, outputTokens: 3 }
          },
          { text: "It is 21 degrees in Paris.", usage: { inputTokens: 20, outputTokens: 7 } },
          { text: "You are welcome." }
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
            assert.strictEqual(kit.model.doStreamCalls.length, 2, "one model call per RunModel")
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

  it.live("2. parallel tool calls of one response run as parallel Steps", () =>
    withAiSdkSession(
      [
        {
          toolCalls: [
            { id: "a", name: "get_weather", arguments: { city: "Oslo" } },
            { id: "b", name: "get_weather", arguments: { city: "Rome" } },
            { id: "c", name: "save_note", arguments: { text: "x" } }
          ]
        },
        { text: "Done." }
      ],
      (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("m2", { initialMessage: "both" })
          yield* awaitTurns("m2", 1)
          const shape = yield* stepShape("m2")
          assert.deepStrictEqual(shape.slice(0, 2), ["StartAgentSession", "RunModel"])
          assert.deepStrictEqual(shape.slice(2, 5).sort(), ["CallTool", "CallTool", "CallTool"])
          assert.deepStrictEqual(shape.slice(5), ["ResumeTurn", "RunModel", "AwaitUserMessage"])
          assert.strictEqual(kit.count("get_weather"), 2)
          assert.deepStrictEqual(Object.keys(toolResultsIn(prompt(kit, 1))).sort(), ["a", "b", "c"])
          assert.deepStrictEqual(kit.idempotencyKeys, [`m2/${(yield* client.getSnapshot("m2")).messages[0]!.turnId}/c`])
        })
    )
  )

  it.live(
    "3+7. a write that needs approval waits beside a READ tool, runs once after approval; a second resolve is false",
    () =>
      withAiSdkSession(
        [
          {
            toolCalls: [
              { id: "w1", name: "send_email", arguments: { to: "ann" } },
              { id: "r1", name: "get_weather", arguments: { city: "Oslo" } }
            ]
          },
          { text: "Sent." }
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

  it.live('7. an approval deadline rejects the call with "approval deadline passed"; resolving after it is false', () =>
    withAiSdkSession(
      [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "cy" } }] }, { text: "Too late." }],
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
    withAiSdkSession(
      [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "bob" } }] }, { text: "OK, I will not." }],
      (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("m4", { initialMessage: "email bob" })
          yield* awaitSnapshot("m4", (s) => s.pendingInterrupts.length === 1, "the approval")
          assert.isTrue(
            yield* client.resolveInterrupt("m4", { interruptId: "w1", approved: false, rejectionMessage: "Not today." })
          )
          yield* awaitTurns("m4", 1)
          assert.strictEqual(kit.count("send_email"), 0)
          assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { w1: "Not today." })
        })
    )
  )

  it.live(
    "a single-attempt write whose tool throws records failed with the error, runs once, and the model sees it",
    () =>
      withAiSdkSession(
        [{ toolCalls: [{ id: "f1", name: "flaky_write", arguments: {} }] }, { text: "It may have gone through." }],
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("m5", { initialMessage: "do it" })
            yield* awaitSnapshot("m5", (s) => s.pendingInterrupts.length === 1, "the approval")
            assert.isTrue(yield* client.resolveInterrupt("m5", { interruptId: "f1", approved: true }))
            yield* awaitTurns("m5", 1)
            assert.strictEqual(kit.count("flaky_write"), 1)
            // a thrown error is a ToolExecutionError: recorded failed, not retried, visible to the model
            assert.include(toolResultsIn(prompt(kit, 1)).f1, "the mail server hung up")
            assert.notStrictEqual(toolResultsIn(prompt(kit, 1)).f1, Wire.OUTCOME_UNKNOWN_TEXT)
          }),
        { toolPolicies: { flaky_write: { effect: "non_idempotent_write", requiresApproval: true } } }
      )
  )

  it.live("8. a turn that fails after a write ran leaves the turn-failure note, and the write is not repeated", () =>
    withAiSdkSession(
      [
        { toolCalls: [{ id: "n1", name: "save_note", arguments: { text: "hello" } }] },
        { fail: "provider down 1" },
        { fail: "provider down 2" },
        { fail: "provider down 3" },
        { text: "Recovered." }
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
          const last = prompt(kit, kit.model.doStreamCalls.length - 1)
          assert.isTrue(
            last.some(
              (m) => m.role === "user" && JSON.stringify(m.content).includes(Wire.TURN_FAILURE_NOTE_HEADER.slice(0, 20))
            )
          )
          assert.strictEqual(kit.count("save_note"), 1)
        })
    )
  )

  it.live(
    "10+11. a message sent during a turn is queued and handled after it; the snapshot returns the conversation",
    () =>
      withAiSdkSession([{ text: "First answer.", delay: "800 millis" }, { text: "Second answer." }], (kit) =>
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
              ["assistant", "First answer."],
              ["user", "two"],
              ["assistant", "Second answer."]
            ]
          )
          assert.strictEqual(kit.model.doStreamCalls.length, 2)
          assert.isFalse(yield* client.sendUserMessage("m10", "   "), "a blank message is refused")
        })
      )
  )
})
