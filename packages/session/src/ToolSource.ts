/**
 * `ToolSource`: the tools of the built-in Stepwise loop. A source lists tool definitions (offered to the
 * model, with an optional effect class as framework metadata) and runs one call at a time inside a tool
 * Step. `ToolSource.layer(tools)` builds one from plain tool definitions with Effect handlers.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type ToolAttemptError, ToolExecutionError } from "./Errors.ts"
import type { ModelToolDefinition } from "./ModelClient.ts"
import {
  isToolInputRequested,
  type ToolExecutionResult,
  type ToolInputRequested,
  type ToolTaskPollOutcome,
  type ToolTaskStarted
} from "./Runner.ts"
import type { EventWriter, Heartbeat } from "./Services.ts"
import type { QuestionAnswer, ToolEffect } from "./wire/index.ts"

/**
 * A tool as a source lists it: the model-facing definition plus its effect class, when the source knows
 * it (framework metadata that a `ToolPolicy` overrides).
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolDefinition extends ModelToolDefinition {
  readonly effect?: ToolEffect | undefined
  /**
   * Where the source finds the tool again (for MCP, the server and the tool's own name), stored on the call's
   * record as `tool_source_reference` and handed back in {@link ToolCallRequest}, so a tool Step needs no
   * listing.
   */
  readonly toolSourceReference?: string | undefined
}

/**
 * One call as a tool Step hands it to a source. `idempotencyKey` is `<flowId>/<turnId>/<toolCallId>` and
 * the same on every attempt.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolCallRequest {
  readonly flowId: string
  readonly turnId: string
  readonly toolCallId: string
  readonly toolName: string
  readonly arguments: { readonly [key: string]: unknown }
  readonly argumentsText: string
  readonly idempotencyKey: string
  readonly attempt: number
  readonly toolSourceReference: string | null
  /**
   * Whether the runner polls tasks: the source may then return a `ToolTaskStarted` (after saving its handle
   * with `Heartbeat.beat(checkpoint)`); without it, the source runs its remote work to the end in the call.
   */
  readonly supportsToolTasks?: boolean | undefined
  /** The user's answers to the questions this call asked so far (a tool asks by returning `toolInputRequested`). */
  readonly inputAnswers?: ReadonlyArray<QuestionAnswer> | undefined
}

/**
 * One poll, or one cancellation, of a task a source started, as PollToolTask and CancelToolTask hand it on.
 * `pollIntervalSeconds` is the interval that just passed; `continuation` is what the last
 * `ToolTaskPending` returned.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolTaskRequest {
  readonly flowId: string
  readonly turnId: string
  readonly toolCallId: string
  readonly toolName: string
  readonly taskId: string
  readonly pollIntervalSeconds: number
  readonly continuation: string | null
  readonly toolSourceReference: string | null
  readonly idempotencyKey: string
  readonly attempt: number
}

/**
 * What a tool call may fail with: {@link ToolExecutionError} (the model sees it) or
 * {@link ToolAttemptError} (the attempt fails and the effect class decides).
 *
 * @category models
 * @since 0.1.0
 */
export type ToolCallError = ToolExecutionError | ToolAttemptError

/**
 * The service shape of {@link ToolSource}.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolSourceShape {
  readonly tools: ReadonlyArray<ToolDefinition>
  readonly call: (
    request: ToolCallRequest
  ) => Effect.Effect<ToolExecutionResult | ToolTaskStarted | ToolInputRequested, ToolCallError, EventWriter | Heartbeat>
  /** Polls a task that `call` started, once; sources whose calls return `ToolTaskStarted` define it. */
  readonly pollToolTask?:
    | ((request: ToolTaskRequest) => Effect.Effect<ToolTaskPollOutcome, ToolCallError, EventWriter | Heartbeat>)
    | undefined
  /** Cancels a task that `call` started, best effort and idempotent by task ID. */
  readonly cancelToolTask?:
    | ((request: ToolTaskRequest) => Effect.Effect<void, ToolCallError, EventWriter | Heartbeat>)
    | undefined
}

/**
 * A tool with an Effect handler. A string result is the output as it is; any other value is encoded as
 * JSON.
 *
 * @category models
 * @since 0.1.0
 */
export interface Tool extends ToolDefinition {
  readonly handler: (
    args: { readonly [key: string]: unknown },
    request: ToolCallRequest
  ) => Effect.Effect<unknown, ToolCallError, EventWriter | Heartbeat>
}

/**
 * Declares a tool; `parameters` defaults to an object schema that accepts any arguments.
 *
 * @category constructors
 * @since 0.1.0
 */
export const tool = (definition: Omit<Tool, "parameters"> & { readonly parameters?: Tool["parameters"] }): Tool => ({
  ...definition,
  parameters: definition.parameters ?? { type: "object", additionalProperties: true }
})

/**
 * A source over a list of tools. A call to a name that is not listed fails with
 * {@link ToolExecutionError} `unknown tool <name>`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromTools = (tools: ReadonlyArray<Tool>): ToolSourceShape => {
  const byName = new Map(tools.map((t) => [t.name, t]))
  return {
    tools: tools.map(({ handler: _handler, ...definition }) => definition),
    call: Effect.fn("ToolSource.call")(function* (request: ToolCallRequest) {
      const found = byName.get(request.toolName)
      if (found === undefined) {
        return yield* new ToolExecutionError({ message: `unknown tool ${request.toolName}` })
      }
      const value = yield* found.handler(request.arguments, request)
      if (typeof value === "object" && value !== null && isToolInputRequested(value as ToolExecutionResult)) {
        return value as ToolInputRequested
      }
      return { output: typeof value === "string" ? value : (JSON.stringify(value) ?? "null") }
    })
  }
}

/**
 * The tools the built-in Stepwise loop offers and runs.
 *
 * @category services
 * @since 0.1.0
 */
export class ToolSource extends Context.Service<ToolSource, ToolSourceShape>()("@durable-agent/session/ToolSource") {
  /** A source over a list of tools. */
  static readonly layer = (tools: ReadonlyArray<Tool>): Layer.Layer<ToolSource> =>
    Layer.succeed(ToolSource, fromTools(tools))

  /** A source with no tools. */
  static readonly layerEmpty: Layer.Layer<ToolSource> = Layer.succeed(ToolSource, fromTools([]))
}
