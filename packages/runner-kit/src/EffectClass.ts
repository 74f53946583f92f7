/**
 * The effect-class table, one for every runner: the session's `Policy.EFFECT_TABLE` (which Step runs a
 * call of each class, its attempts, what a call that ran out of attempts records, its default approval)
 * and the one mapping from tool hints (MCP annotations, effect/ai annotations, a framework's own
 * read-only / idempotent flags) to an effect class. Runners never keep their own copy.
 *
 * @since 0.1.0
 */
import { Policy, type Runner, type Wire } from "@durable-agent/session"

/**
 * The session's effect table (the adapters spec, "Effects and policies").
 *
 * @category constants
 * @since 0.1.0
 */
export const table = Policy.EFFECT_TABLE

/**
 * Tool hints: `readOnlyHint`, `idempotentHint`, `destructiveHint`.
 *
 * @category models
 * @since 0.1.0
 */
export type Hints = Policy.ToolHints

/**
 * The effect class hints decide: `readOnlyHint` is `read`, otherwise `idempotentHint` is
 * `idempotent_write` whatever `destructiveHint` says; anything else `undefined` (the session decides).
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromHints: (hints: Hints | undefined) => Wire.ToolEffect | undefined = Policy.hintsEffect

/**
 * The hints that say an effect class (the inverse of {@link fromHints}).
 *
 * @category constructors
 * @since 0.1.0
 */
export const toHints: (effect: Wire.ToolEffect) => Hints = Policy.effectHints

/**
 * A framework tool's policy in a turn: the tool's own effect (`effect`, else its hints) as the framework
 * effect, under the session's `toolPolicies` and `defaultToolEffect`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const resolve = (
  turn: Pick<Runner.AgentTurnContext, "resolveToolPolicy">,
  toolName: string,
  tool?: { readonly effect?: Wire.ToolEffect | undefined; readonly hints?: Hints | undefined } | undefined
): Policy.ResolvedToolPolicy => turn.resolveToolPolicy(toolName, tool?.effect ?? fromHints(tool?.hints))

/**
 * Whether a call of this effect class may run more than once (its Step retries).
 *
 * @category predicates
 * @since 0.1.0
 */
export const isRetried = (effect: Wire.ToolEffect): boolean => Policy.EFFECT_TABLE[effect].maxAttempts > 1

/**
 * What a call of this effect class records when its Step ran out of attempts or its outcome is lost.
 *
 * @category accessors
 * @since 0.1.0
 */
export const exhaustedStatus = (effect: Wire.ToolEffect): "failed" | "outcome_unknown" =>
  Policy.EFFECT_TABLE[effect].exhausted
