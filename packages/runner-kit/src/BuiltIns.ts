/**
 * The session's built-in tools (ask_user, durable_wait, write_todos) as an effect/ai `Toolkit`, and the
 * ones a turn enabled. A runner offers the enabled built-ins to its framework like its own tools (from the
 * Toolkit's JSON Schemas, or `BuiltInTools.definitions`); the session routes their calls to its own Steps,
 * so the Toolkit has no handlers and a runner never executes a built-in.
 *
 * @since 0.1.0
 */
import { BuiltInTools, type Runner, type Wire } from "@durable-agent/session"
import * as Tool from "effect/ai/Tool"
import * as Toolkit from "effect/ai/Toolkit"

/**
 * A built-in's definition: its name, the description and the JSON Schema of its parameters the model sees.
 *
 * @category models
 * @since 0.1.0
 */
export type Definition = (typeof BuiltInTools.definitions)[number]

/**
 * The built-ins as effect/ai tools (`Tool.dynamic` over their JSON Schemas), read-only as the session runs
 * them.
 *
 * @category constants
 * @since 0.1.0
 */
export const tools: ReadonlyArray<Tool.Any> = BuiltInTools.definitions.map((d) =>
  Tool.dynamic(d.name, { description: d.description, parameters: d.parameters as never }).annotate(Tool.Readonly, true)
)

/**
 * The built-ins as one effect/ai `Toolkit`.
 *
 * @category constants
 * @since 0.1.0
 */
export const toolkit: Toolkit.Toolkit<Record<string, Tool.Any>> = Toolkit.make(...tools) as unknown as Toolkit.Toolkit<
  Record<string, Tool.Any>
>

/**
 * The definitions of the built-ins the turn enabled (`AgentTurnContext.enabledBuiltInTools`), in the
 * session's order.
 *
 * @category accessors
 * @since 0.1.0
 */
export const enabled = (turn: Pick<Runner.AgentTurnContext, "enabledBuiltInTools">): ReadonlyArray<Definition> =>
  BuiltInTools.definitions.filter((d) => turn.enabledBuiltInTools?.includes(d.name) === true)

/**
 * The enabled built-ins as a `Toolkit` (a subset of {@link toolkit}).
 *
 * @category accessors
 * @since 0.1.0
 */
export const enabledToolkit = (
  turn: Pick<Runner.AgentTurnContext, "enabledBuiltInTools">
): Toolkit.Toolkit<Record<string, Tool.Any>> => {
  const names = new Set<string>(enabled(turn).map((d) => d.name))
  return Toolkit.make(...tools.filter((t) => names.has(t.name))) as unknown as Toolkit.Toolkit<Record<string, Tool.Any>>
}

/**
 * Whether a tool name is a built-in the turn enabled: its call goes to the session, not to the runner.
 *
 * @category predicates
 * @since 0.1.0
 */
export const isEnabled = (
  turn: Pick<Runner.AgentTurnContext, "enabledBuiltInTools">,
  name: string
): name is Wire.BuiltInToolName =>
  BuiltInTools.isBuiltInToolName(name) && turn.enabledBuiltInTools?.includes(name) === true
