import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Wire from "../src/wire/index.ts"

/** Decodes the JSON text, encodes the result back, and checks that it equals the input text. */
const roundTrip = <T>(schema: Schema.Codec<T, string>, text: string) =>
  Effect.gen(function* () {
    const decoded = yield* Schema.decodeUnknownEffect(schema)(text)
    const encoded = yield* Schema.encodeEffect(schema)(decoded)
    assert.strictEqual(encoded, text)
    return decoded
  })

const decodeFails = <T>(schema: Schema.Codec<T, string>, text: string) =>
  Effect.gen(function* () {
    const error = yield* Effect.flip(Schema.decodeUnknownEffect(schema)(text))
    assert.isTrue(Schema.isSchemaError(error))
  })

describe("wire: built-in tool results", () => {
  it.effect('ask_user answer: {"status":"answered","answer":"<text>"}', () =>
    Effect.gen(function* () {
      const result = yield* roundTrip(Wire.AskUserAnsweredResultJson, '{"status":"answered","answer":"<text>"}')
      assert.deepStrictEqual(result, { status: "answered", answer: "<text>" })
      yield* decodeFails(Wire.AskUserAnsweredResultJson, '{"status":"declined","answer":"x"}')
    })
  )

  it.effect("durable_wait result: waited_seconds decodes to waitedSeconds", () =>
    Effect.gen(function* () {
      const result = yield* roundTrip(
        Wire.DurableWaitCompletedResultJson,
        '{"status":"completed","waited_seconds":30,"reason":"<reason>"}'
      )
      assert.deepStrictEqual(result, { status: "completed", waitedSeconds: 30, reason: "<reason>" })
      yield* decodeFails(
        Wire.DurableWaitCompletedResultJson,
        '{"status":"completed","waited_seconds":"30","reason":""}'
      )
    })
  )

  it.effect("write_todos results: updated and cleared", () =>
    Effect.gen(function* () {
      const updated = yield* roundTrip(Wire.WriteTodosResultJson, '{"status":"updated","revision":3,"task_count":4}')
      assert.deepStrictEqual(updated, { status: "updated", revision: 3, taskCount: 4 })
      const cleared = yield* roundTrip(Wire.WriteTodosResultJson, '{"status":"cleared","revision":4}')
      assert.deepStrictEqual(cleared, { status: "cleared", revision: 4 })
      yield* decodeFails(Wire.WriteTodosResultJson, '{"status":"updated","revision":3}')
      yield* decodeFails(Wire.WriteTodosResultJson, '{"status":"removed","revision":3}')
    })
  )

  it.effect("cancellation rejection messages are the spec's compact JSON text", () =>
    Effect.gen(function* () {
      const steered = yield* roundTrip(
        Wire.ToolCallCancelledRejectionJson,
        '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'
      )
      assert.deepStrictEqual(steered, { status: "cancelled", reason: "superseded_by_steered_user_message" })
      const cancelled = yield* roundTrip(
        Wire.ToolCallCancelledRejectionJson,
        '{"status":"cancelled","reason":"turn_cancelled_by_user"}'
      )
      assert.strictEqual(cancelled.reason, "turn_cancelled_by_user")
      assert.strictEqual(
        yield* Schema.encodeEffect(Wire.ToolCallCancelledRejectionJson)(steered),
        Wire.STEERED_REJECTION_MESSAGE
      )
      assert.strictEqual(
        yield* Schema.encodeEffect(Wire.ToolCallCancelledRejectionJson)(cancelled),
        Wire.TURN_CANCELLED_REJECTION_MESSAGE
      )
      yield* decodeFails(Wire.ToolCallCancelledRejectionJson, '{"status":"cancelled","reason":"steered"}')
    })
  )
})

