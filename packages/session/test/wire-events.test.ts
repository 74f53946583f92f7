import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Wire from "../src/wire/index.ts"
import { decodeFails, roundTrip } from "./support/wire.ts"

/** An event as `AgentEvents` stores it; `payload` is compact JSON text with keys in the spec's order. */
const event = <const T extends string>(type: T, payload: string) => ({
  type,
  turn_id: "turn-4",
  attempt: 2,
  payload,
  step_execution_id: "RunModel-3"
})

const usage = '{"model_calls":1,"input_tokens":900,"output_tokens":120,"cached_input_tokens":600,"reasoning_tokens":0}'
const total =
  '{"model_calls":5,"input_tokens":4000,"output_tokens":700,"cached_input_tokens":2400,"reasoning_tokens":30}'

/** One event per core type, with the payload the spec lists for it and the decoded camelCase payload. */
const cases: ReadonlyArray<readonly [Wire.AgentEventType, string, unknown]> = [
  ["turn_started", '{"sequence":11}', { sequence: 11 }],
  ["turn_completed", '{"message_count":4}', { messageCount: 4 }],
  ["turn_failed", '{"error":"model call timed out"}', { error: "model call timed out" }],
  ["turn_steered", '{"steered_message_count":2,"message_count":3}', { steeredMessageCount: 2, messageCount: 3 }],
  ["turn_cancelled", '{"message_count":1}', { messageCount: 1 }],
  ["text_delta", '{"text":"Hel"}', { text: "Hel" }],
  ["reasoning_delta", '{"text":"The user wants"}', { text: "The user wants" }],
  [
    "tool_call_started",
    '{"tool_call_id":"call_1","tool_name":"get_weather"}',
    { toolCallId: "call_1", toolName: "get_weather" }
  ],
  [
    "tool_call_finished",
    '{"tool_call_id":"call_1","tool_name":"get_weather","status":"succeeded"}',
    { toolCallId: "call_1", toolName: "get_weather", status: "succeeded" }
  ],
  [
    "tool_call_deferred",
    '{"tool_call_id":"call_2","tool_name":"send_email","effect":"non_idempotent_write","requires_approval":true}',
    { toolCallId: "call_2", toolName: "send_email", effect: "non_idempotent_write", requiresApproval: true }
  ],
  [
    "interrupt_raised",
    '{"interrupt_id":"call_2","tool_call_id":"call_2","tool_name":"send_email","deadline":"2026-11-01T13:00:00.000Z","kind":"tool_approval","question":null,"choices":[],"allows_free_text":true}',
    {
      interruptId: "call_2",
      toolCallId: "call_2",
      toolName: "send_email",
      deadline: "2026-11-01T13:00:00.000Z",
      kind: "tool_approval",
      question: null,
      choices: [],
      allowsFreeText: true
    }
  ],
  [
    "interrupt_resolved",
    '{"interrupt_id":"call_2","approved":false,"rejection_message":"{\\"status\\":\\"cancelled\\",\\"reason\\":\\"superseded_by_steered_user_message\\"}","kind":"tool_approval","answered":false,"cancellation_reason":"steered"}',
    {
      interruptId: "call_2",
      approved: false,
      rejectionMessage: Wire.STEERED_REJECTION_MESSAGE,
      kind: "tool_approval",
      answered: false,
      cancellationReason: "steered"
    }
  ],
  [
    "timer_started",
    '{"tool_call_id":"call_5","wait_until":"2026-11-01T12:05:00.000Z","reason":"wait for the build"}',
    { toolCallId: "call_5", waitUntil: "2026-11-01T12:05:00.000Z", reason: "wait for the build" }
  ],
  ["plan_updated", '{"revision":2,"status":"active","task_count":3}', { revision: 2, status: "active", taskCount: 3 }],
  ["plan_execution_started", '{"revision":2}', { revision: 2 }],
  [
    "tool_task_started",
    '{"tool_call_id":"call_6","tool_name":"render__video","task_id":"task-9"}',
    { toolCallId: "call_6", toolName: "render__video", taskId: "task-9" }
  ],
  [
    "usage_recorded",
    `{"recorded":${usage},"session":${total}}`,
    {
      recorded: { modelCalls: 1, inputTokens: 900, outputTokens: 120, cachedInputTokens: 600, reasoningTokens: 0 },
      session: { modelCalls: 5, inputTokens: 4000, outputTokens: 700, cachedInputTokens: 2400, reasoningTokens: 30 }
    }
  ],
  ["compaction_started", '{"through_sequence":40}', { throughSequence: 40 }],
  ["compaction_finished", '{"generation":2,"through_sequence":40}', { generation: 2, throughSequence: 40 }]
]

