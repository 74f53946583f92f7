/**
 * `ToolSource`: the tools of the built-in Stepwise loop. A source lists tool definitions (offered to the
 * model, with an optional effect class as framework metadata) and runs one call at a time inside a tool
 * Step. `ToolSource.layer(tools)` builds one from plain tool definitions with Effect handlers.
 *
 * @since 0.1.0
 */
import * as AiTool from "effect/ai/Tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { type ToolAttemptError, ToolExecutionError } from "./Errors.ts"
import type { EventWriter } from "./EventWriter.ts"
import type { Heartbeat } from "./Heartbeat.ts"
import type { ModelToolDefinition } from "./ModelClient.ts"
import { effectHints } from "./Policy.ts"
import {
  isToolInputRequested,
  type ToolExecutionResult,
  type ToolInputRequested,
  type ToolTaskPollOutcome,
  type ToolTaskStarted
} from "./Runner.ts"
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
  /** The user's answers to the questions this call asked so far. */
  readonly inputAnswers?: ReadonlyArray<QuestionAnswer> | undefined
  /**
   * For a poll: the resolution of the task's last question while it has not reached the task (see
   * `ToolTaskPoll.pendingAnswer`); `null` or absent otherwise and for a cancellation.
   */
  readonly pendingAnswer?: QuestionAnswer | null | undefined
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
 * A tool with an Effect handler, as {@link tool} builds it. A string result is the output as it is; any
 * other value is encoded as JSON. `R` is what the handler needs besides `EventWriter` and `Heartbeat` (the
 * session provides those per call); {@link ToolSource.layer} takes it from its context.
 *
 * @category models
 * @since 0.1.0
 */
export interface Tool<R = never> extends ToolDefinition {
  /** The effect/ai tool this one is: `Tool.make` for a Schema, `Tool.dynamic` for JSON Schema parameters. */
  readonly aiTool: AiTool.Any
  readonly handler: (
    args: { readonly [key: string]: unknown },
    request: ToolCallRequest
  ) => Effect.Effect<unknown, ToolCallError, R | EventWriter | Heartbeat>
}

/**
 * What {@link tool} takes besides its parameters.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolOptions {
  readonly name: string
  readonly description: string
  /** The effect class; without it the session's `ToolPolicy`, then its default, decides. */
  readonly effect?: ToolEffect | undefined
  readonly toolSourceReference?: string | undefined
}

/** The effect/ai annotations that say the effect class: the session's one mapping (`Policy.effectHints`). */
const annotate = (aiTool: AiTool.Any, effect: ToolEffect | undefined): AiTool.Any => {
  if (effect === undefined) return aiTool
  const hints = effectHints(effect)
  let annotated = aiTool
  if (hints.readOnlyHint !== undefined) annotated = annotated.annotate(AiTool.Readonly, hints.readOnlyHint)
  if (hints.idempotentHint !== undefined) annotated = annotated.annotate(AiTool.Idempotent, hints.idempotentHint)
  if (hints.destructiveHint !== undefined) annotated = annotated.annotate(AiTool.Destructive, hints.destructiveHint)
  return annotated
}

