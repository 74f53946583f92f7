import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Wire from "../src/wire/index.ts"
import { decodeFails, roundTrip } from "./support/wire.ts"

const decode = <T, E>(schema: Schema.Codec<T, E>, json: unknown) => Schema.decodeUnknownEffect(schema)(json)

const usageJson = {
  model_calls: 2,
  input_tokens: 1200,
  output_tokens: 340,
  cached_input_tokens: 800,
  reasoning_tokens: 25
}

const stateJson = {
  status: "running_tools",
  turn_count: 3,
  active_turn_id: "turn-4",
  next_message_sequence: 12,
  last_turn_error: null,
  interaction_mode: "chat",
  accepts_turn_control: true
} as const

const messageJson = {
  sequence: 7,
  turn_id: "turn-4",
  role: "tool",
  text: null,
  tool_call_id: "call_1",
  tool_name: "get_weather",
  tool_arguments: '{"city":"Paris"}',
  tool_output: '{"temp_c":21}',
  framework_item: '{"role":"tool","tool_call_id":"call_1","content":"{\\"temp_c\\":21}"}',
  created_at: "2026-11-01T12:00:00.123Z"
} as const

const toolCallJson = {
  tool_call_id: "call_2",
  turn_id: "turn-4",
  tool_name: "send_email",
  arguments: '{"to":"a@example.com"}',
  effect: "non_idempotent_write",
  requires_approval: true,
  status: "awaiting_answer",
  output: null,
  error: null,
  rejection_message: null,
  deferral_order: 1,
  tool_source_reference: '{"server":"mail","tool":"send"}',
  trace_context: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
  wait_until: null,
  input_continuation: "cont-1",
  input_answers: [
    { interrupt_id: "call_2-input-1", question: "Which account?", answer: "work", resolution: "answered" }
  ],
  input_question: "Send now?",
  input_choices: ["yes", "no"],
  input_allows_free_text: false,
  cancellation_reason: null,
  task_id: "task-9",
  task_poll_interval_seconds: 5,
  task_answer_pending: true
} as const

const interruptJson = {
  interrupt_id: "call_2-input-2",
  kind: "question",
  tool_call_id: "call_2",
  tool_name: "send_email",
  arguments: '{"to":"a@example.com"}',
  created_at: "2026-11-01T12:00:00.123Z",
  deadline: "2026-11-01T13:00:00.000Z",
  question: "Send now?",
  choices: ["yes", "no"],
  allows_free_text: false
} as const

const planJson = {
  revision: 2,
  status: "active",
  tasks: [
    { content: "Draft the outline", status: "completed" },
    { content: "Write section 1", status: "in_progress" },
    { content: "Review", status: "pending" }
  ],
  updated_at: "2026-11-01T12:00:00.123Z"
} as const

const summaryJson = {
  generation: 1,
  first_sequence: 1,
  last_sequence: 40,
  text: "The user asked for a trip plan.",
  created_at: "2026-11-01T12:00:00.123Z"
}

