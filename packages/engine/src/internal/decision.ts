// Step options as stored, decisions and attempt outcomes in their stored form, and error details.
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Schema from "effect/Schema"
import {
  AttemptProgress,
  Defect,
  DefinitionError,
  HeartbeatTimeout,
  MethodTimeout,
  NoTaskSlot,
  type RecoveryError,
  StepFailure,
  ValueTooLarge,
  WorkerLost,
  WorkerShutdown
} from "../Errors.ts"
import type { AnyStepDef, RetryPolicy, StepDecision, StepOptions } from "../Flow.ts"
import type { RegisteredFlow } from "./registry.ts"
import { byteLength, decodeJson, encodeJson, lockNames } from "./state.ts"

export interface ResolvedOptions {
  readonly timeoutMs: number | null
  readonly heartbeatTimeoutMs: number | null
  readonly maxAttempts: number | null
  readonly initialIntervalMs: number
  readonly backoffCoefficient: number
  readonly maximumIntervalMs: number
  readonly totalDurationMs: number | null
  readonly failureRoute: string | null
  readonly waitForFailure: "fail" | "proceed"
  readonly locks: ReadonlyArray<string>
  /** How a failing `waitFor` is evaluated again (`options.waitFor.retry`); absent: evaluated once. */
  readonly waitForRetry?: ResolvedRetry | null | undefined
}

export interface ResolvedRetry {
  readonly maxAttempts: number | null
  readonly initialIntervalMs: number
  readonly backoffCoefficient: number
  readonly maximumIntervalMs: number
  readonly totalDurationMs: number | null
}

const resolveRetry = (retry: RetryPolicy): ResolvedRetry => ({
  maxAttempts: retry.maxAttempts ?? null,
  initialIntervalMs: ms(retry.initialInterval) ?? 1000,
  backoffCoefficient: retry.backoffCoefficient ?? 2,
  maximumIntervalMs: ms(retry.maximumInterval) ?? 100_000,
  totalDurationMs: ms(retry.totalDuration)
})

/** The backoff before attempt `attempt + 1`, or `null` when the policy allows no more attempts. */
export const retryDelay = (retry: ResolvedRetry, attempt: number, elapsedMs: number): number | null => {
  if (retry.maxAttempts !== null && attempt >= retry.maxAttempts) return null
  const delay = Math.min(retry.initialIntervalMs * retry.backoffCoefficient ** (attempt - 1), retry.maximumIntervalMs)
  return retry.totalDurationMs !== null && elapsedMs + delay > retry.totalDurationMs ? null : delay
}

export const ms = (d: Duration.Input | undefined): number | null =>
  d === undefined ? null : Duration.toMillis(Duration.fromInputUnsafe(d))

export const resolveOptions = (base: StepOptions | undefined, override: StepOptions | undefined): ResolvedOptions => {
  const execute = { ...base?.execute, ...override?.execute }
  const retry = { ...base?.execute?.retry, ...override?.execute?.retry }
  const route = override?.onExecuteFailure ?? base?.onExecuteFailure
  const hb = ms(override?.heartbeatTimeout ?? base?.heartbeatTimeout)
  const waitForRetry =
    base?.waitFor?.retry === undefined && override?.waitFor?.retry === undefined
      ? null
      : resolveRetry({ ...base?.waitFor?.retry, ...override?.waitFor?.retry })
  return {
    timeoutMs: ms(execute.timeout),
    heartbeatTimeoutMs: hb === 0 ? null : hb,
    maxAttempts: retry.maxAttempts ?? null,
    initialIntervalMs: ms(retry.initialInterval) ?? 1000,
    backoffCoefficient: retry.backoffCoefficient ?? 2,
    maximumIntervalMs: ms(retry.maximumInterval) ?? 100_000,
    totalDurationMs: ms(retry.totalDuration),
    failureRoute: route?.type ?? null,
    waitForFailure: override?.waitForFailure ?? base?.waitForFailure ?? "fail",
    locks: lockNames(execute.locks),
    waitForRetry
  }
}

export const EncodedMovement = Schema.Struct({ step: Schema.String, input: Schema.String, options: Schema.String })
export type EncodedMovement = typeof EncodedMovement.Type

