import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Wire } from "../../src/index.ts"
import {
  APPROVED_WRITE_TURN_STEPS,
  allEvents,
  awaitSnapshot,
  awaitTurns,
  type EngineFactory,
  type Kit,
  sendEmailTool,
  sessionOn,
  startAndAwait,
  stepShape,
  toolResults,
  weatherTool
} from "../support.ts"

const tools = (kit: Kit) => [weatherTool(kit), sendEmailTool(kit)]

const writeAndRead = [
  {
    toolCalls: [
      { id: "w1", name: "send_email", arguments: { to: "ann" } },
      { id: "r1", name: "get_weather", arguments: {} }
    ]
  },
  { text: "Done." }
]

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const approvalSuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine)

  describe("approvals", () => {
    it.live("a write that needs approval waits in parallel with a READ tool, runs once after approval", () =>
      withSession({ script: writeAndRead, tools }, (kit) =>
        Effect.gen(function* () {
          const { client, snapshot: waiting } = yield* startAndAwait(
            "s-ok",
            "email ann",
            (s) => s.toolCalls.some((c) => c.toolCallId === "r1" && c.status === "succeeded"),
            "the read call"
          )
          assert.strictEqual(kit.count("get_weather"), 1, "the READ call ran while the write waited")
          assert.strictEqual(kit.count("send_email"), 0)
          assert.deepStrictEqual(
            waiting.toolCalls.map((c) => [c.toolCallId, c.status, c.effect, c.requiresApproval, c.deferralOrder]),
            [
              ["w1", "awaiting_approval", "non_idempotent_write", true, 0],
              ["r1", "succeeded", "read", false, 1]
            ]
          )
          assert.deepStrictEqual(
            waiting.pendingInterrupts.map((i) => [i.interruptId, i.kind, i.toolCallId, i.toolName, i.deadline]),
            [["w1", "tool_approval", "w1", "send_email", null]]
          )
          assert.strictEqual(waiting.state?.status, "running_tools")
          assert.isTrue(yield* client.resolveInterrupt("s-ok", { interruptId: "w1", approved: true }))
          assert.isFalse(
            yield* client.resolveInterrupt("s-ok", { interruptId: "w1", approved: true }),
            "resolve_interrupt returns false the second time"
          )
          yield* awaitTurns("s-ok", 1)
          assert.strictEqual(kit.count("send_email"), 1)
          assert.deepStrictEqual(toolResults(kit.requests[1]!), { w1: "sent to ann", r1: "sunny" })
          const shape = yield* stepShape("s-ok")
          assert.deepStrictEqual(shape, APPROVED_WRITE_TURN_STEPS)
          const events = yield* allEvents("s-ok")
          const raised = events.find((e) => e.event.type === "interrupt_raised")!.event
          assert.strictEqual(raised.stepExecutionId, "RunModel-1")
          assert.deepStrictEqual(raised.payload, {
            interruptId: "w1",
            toolCallId: "w1",
            toolName: "send_email",
            deadline: null,
            kind: "tool_approval",
            question: null,
            choices: [],
            allowsFreeText: true
          })
          const resolved = events.find((e) => e.event.type === "interrupt_resolved")!.event
          assert.deepStrictEqual(resolved.payload, {
            interruptId: "w1",
            approved: true,
            rejectionMessage: null,
            kind: "tool_approval",
            answered: false,
            cancellationReason: null
          })
          assert.strictEqual(
            events.filter((e) => e.event.type === "tool_call_finished").length,
            2,
            "one tool_call_finished per call"
          )
        })
      )
    )

    it.live("a rejected write never runs, and the model sees the rejection message", () =>
      withSession(
        {
          script: [
            ...writeAndRead,
            { toolCalls: [{ id: "w2", name: "send_email", arguments: { to: "bob" } }] },
            { text: "Not sent." }
          ],
          tools
        },
        (kit) =>
          Effect.gen(function* () {
            const { client } = yield* startAndAwait(
              "s-rej",
              "email ann",
              (s) => s.pendingInterrupts.length === 1,
              "the approval"
            )
            assert.isTrue(
              yield* client.resolveInterrupt("s-rej", {
                interruptId: "w1",
                approved: false,
                rejectionMessage: "not now"
              })
            )
            const done = yield* awaitTurns("s-rej", 1)
            assert.strictEqual(kit.count("send_email"), 0)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { w1: "not now", r1: "sunny" })
            assert.deepStrictEqual(done.pendingInterrupts, [])
            assert.deepStrictEqual(yield* stepShape("s-rej"), [
              "StartAgentSession",
              "RunModel",
              "AwaitToolApproval",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "AwaitUserMessage"
            ])
            // without a message the model sees the default rejection text
            assert.isTrue(yield* client.sendUserMessage("s-rej", "email bob"))
            yield* awaitSnapshot("s-rej", (s) => s.pendingInterrupts.some((i) => i.interruptId === "w2"), "w2")
            assert.isTrue(yield* client.resolveInterrupt("s-rej", { interruptId: "w2", approved: false }))
            yield* awaitTurns("s-rej", 2)
            assert.deepStrictEqual(toolResults(kit.requests[3]!).w2, Wire.DEFAULT_REJECTION_TEXT)
            assert.strictEqual(kit.count("send_email"), 0)
          })
      )
    )

    it.live("an approval deadline rejects the call, and resolve_interrupt after it returns false", () =>
      withSession(
        {
          script: [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "ann" } }] }, { text: "Expired." }],
          tools,
          flow: { interruptDeadline: "1 second" }
        },
        (kit) =>
          Effect.gen(function* () {
            const { client, snapshot: waiting } = yield* startAndAwait(
              "s-dl",
              "email ann",
              (s) => s.pendingInterrupts.length === 1,
              "the approval"
            )
            const interrupt = waiting.pendingInterrupts[0]!
            assert.isNotNull(interrupt.deadline)
            assert.strictEqual(Date.parse(interrupt.deadline!) - Date.parse(interrupt.createdAt), 1000)
            const done = yield* awaitTurns("s-dl", 1)
            assert.isAtLeast(Date.now(), Date.parse(interrupt.deadline!))
            assert.isFalse(yield* client.resolveInterrupt("s-dl", { interruptId: "w1", approved: true }))
            assert.strictEqual(kit.count("send_email"), 0)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { w1: Wire.APPROVAL_DEADLINE_PASSED_MESSAGE })
            assert.deepStrictEqual(done.pendingInterrupts, [])
            const events = yield* allEvents("s-dl")
            const resolved = events.find((e) => e.event.type === "interrupt_resolved")!.event
            assert.deepStrictEqual(resolved.payload, {
              interruptId: "w1",
              approved: false,
              rejectionMessage: Wire.APPROVAL_DEADLINE_PASSED_MESSAGE,
              kind: "tool_approval",
              answered: false,
              cancellationReason: null
            })
            const finished = events.find((e) => e.event.type === "tool_call_finished")!.event
            assert.deepStrictEqual(finished.payload, { toolCallId: "w1", toolName: "send_email", status: "rejected" })
          })
      )
    )

    it.live("resolve_interrupt for an unknown interrupt returns false", () =>
      withSession({ script: [] }, () =>
        Effect.gen(function* () {
          const { client } = yield* startAndAwait("s-none", undefined, (s) => s.state !== null, "the session start")
          assert.isFalse(yield* client.resolveInterrupt("s-none", { interruptId: "nope", approved: true }))
          assert.isFalse(yield* client.resolveInterrupt("s-none", { interruptId: "nope", approved: false }))
        })
      )
    )
  })
}