describe("wire: AgentState and session values", () => {
  it.effect("AgentState round-trips with camelCase fields", () =>
    Effect.gen(function* () {
      const state = yield* roundTrip(Wire.AgentState, stateJson)
      assert.deepStrictEqual(state, {
        status: "running_tools",
        turnCount: 3,
        activeTurnId: "turn-4",
        nextMessageSequence: 12,
        lastTurnError: null,
        interactionMode: "chat",
        acceptsTurnControl: true
      })
    })
  )

  it.effect("AgentState from 0.1.0 takes interaction_mode and accepts_turn_control defaults", () =>
    Effect.gen(function* () {
      const state = yield* decode(Wire.AgentState, {
        status: "waiting_for_user_message",
        turn_count: 0,
        active_turn_id: null,
        next_message_sequence: 1,
        last_turn_error: null
      })
      assert.strictEqual(state.interactionMode, "chat")
      assert.strictEqual(state.acceptsTurnControl, false)
      const encoded = yield* Schema.encodeEffect(Wire.AgentState)(state)
      assert.strictEqual(encoded.interaction_mode, "chat")
      assert.strictEqual(encoded.accepts_turn_control, false)
    })
  )

  it.effect("AgentState rejects a bad status, a missing field and a wrong type", () =>
    Effect.gen(function* () {
      yield* decodeFails(Wire.AgentState, { ...stateJson, status: "running" }, "status")
      const { next_message_sequence: _, ...missing } = stateJson
      yield* decodeFails(Wire.AgentState, missing, "next_message_sequence")
      yield* decodeFails(Wire.AgentState, { ...stateJson, turn_count: "3" }, "turn_count")
      yield* decodeFails(Wire.AgentState, { ...stateJson, turn_count: 1.5 }, "turn_count")
      yield* decodeFails(Wire.AgentState, { ...stateJson, interaction_mode: "plan" }, "interaction_mode")
    })
  )

  it.effect("every AgentState status and interaction mode decodes", () =>
    Effect.gen(function* () {
      for (const status of [
        "waiting_for_user_message",
        "running_model",
        "running_tools",
        "compacting_context",
        "failed"
      ] as const) {
        for (const mode of ["chat", "planning", "executing"] as const) {
          yield* roundTrip(Wire.AgentState, { ...stateJson, status, interaction_mode: mode })
        }
      }
    })
  )

  it.effect("AgentUsage round-trips and rejects a missing field", () =>
    Effect.gen(function* () {
      const usage = yield* roundTrip(Wire.AgentUsage, usageJson)
      assert.deepStrictEqual(usage, {
        modelCalls: 2,
        inputTokens: 1200,
        outputTokens: 340,
        cachedInputTokens: 800,
        reasoningTokens: 25
      })
      const { reasoning_tokens: _, ...missing } = usageJson
      yield* decodeFails(Wire.AgentUsage, missing, "reasoning_tokens")
      yield* decodeFails(Wire.AgentUsage, { ...usageJson, model_calls: null }, "model_calls")
    })
  )

  it.effect("AgentSessionStartInput round-trips, defaults session_settings to null, and rejects an array", () =>
    Effect.gen(function* () {
      const input = yield* roundTrip(Wire.AgentSessionStartInput, {
        initial_message: "Plan a trip to Lisbon",
        session_settings: { model: "fast", temperature: 0.2, tags: ["a"], nested: { on: true, none: null } }
      })
      assert.strictEqual(input.initialMessage, "Plan a trip to Lisbon")
      assert.deepStrictEqual(input.sessionSettings, {
        model: "fast",
        temperature: 0.2,
        tags: ["a"],
        nested: { on: true, none: null }
      })
      yield* roundTrip(Wire.AgentSessionStartInput, { initial_message: null, session_settings: {} })
      const legacy = yield* decode(Wire.AgentSessionStartInput, { initial_message: null })
      assert.deepStrictEqual(legacy, { initialMessage: null, sessionSettings: null })
      yield* decodeFails(
        Wire.AgentSessionStartInput,
        { initial_message: null, session_settings: [1] },
        "session_settings"
      )
      yield* decodeFails(Wire.AgentSessionStartInput, {}, "initial_message")
    })
  )

  it.effect("TurnSessionSettings round-trips and requires an object", () =>
    Effect.gen(function* () {
      const value = yield* roundTrip(Wire.TurnSessionSettings, {
        turn_id: "turn-2",
        session_settings: { model: "large" }
      })
      assert.deepStrictEqual(value, { turnId: "turn-2", sessionSettings: { model: "large" } })
      yield* decodeFails(Wire.TurnSessionSettings, { turn_id: "turn-2", session_settings: null }, "session_settings")
    })
  )

  it.effect("TurnReplySequence round-trips", () =>
    Effect.gen(function* () {
      const value = yield* roundTrip(Wire.TurnReplySequence, { turn_id: "turn-2", sequence: 5 })
      assert.deepStrictEqual(value, { turnId: "turn-2", sequence: 5 })
      yield* decodeFails(Wire.TurnReplySequence, { turn_id: "turn-2" }, "sequence")
    })
  )

  it.effect("TurnControlRequest round-trips both kinds and rejects another", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* roundTrip(Wire.TurnControlRequest, { kind: "steer" }), { kind: "steer" })
      yield* roundTrip(Wire.TurnControlRequest, { kind: "cancel_turn" })
      yield* decodeFails(Wire.TurnControlRequest, { kind: "cancel" }, "kind")
    })
  )

  it.effect("TurnCancellationRequest round-trips", () =>
    Effect.gen(function* () {
      const value = yield* roundTrip(Wire.TurnCancellationRequest, {
        turn_id: "turn-4",
        requested_at: "2026-11-01T12:00:00.000Z"
      })
      assert.deepStrictEqual(value, { turnId: "turn-4", requestedAt: "2026-11-01T12:00:00.000Z" })
      yield* decodeFails(Wire.TurnCancellationRequest, { turn_id: "turn-4", requested_at: 5 }, "requested_at")
    })
  )

  it.effect("CompactContextInput and RecordTurnFailureInput round-trip", () =>
    Effect.gen(function* () {
      const input = yield* roundTrip(Wire.CompactContextInput, { through_sequence: 40 })
      assert.deepStrictEqual(input, { throughSequence: 40 })
      assert.deepStrictEqual(yield* roundTrip(Wire.RecordTurnFailureInput, null), null)
      assert.deepStrictEqual(yield* roundTrip(Wire.RecordTurnFailureInput, { through_sequence: 40 }), {
        throughSequence: 40
      })
      yield* decodeFails(Wire.CompactContextInput, { throughSequence: 40 }, "through_sequence")
    })
  )

  it.effect("ContextSummary round-trips", () =>
    Effect.gen(function* () {
      const summary = yield* roundTrip(Wire.ContextSummary, summaryJson)
      assert.deepStrictEqual(summary, {
        generation: 1,
        firstSequence: 1,
        lastSequence: 40,
        text: "The user asked for a trip plan.",
        createdAt: "2026-11-01T12:00:00.123Z"
      })
      const { text: _, ...missing } = summaryJson
      yield* decodeFails(Wire.ContextSummary, missing, "text")
    })
  )
})

