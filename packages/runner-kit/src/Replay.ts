/**
 * Replaying recorded tool results: what the model sees for a deferred call when the turn resumes. A final
 * record gives its model-visible result (`Wire.modelVisibleResult`); a record that is not final, or none,
 * gives the spec's outcome-unknown text. Every runner feeds these texts back to its framework.
 *
 * @since 0.1.0
 */
import { type Runner, Wire } from "@durable-agent/session"

/**
 * A deferred call a framework run waits for: its ID and tool name.
 *
 * @category models
 * @since 0.1.0
 */
export interface PendingCall {
  readonly toolCallId: string
  readonly toolName: string
}

/**
 * The final record of a call in the turn, if there is one.
 *
 * @category accessors
 * @since 0.1.0
 */
export const finalRecord = (
  records: ReadonlyArray<Wire.AgentToolCall>,
  toolCallId: string
): (Wire.AgentToolCall & { readonly status: Wire.AgentToolCallFinalStatus }) | undefined => {
  const record = records.find((r) => r.toolCallId === toolCallId)
  return record !== undefined && Wire.isAgentToolCallFinalStatus(record.status)
    ? { ...record, status: record.status }
    : undefined
}

/**
 * The text the model sees for a call: its record's model-visible result when the record is final, else
 * the outcome-unknown text.
 *
 * @category accessors
 * @since 0.1.0
 */
export const resultText = (records: ReadonlyArray<Wire.AgentToolCall>, toolCallId: string): string => {
  const record = finalRecord(records, toolCallId)
  return record === undefined ? Wire.OUTCOME_UNKNOWN_TEXT : Wire.modelVisibleResult(record)
}

/**
 * The texts of the calls a run waits for, by call ID, from the turn's records.
 *
 * @category accessors
 * @since 0.1.0
 */
export const results = (
  turn: Pick<Runner.AgentTurnContext, "toolCalls">,
  pending: ReadonlyArray<PendingCall>
): ReadonlyMap<string, string> => new Map(pending.map((p) => [p.toolCallId, resultText(turn.toolCalls, p.toolCallId)]))

/**
 * The pending calls with their result texts, in order: what a framework's `tool` message is built from.
 *
 * @category accessors
 * @since 0.1.0
 */
export const replay = (
  turn: Pick<Runner.AgentTurnContext, "toolCalls">,
  pending: ReadonlyArray<PendingCall>
): ReadonlyArray<PendingCall & { readonly text: string }> =>
  pending.map((p) => ({ ...p, text: resultText(turn.toolCalls, p.toolCallId) }))
