/**
 * An effect/ai `Toolkit` as the session's `ToolSource`. Tools are declared with `Tool.make(name, { parameters,
 * success, failure, dependencies })`, their handlers come from `toolkit.toLayer(...)` with typed arguments and
 * their own services, and the session runs each call in its own Step.
 *
 * The effect class of a tool is its `ToolPolicy` when the session has one, else its annotations:
 * `Tool.Readonly` is `read`, `Tool.Idempotent` is `idempotent_write`; any other tool gets the session's
 * `defaultToolEffect`. A handler that declares `EventWriter` or `Heartbeat` among its `dependencies` gets the
 * current Step attempt's.
 *
 * A handler's typed failure (and an argument that does not decode) is a `ToolExecutionError`: recorded
 * `failed` and shown to the model. A defect fails the attempt, so the effect class decides a retry.
 *
 * @example
 * ```ts
 * import { Tool, Toolkit } from "effect/ai"
 *
 * const GetWeather = Tool.make("get_weather", {
 *   description: "The weather of a city.",
 *   parameters: Schema.Struct({ city: Schema.String }),
 *   success: Schema.Struct({ city: Schema.String, temperature: Schema.Number })
 * }).annotate(Tool.Readonly, true)
 * const Tools = Toolkit.make(GetWeather)
 * const handlers = Tools.toLayer(
 *   Effect.gen(function* () {
 *     const api = yield* WeatherApi
 *     return { get_weather: ({ city }) => api.current(city) }
 *   })
 * )
 * const tools = ToolkitSource.layer(Tools).pipe(Layer.provide(handlers), Layer.provide(WeatherApi.layer))
 * ```
 *
 * @since 0.1.0
 */

import * as Tool from "effect/ai/Tool"
import type * as Toolkit from "effect/ai/Toolkit"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { ToolExecutionError } from "./Errors.ts"
import type { EventWriter } from "./EventWriter.ts"
import type { Heartbeat } from "./Heartbeat.ts"
import { hintsEffect } from "./Policy.ts"
import { type ToolDefinition, ToolSource, type ToolSourceShape } from "./ToolSource.ts"
import type { ToolEffect } from "./wire/index.ts"

/**
 * The effect class a tool's annotations give: `Readonly` is `read`, `Idempotent` is `idempotent_write`,
 * anything else none (the session's default applies).
 *
 * @category accessors
 * @since 0.1.0
 */
export const effectOf = (tool: Tool.Any): ToolEffect | undefined =>
  hintsEffect({
    readOnlyHint: Context.get(tool.annotations, Tool.Readonly),
    idempotentHint: Context.get(tool.annotations, Tool.Idempotent),
    destructiveHint: Context.get(tool.annotations, Tool.Destructive)
  })

/** A tool result as the model's output text: strings as they are, anything else as JSON. */
const outputText = (value: unknown): string => (typeof value === "string" ? value : (JSON.stringify(value) ?? "null"))

/** The text of a failure for the model. */
const failureText = (error: unknown): string => {
  if (typeof error === "string") return error
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") {
    return error.message
  }
  return outputText(error)
}

/** The services a toolkit's handlers need, other than the ones the session provides per call. */
type HandlerServices<Tools extends Record<string, Tool.Any>> = Exclude<
  Tool.HandlerServices<Tools[keyof Tools]>,
  EventWriter | Heartbeat
>

/**
 * A tool source over a toolkit whose handlers are in context (`toolkit.toLayer(...)`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <Tools extends Record<string, Tool.Any>>(
  toolkit: Toolkit.Toolkit<Tools>
): Effect.Effect<ToolSourceShape, never, Tool.HandlersFor<Tools> | HandlerServices<Tools>> =>
  Effect.gen(function* () {
    const built = yield* toolkit
    const services = yield* Effect.context<HandlerServices<Tools>>()
    const tools: Array<ToolDefinition> = Object.values(toolkit.tools).map((tool) => ({
      name: tool.name,
      description: Tool.getDescription(tool) ?? "",
      parameters: Tool.getJsonSchema(tool) as { readonly [key: string]: unknown },
      effect: effectOf(tool)
    }))
    return {
      tools,
      call: Effect.fnUntraced(function* (request) {
        if (!Object.hasOwn(toolkit.tools, request.toolName)) {
          return yield* new ToolExecutionError({ message: `unknown tool ${request.toolName}` })
        }
        // handle's services are the tools' own type parameters: the ones captured at build time are added here,
        // and the session provides EventWriter and Heartbeat per call.
        const handled = built.handle(
          request.toolName,
          request.arguments as never,
          request.toolCallId
        ) as unknown as Effect.Effect<Stream.Stream<Tool.HandlerResult<Tool.Any>, unknown, unknown>, unknown, unknown>
        const results = yield* handled.pipe(
          Effect.flatMap(Stream.runCollect),
          Effect.catch((error) => Effect.fail(new ToolExecutionError({ message: failureText(error) }))),
          Effect.updateContext((context: Context.Context<EventWriter | Heartbeat>) =>
            Context.merge(services as Context.Context<unknown>, context)
          )
        )
        const final = Array.from(results)
          .filter((r) => !r.preliminary)
          .at(-1)
        if (final === undefined) return yield* new ToolExecutionError({ message: "the tool returned no result" })
        if (final.isFailure) return yield* new ToolExecutionError({ message: failureText(final.encodedResult) })
        return { output: outputText(final.encodedResult) }
      })
    } satisfies ToolSourceShape
  })

/**
 * The `ToolSource` layer of a toolkit; provide the toolkit's handler layer (and the handlers' services) to it.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = <Tools extends Record<string, Tool.Any>>(
  toolkit: Toolkit.Toolkit<Tools>
): Layer.Layer<ToolSource, never, Tool.HandlersFor<Tools> | HandlerServices<Tools>> =>
  Layer.effect(ToolSource, make(toolkit))