describe("wire: plan", () => {
  it.effect("AgentPlan round-trips with its tasks", () =>
    Effect.gen(function* () {
      const plan = yield* roundTrip(Wire.AgentPlan, planJson)
      assert.strictEqual(plan.updatedAt, "2026-11-01T12:00:00.123Z")
      assert.deepStrictEqual(plan.tasks[1], { content: "Write section 1", status: "in_progress" })
      for (const status of ["draft", "active", "completed", "cleared"] as const) {
        yield* roundTrip(Wire.AgentPlan, { ...planJson, status })
      }
    })
  )

  it.effect("AgentPlan rejects a bad plan status and a bad task status", () =>
    Effect.gen(function* () {
      yield* decodeFails(Wire.AgentPlan, { ...planJson, status: "done" }, "status")
      yield* decodeFails(
        Wire.AgentPlan,
        { ...planJson, tasks: [{ content: "x", status: "done" }] },
        '["tasks"][0]["status"]'
      )
    })
  )

  it.effect("AgentPlanTask, PlanExecutionRequest and ExecutePlanRequest round-trip", () =>
    Effect.gen(function* () {
      yield* roundTrip(Wire.AgentPlanTask, { content: "Review", status: "pending" })
      assert.deepStrictEqual(yield* roundTrip(Wire.PlanExecutionRequest, { revision: 3 }), { revision: 3 })
      assert.deepStrictEqual(yield* roundTrip(Wire.ExecutePlanRequest, { revision: 3 }), { revision: 3 })
      yield* decodeFails(Wire.ExecutePlanRequest, { revision: "3" }, "revision")
    })
  )
})

