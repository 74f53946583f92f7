/**
 * Texts the session shows the model or records on tool calls, exactly as docs/session-contract.md lists them, with small
 * helpers that fill in their placeholders.
 *
 * Contract: `docs/session-contract.md`, "Turn-failure note and model-visible results", "Known limits",
 * "Session Flow contract", and "Adapter interface" (context compaction texts).
 *
 * @since 0.1.0
 */
import type { AgentPlan } from "./AgentPlan.ts"
import type { AgentToolCallFinalStatus } from "./AgentToolCall.ts"
import type { InteractionMode } from "./Common.ts"

// ---------------------------------------------------------------------------------------------------------
// Tool call errors and rejections
// ---------------------------------------------------------------------------------------------------------

/**
 * The start of the `error` of a call whose tool never ran (attempt progress `NOT_STARTED`); the full error
 * adds `": "` and the recovery detail ("Known limits"; `RecordToolFailure`).
 *
 * @category texts
 * @since 0.1.0
 */
export const TOOL_CALL_NOT_RUN_ERROR_PREFIX = "the tool did not run, so it is safe to call again"

/**
 * {@link TOOL_CALL_NOT_RUN_ERROR_PREFIX} under the spec's TypeScript name.
 *
 * @category constants
 * @since 0.1.0
 */
export const toolCallNotRunErrorPrefix = TOOL_CALL_NOT_RUN_ERROR_PREFIX

/**
 * The `error` of a call whose tool never ran: {@link TOOL_CALL_NOT_RUN_ERROR_PREFIX}, `": "`, and the
 * recovery detail ("Known limits").
 *
 * @category texts
 * @since 0.1.0
 */
export const toolCallNotRunError = (detail: string): string => `${TOOL_CALL_NOT_RUN_ERROR_PREFIX}: ${detail}`

/**
 * The model-visible text of a `failed` call before its error: `The tool call failed: <error>`
 * ("Turn-failure note and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const TOOL_CALL_FAILED_PREFIX = "The tool call failed: "

/**
 * The model-visible text of a `rejected` call without a `rejection_message` ("Turn-failure note and
 * model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const DEFAULT_REJECTION_TEXT = "The user rejected this tool call."

/**
 * The model-visible text of an `outcome_unknown` call ("Turn-failure note and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const OUTCOME_UNKNOWN_TEXT =
  "The tool call's outcome is unknown: it stopped without returning a result, so it may or may not have taken effect. It will not be retried automatically."

/**
 * The `rejection_message` of a call that steering abandoned ("Turn-failure note and model-visible
 * results").
 *
 * @category texts
 * @since 0.1.0
 */
export const STEERED_REJECTION_MESSAGE = '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'

/**
 * The `rejection_message` of a call that `cancel_turn` abandoned ("Turn-failure note and model-visible
 * results").
 *
 * @category texts
 * @since 0.1.0
 */
export const TURN_CANCELLED_REJECTION_MESSAGE = '{"status":"cancelled","reason":"turn_cancelled_by_user"}'

/**
 * The `rejection_message` of a call whose approval deadline passed ("Turn-failure note and model-visible
 * results").
 *
 * @category texts
 * @since 0.1.0
 */
export const APPROVAL_DEADLINE_PASSED_MESSAGE = "approval deadline passed"

/**
 * The `rejection_message` of a call whose question deadline passed, and the `answer` of a task's
 * `deadline_passed` `QuestionAnswer` ("Turn-failure note and model-visible results"; `AwaitQuestionAnswer`).
 *
 * @category texts
 * @since 0.1.0
 */
export const QUESTION_DEADLINE_PASSED_MESSAGE = "question deadline passed"

/**
 * The `rejection_message` of a declined question when the user gave no message ("Turn-failure note and
 * model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const QUESTION_DECLINED_MESSAGE = "The user declined to answer."

/**
 * The `rejection_message` of every call but `write_todos` in a planning turn ("Session Flow contract",
 * `RunModel`).
 *
 * @category texts
 * @since 0.1.0
 */
export const PLANNING_TURN_REJECTION_MESSAGE = "The tool call was not run: a planning turn can only call write_todos."

/**
 * The `error` of each `write_todos` call of a response with more than one ("Session Flow contract",
 * rules).
 *
 * @category texts
 * @since 0.1.0
 */
export const WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR = "write_todos was called more than once in one response"

