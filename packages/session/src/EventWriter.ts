/**
 * `EventWriter`: best-effort `AgentEvents` writes stamped with the turn, the Step execution and the
 * attempt. The session builds one for every Step attempt from the engine's Step context and provides it to
 * the runner and the tools; decorators (`layerEventWriterDecorator`) wrap it at the edge, and tests use
 * `layerNoop` and `layerTest`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * One event as a runner writes it: its type and its payload as a JSON object (snake_case keys).
 *
 * @category models
 * @since 0.1.0
 */
export interface WrittenEvent {
  readonly type: string
  readonly payload: { readonly [key: string]: unknown }
}

/**
 * The service shape of {@link EventWriter}.
 *
 * @category models
 * @since 0.1.0
 */
export interface EventWriterShape {
  /** Writes a `text_delta` event. */
  readonly textDelta: (text: string) => Effect.Effect<void>
  /** Writes a `reasoning_delta` event. */
  readonly reasoningDelta: (text: string) => Effect.Effect<void>
  /** Writes any event; adapter-specific types use an adapter prefix such as `stepwise.note`. Never fails. */
  readonly write: (event: WrittenEvent) => Effect.Effect<void>
}

/**
 * Writes `AgentEvents` for the current Step attempt. Writes are best effort: they never fail the Step.
 *
 * @category services
 * @since 0.1.0
 */
export class EventWriter extends Context.Service<EventWriter, EventWriterShape>()(
  "@durable-agent/session/EventWriter"
) {
  /** Builds a writer from a function that writes one event. */
  static readonly make = (write: (event: WrittenEvent) => Effect.Effect<void>): EventWriterShape => ({
    write,
    textDelta: (text) => write({ type: "text_delta", payload: { text } }),
    reasoningDelta: (text) => write({ type: "reasoning_delta", payload: { text } })
  })

  /** A writer that drops every event. */
  static readonly layerNoop: Layer.Layer<EventWriter> = Layer.succeed(
    EventWriter,
    EventWriter.make(() => Effect.void)
  )

  /** A writer that appends every event to `sink`, for tests. */
  static readonly layerTest = (sink: Array<WrittenEvent>): Layer.Layer<EventWriter> =>
    Layer.succeed(
      EventWriter,
      EventWriter.make((event) => Effect.sync(() => void sink.push(event)))
    )
}

/**
 * Where an event writer writes for: the Flow, turn, Step execution and attempt.
 *
 * @category models
 * @since 0.1.0
 */
export interface EventWriterScope {
  readonly flowId: string
  readonly turnId: string | null
  readonly stepExecutionId: string
  readonly attempt: number
}

/**
 * Wraps the `EventWriter` the session builds for each Step attempt, for example to mirror events to a second
 * sink. Provide it to the worker layer with {@link layerEventWriterDecorator}; decorators compose, the last
 * provided outermost.
 *
 * @category models
 * @since 0.1.0
 */
export type EventWriterDecorator = (writer: EventWriterShape, scope: EventWriterScope) => EventWriterShape

/**
 * The decorators of the per-attempt `EventWriter`; none by default.
 *
 * @category references
 * @since 0.1.0
 */
export const EventWriterDecorators: Context.Reference<ReadonlyArray<EventWriterDecorator>> = Context.Reference<
  ReadonlyArray<EventWriterDecorator>
>("@durable-agent/session/EventWriterDecorators", { defaultValue: () => [] })

/**
 * Adds a decorator of the per-attempt `EventWriter`; provide it to the worker layer.
 *
 * @example
 * ```ts
 * const mirror = layerEventWriterDecorator((writer, scope) =>
 *   EventWriter.make((event) => Effect.andThen(writer.write(event), sink.publish({ ...scope, event })))
 * )
 * const worker = AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(runner), Layer.provide(mirror))
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerEventWriterDecorator = (decorate: EventWriterDecorator): Layer.Layer<never> =>
  Layer.effect(
    EventWriterDecorators,
    Effect.map(Effect.service(EventWriterDecorators), (current) => [...current, decorate])
  )

/**
 * Builds a writer from a function that writes one event.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: (write: (event: WrittenEvent) => Effect.Effect<void>) => EventWriterShape = EventWriter.make

/**
 * A writer that drops every event.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerNoop: Layer.Layer<EventWriter> = EventWriter.layerNoop

/**
 * A writer that appends every event to `sink`, for tests.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerTest: (sink: Array<WrittenEvent>) => Layer.Layer<EventWriter> = EventWriter.layerTest