describe("wire: messages", () => {
  it.effect("AgentMessage round-trips with camelCase fields", () =>
    Effect.gen(function* () {
      const message = yield* roundTrip(Wire.AgentMessage, messageJson)
      assert.deepStrictEqual(message, {
        sequence: 7,
        turnId: "turn-4",
        role: "tool",
        text: null,
        toolCallId: "call_1",
        toolName: "get_weather",
        toolArguments: '{"city":"Paris"}',
        toolOutput: '{"temp_c":21}',
        frameworkItem: '{"role":"tool","tool_call_id":"call_1","content":"{\\"temp_c\\":21}"}',
        createdAt: "2026-11-01T12:00:00.123Z"
      })
    })
  )

  it.effect("AgentMessage rejects a bad role, a missing framework_item and a wrong type", () =>
    Effect.gen(function* () {
      yield* decodeFails(Wire.AgentMessage, { ...messageJson, role: "system" }, "role")
      const { framework_item: _, ...missing } = messageJson
      yield* decodeFails(Wire.AgentMessage, missing, "framework_item")
      yield* decodeFails(Wire.AgentMessage, { ...messageJson, framework_item: null }, "framework_item")
      const { text: _text, ...noText } = messageJson
      yield* decodeFails(Wire.AgentMessage, noText, "text")
    })
  )

  it.effect("UiAgentMessage leaves out framework_item", () =>
    Effect.gen(function* () {
      const { framework_item: _, ...uiJson } = messageJson
      const message = yield* roundTrip(Wire.UiAgentMessage, uiJson)
      assert.isFalse("frameworkItem" in message)
      const stripped = yield* decode(Wire.UiAgentMessage, messageJson)
      assert.deepStrictEqual(yield* Schema.encodeEffect(Wire.UiAgentMessage)(stripped), uiJson)
    })
  )

  it.effect("AgentUserMessage round-trips and defaults plan_mode to false", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* roundTrip(Wire.AgentUserMessage, { text: "Plan it", plan_mode: true }), {
        text: "Plan it",
        planMode: true
      })
      assert.deepStrictEqual(yield* decode(Wire.AgentUserMessage, { text: "hi" }), { text: "hi", planMode: false })
      yield* decodeFails(Wire.AgentUserMessage, { plan_mode: true }, "text")
      yield* decodeFails(Wire.AgentUserMessage, { text: "hi", plan_mode: "yes" }, "plan_mode")
    })
  )

  it.effect("PendingUserMessage round-trips", () =>
    Effect.gen(function* () {
      const pending = yield* roundTrip(Wire.PendingUserMessage, {
        message_id: "msg-1",
        message: { text: "also book a hotel", plan_mode: false }
      })
      assert.deepStrictEqual(pending, { messageId: "msg-1", message: { text: "also book a hotel", planMode: false } })
      yield* decodeFails(Wire.PendingUserMessage, { message_id: "msg-1" }, "message")
    })
  )

  it.effect("AgentMessageChunk, AgentMessageChunkRange and AgentMessageIndex round-trip", () =>
    Effect.gen(function* () {
      const chunk = yield* roundTrip(Wire.AgentMessageChunk, {
        messages: [messageJson, { ...messageJson, sequence: 8 }]
      })
      assert.deepStrictEqual(
        chunk.messages.map((m) => m.sequence),
        [7, 8]
      )
      assert.deepStrictEqual(yield* roundTrip(Wire.AgentMessageChunkRange, { first_sequence: 1, last_sequence: 32 }), {
        firstSequence: 1,
        lastSequence: 32
      })
      const index = yield* roundTrip(Wire.AgentMessageIndex, {
        chunks: [
          { first_sequence: 1, last_sequence: 32 },
          { first_sequence: 33, last_sequence: 64 },
          { first_sequence: 70, last_sequence: 70 }
        ],
        first_sequence: 1,
        window_first_sequence: 65
      })
      assert.strictEqual(index.windowFirstSequence, 65)
      assert.deepStrictEqual(index.chunks[2], { firstSequence: 70, lastSequence: 70 })
      yield* decodeFails(Wire.AgentMessageIndex, { chunks: [], first_sequence: 1 }, "window_first_sequence")
    })
  )
})

