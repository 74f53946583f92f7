/**
 * Codecs of the compact JSON texts the session records as a tool call's `output` or
 * `rejection_message`: built-in tool results and the cancellation rejection.
 *
 * Contract: `docs/session-contract.md`, "Session Flow contract" (`AwaitQuestionAnswer`, `AwaitTimer`) and
 * "Turn-failure note and model-visible results". Each value schema has a `...Json` twin that decodes from
 * and encodes to the compact JSON text itself.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { wireStruct } from "./internal.ts"

/**
 * Output of an answered `ask_user` call: `{"status":"answered","answer":"<text>"}` ("Session Flow
 * contract", `AwaitQuestionAnswer`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AskUserAnsweredResult = Schema.Struct({
  status: Schema.Literal("answered"),
  answer: Schema.String
})
/** @since 0.1.0 */
export type AskUserAnsweredResult = typeof AskUserAnsweredResult.Type

/**
 * {@link AskUserAnsweredResult} as its JSON text.
 *
 * @category schemas
 * @since 0.1.0
 */
export const AskUserAnsweredResultJson = Schema.fromJsonString(AskUserAnsweredResult)

/**
 * Output of a finished `durable_wait` call:
 * `{"status":"completed","waited_seconds":<n>,"reason":"<reason>"}` ("Session Flow contract",
 * `AwaitTimer`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const DurableWaitCompletedResult = wireStruct(
  {
    status: Schema.Literal("completed"),
    waitedSeconds: Schema.Int,
    reason: Schema.String
  },
  { waitedSeconds: "waited_seconds" }
)
/** @since 0.1.0 */
export type DurableWaitCompletedResult = typeof DurableWaitCompletedResult.Type

/**
 * {@link DurableWaitCompletedResult} as its JSON text.
 *
 * @category schemas
 * @since 0.1.0
 */
export const DurableWaitCompletedResultJson = Schema.fromJsonString(DurableWaitCompletedResult)

/**
 * Output of a successful `write_todos` call: `{"status":"updated","revision":<n>,"task_count":<k>}`, or
 * `{"status":"cleared","revision":<n>}` for no tasks ("Turn-failure note and model-visible results").
 *
 * @category schemas
 * @since 0.1.0
 */
export const WriteTodosResult = Schema.Union([
  wireStruct(
    {
      status: Schema.Literal("updated"),
      revision: Schema.Int,
      taskCount: Schema.Int
    },
    { taskCount: "task_count" }
  ),
  Schema.Struct({
    status: Schema.Literal("cleared"),
    revision: Schema.Int
  })
])
/** @since 0.1.0 */
export type WriteTodosResult = typeof WriteTodosResult.Type

/**
 * {@link WriteTodosResult} as its JSON text.
 *
 * @category schemas
 * @since 0.1.0
 */
export const WriteTodosResultJson = Schema.fromJsonString(WriteTodosResult)

/**
 * The reason in the `rejection_message` of a call that steering or `cancel_turn` abandoned ("Turn-failure
 * note and model-visible results").
 *
 * @category schemas
 * @since 0.1.0
 */
export const ToolCallCancelledReason = Schema.Literals(["superseded_by_steered_user_message", "turn_cancelled_by_user"])
/** @since 0.1.0 */
export type ToolCallCancelledReason = typeof ToolCallCancelledReason.Type

/**
 * The `rejection_message` of a call that steering or `cancel_turn` abandoned, such as
 * `{"status":"cancelled","reason":"turn_cancelled_by_user"}` ("Turn-failure note and model-visible
 * results").
 *
 * @category schemas
 * @since 0.1.0
 */
export const ToolCallCancelledRejection = Schema.Struct({
  status: Schema.Literal("cancelled"),
  reason: ToolCallCancelledReason
})
/** @since 0.1.0 */
export type ToolCallCancelledRejection = typeof ToolCallCancelledRejection.Type

/**
 * {@link ToolCallCancelledRejection} as its JSON text.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ToolCallCancelledRejectionJson = Schema.fromJsonString(ToolCallCancelledRejection)