describe("wire: AgentEvent", () => {
  it("has a case for every event type the spec lists", () => {
    assert.deepStrictEqual(
      cases.map(([type]) => type),
      [...Wire.AgentEventType.literals]
    )
  })

  for (const [type, payload, decodedPayload] of cases) {
    it.effect(`${type} round-trips through AgentEvent`, () =>
      Effect.gen(function* () {
        const json = event(type, payload)
        const decoded = yield* roundTrip(Wire.AgentEvent, json)
        assert.deepStrictEqual(decoded, {
          type,
          turnId: "turn-4",
          attempt: 2,
          payload: decodedPayload,
          stepExecutionId: "RunModel-3"
        } as Wire.AgentEvent)
        // the core-only union decodes it as well
        yield* roundTrip(Wire.SessionAgentEvent, json)
      })
    )
  }

  it.effect("the per-type event schemas decode their own type only", () =>
    Effect.gen(function* () {
      const started = yield* roundTrip(Wire.TurnStartedEvent, event("turn_started", '{"sequence":1}'))
      assert.strictEqual(started.payload.sequence, 1)
      const finished = yield* roundTrip(
        Wire.ToolCallFinishedEvent,
        event("tool_call_finished", '{"tool_call_id":"c","tool_name":"t","status":"outcome_unknown"}')
      )
      assert.strictEqual(finished.payload.status, "outcome_unknown")
      yield* decodeFails(Wire.TurnStartedEvent, event("turn_completed", '{"sequence":1}'), "type")
    })
  )

  it.effect("narrowing on type gives the typed payload", () =>
    Effect.gen(function* () {
      const decoded = yield* Schema.decodeUnknownEffect(Wire.AgentEvent)(
        event("turn_steered", '{"steered_message_count":1,"message_count":2}')
      )
      assert.strictEqual(decoded.type === "turn_steered" ? decoded.payload.steeredMessageCount : -1, 1)
      assert.isTrue(Schema.is(Wire.TurnEndEventType)(decoded.type))
      assert.isFalse(Schema.is(Wire.TurnEndEventType)("text_delta"))
    })
  )

  it.effect("an event without a turn keeps turn_id null", () =>
    Effect.gen(function* () {
      const decoded = yield* roundTrip(Wire.AgentEvent, { ...event("text_delta", '{"text":"x"}'), turn_id: null })
      assert.strictEqual(decoded.turnId, null)
    })
  )

  it.effect("step_execution_id reads as the empty string when absent", () =>
    Effect.gen(function* () {
      const { step_execution_id: _, ...json } = event("text_delta", '{"text":"x"}')
      const decoded = yield* Schema.decodeUnknownEffect(Wire.AgentEvent)(json)
      assert.strictEqual(decoded.stepExecutionId, "")
      const encoded = yield* Schema.encodeEffect(Wire.AgentEvent)(decoded)
      assert.strictEqual(encoded.step_execution_id, "")
    })
  )

  it.effect("adapter-specific events keep their payload as a JSON object", () =>
    Effect.gen(function* () {
      const handoff = yield* roundTrip(
        Wire.AgentEvent,
        event("openai_agents.handoff", '{"from_agent":"Triage","to_agent":"Billing"}')
      )
      assert.strictEqual(handoff.type, "openai_agents.handoff")
      assert.deepStrictEqual(handoff.payload, { from_agent: "Triage", to_agent: "Billing" })
      yield* roundTrip(Wire.AdapterAgentEvent, event("mcp.task_status", '{"task_id":"task-9","status":"working"}'))
      yield* decodeFails(Wire.SessionAgentEvent, event("mcp.task_status", '{"task_id":"task-9"}'), "type")
      yield* decodeFails(Wire.AdapterAgentEvent, event("mcp.task_status", "[1,2]"), "payload")
    })
  )

  it.effect("an unknown type without an adapter prefix fails", () =>
    decodeFails(Wire.AgentEvent, event("turn_paused", '{"message_count":1}'), "type")
  )

  it.effect("a payload that does not match its type fails", () =>
    Effect.gen(function* () {
      yield* decodeFails(Wire.AgentEvent, event("turn_completed", '{"message_count":"4"}'), "message_count")
      yield* decodeFails(Wire.AgentEvent, event("turn_completed", '{"messages":4}'), "message_count")
      yield* decodeFails(
        Wire.AgentEvent,
        event("tool_call_finished", '{"tool_call_id":"c","tool_name":"t","status":"approved"}'),
        "status"
      )
      yield* decodeFails(
        Wire.AgentEvent,
        event("tool_call_deferred", '{"tool_call_id":"c","tool_name":"t","effect":"write","requires_approval":true}'),
        "effect"
      )
      yield* decodeFails(
        Wire.AgentEvent,
        event(
          "interrupt_resolved",
          '{"interrupt_id":"c","approved":true,"rejection_message":null,"kind":"tool_approval","answered":false,"cancellation_reason":"user"}'
        ),
        "cancellation_reason"
      )
      yield* decodeFails(
        Wire.AgentEvent,
        event("plan_updated", '{"revision":1,"status":"done","task_count":0}'),
        "status"
      )
    })
  )

  it.effect("payload text that is not JSON, or not text, fails", () =>
    Effect.gen(function* () {
      yield* decodeFails(Wire.AgentEvent, event("text_delta", "{text:"), "payload")
      yield* decodeFails(Wire.AgentEvent, { ...event("text_delta", ""), payload: { text: "x" } }, "payload")
    })
  )

  it.effect("envelope fields are checked: attempt is a one-based integer, turn_id is required", () =>
    Effect.gen(function* () {
      yield* decodeFails(Wire.AgentEvent, { ...event("text_delta", '{"text":"x"}'), attempt: 0 }, "attempt")
      yield* decodeFails(Wire.AgentEvent, { ...event("text_delta", '{"text":"x"}'), attempt: "1" }, "attempt")
      const { turn_id: _, ...missing } = event("text_delta", '{"text":"x"}')
      yield* decodeFails(Wire.AgentEvent, missing, "turn_id")
    })
  )

  it.effect("AgentEventEnvelope keeps the payload as text", () =>
    Effect.gen(function* () {
      const json = event("openai_agents.handoff", '{"to_agent":"Billing"}')
      const envelope = yield* roundTrip(Wire.AgentEventEnvelope, json)
      assert.deepStrictEqual(envelope, {
        type: "openai_agents.handoff",
        turnId: "turn-4",
        attempt: 2,
        payload: '{"to_agent":"Billing"}',
        stepExecutionId: "RunModel-3"
      })
      yield* decodeFails(Wire.AgentEventEnvelope, { ...json, payload: {} }, "payload")
    })
  )

  it.effect("each payload schema round-trips on its own", () =>
    Effect.gen(function* () {
      const payloads = [
        Wire.TurnStartedPayload,
        Wire.TurnCompletedPayload,
        Wire.TurnFailedPayload,
        Wire.TurnSteeredPayload,
        Wire.TurnCancelledPayload,
        Wire.TextDeltaPayload,
        Wire.TextDeltaPayload,
        Wire.ToolCallStartedPayload,
        Wire.ToolCallFinishedPayload,
        Wire.ToolCallDeferredPayload,
        Wire.InterruptRaisedPayload,
        Wire.InterruptResolvedPayload,
        Wire.TimerStartedPayload,
        Wire.PlanUpdatedPayload,
        Wire.PlanExecutionStartedPayload,
        Wire.ToolTaskStartedPayload,
        Wire.UsageRecordedPayload,
        Wire.CompactionStartedPayload,
        Wire.CompactionFinishedPayload
      ] as const
      assert.strictEqual(payloads.length, cases.length)
      for (let i = 0; i < cases.length; i++) {
        const [, text, decodedPayload] = cases[i]!
        const codec = Schema.fromJsonString(payloads[i]! as Schema.Codec<unknown, unknown>)
        const decoded = yield* roundTrip(codec, text)
        assert.deepStrictEqual(decoded, decodedPayload)
      }
    })
  )
})