describe("wire: tool calls", () => {
  it.effect("AgentToolCall round-trips with every field", () =>
    Effect.gen(function* () {
      const call = yield* roundTrip(Wire.AgentToolCall, toolCallJson)
      assert.deepStrictEqual(call, {
        toolCallId: "call_2",
        turnId: "turn-4",
        toolName: "send_email",
        arguments: '{"to":"a@example.com"}',
        effect: "non_idempotent_write",
        requiresApproval: true,
        status: "awaiting_answer",
        output: null,
        error: null,
        rejectionMessage: null,
        deferralOrder: 1,
        toolSourceReference: '{"server":"mail","tool":"send"}',
        traceContext: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        waitUntil: null,
        inputContinuation: "cont-1",
        inputAnswers: [
          { interruptId: "call_2-input-1", question: "Which account?", answer: "work", resolution: "answered" }
        ],
        inputQuestion: "Send now?",
        inputChoices: ["yes", "no"],
        inputAllowsFreeText: false,
        cancellationReason: null,
        taskId: "task-9",
        taskPollIntervalSeconds: 5,
        taskAnswerPending: true
      })
    })
  )

  it.effect("AgentToolCall takes the spec defaults for absent later fields", () =>
    Effect.gen(function* () {
      const call = yield* decode(Wire.AgentToolCall, {
        tool_call_id: "call_1",
        turn_id: "turn-1",
        tool_name: "get_weather",
        arguments: "{}",
        effect: "read",
        requires_approval: false,
        status: "succeeded",
        output: "sunny",
        error: null,
        rejection_message: null,
        deferral_order: 0,
        tool_source_reference: null,
        trace_context: null
      })
      assert.strictEqual(call.waitUntil, null)
      assert.strictEqual(call.inputContinuation, null)
      assert.deepStrictEqual(call.inputAnswers, [])
      assert.strictEqual(call.inputQuestion, null)
      assert.deepStrictEqual(call.inputChoices, [])
      assert.strictEqual(call.inputAllowsFreeText, true)
      assert.strictEqual(call.cancellationReason, null)
      assert.strictEqual(call.taskId, null)
      assert.strictEqual(call.taskPollIntervalSeconds, null)
      assert.strictEqual(call.taskAnswerPending, false)
    })
  )

  it.effect("AgentToolCall accepts every effect, status and cancellation reason", () =>
    Effect.gen(function* () {
      for (const effect of ["read", "idempotent_write", "non_idempotent_write", "unclassified"] as const) {
        yield* roundTrip(Wire.AgentToolCall, { ...toolCallJson, effect })
      }
      for (const status of [
        "awaiting_approval",
        "approved",
        "awaiting_answer",
        "waiting_for_timer",
        "waiting_for_task",
        "rejected",
        "succeeded",
        "failed",
        "outcome_unknown"
      ] as const) {
        yield* roundTrip(Wire.AgentToolCall, { ...toolCallJson, status })
      }
      for (const reason of ["steered", "turn_cancelled"] as const) {
        yield* roundTrip(Wire.AgentToolCall, {
          ...toolCallJson,
          status: "rejected",
          rejection_message: Wire.STEERED_REJECTION_MESSAGE,
          cancellation_reason: reason
        })
      }
      yield* roundTrip(Wire.AgentToolCall, {
        ...toolCallJson,
        status: "waiting_for_timer",
        wait_until: "2026-11-01T12:05:00.000Z"
      })
    })
  )

  it.effect("AgentToolCall rejects a bad effect, status, cancellation reason, missing field and wrong type", () =>
    Effect.gen(function* () {
      yield* decodeFails(Wire.AgentToolCall, { ...toolCallJson, effect: "write" }, "effect")
      yield* decodeFails(Wire.AgentToolCall, { ...toolCallJson, status: "running" }, "status")
      yield* decodeFails(
        Wire.AgentToolCall,
        { ...toolCallJson, cancellation_reason: "cancelled" },
        "cancellation_reason"
      )
      const { deferral_order: _, ...missing } = toolCallJson
      yield* decodeFails(Wire.AgentToolCall, missing, "deferral_order")
      const { trace_context: _trace, ...noTrace } = toolCallJson
      yield* decodeFails(Wire.AgentToolCall, noTrace, "trace_context")
      yield* decodeFails(Wire.AgentToolCall, { ...toolCallJson, requires_approval: "true" }, "requires_approval")
      yield* decodeFails(
        Wire.AgentToolCall,
        { ...toolCallJson, input_answers: [{ interrupt_id: "x", question: "q", answer: "a", resolution: "ok" }] },
        '["input_answers"][0]["resolution"]'
      )
    })
  )

  it.effect("status groups: record, runner-facing, final and non-final", () =>
    Effect.gen(function* () {
      assert.isTrue(Wire.isAgentToolCallFinalStatus("outcome_unknown"))
      assert.isFalse(Wire.isAgentToolCallFinalStatus("approved"))
      yield* decode(Wire.AgentToolCallStatus, "approved")
      yield* decodeFails(Wire.AgentToolCallStatus, "waiting_for_task", "Expected")
      yield* decode(Wire.AgentToolCallRecordStatus, "waiting_for_task")
      yield* decode(Wire.AgentToolCallNonFinalStatus, "awaiting_answer")
      yield* decodeFails(Wire.AgentToolCallNonFinalStatus, "failed", "Expected")
      yield* decodeFails(Wire.AgentToolCallFinalStatus, "approved", "Expected")
    })
  )

  it.effect("QuestionAnswer round-trips every resolution and defaults to answered", () =>
    Effect.gen(function* () {
      for (const resolution of ["answered", "declined", "deadline_passed"] as const) {
        const answer = yield* roundTrip(Wire.QuestionAnswer, {
          interrupt_id: "call_2-input-1",
          question: "Which account?",
          answer: Wire.QUESTION_DEADLINE_PASSED_MESSAGE,
          resolution
        })
        assert.strictEqual(answer.interruptId, "call_2-input-1")
        assert.strictEqual(answer.resolution, resolution)
      }
      const legacy = yield* decode(Wire.QuestionAnswer, { interrupt_id: "i", question: "q", answer: "a" })
      assert.strictEqual(legacy.resolution, "answered")
      yield* decodeFails(Wire.QuestionAnswer, { interrupt_id: "i", question: "q" }, "answer")
    })
  )

  it.effect("UiAgentToolCall leaves out the Step-only fields", () =>
    Effect.gen(function* () {
      const {
        tool_source_reference: _a,
        trace_context: _b,
        input_continuation: _c,
        input_answers: _d,
        task_answer_pending: _e,
        ...uiJson
      } = toolCallJson
      const call = yield* roundTrip(Wire.UiAgentToolCall, uiJson)
      assert.strictEqual(call.inputQuestion, "Send now?")
      assert.isFalse("traceContext" in call)
      const stripped = yield* decode(Wire.UiAgentToolCall, toolCallJson)
      assert.deepStrictEqual(yield* Schema.encodeEffect(Wire.UiAgentToolCall)(stripped), uiJson)
    })
  )

  it.effect("ToolCallCompleted and ToolCallCancellation round-trip", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* roundTrip(Wire.ToolCallCompleted, { tool_call_id: "call_1" }), {
        toolCallId: "call_1"
      })
      yield* decodeFails(Wire.ToolCallCompleted, { toolCallId: "call_1" }, "tool_call_id")
      assert.deepStrictEqual(yield* roundTrip(Wire.ToolCallCancellation, { reason: "steered" }), { reason: "steered" })
      yield* roundTrip(Wire.ToolCallCancellation, { reason: "turn_cancelled" })
      yield* decodeFails(Wire.ToolCallCancellation, { reason: "cancelled" }, "reason")
    })
  )
})