export const EncodedDecision = Schema.Union([
  Schema.Struct({
    _tag: Schema.Literal("Next"),
    movements: Schema.Array(EncodedMovement),
    cancel: Schema.Array(Schema.String)
  }),
  Schema.Struct({ _tag: Schema.Literal("DeadEnd"), cancel: Schema.Array(Schema.String) }),
  Schema.Struct({
    _tag: Schema.Literals(["GracefulComplete", "ForceComplete"]),
    output: Schema.NullOr(Schema.String),
    cancel: Schema.Array(Schema.String)
  }),
  Schema.Struct({ _tag: Schema.Literal("ForceFail"), reason: Schema.String, cancel: Schema.Array(Schema.String) })
])
export type EncodedDecision = typeof EncodedDecision.Type

export const AttrWriteSchema = Schema.Struct({
  name: Schema.String,
  key: Schema.String,
  value: Schema.NullOr(Schema.String)
})
const PublishSchema = Schema.Struct({ channel: Schema.String, key: Schema.String, value: Schema.String })

export const Outcome = Schema.Union([
  Schema.Struct({
    _tag: Schema.Literal("Success"),
    writes: Schema.Array(AttrWriteSchema),
    publishes: Schema.Array(PublishSchema),
    decision: EncodedDecision,
    /** Stream messages the attempt staged: written with the transition that commits this outcome. */
    streams: Schema.optional(
      Schema.Array(Schema.Struct({ stream: Schema.String, value: Schema.String, bytes: Schema.Number }))
    )
  }),
  Schema.Struct({
    _tag: Schema.Literal("Failure"),
    errorType: Schema.String,
    detail: Schema.String,
    retryable: Schema.Boolean,
    /** `false` when the attempt never reached the Step's code (its definition was missing). */
    reached: Schema.optional(Schema.Boolean),
    /** The typed error as JSON, encoded with the Step's error Schema, or with `StepFailure` for the engine's. */
    error: Schema.optional(Schema.String)
  })
])
export type Outcome = typeof Outcome.Type
export type FailureOutcome = Outcome & { readonly _tag: "Failure" }

const engineFailures = [
  ValueTooLarge,
  MethodTimeout,
  HeartbeatTimeout,
  WorkerLost,
  WorkerShutdown,
  NoTaskSlot,
  DefinitionError,
  Defect
] as const
const engineTags: ReadonlySet<string> = new Set([
  "ValueTooLarge",
  "MethodTimeout",
  "HeartbeatTimeout",
  "WorkerLost",
  "WorkerShutdown",
  "NoTaskSlot",
  "DefinitionError",
  "Defect"
] satisfies ReadonlyArray<StepFailure["_tag"]>)

const isStepFailure = (e: unknown): e is StepFailure => engineFailures.some((c) => e instanceof c)

/** The failed outcome of one of the engine's own failures. */
export const engineFailure = (error: StepFailure, retryable: boolean, reached?: boolean): FailureOutcome => ({
  _tag: "Failure",
  errorType: error._tag,
  detail: error.message,
  retryable,
  ...(reached === undefined ? {} : { reached }),
  error: encodeJson(StepFailure, error)
})

/**
 * The failed outcome of an attempt's cause: a failure the Step declares (stored with its error Schema), one
 * of the engine's failures, or else a `Defect` (a die, or a failure its Schema cannot encode).
 */
export const failureOf = (cause: Cause.Cause<unknown>, errorSchema: Schema.Codec<unknown, any> | undefined) => {
  const failure = cause.reasons.find(Cause.isFailReason)
  if (failure !== undefined) {
    const e = failure.error
    // an oversized or malformed decision fails the same way on every attempt
    if (isStepFailure(e)) return engineFailure(e, !(e instanceof ValueTooLarge || e instanceof DefinitionError))
    if (errorSchema !== undefined) {
      try {
        const error = encodeJson(errorSchema, e)
        return { _tag: "Failure", ...errorInfo(cause), retryable: true, error } satisfies FailureOutcome
      } catch {
        // not a declared error: a Defect below
      }
    }
  }
  return engineFailure(new Defect(errorInfo(cause)), true)
}

/** A recovery error as a failure route's Step row stores it. */
export const StoredRecovery = Schema.Struct({
  errorType: Schema.String,
  detail: Schema.String,
  attemptProgress: AttemptProgress,
  /** The failing Step's type, whose error Schema decodes `error`. */
  stepType: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String)
})
export type StoredRecovery = typeof StoredRecovery.Type

