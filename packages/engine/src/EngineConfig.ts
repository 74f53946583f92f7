/**
 * The engine's limits, as a service every engine layer provides. Applications read it to learn the
 * configured limits; engine layers take the same fields as options.
 *
 * @since 0.2.0
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"

/** The engine's configurable limits. */
export interface EngineConfigShape {
  /** Largest stored value (attribute, message, Step input); default 16 MiB. */
  readonly maxValueBytes: number
  /** Largest stream message; default 100 KiB. */
  readonly maxStreamMessageBytes: number
}

/** The engine configuration service. */
export class EngineConfig extends Context.Service<EngineConfig, EngineConfigShape>()(
  "@durable-agent/engine/EngineConfig"
) {
  static readonly defaults: EngineConfigShape = {
    maxValueBytes: 16 * 1024 * 1024,
    maxStreamMessageBytes: 100 * 1024
  }
  /** The defaults, with the given fields replaced. */
  static readonly layer = (config?: Partial<EngineConfigShape>) =>
    Layer.succeed(EngineConfig, { ...EngineConfig.defaults, ...config })
}
