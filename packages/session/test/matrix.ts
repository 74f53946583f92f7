// The spec's test matrix ("Tests") as one suite that runs on any engine: cases 1, 2, 3 (without the worker
// restart; test/kill.test.ts and test/process.test.ts restart the worker), 4, 7, 8, 10 and 11. Cases 5, 6 and 9
// kill a worker process and live in test/kill.test.ts.
import type { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import {
  AgentSessionClient,
  APPROVAL_DEADLINE_PASSED_MESSAGE,
  type ToolEffect,
  TURN_FAILURE_NOTE_HEADER,
  TURN_NOTE_FOOTER,
  tool
} from "../src/index.ts"
import {
  awaitSnapshot,
  awaitTurns,
  bump,
  type EngineFactory,
  eventTypes,
  type Kit,
  lastUserText,
  type Setup,
  stepExecutions,
  stepShape,
  toolResults,
  withSession
} from "./support.ts"

/** A tool that counts its runs and answers `<name> ok`. */
const counted = (kit: Kit, name: string, effect: ToolEffect) =>
  tool({
    name,
    description: `${name} tool`,
    effect,
    handler: () =>
      Effect.sync(() => {
        bump(kit, name)
        return `${name} ok`
      })
  })

const readAndWrite = (kit: Kit) => [counted(kit, "reader", "read"), counted(kit, "mailer", "non_idempotent_write")]

const writeAndRead = [
  {
    toolCalls: [
      { id: "w1", name: "mailer", arguments: { to: "ann" } },
      { id: "r1", name: "reader", arguments: {} }
    ]
  },
  { text: "Done." }
]

/** Registers the matrix for one engine. */
export const sessionMatrix = (label: string, engine: EngineFactory) => {
  const session = <A, E>(
    setup: Omit<Setup, "engine">,
    body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient | Client.Client>
  ) => withSession({ ...setup, engine }, body)

  describe(`session matrix on the ${label} engine`, () => {
    it.live("#1 a turn with two model calls and a READ tool; the history replays on the next turn", () =>
      session(
        {
          script: [
            { toolCalls: [{ id: "c1", name: "reader", arguments: { q: "paris" } }] },
            { text: "It is sunny." },
            { text: "You are welcome." }
          ],
          tools: readAndWrite
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient
            yield* client.startSession("m-1", { initialMessage: "Weather?" })
            const first = yield* awaitTurns("m-1", 1)
            assert.deepStrictEqual(yield* stepShape("m-1"), [
              "StartAgentSession",
              "RunModel",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "AwaitUserMessage"
            ])
            assert.strictEqual(kit.count("reader"), 1)
            assert.deepStrictEqual(
              first.messages.map((m) => [m.role, m.text, m.toolCallId]),
              [
                ["user", "Weather?", null],
                ["assistant", null, "c1"],
                ["tool", null, "c1"],
                ["assistant", "It is sunny.", null]
              ]
            )
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { c1: "reader ok" })
            assert.isTrue(yield* client.sendUserMessage("m-1", "Thanks!"))
            yield* awaitTurns("m-1", 2)
            assert.deepStrictEqual(
              kit.requests[2]!.messages.map((m) => m.role),
              ["user", "assistant", "tool", "assistant", "user"]
            )
            assert.strictEqual(lastUserText(kit.requests[2]!), "Thanks!")
          })
      )
    )

    it.live("#2 parallel tool calls of one model response run as parallel Steps", () => {
      let running = 0
      let maxRunning = 0
      const all = Deferred.makeUnsafe<void>()
      return session(
        {
          script: [
            { toolCalls: ["a", "b", "c"].map((city, i) => ({ id: `p${i}`, name: "slow", arguments: { city } })) },
            { text: "Done." }
          ],
          tools: (kit) => [
            tool({
              name: "slow",
              description: "Waits until all three calls run.",
              effect: "read",
              handler: (args) =>
                Effect.gen(function* () {
                  bump(kit, "slow")
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
            const client = yield* AgentSessionClient
            yield* client.startSession("m-2", { initialMessage: "Three cities" })
            yield* awaitTurns("m-2", 1)
            assert.strictEqual(maxRunning, 3, "the three calls ran at the same time")
            assert.strictEqual(kit.count("slow"), 3)
            assert.deepStrictEqual(yield* stepShape("m-2"), [
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
          })
      )
    })

    it.live("#3 a write that needs approval waits in parallel with a READ tool and runs once after approval", () =>
      session({ script: writeAndRead, tools: readAndWrite }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient
          yield* client.startSession("m-3", { initialMessage: "mail ann" })
          const waiting = yield* awaitSnapshot(
            "m-3",
            (s) => s.toolCalls.some((c) => c.toolCallId === "r1" && c.status === "succeeded"),
            "the READ call"
          )
          assert.deepStrictEqual(
            waiting.toolCalls.map((c) => [c.toolCallId, c.status]),
            [
              ["w1", "awaiting_approval"],
              ["r1", "succeeded"]
            ]
          )
          assert.strictEqual(kit.count("reader"), 1, "the READ call ran while the write waited")
          assert.strictEqual(kit.count("mailer"), 0)
          assert.isTrue(yield* client.resolveInterrupt("m-3", { interruptId: "w1", approved: true }))
          yield* awaitTurns("m-3", 1)
          assert.strictEqual(kit.count("mailer"), 1)
          assert.deepStrictEqual(toolResults(kit.requests[1]!), { w1: "mailer ok", r1: "reader ok" })
          assert.deepStrictEqual(yield* stepShape("m-3"), [
            "StartAgentSession",
            "RunModel",
            "AwaitToolApproval",
            "CallTool",
            "ResumeTurn",
            "CallSingleAttemptTool",
            "RunModel",
            "AwaitUserMessage"
          ])
        })
      )
    )

    it.live("#4 a rejected write never runs, and the model sees the rejection message", () =>
      session({ script: writeAndRead, tools: readAndWrite }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient
          yield* client.startSession("m-4", { initialMessage: "mail ann" })
          yield* awaitSnapshot("m-4", (s) => s.pendingInterrupts.length === 1, "the approval")
          assert.isTrue(
            yield* client.resolveInterrupt("m-4", { interruptId: "w1", approved: false, rejectionMessage: "not now" })
          )
          const done = yield* awaitTurns("m-4", 1)
          assert.strictEqual(kit.count("mailer"), 0)
          assert.deepStrictEqual(toolResults(kit.requests[1]!), { w1: "not now", r1: "reader ok" })
          assert.deepStrictEqual(done.pendingInterrupts, [])
          assert.notInclude(yield* stepShape("m-4"), "CallSingleAttemptTool")
        })
      )
    )

    it.live("#7 resolve_interrupt called twice returns false the second time", () =>
      session({ script: writeAndRead, tools: readAndWrite }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient
          yield* client.startSession("m-7", { initialMessage: "mail ann" })
          yield* awaitSnapshot("m-7", (s) => s.pendingInterrupts.length === 1, "the approval")
          assert.isTrue(yield* client.resolveInterrupt("m-7", { interruptId: "w1", approved: true }))
          assert.isFalse(yield* client.resolveInterrupt("m-7", { interruptId: "w1", approved: true }))
          assert.isFalse(yield* client.resolveInterrupt("m-7", { interruptId: "w1", approved: false }))
          yield* awaitTurns("m-7", 1)
          assert.strictEqual(kit.count("mailer"), 1)
        })
      )
    )

    it.live("#7 an approval deadline rejects the call", () =>
      session(
        {
          script: [{ toolCalls: [{ id: "w1", name: "mailer", arguments: {} }] }, { text: "Expired." }],
          tools: readAndWrite,
          flow: { interruptDeadline: "1 second" }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient
            yield* client.startSession("m-7d", { initialMessage: "mail ann" })
            const waiting = yield* awaitSnapshot("m-7d", (s) => s.pendingInterrupts.length === 1, "the approval")
            const deadline = Date.parse(waiting.pendingInterrupts[0]!.deadline!)
            yield* awaitTurns("m-7d", 1)
            assert.isAtLeast(Date.now(), deadline)
            assert.isFalse(yield* client.resolveInterrupt("m-7d", { interruptId: "w1", approved: true }))
            assert.strictEqual(kit.count("mailer"), 0)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { w1: APPROVAL_DEADLINE_PASSED_MESSAGE })
          })
      )
    )

    it.live("#8 a turn that fails after a write ran leaves the turn-failure note, and the write is not repeated", () =>
      session(
        {
          script: [
            { toolCalls: [{ id: "u1", name: "upserter", arguments: { id: 7 } }] },
            { fail: "provider down 1" },
            { fail: "provider down 2" },
            { fail: "provider down 3" },
            { text: "Recovered." }
          ],
          tools: (kit) => [counted(kit, "upserter", "idempotent_write")]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient
            yield* client.startSession("m-8", { initialMessage: "update 7" })
            const failed = yield* awaitTurns("m-8", 1)
            assert.strictEqual(failed.state?.lastTurnError, "ModelCallError: provider down 3")
            assert.deepStrictEqual(yield* stepShape("m-8"), [
              "StartAgentSession",
              "RunModel",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "RecordTurnFailure",
              "AwaitUserMessage"
            ])
            const run = (yield* stepExecutions("m-8")).filter((s) => s.stepType === "RunModel")[1]!
            assert.deepStrictEqual(
              run.attempts.map((a) => a.outcome),
              ["failure", "failure", "failure"]
            )
            assert.strictEqual(
              failed.messages[failed.messages.length - 1]!.text,
              [TURN_FAILURE_NOTE_HEADER, '- upserter {"id":7} -> succeeded: upserter ok', TURN_NOTE_FOOTER].join("\n")
            )
            assert.isTrue(yield* client.sendUserMessage("m-8", "and now?"))
            const next = yield* awaitTurns("m-8", 2)
            assert.strictEqual(kit.count("upserter"), 1, "the write was not repeated")
            assert.strictEqual(next.messages[next.messages.length - 1]!.text, "Recovered.")
            assert.isTrue(
              kit.requests[kit.requests.length - 1]!.messages.some(
                (m) => m.role === "user" && m.text.startsWith(TURN_FAILURE_NOTE_HEADER)
              )
            )
          })
      )
    )

    it.live("#10 a message sent during a turn is queued and handled after the turn", () =>
      session({ script: [{ text: "First answer.", delay: "600 millis" }, { text: "Second answer." }] }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient
          yield* client.startSession("m-10", { initialMessage: "one" })
          yield* awaitSnapshot("m-10", (s) => s.state?.status === "running_model", "the model call")
          assert.isTrue(yield* client.sendUserMessage("m-10", "two"))
          const during = yield* client.getSnapshot("m-10")
          assert.deepStrictEqual(
            during.queuedMessages.map((m) => m.message.text),
            ["two"]
          )
          assert.strictEqual(during.state?.activeTurnId, "turn-1")
          const done = yield* awaitTurns("m-10", 2)
          assert.deepStrictEqual(
            done.messages.map((m) => [m.turnId, m.text]),
            [
              ["turn-1", "one"],
              ["turn-1", "First answer."],
              ["turn-2", "two"],
              ["turn-2", "Second answer."]
            ]
          )
          assert.strictEqual(done.queuedMessageCount, 0)
          assert.strictEqual(lastUserText(kit.requests[1]!), "two")
          assert.deepStrictEqual(yield* eventTypes("m-10"), [
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
    )

    it.live("#11 get_agent_snapshot returns the conversation after the session completes a turn", () =>
      session({ script: [{ text: "a1", usage: { inputTokens: 3, outputTokens: 2 } }] }, () =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient
          yield* client.startSession("m-11", { initialMessage: "q1" })
          const snapshot = yield* awaitTurns("m-11", 1)
          assert.deepStrictEqual(
            snapshot.messages.map((m) => [m.sequence, m.role, m.text]),
            [
              [1, "user", "q1"],
              [2, "assistant", "a1"]
            ]
          )
          assert.deepStrictEqual(snapshot.state, {
            status: "waiting_for_user_message",
            turnCount: 1,
            activeTurnId: null,
            nextMessageSequence: 3,
            lastTurnError: null,
            interactionMode: "chat",
            acceptsTurnControl: false
          })
          assert.deepStrictEqual(snapshot.usage, {
            modelCalls: 1,
            inputTokens: 3,
            outputTokens: 2,
            cachedInputTokens: 0,
            reasoningTokens: 0
          })
          assert.deepStrictEqual(snapshot.toolCalls, [])
          assert.deepStrictEqual(snapshot.pendingInterrupts, [])
          assert.strictEqual(snapshot.queuedMessageCount, 0)
        })
      )
    )
  })
}
