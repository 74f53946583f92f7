// The reader's rules for the event stream (docs/session-contract.md, "Events"): the highest attempt of a Step
// execution counts, and of the outcome events the last one per call or turn.
import { assert, describe, it } from "@effect/vitest"
import { type SettleableEvent, settleEvents } from "../src/wire/index.ts"

const event = (
  type: string,
  stepExecutionId: string,
  attempt: number,
  payload: Record<string, unknown> = {},
  turnId: string | null = "turn-1"
): SettleableEvent => ({ type, turnId, stepExecutionId, attempt, payload })

describe("settleEvents", () => {
  it("keeps only the highest attempt of each Step execution", () => {
    const events = [
      event("text_delta", "RunModel-1", 1, { text: "lost" }),
      event("text_delta", "RunModel-1", 2, { text: "kept" }),
      event("tool_call_finished", "RecordToolOutcomeUnknown-1", 1, { toolCallId: "c1", status: "outcome_unknown" }),
      event("tool_call_finished", "RecordToolOutcomeUnknown-1", 2, { toolCallId: "c1", status: "outcome_unknown" })
    ]
    assert.deepStrictEqual(settleEvents(events), [events[1], events[3]])
  })

  it("a failure route's outcome supersedes the outcome an uncommitted attempt wrote", () => {
    const events = [
      event("tool_call_finished", "CallTool-1", 1, { toolCallId: "c1", status: "succeeded" }),
      event("tool_call_finished", "CallTool-2", 1, { toolCallId: "c2", status: "succeeded" }),
      event("tool_call_finished", "RecordToolFailure-1", 1, { toolCallId: "c1", status: "failed" }),
      event("turn_completed", "RunModel-2", 1, { messageCount: 2 }),
      event("turn_failed", "RecordTurnFailure-1", 1, { error: "x" }),
      event("turn_started", "AwaitUserMessage-2", 1, { sequence: 4 }, "turn-2")
    ]
    assert.deepStrictEqual(settleEvents(events), [events[1], events[2], events[4], events[5]])
  })

  it("tool_call_finished is keyed by turn and call: a later turn that reuses a call ID keeps the earlier outcome", () => {
    const events = [
      event("tool_call_finished", "CallTool-1", 1, { toolCallId: "call_0", status: "succeeded" }, "turn-1"),
      event("turn_completed", "RunModel-2", 1, {}, "turn-1"),
      event("tool_call_finished", "CallTool-2", 1, { toolCallId: "call_0", status: "succeeded" }, "turn-2"),
      event("tool_call_finished", "RecordToolFailure-1", 1, { toolCallId: "call_0", status: "failed" }, "turn-2"),
      event("turn_completed", "RunModel-4", 1, {}, "turn-2")
    ]
    // turn 1's outcome stays; within turn 2 the failure route's outcome supersedes the attempt's
    assert.deepStrictEqual(settleEvents(events), [events[0], events[1], events[3], events[4]])
  })
})
