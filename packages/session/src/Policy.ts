/**
 * Tool effects and policies: which Step runs a call, how it retries, whether it needs approval, and the
 * checks every requested call passes before it gets a record (docs/session-contract.md, "Effects and policies").
 *
 * @since 0.1.0
 */
import * as Option from "effect/Option"
import type { ToolEffect } from "./wire/index.ts"

/**
 * A per-tool override: its effect, and whether it needs approval (`undefined` uses the effect's default).
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolPolicy {
  readonly effect: ToolEffect
  readonly requiresApproval?: boolean | undefined
}

/**
 * A policy with every field decided, as stored on the call's record.
 *
 * @category models
 * @since 0.1.0
 */
export interface ResolvedToolPolicy {
  readonly effect: ToolEffect
  readonly requiresApproval: boolean
}

/**
 * The Step type that runs a call of an effect class.
 *
 * @category models
 * @since 0.1.0
 */
export type ToolStepType = "CallTool" | "CallSingleAttemptTool"

/**
 * The effect table (docs/session-contract.md, "Effects and policies"): the Step, the number of attempts, what a call that ran out of attempts
 * records, and the default approval of each effect class.
 *
 * @category constants
 * @since 0.1.0
 */
export const EFFECT_TABLE: {
  readonly [E in ToolEffect]: {
    readonly step: ToolStepType
    readonly maxAttempts: number
    readonly exhausted: "failed" | "outcome_unknown"
    readonly defaultRequiresApproval: boolean
  }
} = {
  read: { step: "CallTool", maxAttempts: 3, exhausted: "failed", defaultRequiresApproval: false },
  idempotent_write: { step: "CallTool", maxAttempts: 3, exhausted: "outcome_unknown", defaultRequiresApproval: false },
  non_idempotent_write: {
    step: "CallSingleAttemptTool",
    maxAttempts: 1,
    exhausted: "outcome_unknown",
    defaultRequiresApproval: true
  },
  unclassified: {
    step: "CallSingleAttemptTool",
    maxAttempts: 1,
    exhausted: "outcome_unknown",
    defaultRequiresApproval: true
  }
}

/**
 * Tool behaviour hints as MCP annotations carry them (effect/ai's `Tool.Readonly` / `Tool.Idempotent` /
 * `Tool.Destructive` are the same hints).
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolHints {
  readonly readOnlyHint?: boolean | undefined
  readonly idempotentHint?: boolean | undefined
  readonly destructiveHint?: boolean | undefined
}

/**
 * The effect class a tool's hints decide, the one mapping every adapter uses (the adapters spec, "Effects
 * and policies" and "MCP"): `readOnlyHint` is `read`, otherwise `idempotentHint` is `idempotent_write`
 * whatever `destructiveHint` says; anything else decides nothing (`undefined`: an explicit `ToolPolicy`,
 * then the session's `defaultToolEffect`, apply). `destructiveHint` alone never decides an effect.
 *
 * @category constructors
 * @since 0.1.0
 */
export const hintsEffect = (hints: ToolHints | undefined): ToolEffect | undefined =>
  hints?.readOnlyHint === true ? "read" : hints?.idempotentHint === true ? "idempotent_write" : undefined

/**
 * The hints that say an effect class, the inverse of {@link hintsEffect} for a framework that takes hints
 * (MCP annotations, effect/ai annotations): `read` is read-only, `idempotent_write` idempotent (and
 * destructive), `non_idempotent_write` destructive and not idempotent, `unclassified` no hints.
 * `hintsEffect(effectHints(e))` is `e` for `read` and `idempotent_write`, and `undefined` (the session's
 * default decides) for the single-attempt classes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const effectHints = (effect: ToolEffect): ToolHints => {
  switch (effect) {
    case "read":
      return { readOnlyHint: true, idempotentHint: true, destructiveHint: false }
    case "idempotent_write":
      return { readOnlyHint: false, idempotentHint: true, destructiveHint: true }
    case "non_idempotent_write":
      return { readOnlyHint: false, idempotentHint: false, destructiveHint: true }
    case "unclassified":
      return {}
  }
}

/**
 * The session's default effect for tools without a policy or framework metadata.
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_TOOL_EFFECT: ToolEffect = "unclassified"

/**
 * Resolves a tool's policy: an explicit {@link ToolPolicy} for its name wins, then the framework's metadata
 * (such as MCP annotations), then the session's default effect. An unset `requiresApproval` takes the
 * effect's default.
 *
 * @category constructors
 * @since 0.1.0
 */
export const resolveToolPolicy = (
  toolName: string,
  options: {
    readonly toolPolicies?: Readonly<Record<string, ToolPolicy>> | undefined
    readonly defaultToolEffect?: ToolEffect | undefined
    readonly frameworkEffect?: ToolEffect | undefined
  }
): ResolvedToolPolicy => {
  const policy =
    options.toolPolicies && Object.hasOwn(options.toolPolicies, toolName) ? options.toolPolicies[toolName] : undefined
  const effect = policy?.effect ?? options.frameworkEffect ?? options.defaultToolEffect ?? DEFAULT_TOOL_EFFECT
  return {
    effect,
    requiresApproval: policy?.requiresApproval ?? EFFECT_TABLE[effect].defaultRequiresApproval
  }
}

/**
 * Checks one requested tool call ID: non-empty, no `/`, and not used before in this turn. Returns the
 * reason it is refused, or `undefined` when it is valid.
 *
 * @category validation
 * @since 0.1.0
 */
export const toolCallIdProblem = (toolCallId: string, usedInTurn: ReadonlySet<string>): string | undefined => {
  if (toolCallId.length === 0) return "a tool call ID must not be empty"
  if (toolCallId.includes("/")) return `tool call ID ${JSON.stringify(toolCallId)} must not contain "/"`
  if (usedInTurn.has(toolCallId))
    return `tool call ID ${JSON.stringify(toolCallId)} is used more than once in this turn`
  return undefined
}

/**
 * Parses tool argument text as strict JSON and returns it when it is a JSON object. `NaN`, `Infinity`,
 * arrays, scalars and text that is not JSON are refused (`arguments must be a JSON object`).
 *
 * @category validation
 * @since 0.1.0
 */
export const parseToolArguments = (text: string): Option.Option<{ readonly [key: string]: unknown }> => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return Option.none()
  }
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? Option.some(value as { readonly [key: string]: unknown })
    : Option.none()
}