describe("wire: texts", () => {
  it('tool-not-run error: prefix, ": ", and the recovery detail', () => {
    assert.strictEqual(Wire.TOOL_CALL_NOT_RUN_ERROR_PREFIX, "the tool did not run, so it is safe to call again")
    assert.strictEqual(
      Wire.toolCallNotRunError("no Worker accepted the task"),
      "the tool did not run, so it is safe to call again: no Worker accepted the task"
    )
  })

  it("model-visible results for each final status", () => {
    const base = { output: null, error: null, rejectionMessage: null }
    assert.strictEqual(Wire.modelVisibleResult({ ...base, status: "succeeded", output: "sunny" }), "sunny")
    assert.strictEqual(
      Wire.modelVisibleResult({ ...base, status: "failed", error: "HTTP 500" }),
      "The tool call failed: HTTP 500"
    )
    assert.strictEqual(Wire.modelVisibleResult({ ...base, status: "rejected", rejectionMessage: "not now" }), "not now")
    assert.strictEqual(Wire.modelVisibleResult({ ...base, status: "rejected" }), "The user rejected this tool call.")
    assert.strictEqual(
      Wire.modelVisibleResult({ ...base, status: "outcome_unknown" }),
      "The tool call's outcome is unknown: it stopped without returning a result, so it may or may not have taken effect. It will not be retried automatically."
    )
  })

  it("turn-failure, steered and cancelled notes use the spec's lines", () => {
    const records = [
      {
        toolName: "get_weather",
        arguments: '{"city":"Paris"}',
        status: "succeeded",
        output: "sunny",
        error: null,
        rejectionMessage: null
      },
      {
        toolName: "send_email",
        arguments: '{"to":"a@example.com"}',
        status: "outcome_unknown",
        output: null,
        error: "worker lost",
        rejectionMessage: null
      }
    ] as const
    const lines = [
      '- get_weather {"city":"Paris"} -> succeeded: sunny',
      `- send_email {"to":"a@example.com"} -> outcome_unknown: ${Wire.OUTCOME_UNKNOWN_TEXT}`
    ]
    assert.strictEqual(
      Wire.turnNote(Wire.TURN_FAILURE_NOTE_HEADER, records),
      [
        "[Dex] The previous turn failed after these tool calls ran:",
        ...lines,
        "Do not repeat these tool calls unless the user asks again."
      ].join("\n")
    )
    assert.strictEqual(
      Wire.turnNote(Wire.TURN_STEERED_NOTE_HEADER, records).split("\n")[0],
      "[Dex] The user steered the conversation after these tool calls ran:"
    )
    assert.strictEqual(
      Wire.turnNote(Wire.TURN_CANCELLED_NOTE_HEADER, records).split("\n")[0],
      "[Dex] The user stopped the previous turn after these tool calls ran:"
    )
  })

  it("rejection and error texts", () => {
    assert.strictEqual(Wire.APPROVAL_DEADLINE_PASSED_MESSAGE, "approval deadline passed")
    assert.strictEqual(Wire.QUESTION_DEADLINE_PASSED_MESSAGE, "question deadline passed")
    assert.strictEqual(Wire.QUESTION_DECLINED_MESSAGE, "The user declined to answer.")
    assert.strictEqual(
      Wire.PLANNING_TURN_REJECTION_MESSAGE,
      "The tool call was not run: a planning turn can only call write_todos."
    )
    assert.strictEqual(
      Wire.WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR,
      "write_todos was called more than once in one response"
    )
    assert.strictEqual(
      Wire.invalidBuiltInArgumentsError("ask_user", Wire.ARGUMENTS_NOT_JSON_OBJECT_REASON),
      "invalid ask_user arguments: arguments must be a JSON object"
    )
    assert.strictEqual(Wire.invalidTodosError("tasks must be a list"), "invalid todos: tasks must be a list")
    assert.strictEqual(
      Wire.interruptIdInUseError("call_2-input-1"),
      "the tool's question cannot use interrupt ID call_2-input-1, which another tool call of this turn uses"
    )
    assert.strictEqual(
      Wire.TOOL_TASK_CANCELLED_ERROR,
      "the turn was cancelled while the tool's task was running; the task may have taken effect"
    )
    assert.isTrue(
      Wire.UNFINISHED_TURN_MESSAGES_REQUIRED_ERROR.startsWith(
        "a runner that sets ToolCallsRequested.new_messages must implement build_unfinished_turn_messages"
      )
    )
    assert.isTrue(Wire.INVALID_START_SESSION_SETTINGS_REASON.startsWith("dex-agents: "))
  })

  it("plan notes", () => {
    const plan = {
      revision: 2,
      status: "draft",
      tasks: [
        { content: "Draft the outline", status: "completed" },
        { content: "Write section 1", status: "pending" }
      ]
    } as const
    const body = [
      "[Dex] The current plan, revision 2, is draft:",
      "- [completed] Draft the outline",
      "- [pending] Write section 1"
    ]
    assert.strictEqual(
      Wire.buildPlanNote(plan, "planning"),
      [
        ...body,
        "This turn only plans: write or revise the plan with write_todos, and do not do or claim any of its tasks. The user reviews the plan before it runs."
      ].join("\n")
    )
    assert.strictEqual(Wire.buildPlanNote(plan, "executing"), body.join("\n"))
    assert.strictEqual(Wire.buildPlanNote(null, "planning"), "[Dex] There is no plan yet.")
    assert.strictEqual(Wire.buildPlanNote({ ...plan, status: "cleared", tasks: [] }, "planning"), Wire.NO_PLAN_YET_NOTE)
    assert.isUndefined(Wire.buildPlanNote(null, "chat"))
    assert.isUndefined(Wire.buildPlanNote({ ...plan, status: "cleared", tasks: [] }, "executing"))
    assert.strictEqual(
      Wire.planExecutionApprovedMessage(2),
      "[Dex] The user approved plan revision 2. Execute it and keep the task statuses current with write_todos."
    )
  })

  it("compaction texts", () => {
    assert.strictEqual(Wire.CONTEXT_SUMMARY_PREFIX, "[Dex] Summary of the earlier conversation:")
    assert.strictEqual(
      Wire.omittedMessagesNote(1),
      "[Dex] 1 earlier message did not fit in this request and is left out."
    )
    assert.strictEqual(
      Wire.omittedMessagesNote(3),
      "[Dex] 3 earlier messages did not fit in this request and are left out."
    )
  })
})
