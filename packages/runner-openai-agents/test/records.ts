// A tool call record as the session stores it once the call is approved, for driving the runner by hand
// (unit tests and the benchmark).
import type { Wire } from "@durable-agent/session"

/** An approved `read` record of a requested call. */
export const approvedRecord = (
  turnId: string,
  call: { readonly toolCallId: string; readonly toolName: string; readonly arguments: string },
  deferralOrder = 0
): Wire.AgentToolCall => ({
  toolCallId: call.toolCallId,
  turnId,
  toolName: call.toolName,
  arguments: call.arguments,
  effect: "read",
  requiresApproval: false,
  status: "approved",
  output: null,
  error: null,
  rejectionMessage: null,
  deferralOrder,
  toolSourceReference: null,
  traceContext: null,
  waitUntil: null,
  inputContinuation: null,
  inputAnswers: [],
  inputQuestion: null,
  inputChoices: [],
  inputAllowsFreeText: true,
  cancellationReason: null,
  taskId: null,
  taskPollIntervalSeconds: null,
  taskAnswerPending: false
})
