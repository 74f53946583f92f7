/**
 * `Heartbeat`: durable heartbeats of the current Step attempt, with an optional checkpoint the next attempt
 * of the same Step reads. The session builds it for every attempt and provides it to the runner and the
 * tools; tests use `layerNoop` and `layerTest`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

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

/**
 * A heartbeat that does nothing and has no checkpoint.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerNoop: Layer.Layer<Heartbeat> = Heartbeat.layerNoop

/**
 * A heartbeat that records every checkpoint in `sink` and starts from `checkpoint`, for tests.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerTest: (sink: Array<unknown>, checkpoint?: unknown) => Layer.Layer<Heartbeat> = Heartbeat.layerTest
