// Every time field decodes any RFC 3339 offset and encodes in the writers' form: UTC, milliseconds, `Z`.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Wire from "../src/wire/index.ts"

const OFFSET = "2026-11-01T14:00:00+02:00"
const PLUS_ZERO = "2026-11-01T12:00:00+00:00"
const CANONICAL = "2026-11-01T12:00:00.000Z"

/** Decodes `json`, encodes it back, and returns the encoded value. */
const reencode = <T, E>(schema: Schema.Codec<T, E>, json: unknown) =>
  Effect.flatMap(Schema.decodeUnknownEffect(schema)(json), (decoded) => Schema.encodeEffect(schema)(decoded))

const cases: ReadonlyArray<
  readonly [string, Schema.Codec<any, any>, (time: string) => unknown, ReadonlyArray<string>]
> = [
  [
    "AgentMessage.created_at",
    Wire.AgentMessage,
    (t) => ({
      sequence: 1,
      turn_id: "turn-1",
      role: "user",
      text: "hi",
      tool_call_id: null,
      tool_name: null,
      tool_arguments: null,
      tool_output: null,
      framework_item: "{}",
      created_at: t
    }),
    ["created_at"]
  ],
  [
    "AgentInterrupt.created_at and deadline",
    Wire.AgentInterrupt,
    (t) => ({
      interrupt_id: "call_1",
      kind: "tool_approval",
      tool_call_id: "call_1",
      tool_name: "send_email",
      arguments: "{}",
      created_at: t,
      deadline: t,
      question: null,
      choices: [],
      allows_free_text: true
    }),
    ["created_at", "deadline"]
  ],
  [
    "AgentPlan.updated_at",
    Wire.AgentPlan,
    (t) => ({ revision: 1, status: "active", tasks: [], updated_at: t }),
    ["updated_at"]
  ],
  [
    "TurnCancellationRequest.requested_at",
    Wire.TurnCancellationRequest,
    (t) => ({ turn_id: "turn-1", requested_at: t }),
    ["requested_at"]
  ],
  [
    "ContextSummary.created_at",
    Wire.ContextSummary,
    (t) => ({ generation: 1, first_sequence: 1, last_sequence: 2, text: "s", created_at: t }),
    ["created_at"]
  ],
  [
    "interrupt_raised deadline",
    Wire.InterruptRaisedPayload,
    (t) => ({
      interrupt_id: "call_1",
      tool_call_id: "call_1",
      tool_name: "send_email",
      deadline: t,
      kind: "tool_approval",
      question: null,
      choices: [],
      allows_free_text: true
    }),
    ["deadline"]
  ],
  [
    "timer_started wait_until",
    Wire.TimerStartedPayload,
    (t) => ({ tool_call_id: "call_1", wait_until: t, reason: "wait" }),
    ["wait_until"]
  ]
]

describe("wire: times", () => {
  for (const [name, schema, json, fields] of cases) {
    it.effect(`${name}: +00:00 and other offsets encode as UTC with milliseconds and Z`, () =>
      Effect.gen(function* () {
        for (const input of [PLUS_ZERO, OFFSET, "2026-11-01T12:00:00Z", CANONICAL]) {
          const encoded = (yield* reencode(schema, json(input))) as Record<string, unknown>
          for (const field of fields) assert.strictEqual(encoded[field], CANONICAL, `${field} from ${input}`)
        }
      })
    )
  }

  it.effect("AgentToolCall.wait_until encodes in the writers' form", () =>
    Effect.gen(function* () {
      const record = {
        tool_call_id: "call_1",
        turn_id: "turn-1",
        tool_name: "durable_wait",
        arguments: "{}",
        effect: "read",
        requires_approval: false,
        status: "waiting_for_timer",
        output: null,
        error: null,
        rejection_message: null,
        deferral_order: 0,
        tool_source_reference: null,
        trace_context: null,
        wait_until: PLUS_ZERO,
        input_continuation: null,
        input_answers: [],
        input_question: null,
        input_choices: [],
        input_allows_free_text: true,
        cancellation_reason: null,
        task_id: null,
        task_poll_interval_seconds: null,
        task_answer_pending: false
      }
      const encoded = (yield* reencode(Wire.AgentToolCall, record)) as Record<string, unknown>
      assert.strictEqual(encoded.wait_until, CANONICAL)
    })
  )

  it("canonicalTimestamp keeps fractions to the millisecond and leaves non-times alone", () => {
    assert.strictEqual(Wire.canonicalTimestamp("2026-11-01T12:00:00.5+00:00"), "2026-11-01T12:00:00.500Z")
    assert.strictEqual(Wire.canonicalTimestamp("2026-11-01t10:00:00.123-02:00"), "2026-11-01T12:00:00.123Z")
    assert.strictEqual(Wire.canonicalTimestamp("yesterday"), "yesterday")
  })
})
