import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { AgentSessionClient, ToolSource } from "../../src/index.ts"
import {
  allEvents,
  awaitCount,
  awaitTurns,
  bump,
  type EngineFactory,
  eventTypes,
  lastUserText,
  makeGate,
  sessionOn,
  startAndAwait,
  stepExecutions,
  stepShape,
  toolResults
} from "../support.ts"

const weather = (kit: Parameters<typeof bump>[0]) =>
  ToolSource.tool({
    name: "get_weather",
    description: "The weather of a city.",
    effect: "read",
    handler: (args) =>
      Effect.sync(() => {
        bump(kit, "get_weather")
        return { city: args.city, temperature: 21 }
      })
  })

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const turnSuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine)

  describe("the turn loop", () => {
    it.live("a turn with two model calls and a read tool is RunModel -> CallTool -> ResumeTurn -> RunModel", () =>
      withSession(
        {
          script: [
            {
              toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
              usage: { inputTokens: 10 }
            },
            { text: "It is 21 degrees in Paris.", usage: { inputTokens: 20, outputTokens: 7 } },
            { text: "You are welcome." }
          ],
          tools: (kit) => [weather(kit)]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-1", { initialMessage: "Weather in Paris?" })
            const first = yield* awaitTurns("s-1", 1)
            assert.deepStrictEqual(yield* stepShape("s-1"), [
              "StartAgentSession",
              "RunModel",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "AwaitUserMessage"
            ])
            assert.strictEqual(kit.count("get_weather"), 1)
            assert.deepStrictEqual(
              first.messages.map((m) => [m.sequence, m.role, m.text, m.toolCallId, m.toolOutput]),
              [
                [1, "user", "Weather in Paris?", null, null],
                [2, "assistant", null, "call_1", null],
                [3, "tool", null, "call_1", '{"city":"Paris","temperature":21}'],
                [4, "assistant", "It is 21 degrees in Paris.", null, null]
              ]
            )
            assert.deepStrictEqual(first.usage, {
              modelCalls: 2,
              inputTokens: 30,
              outputTokens: 7,
              cachedInputTokens: 0,
              reasoningTokens: 0
            })
            assert.deepStrictEqual(first.toolCalls, [], "the turn's records are deleted when it ends")
            assert.strictEqual(first.state?.status, "waiting_for_user_message")
            assert.strictEqual(first.state?.lastTurnError, null)
            // the second model call saw the tool result
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { call_1: '{"city":"Paris","temperature":21}' })
            // the history replays on the next turn
            assert.isTrue(yield* client.sendUserMessage("s-1", "Thanks!"))
            yield* awaitTurns("s-1", 2)
            const replay = kit.requests[2]!
            assert.deepStrictEqual(
              replay.messages.map((m) => m.role),
              ["user", "assistant", "tool", "assistant", "user"]
            )
            assert.strictEqual(lastUserText(replay), "Thanks!")
            assert.strictEqual(replay.instructions, "You are a test agent.")
            assert.deepStrictEqual(
              replay.tools.map((t) => t.name),
              ["get_weather"]
            )
          })
      )
    )

    it.live("events carry turn_id, attempt and step_execution_id, in commit order", () =>
      withSession(
        {
          script: [
            { toolCalls: [{ id: "c1", name: "get_weather", arguments: { city: "Oslo" } }], reasoning: "Look it up." },
            { text: "Cold.", textDeltas: ["Co", "ld."], usage: { outputTokens: 2 } }
          ],
          tools: (kit) => [weather(kit)]
        },
        () =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-ev", { initialMessage: "Oslo?" })
            yield* awaitTurns("s-ev", 1)
            const events = yield* allEvents("s-ev")
            assert.deepStrictEqual(
              events.map((e) => [e.event.type, e.event.stepExecutionId]),
              [
                ["turn_started", "StartAgentSession-1"],
                ["reasoning_delta", "RunModel-1"],
                ["usage_recorded", "RunModel-1"],
                ["tool_call_deferred", "RunModel-1"],
                ["tool_call_started", "CallTool-1"],
                ["tool_call_finished", "CallTool-1"],
                ["text_delta", "RunModel-2"],
                ["text_delta", "RunModel-2"],
                ["usage_recorded", "RunModel-2"],
                ["turn_completed", "RunModel-2"]
              ]
            )
            for (const { event } of events) {
              assert.strictEqual(event.turnId, "turn-1")
              assert.strictEqual(event.attempt, 1)
            }
            const byType = (type: string) => events.find((e) => e.event.type === type)!.event
            assert.deepStrictEqual(byType("turn_started").payload, { sequence: 1 })
            assert.deepStrictEqual(byType("tool_call_deferred").payload, {
              toolCallId: "c1",
              toolName: "get_weather",
              effect: "read",
              requiresApproval: false
            })
            assert.deepStrictEqual(byType("tool_call_finished").payload, {
              toolCallId: "c1",
              toolName: "get_weather",
              status: "succeeded"
            })
            assert.deepStrictEqual(byType("turn_completed").payload, { messageCount: 3 })
            const usage = events.filter((e) => e.event.type === "usage_recorded").map((e) => e.event.payload)
            assert.deepStrictEqual(usage[1], {
              recorded: { modelCalls: 1, inputTokens: 0, outputTokens: 2, cachedInputTokens: 0, reasoningTokens: 0 },
              session: { modelCalls: 2, inputTokens: 0, outputTokens: 2, cachedInputTokens: 0, reasoningTokens: 0 }
            })
            // a resume token continues after its event
            const after = Array.from(
              yield* Stream.runCollect(client.events("s-ev", { from: { after: events[7]!.token } }))
            )
            assert.deepStrictEqual(
              after.map((e) => e.event.type),
              ["usage_recorded", "turn_completed"]
            )
          })
      )
    )

    it.live("parallel tool calls of one response run as parallel Steps, and ResumeTurn waits for all", () => {
      let running = 0
      let maxRunning = 0
      const all = Deferred.makeUnsafe<void>()
      return withSession(
        {
          script: [
            {
              toolCalls: ["a", "b", "c"].map((city, i) => ({ id: `p${i}`, name: "slow_weather", arguments: { city } }))
            },
            { text: "Done." }
          ],
          tools: (kit) => [
            ToolSource.tool({
              name: "slow_weather",
              description: "Slow weather.",
              effect: "read",
              handler: (args) =>
                Effect.gen(function* () {
                  bump(kit, "slow_weather")
                  running++
                  maxRunning = Math.max(maxRunning, running)
                  if (running === 3) Deferred.doneUnsafe(all, Effect.void)
                  yield* Deferred.await(all).pipe(Effect.timeout("10 seconds"), Effect.ignore)
                  running--
                  return `weather of ${String(args.city)}`
                })
            })
          ]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-par", { initialMessage: "Three cities" })
            yield* awaitTurns("s-par", 1)
            assert.strictEqual(maxRunning, 3, "the three calls ran at the same time")
            assert.strictEqual(kit.count("slow_weather"), 3)
            assert.deepStrictEqual(yield* stepShape("s-par"), [
              "StartAgentSession",
              "RunModel",
              "CallTool",
              "CallTool",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "AwaitUserMessage"
            ])
            assert.deepStrictEqual(toolResults(kit.requests[1]!), {
              p0: "weather of a",
              p1: "weather of b",
              p2: "weather of c"
            })
            // ResumeTurn consumed exactly one ToolCallCompleted per call
            const steps = yield* stepExecutions("s-par")
            assert.strictEqual(steps.find((s) => s.stepType === "ResumeTurn")!.attempts.length, 1)
          })
      )
    })

    it.live("a message sent during a turn is queued and handled after the turn", () => {
      // the first model call answers only once the test has sent and seen the queued message
      const firstCall = makeGate()
      return withSession(
        { script: [{ text: "First answer." }, { text: "Second answer." }], holds: { 0: firstCall } },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait(
              "s-q",
              "one",
              (s) => s.state?.status === "running_model",
              "the model call"
            )
            yield* awaitCount(() => kit.requests.length, 1, "the model call")
            assert.isTrue(yield* client.sendUserMessage("s-q", "two"))
            const during = yield* client.getSnapshot("s-q")
            assert.strictEqual(during.queuedMessageCount, 1)
            assert.deepStrictEqual(
              during.queuedMessages.map((m) => m.message.text),
              ["two"]
            )
            yield* firstCall.open
            const done = yield* awaitTurns("s-q", 2)
            assert.deepStrictEqual(
              done.messages.map((m) => [m.turnId, m.role, m.text]),
              [
                ["turn-1", "user", "one"],
                ["turn-1", "assistant", "First answer."],
                ["turn-2", "user", "two"],
                ["turn-2", "assistant", "Second answer."]
              ]
            )
            assert.strictEqual(done.queuedMessageCount, 0)
            assert.strictEqual(lastUserText(kit.requests[1]!), "two")
            assert.deepStrictEqual(yield* eventTypes("s-q"), [
              "turn_started",
              "text_delta",
              "usage_recorded",
              "turn_completed",
              "turn_started",
              "text_delta",
              "usage_recorded",
              "turn_completed"
            ])
          })
      )
    })

    it.live("get_agent_snapshot and list_agent_messages return the conversation after a turn", () =>
      withSession({ script: [{ text: "a1" }, { text: "a2" }] }, () =>
        Effect.gen(function* () {
          const { client, snapshot: idle } = yield* startAndAwait(
            "s-snap",
            undefined,
            (s) => s.state !== null,
            "the session start"
          )
          assert.deepStrictEqual(idle.state, {
            status: "waiting_for_user_message",
            turnCount: 0,
            activeTurnId: null,
            nextMessageSequence: 1,
            lastTurnError: null,
            interactionMode: "chat",
            acceptsTurnControl: false
          })
          assert.deepStrictEqual(yield* stepShape("s-snap"), ["StartAgentSession", "AwaitUserMessage"])
          assert.isFalse(yield* client.sendUserMessage("s-snap", "   "), "a blank message is refused")
          assert.isFalse(yield* client.sendUserMessage("s-snap", { text: "plan it", planMode: true }))
          assert.isTrue(yield* client.sendUserMessage("s-snap", "q1"))
          yield* awaitTurns("s-snap", 1)
          assert.isTrue(yield* client.sendUserMessage("s-snap", "q2"))
          const snapshot = yield* awaitTurns("s-snap", 2)
          assert.deepStrictEqual(
            snapshot.messages.map((m) => m.text),
            ["q1", "a1", "q2", "a2"]
          )
          assert.strictEqual(snapshot.state?.nextMessageSequence, 5)
          assert.strictEqual(snapshot.usage.modelCalls, 2)
          assert.deepStrictEqual(snapshot.pendingInterrupts, [])
          assert.strictEqual(snapshot.sessionSettings, null)
          const page = yield* client.listMessages("s-snap", { limit: 3 })
          assert.deepStrictEqual(
            page.messages.map((m) => m.sequence),
            [2, 3, 4]
          )
          assert.strictEqual(page.nextBeforeSequence, 2)
          const older = yield* client.listMessages("s-snap", { beforeSequence: 2, limit: 3 })
          assert.deepStrictEqual(
            older.messages.map((m) => m.sequence),
            [1]
          )
          assert.strictEqual(older.nextBeforeSequence, null)
          const clamped = yield* client.listMessages("s-snap", { limit: 0 })
          assert.deepStrictEqual(
            clamped.messages.map((m) => m.sequence),
            [4]
          )
        })
      )
    )

    it.live("a tool Step heartbeats before it calls the tool", () => {
      const ranAt: Array<number> = []
      return withSession(
        {
          script: [{ toolCalls: [{ id: "h1", name: "stamp" }] }, { text: "ok" }],
          tools: () => [
            ToolSource.tool({
              name: "stamp",
              description: "Records when it ran.",
              effect: "read",
              handler: () => Effect.sync(() => void ranAt.push(Date.now()))
            })
          ]
        },
        () =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-hb", { initialMessage: "go" })
            yield* awaitTurns("s-hb", 1)
            const call = (yield* stepExecutions("s-hb")).find((s) => s.stepType === "CallTool")!
            const attempt = call.attempts[0]!
            assert.isNotNull(attempt.outputAt, "the attempt produced output (a heartbeat)")
            assert.isAtMost(attempt.outputAt!, ranAt[0]!, "the heartbeat came before the tool ran")
          })
      )
    })
  })
}