/** The typed recovery error of a stored one, decoded with the failing Step's error Schema (or the engine's). */
export const decodeRecovery = (registered: RegisteredFlow, stored: StoredRecovery): RecoveryError<unknown> => {
  let error: unknown
  if (stored.error !== undefined) {
    try {
      if (engineTags.has(stored.errorType)) error = decodeJson(StepFailure, stored.error)
      else {
        const schema = stored.stepType === undefined ? undefined : registered.steps.get(stored.stepType)?.error
        if (schema !== undefined) error = decodeJson(schema, stored.error)
      }
    } catch {
      // the Schema changed since: a Defect below
    }
  }
  if (error === undefined) {
    error =
      stored.errorType === "WorkerLost"
        ? new WorkerLost({ detail: stored.detail })
        : new Defect({ errorType: stored.errorType, detail: stored.detail })
  }
  const tag = (error as { readonly _tag?: unknown })._tag
  return {
    errorType: typeof tag === "string" ? tag : stored.errorType,
    detail: stored.detail,
    attemptProgress: stored.attemptProgress,
    error
  }
}

/** The error type and detail of a failed attempt, RPC or waitFor. */
export const errorInfo = (cause: Cause.Cause<unknown>): { errorType: string; detail: string } => {
  const failure = cause.reasons.find(Cause.isFailReason)
  const value: unknown = failure ? failure.error : cause.reasons.find(Cause.isDieReason)?.defect
  if (value !== null && typeof value === "object") {
    const v = value as { _tag?: unknown; name?: unknown; message?: unknown }
    // a subclass of Error that does not set its own `name` is known by its class name
    const className = (value as object).constructor?.name
    const errorType =
      typeof v._tag === "string"
        ? v._tag
        : typeof v.name === "string" && v.name !== "Error"
          ? v.name
          : className !== undefined && className !== "Object" && className !== ""
            ? className
            : "Error"
    const detail = typeof v.message === "string" && v.message !== "" ? v.message : safeJson(value)
    return { errorType, detail }
  }
  if (value !== undefined) return { errorType: "Error", detail: String(value) }
  return { errorType: "Interrupted", detail: Cause.pretty(cause) }
}

export const safeJson = (v: unknown) => {
  try {
    return JSON.stringify(v) ?? String(v)
  } catch {
    return String(v)
  }
}

export const encodeMovement = (
  step: AnyStepDef,
  input: unknown,
  override: StepOptions | undefined,
  maxValueBytes: number
): EncodedMovement => {
  const inputJson = encodeJson(step.input, input)
  if (byteLength(inputJson) > maxValueBytes) {
    throw new ValueTooLarge({ name: `${step.type} input`, bytes: byteLength(inputJson), limit: maxValueBytes })
  }
  return { step: step.type, input: inputJson, options: JSON.stringify(resolveOptions(step.options, override)) }
}

export const encodeDecision = (decision: StepDecision, maxValueBytes: number): EncodedDecision => {
  switch (decision._tag) {
    case "Next":
      if (decision.movements.length === 0) {
        throw new DefinitionError({ flowType: "", reason: "goTo/goToMany requires a movement" })
      }
      return {
        _tag: "Next",
        movements: decision.movements.map((m) => encodeMovement(m.step, m.input, m.options, maxValueBytes)),
        cancel: decision.cancel
      }
    case "DeadEnd":
      return { _tag: "DeadEnd", cancel: decision.cancel }
    case "GracefulComplete":
    case "ForceComplete":
      return {
        _tag: decision._tag,
        output: decision.output === undefined ? null : safeJson(decision.output),
        cancel: decision.cancel
      }
    case "ForceFail":
      return { _tag: "ForceFail", reason: decision.reason, cancel: decision.cancel }
  }
}

/** Size checks of a Step result: the first oversized value, if any. */
export const oversized = (outcome: Outcome & { _tag: "Success" }, limit: number): ValueTooLarge | undefined => {
  for (const w of outcome.writes) {
    if (w.value !== null && byteLength(w.value) > limit) {
      return new ValueTooLarge({ name: `${w.name}${w.key ? `[${w.key}]` : ""}`, bytes: byteLength(w.value), limit })
    }
  }
  for (const p of outcome.publishes) {
    if (byteLength(p.value) > limit) return new ValueTooLarge({ name: p.channel, bytes: byteLength(p.value), limit })
  }
  if (outcome.decision._tag === "Next") {
    for (const m of outcome.decision.movements) {
      if (byteLength(m.input) > limit)
        return new ValueTooLarge({ name: `${m.step} input`, bytes: byteLength(m.input), limit })
    }
  }
  return undefined
}
