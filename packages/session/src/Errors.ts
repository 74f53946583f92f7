/**
 * Typed errors of the agent session. A Step body's error channel separates three kinds:
 *
 * - {@link ToolExecutionError}: a tool failure the model should see. The tool Step records the call `failed`
 *   with its message and does not retry.
 * - Attempt errors ({@link ModelCallError}, {@link ToolAttemptError}): the attempt fails, the Step's retry
 *   policy runs, and when attempts run out the failure route records the call or the turn from the engine's
 *   recovery error (`ValueTooLarge` of an oversized commit arrives the same way).
 * - Anything else is a defect, which also fails the attempt.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A tool failure the model sees: the call is recorded `failed` with `message` as its error, and is not
 * retried ("Session Flow contract", rules).
 *
 * @category errors
 * @since 0.1.0
 */
export class ToolExecutionError extends Schema.TaggedError<ToolExecutionError>()("ToolExecutionError", {
  message: Schema.String
}) {}

/**
 * A model call failed (network, provider error, exhausted script). The RunModel attempt fails and is
 * retried; when attempts run out the turn fails through RecordTurnFailure.
 *
 * @category errors
 * @since 0.1.0
 */
export class ModelCallError extends Schema.TaggedError<ModelCallError>()("ModelCallError", {
  message: Schema.String
}) {}

/**
 * A tool call attempt stopped without a result the model should see, such as a request that was sent
 * without an answer. The attempt fails; the call's effect class decides a retry (CallTool) or
 * `outcome_unknown` (CallSingleAttemptTool).
 *
 * @category errors
 * @since 0.1.0
 */
export class ToolAttemptError extends Schema.TaggedError<ToolAttemptError>()("ToolAttemptError", {
  message: Schema.String
}) {}

/**
 * The options given to `AgentSessionFlow.make` are invalid.
 *
 * @category errors
 * @since 0.1.0
 */
export class AgentSessionDefinitionError extends Schema.TaggedError<AgentSessionDefinitionError>()(
  "AgentSessionDefinitionError",
  { message: Schema.String }
) {}

/**
 * `AgentSessionClient.awaitTurn` gave up: the session did not settle within the timeout.
 *
 * @category errors
 * @since 0.1.0
 */
export class AwaitTurnTimeout extends Schema.TaggedError<AwaitTurnTimeout>()("AwaitTurnTimeout", {
  sessionId: Schema.String,
  timeout: Schema.String,
  state: Schema.String
}) {
  override get message() {
    return `session ${this.sessionId} did not settle within ${this.timeout} (last seen: ${this.state})`
  }
}

/**
 * A session helper that waits on the engine ran under effect's `TestClock` (as `it.effect` installs it),
 * where the engine's polls and timers never advance by themselves. Write the test with `it.live`.
 *
 * @category errors
 * @since 0.1.0
 */
export class LiveClockRequired extends Schema.TaggedError<LiveClockRequired>()("LiveClockRequired", {
  operation: Schema.String
}) {
  override get message() {
    return `${this.operation} needs the live clock, but it runs under TestClock: write this test with it.live instead of it.effect (the engine's polls and timers do not advance under TestClock)`
  }
}

/**
 * A client refused session settings whose compact JSON text in UTF-8 is over `Wire.MAX_SESSION_SETTINGS_BYTES`
 * (16,384) bytes, the limit the spec has clients check ("Session Flow contract", rules). Nothing was sent.
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionSettingsTooLarge extends Schema.TaggedError<SessionSettingsTooLarge>()("SessionSettingsTooLarge", {
  bytes: Schema.Number,
  limit: Schema.Number
}) {
  override get message() {
    return `session_settings are ${this.bytes} bytes of compact UTF-8 JSON, over the limit of ${this.limit}`
  }
}
