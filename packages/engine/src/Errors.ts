/**
 * Typed errors of the engine port. Every error is a `Schema.TaggedError`, so it crosses process
 * boundaries (cluster replies, persisted RPC results) with its fields intact.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
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

/** An attempt ran longer than its method timeout (`options.execute.timeout`); its fiber was interrupted. */
export class MethodTimeout extends Schema.TaggedError<MethodTimeout>()("MethodTimeout", { ms: Schema.Number }) {
  override get message() {
    return `execute did not finish within ${this.ms} ms`
  }
}

/** An attempt sent no heartbeat within its heartbeat timeout; its fiber was interrupted. */
export class HeartbeatTimeout extends Schema.TaggedError<HeartbeatTimeout>()("HeartbeatTimeout", {
  ms: Schema.Number
}) {
  override get message() {
    return `no heartbeat for ${this.ms} ms`
  }
}

/**
 * No task slot of the runner was free within the dispatch wait (`EngineConfig.dispatchWait`) for an RPC
 * handler (Steps wait in the queue instead). As a Step's recovery error (kept for Steps recorded by earlier
 * versions): the attempt
 * never started, and it counts as one attempt.
 */
export class NoTaskSlot extends Schema.TaggedError<NoTaskSlot>()("NoTaskSlot", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

/**
 * A draining runner reached its drain timeout while the attempt ran, after the attempt produced output (a
 * heartbeat): the attempt was cancelled and its retry policy applies, as for a lost worker.
 */
export class WorkerShutdown extends Schema.TaggedError<WorkerShutdown>()("WorkerShutdown", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

/** The worker running an attempt stopped after the attempt produced output (a heartbeat). */
export class WorkerLost extends Schema.TaggedError<WorkerLost>()("WorkerLost", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

/**
 * A Step failed with something it did not declare: a defect (`Effect.die`, a thrown exception), or a
 * failure its error Schema cannot encode. `errorType` names what it was (a tag or a class name).
 */
export class Defect extends Schema.TaggedError<Defect>()("Defect", {
  errorType: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `${this.errorType}: ${this.detail}`
  }
}

/** The engine's own reasons a Step attempt fails, besides the errors a Step declares. */
export type StepFailure =
  | ValueTooLarge
  | MethodTimeout
  | HeartbeatTimeout
  | WorkerLost
  | WorkerShutdown
  | NoTaskSlot
  | DefinitionError
  | Defect

/** The schema of {@link StepFailure}: how the engine stores its own failures with an attempt. */
export const StepFailure: Schema.Codec<StepFailure, unknown> = Schema.Union([
  ValueTooLarge,
  MethodTimeout,
  HeartbeatTimeout,
  WorkerLost,
  WorkerShutdown,
  NoTaskSlot,
  DefinitionError,
  Defect
])

/** The tags of the engine's own Step failures. */
export type StepFailureType = StepFailure["_tag"]

/** The `_tag` of an error type, or `string` for an error without a literal tag. */
export type ErrorTag<E> = [E] extends [never] ? never : E extends { readonly _tag: infer T extends string } ? T : string

/**
 * The recovery error a failure-route Step reads (`ctx.recoveryError`): the last attempt's typed error
 * (one the failing Step declares, `E`, or one of the engine's {@link StepFailure}s), its type and
 * detail, and the furthest progress of all attempts. The error was stored with its Schema and decoded
 * again, so it is an instance of its class on whichever worker runs the route.
 */
export interface RecoveryError<E = never> {
  /** The error's tag: a declared tag, or ValueTooLarge, MethodTimeout, HeartbeatTimeout, WorkerLost, WorkerShutdown, NoTaskSlot, DefinitionError, Defect. */
  readonly errorType: ErrorTag<E> | StepFailureType
  readonly detail: string
  readonly attemptProgress: AttemptProgress
  /** The typed error. Match it with `RecoveryError.failure(r).pipe(Effect.catchTag(...))` or `RecoveryError.is`. */
  readonly error: E | StepFailure
}

/** Constructors and matchers of {@link RecoveryError}. */
export const RecoveryError = {
  /** A recovery error for `error` (its type from its tag, its detail from its message). */
  make: <E extends { readonly _tag: string; readonly message: string }>(
    error: E,
    attemptProgress: AttemptProgress
  ): RecoveryError<Exclude<E, StepFailure>> => ({
    errorType: error._tag as ErrorTag<Exclude<E, StepFailure>> | StepFailureType,
    detail: error.message,
    attemptProgress,
    error: error as Exclude<E, StepFailure> | StepFailure
  }),
  /** The typed error as a failed Effect, to handle with `Effect.catchTag` / `Effect.catchTags`. */
  failure: <E>(recovery: RecoveryError<E>): Effect.Effect<never, E | StepFailure> => Effect.fail(recovery.error),
  /** Whether the error has this tag; narrows `recovery.error`. */
  is: <E, const T extends ErrorTag<E> | StepFailureType>(
    recovery: RecoveryError<E>,
    tag: T
  ): recovery is RecoveryError<E> & {
    readonly errorType: T
    readonly error: Extract<E | StepFailure, { readonly _tag: T }>
  } => recovery.errorType === tag
}

/**
 * A client wait ran out of time: `waitForFlow` before the Flow closed, or `waitForStepExecution` (with
 * `stepExecutionId`) before the Step execution ended.
 */
export class LongPollTimeout extends Schema.TaggedError<LongPollTimeout>()("LongPollTimeout", {
  flowId: Schema.String,
  waitedMs: Schema.Number,
  stepExecutionId: Schema.optional(Schema.String)
}) {
  override get message() {
    return this.stepExecutionId === undefined
      ? `Flow ${this.flowId} did not close within ${this.waitedMs} ms`
      : `Step execution ${this.stepExecutionId} of Flow ${this.flowId} did not end within ${this.waitedMs} ms`
  }
}

/**
 * An RPC call reused a `requestId` (a client idempotency key) that an earlier call on this Flow committed with
 * another RPC or other input. Nothing was committed: a key names one request, so a retry must repeat its
 * arguments exactly, and a new request needs a new key.
 */
export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()("IdempotencyKeyReused", {
  flowId: Schema.String,
  rpc: Schema.String,
  requestId: Schema.String
}) {
  override get message() {
    return `request ID ${JSON.stringify(this.requestId)} was already used on Flow ${this.flowId} for another request than this ${this.rpc} call`
  }
}
