// The spec's test matrix for the Pi runner, as one suite registered for each engine (matrix-*.test.ts), plus
// the Pi-specific cases: TypeBox validation, retryable tool errors, deltas, usage and cost, steering and
// follow-ups. Cases 3 with a restart, 5, 6 and 9 need process kills: see kill.test.ts.
import { AgentSessionClient, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { allEvents } from "../../../session/test/support.ts"
import {
  awaitSnapshot,
  awaitTurns,
  type EngineFactory,
  prompt,
  promptShape,
  stepShape,
  toolResultsIn,
  withPiSession
} from "../support.ts"

export const matrixSuite = (engineName: string, engine: EngineFactory) =>
  describe(`Pi runner on the ${engineName} engine: the session matrix`, () => {
    it.live(
      "1. two model calls and a READ tool: RunModel -> CallTool -> ResumeTurn -> RunModel; the history replays",
      () =>
        withPiSession(
          [
            {
              text: "Checking.",
              toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
              usage: { inputTokens: 10, outputTokens: 3 }
            },
            { text: "It is 21 degrees in Paris.", usage: { inputTokens: 20, outputTokens: 7 } },
            { text: "You are welcome." }
          ],
          { engine },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("p1", { initialMessage: "Weather in Paris?" })
              const first = yield* awaitTurns("p1", 1)
              assert.deepStrictEqual(yield* stepShape("p1"), [
                "StartAgentSession",
                "RunModel",
                "CallTool",
                "ResumeTurn",
                "RunModel",
                "AwaitUserMessage"
              ])
              assert.strictEqual(kit.count("get_weather"), 1)
              assert.strictEqual(kit.provider.calls.length, 2, "one model call per RunModel")
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
              // the second call continues Pi's context: the call, then its recorded result
              assert.strictEqual(prompt(kit, 1).systemPrompt, "You are a test agent.")
              assert.deepStrictEqual(promptShape(prompt(kit, 1)), [
                "user",
                "assistant[text,call_1]",
                "toolResult[call_1]"
              ])
              assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { call_1: '{"city":"Paris","temperature":21}' })
              // the next turn replays the stored history: the call, its result and the answer
              assert.isTrue(yield* client.sendUserMessage("p1", "Thanks!"))
              yield* awaitTurns("p1", 2)
              assert.deepStrictEqual(promptShape(prompt(kit, 2)), [
                "user",
                "assistant[text,call_1]",
                "toolResult[call_1]",
                "assistant[text]",
                "user"
              ])
              const assistant = prompt(kit, 2).messages[1]!
              assert.strictEqual(assistant.role, "assistant")
              if (assistant.role === "assistant") {
                assert.deepStrictEqual(assistant.content[1], {
                  type: "toolCall",
                  id: "call_1",
                  name: "get_weather",
                  arguments: { city: "Paris" }
                })
                // Pi's own message fields come back as they were: provider, model, usage, stop reason
                assert.strictEqual(assistant.provider, "scripted")
                assert.strictEqual(assistant.stopReason, "toolUse")
                assert.strictEqual(assistant.usage.input, 10)
              }
            })
        )
    )

    it.live("1b. sequential rounds reach the model as separate assistant messages, not as parallel calls", () =>
      withPiSession(
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
            yield* client.startSession("p1b", { initialMessage: "three cities, one by one" })
            yield* awaitTurns("p1b", 1)
            const rounds = ["user", "assistant[r1]", "toolResult[r1]", "assistant[r2]", "toolResult[r2]"]
            assert.deepStrictEqual(promptShape(prompt(kit, 3)), [...rounds, "assistant[r3]", "toolResult[r3]"])
            assert.isTrue(yield* client.sendUserMessage("p1b", "bye"))
            yield* awaitTurns("p1b", 2)
            assert.deepStrictEqual(promptShape(prompt(kit, 4)), [
              ...rounds,
              "assistant[r3]",
              "toolResult[r3]",
              "assistant[text]",
              "user"
            ])
          })
      )
    )

    it.live("2. parallel tool calls of one response run as parallel Steps", () =>
      withPiSession(
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
        { engine },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("p2", { initialMessage: "both" })
            yield* awaitTurns("p2", 1)
            const shape = yield* stepShape("p2")
            assert.deepStrictEqual(shape.slice(0, 2), ["StartAgentSession", "RunModel"])
            assert.deepStrictEqual(shape.slice(2, 5).sort(), ["CallTool", "CallTool", "CallTool"])
            assert.deepStrictEqual(shape.slice(5), ["ResumeTurn", "RunModel", "AwaitUserMessage"])
            assert.strictEqual(kit.count("get_weather"), 2)
            assert.deepStrictEqual(promptShape(prompt(kit, 1)), [
              "user",
              "assistant[a,b,c]",
              "toolResult[a]",
              "toolResult[b]",
              "toolResult[c]"
            ])
            const turnId = (yield* client.getSnapshot("p2")).messages[0]!.turnId
            assert.deepStrictEqual(kit.idempotencyKeys, [`p2/${turnId}/c`])
          })
      )
    )

    it.live(
      "3+7. a write that needs approval waits beside a READ tool, runs once after approval; a second resolve is false",
      () =>
        withPiSession(
          [
            {
              toolCalls: [
                { id: "w1", name: "send_email", arguments: { to: "ann" } },
                { id: "r1", name: "get_weather", arguments: { city: "Oslo" } }
              ]
            },
            { text: "Sent." }
          ],
          { engine },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("p3", { initialMessage: "email ann" })
              yield* awaitSnapshot(
                "p3",
                (s) =>
                  s.toolCalls.some((c) => c.toolCallId === "r1" && c.status === "succeeded") &&
                  s.pendingInterrupts.length === 1,
                "the read result and the approval"
              )
              assert.strictEqual(kit.count("send_email"), 0)
              assert.isTrue(yield* client.resolveInterrupt("p3", { interruptId: "w1", approved: true }))
              assert.isFalse(yield* client.resolveInterrupt("p3", { interruptId: "w1", approved: true }))
              yield* awaitTurns("p3", 1)
              assert.strictEqual(kit.count("send_email"), 1)
              assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), {
                w1: "sent to ann",
                r1: '{"city":"Oslo","temperature":21}'
              })
              assert.isTrue((yield* stepShape("p3")).includes("CallSingleAttemptTool"))
            })
        )
    )

    it.live(
      '7. an approval deadline rejects the call with "approval deadline passed"; resolving after it is false',
      () =>
        withPiSession(
          [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "cy" } }] }, { text: "Too late." }],
          { engine, interruptDeadline: "1 second" },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("p7", { initialMessage: "email cy" })
              yield* awaitTurns("p7", 1)
              assert.isFalse(yield* client.resolveInterrupt("p7", { interruptId: "w1", approved: true }))
              assert.strictEqual(kit.count("send_email"), 0)
              assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { w1: "approval deadline passed" })
              const result = prompt(kit, 1).messages.find((m) => m.role === "toolResult")
              assert.isTrue(result?.role === "toolResult" && result.isError, "a rejection is an error result for Pi")
            })
        )
    )

    it.live("4. a rejected write never runs, and the model sees the rejection message", () =>
      withPiSession(
        [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "bob" } }] }, { text: "OK, I will not." }],
        { engine },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("p4", { initialMessage: "email bob" })
            yield* awaitSnapshot("p4", (s) => s.pendingInterrupts.length === 1, "the approval")
            assert.isTrue(
              yield* client.resolveInterrupt("p4", {
                interruptId: "w1",
                approved: false,
                rejectionMessage: "Not today."
              })
            )
            yield* awaitTurns("p4", 1)
            assert.strictEqual(kit.count("send_email"), 0)
            assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { w1: "Not today." })
          })
      )
    )

    it.live(
      "a single-attempt write whose tool throws records failed with the error, runs once, the model sees it",
      () =>
        withPiSession(
          [{ toolCalls: [{ id: "f1", name: "flaky_write", arguments: {} }] }, { text: "It may have gone through." }],
          { engine, toolPolicies: { flaky_write: { effect: "non_idempotent_write", requiresApproval: true } } },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("p5", { initialMessage: "do it" })
              yield* awaitSnapshot("p5", (s) => s.pendingInterrupts.length === 1, "the approval")
              assert.isTrue(yield* client.resolveInterrupt("p5", { interruptId: "f1", approved: true }))
              yield* awaitTurns("p5", 1)
              assert.strictEqual(kit.count("flaky_write"), 1)
              assert.include(toolResultsIn(prompt(kit, 1)).f1, "the mail server hung up")
              assert.notStrictEqual(toolResultsIn(prompt(kit, 1)).f1, Wire.OUTCOME_UNKNOWN_TEXT)
            })
        )
    )

    it.live("a READ tool that throws ToolRetryableError is retried by its CallTool Step and succeeds", () =>
      withPiSession(
        [{ toolCalls: [{ id: "b1", name: "busy_read", arguments: {} }] }, { text: "Got it." }],
        { engine },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("pr", { initialMessage: "read" })
            yield* awaitTurns("pr", 1)
            assert.strictEqual(kit.count("busy_read"), 3, "three attempts of one CallTool Step")
            assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), { b1: "finally" })
          })
      )
    )

    it.live("8. a turn that fails after a write ran leaves the turn-failure note, and the write is not repeated", () =>
      withPiSession(
        [
          { toolCalls: [{ id: "n1", name: "save_note", arguments: { text: "hello" } }] },
          { fail: "provider down 1" },
          { fail: "provider down 2" },
          { fail: "provider down 3" },
          { text: "Recovered." }
        ],
        { engine },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("p8", { initialMessage: "save hello" })
            const failed = yield* awaitTurns("p8", 1)
            assert.strictEqual(kit.count("save_note"), 1)
            assert.include(failed.state?.lastTurnError ?? "", "provider down 3")
            // the unfinished-turn messages keep Pi's transcript (the call and its result), then the note
            assert.deepStrictEqual(
              failed.messages.slice(0, -1).map((m) => [m.role, m.text, m.toolCallId, m.toolOutput]),
              [
                ["user", "save hello", null, null],
                ["assistant", null, "n1", null],
                ["tool", null, "n1", "saved hello"]
              ]
            )
            const note = failed.messages[failed.messages.length - 1]!
            assert.isTrue(note.text?.startsWith(Wire.TURN_FAILURE_NOTE_HEADER))
            assert.include(note.text ?? "", "save_note")
            assert.isTrue(yield* client.sendUserMessage("p8", "and now?"))
            yield* awaitTurns("p8", 2)
            const last = prompt(kit, kit.provider.calls.length - 1)
            assert.deepStrictEqual(promptShape(last), ["user", "assistant[n1]", "toolResult[n1]", "user", "user"])
            assert.strictEqual(kit.count("save_note"), 1)
          })
      )
    )

    it.live(
      "10+11. a message sent during a turn is queued (Pi's follow-up) and handled after it; the snapshot returns the conversation",
      () =>
        withPiSession([{ text: "First answer.", delay: "800 millis" }, { text: "Second answer." }], { engine }, (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("p10", { initialMessage: "one" })
            yield* awaitSnapshot("p10", (s) => s.state?.activeTurnId !== null, "the first turn")
            assert.isTrue(yield* client.sendUserMessage("p10", "two"))
            const snapshot = yield* awaitTurns("p10", 2)
            assert.deepStrictEqual(
              snapshot.messages.map((m) => [m.role, m.text]),
              [
                ["user", "one"],
                ["assistant", "First answer."],
                ["user", "two"],
                ["assistant", "Second answer."]
              ]
            )
            assert.strictEqual(kit.provider.calls.length, 2)
            assert.deepStrictEqual(promptShape(prompt(kit, 1)), ["user", "assistant[text]", "user"])
            assert.isFalse(yield* client.sendUserMessage("p10", "   "), "a blank message is refused")
          })
        )
    )

    it.live(
      "a steer during an approval wait (Pi's steering): the waiting call is abandoned, the transcript stays, the steered message comes next",
      () =>
        withPiSession(
          [
            {
              toolCalls: [
                { id: "r1", name: "get_weather", arguments: { city: "Oslo" } },
                { id: "w1", name: "send_email", arguments: { to: "ann" } }
              ]
            },
            { text: "Rome, then." }
          ],
          { engine },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("ps", { initialMessage: "weather, then email ann" })
              yield* awaitSnapshot(
                "ps",
                (s) =>
                  s.toolCalls.some((c) => c.toolCallId === "r1" && c.status === "succeeded") &&
                  s.pendingInterrupts.length === 1,
                "the read result and the approval"
              )
              assert.isTrue(yield* client.steerUserMessage("ps", { text: "no email; Rome instead" }))
              const snapshot = yield* awaitTurns("ps", 2)
              assert.strictEqual(kit.count("send_email"), 0)
              assert.strictEqual(kit.count("get_weather"), 1)
              // the steered turn's model call sees Pi's transcript as Pi's own steering builds it: the
              // calls, their results (the abandoned one rejected), then the steering message
              assert.deepStrictEqual(promptShape(prompt(kit, 1)), [
                "user",
                "assistant[r1,w1]",
                "toolResult[r1]",
                "toolResult[w1]",
                "user"
              ])
              assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), {
                r1: '{"city":"Oslo","temperature":21}',
                w1: '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'
              })
              assert.deepStrictEqual(
                snapshot.messages.map((m) => [m.role, m.text ?? m.toolOutput ?? m.toolCallId]),
                [
                  ["user", "weather, then email ann"],
                  ["assistant", "r1"],
                  ["assistant", "w1"],
                  ["tool", '{"city":"Oslo","temperature":21}'],
                  ["tool", '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'],
                  ["user", "no email; Rome instead"],
                  ["assistant", "Rome, then."]
                ]
              )
            })
        )
    )

    it.live("TypeBox validation: arguments that fail a tool's schema are recorded failed; an unknown tool too", () =>
      withPiSession(
        [
          {
            toolCalls: [
              { id: "u1", name: "launch_rocket", arguments: { now: true } },
              { id: "v1", name: "get_weather", arguments: { town: "Oslo" } }
            ]
          },
          { text: "Sorry." }
        ],
        { engine },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("pu", { initialMessage: "go" })
            const snapshot = yield* awaitTurns("pu", 1)
            const results = Object.fromEntries(
              snapshot.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m.toolOutput])
            )
            assert.strictEqual(results.u1, "The tool call failed: unknown tool launch_rocket")
            assert.isTrue(results.v1?.startsWith("The tool call failed: invalid get_weather arguments: "))
            assert.strictEqual(kit.count("get_weather"), 0)
            assert.deepStrictEqual(toolResultsIn(prompt(kit, 1)), results)
            assert.isFalse((yield* stepShape("pu")).includes("AwaitToolApproval"), "nothing asked for approval")
          })
      )
    )

    it.live("text, thinking and tool-call deltas stream as events; usage and pi-ai's cost are recorded", () =>
      withPiSession(
        [
          {
            reasoning: "The user wants the weather in a city I should look up.",
            text: "Let me look that up for you, one moment please.",
            toolCalls: [{ id: "d1", name: "get_weather", arguments: { city: "Amsterdam" } }],
            usage: { inputTokens: 1_000_000, outputTokens: 500_000, cachedInputTokens: 200_000 }
          },
          { text: "Done." }
        ],
        {
          engine,
          provider: { reasoning: true, cost: { input: 2, output: 8, cacheRead: 0.5, cacheWrite: 0 } }
        },
        () =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("pd", { initialMessage: "weather" })
            const snapshot = yield* awaitTurns("pd", 1)
            const events = yield* allEvents("pd")
            const joined = (type: string) =>
              events
                .filter((e) => e.event.type === type)
                .map((e) => String((e.event.payload as { text?: unknown }).text ?? ""))
                .join("")
            assert.strictEqual(joined("text_delta"), "Let me look that up for you, one moment please.Done.")
            assert.strictEqual(joined("reasoning_delta"), "The user wants the weather in a city I should look up.")
            const toolCallDeltas = events.filter((e) => e.event.type === "pi.tool_call_delta")
            assert.deepStrictEqual(JSON.parse(joined("pi.tool_call_delta")), { city: "Amsterdam" })
            assert.strictEqual((toolCallDeltas[0]!.event.payload as { tool_call_id: string }).tool_call_id, "d1")
            // usage: 1M input tokens of which 200k cached; cost from the price table (dollars per million)
            const usageEvents = events.filter((e) => e.event.type === "pi.usage")
            assert.strictEqual(usageEvents.length, 2)
            const first = usageEvents[0]!.event.payload as {
              input_tokens: number
              cache_read_tokens: number
              cost: { input: number; output: number; cache_read: number; total: number }
            }
            assert.strictEqual(first.input_tokens, 800_000)
            assert.strictEqual(first.cache_read_tokens, 200_000)
            assert.closeTo(first.cost.input, 1.6, 1e-9)
            assert.closeTo(first.cost.output, 4, 1e-9)
            assert.closeTo(first.cost.cache_read, 0.1, 1e-9)
            assert.closeTo(first.cost.total, 5.7, 1e-9)
            const recorded = events.filter((e) => e.event.type === "usage_recorded")
            assert.isAbove(recorded.length, 0)
            assert.isAtLeast(snapshot.usage.inputTokens, 1_000_000)
            assert.isAtLeast(snapshot.usage.cachedInputTokens, 200_000)
            assert.strictEqual(snapshot.usage.modelCalls, 2)
          })
      )
    )
  })
