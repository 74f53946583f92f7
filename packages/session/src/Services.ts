/**
 * The per-Step services a runner and a tool see: `EventWriter` (best-effort `AgentEvents` writes stamped
 * with the turn, the Step execution and the attempt) and `Heartbeat` (durable heartbeats with an optional
 * checkpoint). The session builds both from the engine's Step context for every attempt and provides them
 * to the runner; tests use the `layerNoop` and `layerTest` variants.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

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
 * The service shape of {@link Heartbeat}.
 *
 * @category models
 * @since 0.1.0
 */
export interface HeartbeatShape {
  /**
   * A durable heartbeat; resolves once persisted. A checkpoint, when given, is kept for the next attempt of
   * the same Step (`checkpoint`).
   */
  readonly beat: (checkpoint?: unknown) => Effect.Effect<void>
  /** The checkpoint an earlier attempt of this Step saved with `beat`. */
  readonly checkpoint: Option.Option<unknown>
}

/**
 * Durable heartbeats of the current Step attempt. The session heartbeats RunModel and tool Steps every
 * 20 seconds on its own; runners and tools call it to save a checkpoint.
 *
 * @category services
 * @since 0.1.0
 */
export class Heartbeat extends Context.Service<Heartbeat, HeartbeatShape>()("@durable-agent/session/Heartbeat") {
  /** A heartbeat that does nothing and has no checkpoint. */
  static readonly layerNoop: Layer.Layer<Heartbeat> = Layer.succeed(Heartbeat, {
    beat: () => Effect.void,
    checkpoint: Option.none()
  })

  /** A heartbeat that records every checkpoint in `sink` and starts from `checkpoint`, for tests. */
  static readonly layerTest = (sink: Array<unknown>, checkpoint?: unknown): Layer.Layer<Heartbeat> =>
    Layer.succeed(Heartbeat, {
      beat: (cp) => Effect.sync(() => void sink.push(cp)),
      checkpoint: Option.fromUndefinedOr(checkpoint)
    })
}