describe("wire: interrupts", () => {
  it.effect("AgentInterrupt round-trips a question", () =>
    Effect.gen(function* () {
      const interrupt = yield* roundTrip(Wire.AgentInterrupt, interruptJson)
      assert.deepStrictEqual(interrupt, {
        interruptId: "call_2-input-2",
        kind: "question",
        toolCallId: "call_2",
        toolName: "send_email",
        arguments: '{"to":"a@example.com"}',
        createdAt: "2026-11-01T12:00:00.123Z",
        deadline: "2026-11-01T13:00:00.000Z",
        question: "Send now?",
        choices: ["yes", "no"],
        allowsFreeText: false
      })
    })
  )

  it.effect("AgentInterrupt of a 0.1.0 approval takes the question defaults", () =>
    Effect.gen(function* () {
      const interrupt = yield* decode(Wire.AgentInterrupt, {
        interrupt_id: "call_3",
        kind: "tool_approval",
        tool_call_id: "call_3",
        tool_name: "delete_file",
        arguments: '{"path":"/tmp/x"}',
        created_at: "2026-11-01T12:00:00.123Z",
        deadline: null
      })
      assert.strictEqual(interrupt.question, null)
      assert.deepStrictEqual(interrupt.choices, [])
      assert.strictEqual(interrupt.allowsFreeText, true)
    })
  )

  it.effect("AgentInterrupt rejects a bad kind, a missing deadline and a wrong type", () =>
    Effect.gen(function* () {
      yield* decodeFails(Wire.AgentInterrupt, { ...interruptJson, kind: "approval" }, "kind")
      const { deadline: _, ...missing } = interruptJson
      yield* decodeFails(Wire.AgentInterrupt, missing, "deadline")
      yield* decodeFails(Wire.AgentInterrupt, { ...interruptJson, choices: "yes" }, "choices")
    })
  )

  it.effect("PendingInterrupts round-trips a list", () =>
    Effect.gen(function* () {
      const list = yield* roundTrip(Wire.PendingInterrupts, [
        interruptJson,
        { ...interruptJson, interrupt_id: "call_4", kind: "tool_approval" }
      ])
      assert.strictEqual(list.length, 2)
      assert.deepStrictEqual(yield* roundTrip(Wire.PendingInterrupts, []), [])
    })
  )

  it.effect("AgentInterruptResolution round-trips and defaults answer to null", () =>
    Effect.gen(function* () {
      const resolution = yield* roundTrip(Wire.AgentInterruptResolution, {
        approved: true,
        rejection_message: null,
        answer: "yes"
      })
      assert.deepStrictEqual(resolution, { approved: true, rejectionMessage: null, answer: "yes" })
      const legacy = yield* decode(Wire.AgentInterruptResolution, {
        approved: false,
        rejection_message: "not now"
      })
      assert.deepStrictEqual(legacy, { approved: false, rejectionMessage: "not now", answer: null })
      yield* decodeFails(Wire.AgentInterruptResolution, { rejection_message: null }, "approved")
    })
  )
})

