/**
 * Typed errors of the engine port. Every error is a `Schema.TaggedError`, so it crosses process
 * boundaries (cluster replies, persisted RPC results) with its fields intact.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** `startFlow` named a Flow ID that already exists (and the request was not an idempotent repeat). */
export class FlowAlreadyStarted extends Schema.TaggedError<FlowAlreadyStarted>()("FlowAlreadyStarted", {
  flowId: Schema.String,
  runId: Schema.String
}) {
  override get message() {
    return `Flow ${this.flowId} is already started (run ${this.runId})`
  }
}

/** No Flow with this ID exists. */
export class FlowNotFound extends Schema.TaggedError<FlowNotFound>()("FlowNotFound", {
  flowId: Schema.String
}) {
  override get message() {
    return `Flow ${this.flowId} not found`
  }
}

/** The Flow exists but is closed (completed, failed, cancelled or terminated). */
export class FlowNotActive extends Schema.TaggedError<FlowNotActive>()("FlowNotActive", {
  flowId: Schema.String,
  status: Schema.String
}) {
  override get message() {
    return `Flow ${this.flowId} is not active (status ${this.status})`
  }
}

/** A locking RPC found one of its locks held by a running Step. Nothing was committed; retrying is safe. */
export class RpcLockConflict extends Schema.TaggedError<RpcLockConflict>()("RpcLockConflict", {
  flowId: Schema.String,
  rpc: Schema.String,
  locks: Schema.Array(Schema.String)
}) {
  override get message() {
    return `RPC ${this.rpc} on ${this.flowId}: locks held by a running Step: ${this.locks.join(", ")}`
  }
}

/** An RPC deleted a channel message by ID that no longer exists. Nothing was committed. */
export class ChannelMessageNotFound extends Schema.TaggedError<ChannelMessageNotFound>()("ChannelMessageNotFound", {
  flowId: Schema.String,
  channel: Schema.String,
  messageId: Schema.String
}) {
  override get message() {
    return `Channel message ${this.messageId} of ${this.channel} in Flow ${this.flowId} not found`
  }
}

/** An RPC handler failed (typed failure or defect). Nothing was committed. */
export class RpcFailed extends Schema.TaggedError<RpcFailed>()("RpcFailed", {
  flowId: Schema.String,
  rpc: Schema.String,
  errorType: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `RPC ${this.rpc} on ${this.flowId} failed: ${this.errorType}: ${this.detail}`
  }
}

/** A stream resume token is malformed, foreign, or points at messages that were trimmed. */
export class InvalidResumeToken extends Schema.TaggedError<InvalidResumeToken>()("InvalidResumeToken", {
  token: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `Invalid resume token ${JSON.stringify(this.token)}: ${this.reason}`
  }
}

/** A Flow definition (or a set of them) is invalid: reported at registration, before anything runs. */
export class DefinitionError extends Schema.TaggedError<DefinitionError>()("DefinitionError", {
  flowType: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `Invalid Flow definition ${this.flowType}: ${this.reason}`
  }
}

/** A value (attribute, channel message, Step input) is larger than the engine's `maxValueBytes`. */
export class ValueTooLarge extends Schema.TaggedError<ValueTooLarge>()("ValueTooLarge", {
  name: Schema.String,
  bytes: Schema.Number,
  limit: Schema.Number
}) {
  override get message() {
    return `Value ${this.name} is ${this.bytes} bytes, over the limit of ${this.limit}`
  }
}

/** The storage cannot be used: a corrupt or foreign database, a lock held by another process, an I/O failure. */
export class EngineError extends Schema.TaggedError<EngineError>()("EngineError", {
  reason: Schema.String
}) {
  override get message() {
    return this.reason
  }
}

/** An input did not match its schema (RPC input, Flow input, channel message). */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  what: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `Invalid ${this.what}: ${this.detail}`
  }
}

/**
 * How far a failed Step got before it ran out of attempts: `not_started` when no attempt reached a
 * worker, `not_completed` when one did, `unspecified` when the engine cannot tell.
 */
export const AttemptProgress = Schema.Literals(["not_started", "not_completed", "unspecified"])
export type AttemptProgress = typeof AttemptProgress.Type

/**
 * The recovery error a failure-route Step reads (`ctx.recoveryError`): the last attempt's error type
 * and detail, plus the furthest progress of all attempts. `errorType` `ValueTooLarge` marks an
 * oversized commit.
 */
export class RecoveryError extends Schema.Class<RecoveryError>("@durable-agent/engine/RecoveryError")({
  errorType: Schema.String,
  detail: Schema.String,
  attemptProgress: AttemptProgress
}) {}

/** A client wait (`waitForFlow`) ran out of time before the Flow closed. */
export class LongPollTimeout extends Schema.TaggedError<LongPollTimeout>()("LongPollTimeout", {
  flowId: Schema.String,
  waitedMs: Schema.Number
}) {
  override get message() {
    return `Flow ${this.flowId} did not close within ${this.waitedMs} ms`
  }
}
