/**
 * Running a framework tool call in its tool Step: the arguments parsed as a JSON object, validated by the
 * framework's schema, the tool's function called with the call's idempotency key, attempt and abort
 * signal, and what it returns or throws mapped onto the session's contract. One mechanism for every
 * runner's `executeDeferredToolCall`.
 *
 * @since 0.1.0
 */
import { Errors, Policy, type Runner } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/**
 * Thrown by a tool when this attempt failed in a way worth another attempt (a timeout, a 503). The call's
 * effect class then decides: retried (`read`, `idempotent_write`) or `outcome_unknown`. Any other thrown
 * error records the call `failed` with its message, which the model sees.
 *
 * @category errors
 * @since 0.1.0
 */
export class ToolRetryableError extends Error {
  override readonly name = "ToolRetryableError"
}

/**
 * What a tool's function receives besides its input.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolCallOptions {
  readonly toolCallId: string
  /** `<flowId>/<turnId>/<toolCallId>`: the same on every attempt; pass it to the system you write to. */
  readonly idempotencyKey: string
  readonly attempt: number
  /** Aborted when the Step is cancelled or times out. */
  readonly abortSignal: AbortSignal
}

/**
 * The options of {@link run}.
 *
 * @category models
 * @since 0.1.0
 */
export interface RunOptions<Input> {
  /**
   * Validates the parsed arguments with the framework's schema; a refusal is a `ToolExecutionError` (the
   * model sees it). Without it the parsed JSON object is the input.
   */
  readonly validate?:
    | ((raw: { readonly [key: string]: unknown }) => Effect.Effect<Input, Errors.ToolExecutionError>)
    | undefined
  /** The framework tool's function. */
  readonly execute: (input: Input, options: ToolCallOptions) => PromiseLike<unknown> | unknown
  /** The model-visible output of what `execute` returned; {@link outputText} by default. */
  readonly output?: ((value: unknown) => Effect.Effect<string, Errors.ToolExecutionError>) | undefined
}

/**
 * A value as tool output text: strings as they are, anything else as JSON (`null` for a value JSON cannot
 * write).
 *
 * @category conversions
 * @since 0.1.0
 */
export const outputText = (value: unknown): string =>
  typeof value === "string" ? value : (JSON.stringify(value) ?? "null")

/**
 * The call's arguments as a JSON object, or the `ToolExecutionError` the spec gives text that is not one
 * (`arguments must be a JSON object`).
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseArguments = (
  call: Runner.DeferredToolExecution
): Effect.Effect<{ readonly [key: string]: unknown }, Errors.ToolExecutionError> => {
  const parsed = Policy.parseToolArguments(call.toolCall.arguments)
  return Option.isSome(parsed)
    ? Effect.succeed(parsed.value)
    : Effect.fail(new Errors.ToolExecutionError({ message: "arguments must be a JSON object" }))
}

/**
 * The error a tool's thrown value becomes: a {@link ToolRetryableError} fails the attempt
 * (`ToolAttemptError`), anything else fails the call (`ToolExecutionError` with its message).
 *
 * @category conversions
 * @since 0.1.0
 */
export const fromThrown = (error: unknown): Errors.ToolAttemptError | Errors.ToolExecutionError =>
  error instanceof ToolRetryableError
    ? new Errors.ToolAttemptError({ message: error.message })
    : new Errors.ToolExecutionError({ message: error instanceof Error ? error.message : String(error) })

/**
 * The error for a call to a tool the runner does not have (`unknown tool <name>`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const unknownTool = (call: Runner.DeferredToolExecution): Errors.ToolExecutionError =>
  new Errors.ToolExecutionError({ message: `unknown tool ${call.toolCall.toolName}` })

/**
 * Runs one framework tool call in its tool Step: parses the arguments, validates them, calls `execute`
 * with the call's options (its abort signal follows the Step's interruption), and returns the output text.
 *
 * @category constructors
 * @since 0.1.0
 */
export const run = <Input>(
  call: Runner.DeferredToolExecution,
  options: RunOptions<Input>
): Effect.Effect<Runner.ToolExecutionResult, Errors.ToolExecutionError | Errors.ToolAttemptError> =>
  Effect.gen(function* () {
    const raw = yield* parseArguments(call)
    const input = options.validate === undefined ? (raw as Input) : yield* options.validate(raw)
    const value = yield* Effect.tryPromise({
      try: (abortSignal) =>
        Promise.resolve(
          options.execute(input, {
            toolCallId: call.toolCall.toolCallId,
            idempotencyKey: call.idempotencyKey,
            attempt: call.attempt,
            abortSignal
          })
        ),
      catch: fromThrown
    })
    const output = options.output === undefined ? outputText(value) : yield* options.output(value)
    return { output }
  })
