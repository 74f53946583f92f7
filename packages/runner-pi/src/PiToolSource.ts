/**
 * Pi tools as a session `ToolSource`: each `AgentTool` is offered with its TypeBox schema (which is JSON
 * Schema) and its effect class, and a call runs in the tool Step the way Pi's agent loop runs it
 * (`prepareArguments`, then `validateToolArguments`, then `execute` with the Step's abort signal). The
 * built-in Stepwise runner and any runner that takes a `ToolSource` can use Pi's tools this way.
 *
 * @since 0.1.0
 */
import { Errors, ToolSource, type Wire } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { runParsed } from "./internal/tools.ts"
import type { AnyPiTool, PiTool } from "./PiRunner.ts"

/** Options of {@link make}. */
export interface PiToolSourceOptions {
  /** Effect classes by tool name; wins over a tool's own `effect`. */
  readonly toolEffects?: Readonly<Record<string, Wire.ToolEffect>> | undefined
}

/**
 * A source over Pi tools. A call to a name that is not listed fails with `unknown tool <name>`; inside
 * `execute`, `PiRunner.currentToolCall()` gives the call's idempotency key.
 */
export const make = (piTools: ReadonlyArray<AnyPiTool>, options?: PiToolSourceOptions): ToolSource.ToolSourceShape => {
  const tools = piTools as ReadonlyArray<PiTool<any>>
  const byName = new Map(tools.map((t) => [t.name, t]))
  const effects = options?.toolEffects ?? {}
  return {
    tools: tools.map((t) => ({
      name: t.name,
      description: t.description,
      parameters: t.parameters as unknown as { readonly [key: string]: unknown },
      ...(Object.hasOwn(effects, t.name)
        ? { effect: effects[t.name] }
        : t.effect !== undefined
          ? { effect: t.effect }
          : {})
    })),
    call: (request) => {
      const tool = byName.get(request.toolName)
      return tool === undefined
        ? Effect.fail(new Errors.ToolExecutionError({ message: `unknown tool ${request.toolName}` }))
        : runParsed(tool, request.arguments, {
            toolCallId: request.toolCallId,
            idempotencyKey: request.idempotencyKey,
            attempt: request.attempt
          })
    }
  }
}

/** The source as the session's `ToolSource` layer, for `Stepwise`. */
export const layer = (
  tools: ReadonlyArray<AnyPiTool>,
  options?: PiToolSourceOptions
): Layer.Layer<ToolSource.ToolSource> => Layer.succeed(ToolSource.ToolSource, make(tools, options))