/**
 * The reason of a built-in call whose argument text is not a strict JSON object ("Turn-failure note and
 * model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const ARGUMENTS_NOT_JSON_OBJECT_REASON = "arguments must be a JSON object"

/**
 * The `error` of a built-in call with invalid arguments: `invalid <tool> arguments: <reason>`
 * ("Turn-failure note and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const invalidBuiltInArgumentsError = (toolName: string, reason: string): string =>
  `invalid ${toolName} arguments: ${reason}`

/**
 * The `error` of a `write_todos` call with invalid todos: `invalid todos: <reason>` ("Turn-failure note
 * and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const invalidTodosError = (reason: string): string => `invalid todos: ${reason}`

/**
 * The `error` of a call whose tool question would reuse an interrupt ID another call of the turn uses
 * ("Session Flow contract", `AwaitQuestionAnswer`).
 *
 * @category texts
 * @since 0.1.0
 */
export const interruptIdInUseError = (interruptId: string): string =>
  `the tool's question cannot use interrupt ID ${interruptId}, which another tool call of this turn uses`

/**
 * The `error` of a started task that `cancel_turn` abandoned ("Session Flow contract", `CancelToolTask`).
 *
 * @category texts
 * @since 0.1.0
 */
export const TOOL_TASK_CANCELLED_ERROR =
  "the turn was cancelled while the tool's task was running; the task may have taken effect"

/**
 * The `last_turn_error` and force-fail reason of a session that ended because its framework run state does
 * not fit in one stored value (docs/session-contract.md, "Size rules"). It contains `run state of`, the words
 * by which the failure routes recognise it.
 *
 * @category texts
 * @since 0.1.0
 */
export const runStateTooLargeDetail = (bytes: number, limit: number): string =>
  `ValueTooLarge: framework run state of ${bytes} bytes is over the limit of ${limit} bytes`

/**
 * The `last_turn_error` of a turn whose runner set `ToolCallsRequested.new_messages` without
 * `build_unfinished_turn_messages` ("Session Flow contract", `RunModel`).
 *
 * @category texts
 * @since 0.1.0
 */
export const UNFINISHED_TURN_MESSAGES_REQUIRED_ERROR =
  "a runner that sets ToolCallsRequested.new_messages must implement build_unfinished_turn_messages (TypeScript names newMessages and buildUnfinishedTurnMessages)"

/**
 * The start of the reason that force-fails a session whose start input has invalid session settings
 * ("Session Flow contract", `StartAgentSession`).
 *
 * @category texts
 * @since 0.1.0
 */
export const INVALID_START_SESSION_SETTINGS_REASON =
  "dex-agents: the start input's session_settings are not valid session settings"

// ---------------------------------------------------------------------------------------------------------
// Model-visible results and turn notes
// ---------------------------------------------------------------------------------------------------------

/**
 * The model-visible result of a final record, used in turn notes and when resuming ("Turn-failure note
 * and model-visible results"). A `succeeded` record without output shows as the empty string.
 *
 * @category texts
 * @since 0.1.0
 */
export const modelVisibleResult = (record: {
  readonly status: AgentToolCallFinalStatus
  readonly output: string | null
  readonly error: string | null
  readonly rejectionMessage: string | null
}): string => {
  switch (record.status) {
    case "succeeded":
      return record.output ?? ""
    case "failed":
      return `${TOOL_CALL_FAILED_PREFIX}${record.error ?? ""}`
    case "rejected":
      return record.rejectionMessage ?? DEFAULT_REJECTION_TEXT
    case "outcome_unknown":
      return OUTCOME_UNKNOWN_TEXT
  }
}

