import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, Errors, ToolSource, Wire } from "../../src/index.ts"
import {
  allEvents,
  awaitTurns,
  bump,
  type EngineFactory,
  type Kit,
  lastUserText,
  sessionOn,
  startAndAwait,
  stepExecutions,
  stepShape,
  toolResults
} from "../support.ts"

/** A tool that counts its runs and records its idempotency keys; it fails its first `failures` runs. */
const counted = (
  kit: Kit,
  name: string,
  effect: Wire.ToolEffect | undefined,
  failures = 0,
  failure: "attempt" | "execution" = "attempt"
) =>
  ToolSource.tool({
    name,
    description: `${name} tool`,
    effect,
    handler: (_args, request) =>
      Effect.gen(function* () {
        bump(kit, name)
        kit.idempotencyKeys.push(`${name}:${request.attempt}:${request.idempotencyKey}`)
        if (kit.count(name) <= failures) {
          return yield* failure === "attempt"
            ? new Errors.ToolAttemptError({ message: `${name} lost its connection` })
            : new Errors.ToolExecutionError({ message: `${name} refused` })
        }
        return `${name} ok`
      })
  })

const oneCall = (id: string, name: string) => [{ toolCalls: [{ id, name, arguments: { x: 1 } }] }, { text: "Done." }]

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const effectsSuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine)

  describe("effects and policies", () => {
    it.live("each effect class picks its Step and default approval; a ToolPolicy overrides the tool's metadata", () =>
      withSession(
        {
          script: [
            {
              toolCalls: [
                { id: "r", name: "reader", arguments: {} },
                { id: "i", name: "upserter", arguments: {} },
                { id: "n", name: "mailer", arguments: {} },
                { id: "u", name: "mystery", arguments: {} }
              ]
            },
            { text: "All done." }
          ],
          tools: (kit) => [
            counted(kit, "reader", "read"),
            counted(kit, "upserter", "idempotent_write"),
            counted(kit, "mailer", "read"),
            counted(kit, "mystery", undefined)
          ],
          flow: { toolPolicies: { mailer: { effect: "non_idempotent_write", requiresApproval: false } } }
        },
        (kit) =>
          Effect.gen(function* () {
            const { client, snapshot: waiting } = yield* startAndAwait(
              "s-fx",
              "go",
              (s) => s.toolCalls.filter((c) => c.status === "succeeded").length === 3,
              "three calls"
            )
            assert.deepStrictEqual(
              waiting.toolCalls.map((c) => [c.toolCallId, c.effect, c.requiresApproval, c.status]),
              [
                ["r", "read", false, "succeeded"],
                ["i", "idempotent_write", false, "succeeded"],
                ["n", "non_idempotent_write", false, "succeeded"],
                ["u", "unclassified", true, "awaiting_approval"]
              ]
            )
            assert.isTrue(yield* client.resolveInterrupt("s-fx", { interruptId: "u", approved: true }))
            yield* awaitTurns("s-fx", 1)
            const shape = yield* stepShape("s-fx")
            const count = (type: string) => shape.filter((t) => t === type).length
            assert.strictEqual(count("CallTool"), 2, "read and idempotent_write")
            assert.strictEqual(count("CallSingleAttemptTool"), 2, "non_idempotent_write and unclassified")
            assert.strictEqual(count("AwaitToolApproval"), 1)
            for (const name of ["reader", "upserter", "mailer", "mystery"]) assert.strictEqual(kit.count(name), 1)
            assert.include(kit.idempotencyKeys, "upserter:1:s-fx/turn-1/i")
          })
      )
    )

    it.live("defaultToolEffect applies to tools without a policy or metadata", () =>
      withSession(
        {
          script: oneCall("d1", "plain"),
          tools: (kit) => [counted(kit, "plain", undefined)],
          flow: { defaultToolEffect: "read" }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-def", { initialMessage: "go" })
            yield* awaitTurns("s-def", 1)
            assert.deepStrictEqual(yield* stepShape("s-def"), [
              "StartAgentSession",
              "RunModel",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "AwaitUserMessage"
            ])
            assert.strictEqual(kit.count("plain"), 1)
          })
      )
    )

    it.live("an idempotent write retries with the same idempotency key on every attempt", () =>
      withSession(
        { script: oneCall("k1", "upserter"), tools: (kit) => [counted(kit, "upserter", "idempotent_write", 2)] },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-key", { initialMessage: "go" })
            yield* awaitTurns("s-key", 1)
            assert.deepStrictEqual(kit.idempotencyKeys, [
              "upserter:1:s-key/turn-1/k1",
              "upserter:2:s-key/turn-1/k1",
              "upserter:3:s-key/turn-1/k1"
            ])
            const call = (yield* stepExecutions("s-key")).find((s) => s.stepType === "CallTool")!
            assert.deepStrictEqual(
              call.attempts.map((a) => [a.attempt, a.outcome, a.errorType]),
              [
                [1, "failure", "ToolAttemptError"],
                [2, "failure", "ToolAttemptError"],
                [3, "success", null]
              ]
            )
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { k1: "upserter ok" })
          })
      )
    )

    it.live("a READ call that runs out of attempts is recorded failed through RecordToolFailure", () =>
      withSession({ script: oneCall("f1", "reader"), tools: (kit) => [counted(kit, "reader", "read", 99)] }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-rf", { initialMessage: "go" })
          yield* awaitTurns("s-rf", 1)
          assert.strictEqual(kit.count("reader"), 3)
          assert.deepStrictEqual(yield* stepShape("s-rf"), [
            "StartAgentSession",
            "RunModel",
            "CallTool",
            "ResumeTurn",
            "RecordToolFailure",
            "RunModel",
            "AwaitUserMessage"
          ])
          assert.deepStrictEqual(toolResults(kit.requests[1]!), {
            f1: `${Wire.TOOL_CALL_FAILED_PREFIX}reader lost its connection`
          })
          const finished = (yield* allEvents("s-rf")).filter((e) => e.event.type === "tool_call_finished")
          assert.strictEqual(finished.length, 1)
          assert.strictEqual(finished[0]!.event.stepExecutionId, "RecordToolFailure-1")
        })
      )
    )

    it.live("an idempotent write that runs out of attempts is recorded outcome_unknown", () =>
      withSession(
        { script: oneCall("o1", "upserter"), tools: (kit) => [counted(kit, "upserter", "idempotent_write", 99)] },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-ou", { initialMessage: "go" })
            yield* awaitTurns("s-ou", 1)
            assert.strictEqual(kit.count("upserter"), 3)
            assert.include(yield* stepShape("s-ou"), "RecordToolFailure")
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { o1: Wire.OUTCOME_UNKNOWN_TEXT })
          })
      )
    )

    it.live("a single-attempt write that fails is recorded outcome_unknown and never runs again", () =>
      withSession(
        {
          script: oneCall("s1", "mailer"),
          tools: (kit) => [counted(kit, "mailer", "non_idempotent_write", 99)],
          flow: { toolPolicies: { mailer: { effect: "non_idempotent_write", requiresApproval: false } } }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-single", { initialMessage: "go" })
            yield* awaitTurns("s-single", 1)
            assert.strictEqual(kit.count("mailer"), 1, "ran once")
            assert.deepStrictEqual(yield* stepShape("s-single"), [
              "StartAgentSession",
              "RunModel",
              "CallSingleAttemptTool",
              "ResumeTurn",
              "RecordToolOutcomeUnknown",
              "RunModel",
              "AwaitUserMessage"
            ])
            const call = (yield* stepExecutions("s-single")).find((s) => s.stepType === "CallSingleAttemptTool")!
            assert.strictEqual(call.attempts.length, 1)
            assert.deepStrictEqual(toolResults(kit.requests[1]!), { s1: Wire.OUTCOME_UNKNOWN_TEXT })
          })
      )
    )

    it.live("ToolExecutionError records failed at once, without a retry, and the model sees it", () =>
      withSession(
        { script: oneCall("e1", "reader"), tools: (kit) => [counted(kit, "reader", "read", 99, "execution")] },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-te", { initialMessage: "go" })
            yield* awaitTurns("s-te", 1)
            assert.strictEqual(kit.count("reader"), 1)
            const call = (yield* stepExecutions("s-te")).find((s) => s.stepType === "CallTool")!
            assert.deepStrictEqual(
              call.attempts.map((a) => a.outcome),
              ["success"]
            )
            assert.notInclude(yield* stepShape("s-te"), "RecordToolFailure")
            assert.deepStrictEqual(toolResults(kit.requests[1]!), {
              e1: `${Wire.TOOL_CALL_FAILED_PREFIX}reader refused`
            })
          })
      )
    )
  })

  describe("turn failures", () => {
    it.live("a turn that fails after a write ran leaves the turn-failure note, and the write is not repeated", () =>
      withSession(
        {
          script: [
            { toolCalls: [{ id: "w1", name: "upserter", arguments: { id: 7 } }] },
            { fail: "provider down 1" },
            { fail: "provider down 2" },
            { fail: "provider down 3" },
            { text: "Recovered." }
          ],
          tools: (kit) => [counted(kit, "upserter", "idempotent_write")]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-tf", { initialMessage: "update 7" })
            const failed = yield* awaitTurns("s-tf", 1)
            assert.strictEqual(kit.count("upserter"), 1)
            assert.strictEqual(failed.state?.lastTurnError, "ModelCallError: provider down 3")
            assert.deepStrictEqual(yield* stepShape("s-tf"), [
              "StartAgentSession",
              "RunModel",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "RecordTurnFailure",
              "AwaitUserMessage"
            ])
            // Stepwise's unfinished messages (the call and its result) come first, then the note
            assert.deepStrictEqual(
              failed.messages.slice(0, -1).map((m) => [m.role, m.toolCallId, m.text ?? m.toolOutput]),
              [
                ["user", null, "update 7"],
                ["assistant", "w1", null],
                ["tool", "w1", "upserter ok"]
              ]
            )
            const note = failed.messages[failed.messages.length - 1]!
            assert.strictEqual(note.role, "user")
            assert.strictEqual(
              note.text,
              [
                Wire.TURN_FAILURE_NOTE_HEADER,
                '- upserter {"id":7} -> succeeded: upserter ok',
                Wire.TURN_NOTE_FOOTER
              ].join("\n")
            )
            assert.deepStrictEqual(failed.toolCalls, [])
            assert.strictEqual(failed.usage.modelCalls, 1, "only the model call that answered is counted")
            const events = yield* allEvents("s-tf")
            const turnFailed = events.find((e) => e.event.type === "turn_failed")!.event
            assert.deepStrictEqual(turnFailed.payload, { error: "ModelCallError: provider down 3" })
            assert.strictEqual(turnFailed.stepExecutionId, "RecordTurnFailure-1")
            // the next turn sees the note, and does not repeat the write
            assert.isTrue(yield* client.sendUserMessage("s-tf", "and now?"))
            const next = yield* awaitTurns("s-tf", 2)
            const request = kit.requests[kit.requests.length - 1]!
            assert.isTrue(
              request.messages.some((m) => m.role === "user" && m.text.startsWith(Wire.TURN_FAILURE_NOTE_HEADER))
            )
            assert.strictEqual(lastUserText(request), "and now?")
            assert.strictEqual(kit.count("upserter"), 1)
            assert.strictEqual(next.state?.lastTurnError, null, "a completed turn clears last_turn_error")
          })
      )
    )
  })
}
