// What the Pi runner adds to the runner kit's conformance suite (conformance.test.ts runs the spec's matrix,
// the controls and the kill tests), registered once per engine (matrix-*.test.ts): Pi's context between the
// RunModel Steps and across turns, sequential rounds, a retried tool, the unfinished-turn messages of a failed,
// steered and cancelled turn, TypeBox validation, and text, thinking and tool-call deltas with usage and cost.
import { assertReadToolTurn, READ_TOOL_TURN, READ_TOOL_TURN_STEPS } from "@durable-agent/runner-kit/Conformance"
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
  TINY_PNG,
  toolResultsIn,
  withPiSession
} from "../support.ts"

export const matrixSuite = (engineName: string, engine: EngineFactory) =>
  describe(`Pi runner on the ${engineName} engine: the session matrix`, () => {
    it.live(
      "Pi's context: the next RunModel continues it with the recorded result; the next turn replays Pi's messages",
      () =>
        withPiSession(READ_TOOL_TURN, { engine }, (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("p1", { initialMessage: "Weather in Paris?" })
            const first = yield* awaitTurns("p1", 1)
            assert.deepStrictEqual(yield* stepShape("p1"), READ_TOOL_TURN_STEPS)
            assert.strictEqual(kit.count("get_weather"), 1)
            assert.strictEqual(kit.provider.calls.length, 2, "one model call per RunModel")
            assertReadToolTurn(first)
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

    it.live(
      "a tool result's image and details reach the next model call as Pi's toolResult message, and the next turn's",
      () =>
        withPiSession(
          [
            {
              toolCalls: [
                { id: "s1", name: "screenshot", arguments: { url: "https://example.com" } },
                { id: "w1", name: "get_weather", arguments: { city: "Oslo" } }
              ]
            },
            { text: "A blank page; 21 degrees in Oslo." },
            { text: "Still blank." }
          ],
          { engine },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("pimg", { initialMessage: "screenshot example.com, and the weather" })
              const done = yield* awaitTurns("pimg", 1)
              assert.strictEqual(kit.count("screenshot"), 1)
              const expected = {
                role: "toolResult",
                toolCallId: "s1",
                toolName: "screenshot",
                content: [
                  { type: "text", text: "screenshot of https://example.com" },
                  { type: "image", data: TINY_PNG, mimeType: "image/png" }
                ],
                details: { url: "https://example.com", width: 1, height: 1 },
                isError: false
              }
              const resultOf = (index: number, id: string) => {
                const found = prompt(kit, index).messages.find((m) => m.role === "toolResult" && m.toolCallId === id)
                if (found === undefined) throw new Error(`no result for ${id} in call ${index}`)
                const { timestamp: _timestamp, ...rest } = found as { timestamp: number }
                return rest
              }
              // the next RunModel: Pi's toolResult message as Pi's loop builds it, the image as an image block
              assert.deepStrictEqual(resultOf(1, "s1"), expected)
              // a text-only result without details stays plain text, on the record as in the context
              assert.deepStrictEqual(resultOf(1, "w1"), {
                role: "toolResult",
                toolCallId: "w1",
                toolName: "get_weather",
                content: [{ type: "text", text: '{"city":"Oslo","temperature":21}' }],
                isError: false
              })
              // the stored tool message shows the text (the image named), and keeps Pi's message whole
              const stored = done.messages.find((m) => m.role === "tool" && m.toolCallId === "s1")!
              assert.strictEqual(stored.toolOutput, "screenshot of https://example.com\n[image image/png]")
              // the next turn's context rebuilds it from the stored history, image and details included
              assert.isTrue(yield* client.sendUserMessage("pimg", "and now?"))
              yield* awaitTurns("pimg", 2)
              assert.deepStrictEqual(resultOf(2, "s1"), expected)
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

    it.live("a failed turn keeps Pi's transcript (the unfinished-turn messages), then the turn-failure note", () =>
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
              const abandoned = prompt(kit, 1).messages.find((m) => m.role === "toolResult" && m.toolCallId === "w1")
              assert.isTrue(
                abandoned?.role === "toolResult" && abandoned.isError,
                "an abandoned call is an error for Pi"
              )
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

    it.live(
      "a message sent during an approval wait (Pi's follow-up): queued, the turn ends with its answer, the next turn starts with it",
      () =>
        withPiSession(
          [
            { toolCalls: [{ id: "e1", name: "send_email", arguments: { to: "ann" } }] },
            { text: "Sent to Ann." },
            { text: "Bob is copied now." }
          ],
          { engine },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("pf", { initialMessage: "email ann" })
              yield* awaitSnapshot("pf", (s) => s.pendingInterrupts.length === 1, "the approval")
              // Pi's followUp: delivered once the agent would stop; the session queues it for the next turn
              assert.isTrue(yield* client.sendUserMessage("pf", "also cc Bob"))
              assert.isTrue(yield* client.resolveInterrupt("pf", { interruptId: "e1", approved: true }))
              const done = yield* awaitTurns("pf", 2)
              assert.strictEqual(kit.count("send_email"), 1)
              assert.strictEqual(kit.provider.calls.length, 3)
              // the answered turn, then the follow-up: Pi's transcript, as its agent would have it
              assert.deepStrictEqual(promptShape(prompt(kit, 2)), [
                "user",
                "assistant[e1]",
                "toolResult[e1]",
                "assistant[text]",
                "user"
              ])
              const followUp = prompt(kit, 2).messages[4]!
              assert.strictEqual(followUp.role === "user" ? followUp.content : null, "also cc Bob")
              assert.deepStrictEqual(
                done.messages.map((m) => [m.role, m.text ?? m.toolOutput ?? m.toolCallId]),
                [
                  ["user", "email ann"],
                  ["assistant", "e1"],
                  ["tool", "sent to ann"],
                  ["assistant", "Sent to Ann."],
                  ["user", "also cc Bob"],
                  ["assistant", "Bob is copied now."]
                ]
              )
            })
        )
    )

    it.live(
      "cancel_turn during the second model call: the call is aborted, the turn keeps Pi's transcript of the first round",
      () =>
        withPiSession(
          [
            { toolCalls: [{ id: "r1", name: "get_weather", arguments: { city: "Oslo" } }] },
            { text: "never seen", delay: "10 minutes" },
            { text: "Oslo is 21 degrees." }
          ],
          { engine },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("pc", { initialMessage: "weather in Oslo" })
              yield* awaitSnapshot("pc", () => kit.provider.calls.length === 2, "the second model call")
              assert.isTrue(yield* client.cancelTurn("pc"))
              const cancelled = yield* awaitTurns("pc", 1)
              yield* awaitSnapshot("pc", () => kit.provider.abortedCalls.length === 1, "the provider to see the abort")
              assert.deepStrictEqual(kit.provider.abortedCalls, [1])
              // the unfinished-turn messages, not the cancelled note: the call and its result stay
              assert.deepStrictEqual(
                cancelled.messages.map((m) => [m.role, m.text ?? m.toolOutput ?? m.toolCallId]),
                [
                  ["user", "weather in Oslo"],
                  ["assistant", "r1"],
                  ["tool", '{"city":"Oslo","temperature":21}']
                ]
              )
              assert.isTrue(yield* client.sendUserMessage("pc", "so?"))
              yield* awaitTurns("pc", 2)
              assert.deepStrictEqual(promptShape(prompt(kit, 2)), ["user", "assistant[r1]", "toolResult[r1]", "user"])
              assert.strictEqual(kit.count("get_weather"), 1)
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