/**
 * The first line of the turn-failure note ("Turn-failure note and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const TURN_FAILURE_NOTE_HEADER = "[Dex] The previous turn failed after these tool calls ran:"

/**
 * The first line of the note of a steered turn ("Turn-failure note and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const TURN_STEERED_NOTE_HEADER = "[Dex] The user steered the conversation after these tool calls ran:"

/**
 * The first line of the note of a cancelled turn ("Turn-failure note and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const TURN_CANCELLED_NOTE_HEADER = "[Dex] The user stopped the previous turn after these tool calls ran:"

/**
 * The last line of every turn note ("Turn-failure note and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const TURN_NOTE_FOOTER = "Do not repeat these tool calls unless the user asks again."

/**
 * One line of a turn note: `- <tool_name> <arguments> -> <status>: <model-visible result>`
 * ("Turn-failure note and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const turnNoteLine = (record: {
  readonly toolName: string
  readonly arguments: string
  readonly status: AgentToolCallFinalStatus
  readonly output: string | null
  readonly error: string | null
  readonly rejectionMessage: string | null
}): string => `- ${record.toolName} ${record.arguments} -> ${record.status}: ${modelVisibleResult(record)}`

/**
 * A turn note: the header, one line per final record in the given order (callers pass `deferral_order`),
 * and the footer, joined by newlines ("Turn-failure note and model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const turnNote = (header: string, records: ReadonlyArray<Parameters<typeof turnNoteLine>[0]>): string =>
  [header, ...records.map(turnNoteLine), TURN_NOTE_FOOTER].join("\n")

// ---------------------------------------------------------------------------------------------------------
// Plan mode
// ---------------------------------------------------------------------------------------------------------

/**
 * The user message that starts an executing turn after a plan approval ("Session Flow contract",
 * `AwaitUserMessage`).
 *
 * @category texts
 * @since 0.1.0
 */
export const planExecutionApprovedMessage = (revision: number): string =>
  `[Dex] The user approved plan revision ${revision}. Execute it and keep the task statuses current with write_todos.`

/**
 * The last line of the plan note in a planning turn ("Turn-failure note and model-visible results",
 * `build_plan_note`).
 *
 * @category texts
 * @since 0.1.0
 */
export const PLANNING_TURN_PLAN_NOTE_FOOTER =
  "This turn only plans: write or revise the plan with write_todos, and do not do or claim any of its tasks. The user reviews the plan before it runs."

/**
 * The plan note of a planning turn without a plan, or with a cleared one ("Turn-failure note and
 * model-visible results", `build_plan_note`).
 *
 * @category texts
 * @since 0.1.0
 */
export const NO_PLAN_YET_NOTE = "[Dex] There is no plan yet."

/**
 * `build_plan_note(plan, interaction_mode)`: the user text shown before the turn's messages, or
 * `undefined` when a missing or cleared plan shows nothing outside a planning turn ("Turn-failure note and
 * model-visible results").
 *
 * @category texts
 * @since 0.1.0
 */
export const buildPlanNote = (
  plan: Pick<AgentPlan, "revision" | "status" | "tasks"> | null,
  interactionMode: InteractionMode
): string | undefined => {
  const planning = interactionMode === "planning"
  if (plan === null || plan.status === "cleared") {
    return planning ? NO_PLAN_YET_NOTE : undefined
  }
  const lines = [
    `[Dex] The current plan, revision ${plan.revision}, is ${plan.status}:`,
    ...plan.tasks.map((task) => `- [${task.status}] ${task.content}`)
  ]
  if (planning) lines.push(PLANNING_TURN_PLAN_NOTE_FOOTER)
  return lines.join("\n")
}

// ---------------------------------------------------------------------------------------------------------
// Context compaction
// ---------------------------------------------------------------------------------------------------------

/**
 * The text that starts a model input after compaction, followed by the summary text ("Adapter interface",
 * `ContextCompactionRunner`).
 *
 * @category texts
 * @since 0.1.0
 */
export const CONTEXT_SUMMARY_PREFIX = "[Dex] Summary of the earlier conversation:"

/**
 * The note for messages left out of a summary request that would not fit its budget ("Adapter interface",
 * `ContextCompactionRunner`).
 *
 * @category texts
 * @since 0.1.0
 */
export const omittedMessagesNote = (count: number): string =>
  count === 1
    ? "[Dex] 1 earlier message did not fit in this request and is left out."
    : `[Dex] ${count} earlier messages did not fit in this request and are left out.`

/**
 * How many continuations in a row the built-in loop allows before it ends the turn as failed
 * ("AgentFrameworkRunner", `TurnContinued`).
 *
 * @category texts
 * @since 0.1.0
 */
export const MAX_CONSECUTIVE_CONTINUATIONS = 8

/**
 * The `turn_error` of a Stepwise turn whose `decideTurnContinuation` asked for a continuation after
 * {@link MAX_CONSECUTIVE_CONTINUATIONS} continuations in a row. The spec gives no text; this one is ours.
 *
 * @category texts
 * @since 0.1.0
 */
export const TOO_MANY_CONTINUATIONS_ERROR = `the agent continued the turn more than ${MAX_CONSECUTIVE_CONTINUATIONS} times in a row`