/**
 * Declares a tool: a thin helper over effect/ai's `Tool.make` (with a Schema) or `Tool.dynamic` (with JSON
 * Schema, or none: any object), plus its handler. With a Schema the handler gets the decoded, typed
 * arguments, and arguments that do not decode fail the call with a {@link ToolExecutionError} the model
 * sees. The handler may use any service; `ToolSource.layer` requires them.
 *
 * For a set of tools with their own handler layers, an effect/ai `Toolkit` through `ToolkitSource` is the
 * other way in.
 *
 * @example
 * ```ts
 * const getWeather = tool({
 *   name: "get_weather",
 *   description: "The weather of a city.",
 *   effect: "read",
 *   parameters: Schema.Struct({ city: Schema.String }),
 *   handler: ({ city }) => Effect.flatMap(WeatherApi, (api) => api.current(city))
 * })
 * const tools = ToolSource.layer([getWeather]) // Layer<ToolSource, never, WeatherApi>
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export function tool<S extends Schema.Top, R = never>(
  definition: ToolOptions & {
    readonly parameters: S
    readonly handler: (
      args: S["Type"],
      request: ToolCallRequest
    ) => Effect.Effect<unknown, ToolCallError, R | EventWriter | Heartbeat>
  }
): Tool<Exclude<R, EventWriter | Heartbeat> | S["DecodingServices"]>
export function tool<R = never>(
  definition: ToolOptions & {
    /** JSON Schema of the arguments; default: any object. */
    readonly parameters?: { readonly [key: string]: unknown } | undefined
    readonly handler: (
      args: { readonly [key: string]: unknown },
      request: ToolCallRequest
    ) => Effect.Effect<unknown, ToolCallError, R | EventWriter | Heartbeat>
  }
): Tool<Exclude<R, EventWriter | Heartbeat>>
export function tool(
  definition: ToolOptions & {
    readonly parameters?: Schema.Top | { readonly [key: string]: unknown } | undefined
    readonly handler: (args: never, request: ToolCallRequest) => Effect.Effect<unknown, ToolCallError, unknown>
  }
): Tool<unknown> {
  const { parameters, handler, ...rest } = definition
  const handle = handler as (args: unknown, request: ToolCallRequest) => Effect.Effect<unknown, ToolCallError, unknown>
  if (Schema.isSchema(parameters)) {
    const schema = parameters as Schema.Top
    const aiTool = annotate(
      AiTool.make(definition.name, { description: definition.description, parameters: schema }),
      definition.effect
    )
    const decode = Schema.decodeUnknownEffect(schema as Schema.Codec<unknown, unknown, unknown, unknown>)
    return {
      ...rest,
      aiTool,
      parameters: AiTool.getJsonSchema(aiTool) as { readonly [key: string]: unknown },
      handler: (args, request) =>
        decode(args).pipe(
          Effect.mapError(
            (issue) => new ToolExecutionError({ message: `invalid arguments for ${definition.name}: ${issue.message}` })
          ),
          Effect.flatMap((decoded) => handle(decoded, request))
        )
    }
  }
  const jsonSchema = (parameters as { readonly [key: string]: unknown } | undefined) ?? {
    type: "object",
    additionalProperties: true
  }
  const aiTool = annotate(
    AiTool.dynamic(definition.name, { description: definition.description, parameters: jsonSchema as never }),
    definition.effect
  )
  return { ...rest, aiTool, parameters: jsonSchema, handler: handle }
}

/**
 * A source over a list of tools whose handlers need nothing beyond `EventWriter` and `Heartbeat`. A call to
 * a name that is not listed fails with {@link ToolExecutionError} `unknown tool <name>`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromTools = (tools: ReadonlyArray<Tool>): ToolSourceShape => fromToolsWith(tools, Context.empty())

const fromToolsWith = <R>(
  tools: ReadonlyArray<Tool<R>>,
  services: Context.Context<Exclude<R, EventWriter | Heartbeat>>
): ToolSourceShape => {
  const byName = new Map(tools.map((t) => [t.name, t]))
  return {
    tools: tools.map(({ handler: _handler, aiTool: _aiTool, ...definition }) => definition),
    call: Effect.fnUntraced(function* (request: ToolCallRequest) {
      const found = byName.get(request.toolName)
      if (found === undefined) {
        return yield* new ToolExecutionError({ message: `unknown tool ${request.toolName}` })
      }
      // The handler's own services were captured when the layer was built; EventWriter and Heartbeat come per call.
      const value = yield* Effect.updateContext(
        found.handler(request.arguments, request),
        (context: Context.Context<EventWriter | Heartbeat>) =>
          Context.merge(services, context) as Context.Context<R | EventWriter | Heartbeat>
      )
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
  /** A source over a list of tools; requires what their handlers need besides `EventWriter` and `Heartbeat`. */
  static readonly layer = <R = never>(
    tools: ReadonlyArray<Tool<R>>
  ): Layer.Layer<ToolSource, never, Exclude<R, EventWriter | Heartbeat>> =>
    Layer.effect(
      ToolSource,
      Effect.map(Effect.context<Exclude<R, EventWriter | Heartbeat>>(), (services) => fromToolsWith(tools, services))
    )

  /** A source with no tools. */
  static readonly layerEmpty: Layer.Layer<ToolSource> = Layer.succeed(ToolSource, fromTools([]))
}

/**
 * A `ToolSource` layer of `tools`; it requires the services their handlers use besides `EventWriter` and
 * `Heartbeat`, which the session provides to every attempt.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: <R = never>(
  tools: ReadonlyArray<Tool<R>>
) => Layer.Layer<ToolSource, never, Exclude<R, EventWriter | Heartbeat>> = ToolSource.layer

/**
 * A `ToolSource` with no tools.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerEmpty: Layer.Layer<ToolSource> = ToolSource.layerEmpty