describe("wire: RPC requests and responses", () => {
  it.effect("send_user_message takes an AgentUserMessage and returns a bool", () =>
    Effect.gen(function* () {
      const rpc = Wire.AgentSessionRpcs.send_user_message
      assert.deepStrictEqual(yield* roundTrip(rpc.input, { text: "hello", plan_mode: false }), {
        text: "hello",
        planMode: false
      })
      assert.strictEqual(yield* roundTrip(rpc.output, true), true)
      yield* decodeFails(rpc.output, "true", "")
    })
  )

  it.effect("SteerUserMessageRequest round-trips a message ID or a text", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* roundTrip(Wire.SteerUserMessageRequest, { message_id: "msg-1", text: null }), {
        messageId: "msg-1",
        text: null
      })
      yield* roundTrip(Wire.SteerUserMessageRequest, { message_id: null, text: "use the other city" })
      yield* decodeFails(Wire.SteerUserMessageRequest, { text: "x" }, "message_id")
    })
  )

  it.effect("DeleteQueuedMessageRequest round-trips", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* roundTrip(Wire.DeleteQueuedMessageRequest, { message_id: "msg-1" }), {
        messageId: "msg-1"
      })
      yield* decodeFails(Wire.DeleteQueuedMessageRequest, { message_id: null }, "message_id")
    })
  )

  it.effect("CancelTurnRequest round-trips a turn ID or null", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* roundTrip(Wire.CancelTurnRequest, { turn_id: "turn-4" }), { turnId: "turn-4" })
      assert.deepStrictEqual(yield* roundTrip(Wire.CancelTurnRequest, { turn_id: null }), { turnId: null })
      yield* decodeFails(Wire.CancelTurnRequest, { turn_id: 4 }, "turn_id")
    })
  )

  it.effect("UpdateSessionSettingsRequest round-trips; absent reads as null; a non-object fails", () =>
    Effect.gen(function* () {
      const request = yield* roundTrip(Wire.UpdateSessionSettingsRequest, {
        session_settings: { model: "large", reasoning: { effort: "high" } }
      })
      assert.deepStrictEqual(request.sessionSettings, { model: "large", reasoning: { effort: "high" } })
      yield* roundTrip(Wire.UpdateSessionSettingsRequest, { session_settings: {} })
      yield* roundTrip(Wire.UpdateSessionSettingsRequest, { session_settings: null })
      assert.deepStrictEqual(yield* decode(Wire.UpdateSessionSettingsRequest, {}), { sessionSettings: null })
      yield* decodeFails(Wire.UpdateSessionSettingsRequest, { session_settings: "model=large" }, "session_settings")
    })
  )

  it.effect("ResolveInterruptRequest round-trips", () =>
    Effect.gen(function* () {
      const request = yield* roundTrip(Wire.ResolveInterruptRequest, {
        interrupt_id: "call_2",
        approved: false,
        rejection_message: "Use the sandbox account"
      })
      assert.deepStrictEqual(request, {
        interruptId: "call_2",
        approved: false,
        rejectionMessage: "Use the sandbox account"
      })
      yield* decodeFails(Wire.ResolveInterruptRequest, { interrupt_id: "call_2", approved: "no" }, "approved")
    })
  )

  it.effect("AnswerQuestionRequest round-trips", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(
        yield* roundTrip(Wire.AnswerQuestionRequest, { interrupt_id: "call_2-input-2", answer: "yes" }),
        { interruptId: "call_2-input-2", answer: "yes" }
      )
      yield* decodeFails(Wire.AnswerQuestionRequest, { interrupt_id: "call_2-input-2" }, "answer")
    })
  )

  it.effect("ListAgentMessagesRequest round-trips and defaults limit to 50", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* roundTrip(Wire.ListAgentMessagesRequest, { before_sequence: 120, limit: 20 }), {
        beforeSequence: 120,
        limit: 20
      })
      assert.deepStrictEqual(yield* decode(Wire.ListAgentMessagesRequest, { before_sequence: null }), {
        beforeSequence: null,
        limit: Wire.DEFAULT_LIST_AGENT_MESSAGES_LIMIT
      })
      yield* decodeFails(Wire.ListAgentMessagesRequest, { before_sequence: null, limit: "all" }, "limit")
    })
  )

  it.effect("AgentMessagesPage round-trips", () =>
    Effect.gen(function* () {
      const page = yield* roundTrip(Wire.AgentMessagesPage, {
        messages: [messageJson],
        next_before_sequence: 7,
        deleted_before_sequence: null
      })
      assert.strictEqual(page.nextBeforeSequence, 7)
      assert.strictEqual(page.deletedBeforeSequence, null)
      assert.strictEqual(page.messages[0]?.toolCallId, "call_1")
      yield* decodeFails(
        Wire.AgentMessagesPage,
        { messages: [], next_before_sequence: null },
        "deleted_before_sequence"
      )
    })
  )

  const snapshotJson = {
    state: stateJson,
    messages: [messageJson],
    pending_interrupts: [interruptJson],
    tool_calls: [toolCallJson],
    usage: usageJson,
    queued_message_count: 1,
    plan: planJson,
    queued_messages: [{ message_id: "msg-1", message: { text: "and a hotel", plan_mode: false } }],
    steered_messages: [],
    context_summary: summaryJson,
    session_settings: { model: "fast" }
  }

  it.effect("get_agent_snapshot returns an AgentSnapshot that round-trips", () =>
    Effect.gen(function* () {
      const rpc = Wire.AgentSessionRpcs.get_agent_snapshot
      assert.strictEqual(yield* roundTrip(rpc.input, null), null)
      const snapshot = yield* roundTrip(rpc.output, snapshotJson)
      assert.strictEqual(snapshot.state?.activeTurnId, "turn-4")
      assert.strictEqual(snapshot.pendingInterrupts[0]?.interruptId, "call_2-input-2")
      assert.strictEqual(snapshot.toolCalls[0]?.taskId, "task-9")
      assert.strictEqual(snapshot.queuedMessageCount, 1)
      assert.strictEqual(snapshot.queuedMessages[0]?.messageId, "msg-1")
      assert.strictEqual(snapshot.contextSummary?.lastSequence, 40)
      assert.deepStrictEqual(snapshot.sessionSettings, { model: "fast" })
    })
  )

  it.effect("AgentSnapshot before StartAgentSession, from 0.1.0, takes defaults", () =>
    Effect.gen(function* () {
      const snapshot = yield* decode(Wire.AgentSnapshot, {
        state: null,
        messages: [],
        pending_interrupts: [],
        tool_calls: [],
        usage: { model_calls: 0, input_tokens: 0, output_tokens: 0, cached_input_tokens: 0, reasoning_tokens: 0 },
        queued_message_count: 0
      })
      assert.strictEqual(snapshot.state, null)
      assert.strictEqual(snapshot.plan, null)
      assert.deepStrictEqual(snapshot.queuedMessages, [])
      assert.deepStrictEqual(snapshot.steeredMessages, [])
      assert.strictEqual(snapshot.contextSummary, null)
      assert.strictEqual(snapshot.sessionSettings, null)
      yield* decodeFails(Wire.AgentSnapshot, { ...snapshotJson, usage: undefined }, "usage")
      yield* decodeFails(Wire.AgentSnapshot, { ...snapshotJson, state: { ...stateJson, status: "idle" } }, "status")
    })
  )

  it.effect("UiAgentSnapshot leaves out the fields only the session's Steps use", () =>
    Effect.gen(function* () {
      const snapshot = yield* decode(Wire.UiAgentSnapshot, snapshotJson)
      const encoded = yield* Schema.encodeEffect(Wire.UiAgentSnapshot)(snapshot)
      const text = JSON.stringify(encoded)
      for (const key of [
        "framework_item",
        "tool_source_reference",
        "trace_context",
        "input_continuation",
        "input_answers",
        "task_answer_pending"
      ]) {
        assert.notInclude(text, `"${key}"`)
      }
      assert.include(text, '"input_question"')
      yield* roundTrip(Wire.UiAgentSnapshot, encoded)
    })
  )

  it.effect("the RPC table covers every RPC name and each output decodes", () =>
    Effect.gen(function* () {
      const names = Object.keys(Wire.AgentSessionRpcs).sort()
      assert.deepStrictEqual(names, [...Wire.AgentRpcName.literals].sort())
      for (const name of [
        "execute_plan",
        "steer_user_message",
        "delete_queued_message",
        "cancel_turn",
        "update_session_settings",
        "resolve_interrupt",
        "answer_question"
      ] as const) {
        assert.strictEqual(yield* roundTrip(Wire.AgentSessionRpcs[name].output, false), false)
      }
      yield* decodeFails(Wire.AgentRpcName, "get_snapshot", "Expected")
    })
  )
})

describe("wire: names and keys", () => {
  it.effect("Step types, state names, built-in tools, IDs and keys follow the spec", () =>
    Effect.gen(function* () {
      assert.strictEqual(Wire.AgentSessionStepType.literals.length, 17)
      assert.strictEqual(Wire.AgentSessionStateName.literals.length, 24)
      yield* decode(Wire.BuiltInToolName, "durable_wait")
      yield* decodeFails(Wire.AgentSessionStepType, "RunTool", "Expected")
      assert.strictEqual(Wire.formatTurnId(4), "turn-4")
      assert.strictEqual(Wire.toolQuestionInterruptId("call_2", 1), "call_2-input-1")
      assert.strictEqual(Wire.messageSequenceKey(42), "000000000042")
      assert.strictEqual(Wire.toolCallIdempotencyKey("flow-1", "turn-4", "call_2"), "flow-1/turn-4/call_2")
      assert.strictEqual(Wire.CHANNEL_RANGE_MAX, 2_147_483_647)
      assert.strictEqual(Wire.MAX_SESSION_SETTINGS_BYTES + Wire.SESSION_SETTINGS_SIZE_TOLERANCE_BYTES, 17_408)
    })
  )
})
