/**
 * A session tool source (an MCP source above all) as framework tools: for runners whose framework accepts
 * JSON-Schema tools, each of the source's tools becomes one {@link JsonSchemaTool} whose function calls the
 * source's `callTool` with the adapter's idempotency key (`<flowId>/<turnId>/<toolCallId>`, the same on every
 * attempt), and whose policy is the source's annotation policy merged under the application's own
 * (`mergeToolPolicies`). The runner offers them like its own tools and runs each call in its tool Step
 * (`ToolCall.run`).
 *
 * @since 0.1.0
 */
import type { Errors, Policy, Runner, ToolSource } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { type ToolCallOptions, ToolRetryableError } from "./ToolCall.ts"

/**
 * A framework-neutral JSON-Schema tool: what a runner turns into one of its framework's tools. `execute`
 * follows the kit's tool contract: a thrown `ToolRetryableError` fails the attempt, any other throw fails the
 * call with its message.
 *
 * @category models
 * @since 0.1.0
 */
export interface JsonSchemaTool {
  readonly name: string
  readonly description: string
  /** The JSON Schema of the arguments (an object schema). */
  readonly parameters: { readonly [key: string]: unknown }
  /** The effect class; without it the session's `ToolPolicy`, then its default, decides. */
  readonly effect?: Policy.ToolPolicy["effect"] | undefined
  /** The tool's approval when the session has no `ToolPolicy` for it; the effect's default otherwise. */
  readonly requiresApproval?: boolean | undefined
  /** Stored on the call's record (an MCP tool's server and name). */
  readonly toolSourceReference?: string | undefined
  readonly execute: (input: { readonly [key: string]: unknown }, options: ToolCallOptions) => Promise<unknown>
}

/**
 * The part of a tool source a runner needs: what `McpToolSource.make` returns satisfies it.
 *
 * @category models
 * @since 0.1.0
 */
export interface Source {
  readonly tools: ReadonlyArray<ToolSource.ToolDefinition & { readonly toolSourceReference?: string | undefined }>
  /** The source's policies (from annotations) overridden by the application's own. */
  readonly mergeToolPolicies: (
    applicationPolicies?: Readonly<Record<string, Policy.ToolPolicy>> | undefined
  ) => Record<string, Policy.ToolPolicy>
  /** One call outside the session's tool Step (the runner's tool function runs it inside its tool Step). */
  readonly callTool: (request: {
    readonly toolName: string
    readonly arguments: { readonly [key: string]: unknown }
    readonly idempotencyKey: string
    readonly toolSourceReference?: string | null | undefined
  }) => Effect.Effect<
    Runner.ToolExecutionResult,
    Errors.ToolExecutionError | { readonly _tag: "McpToolCallInterruptedError"; readonly message: string }
  >
}

/**
 * The source's tools as {@link JsonSchemaTool}s. `applicationPolicies` override the source's annotation
 * policies (`mergeToolPolicies`); a request sent without a result back (`McpToolCallInterruptedError`) fails
 * the attempt (the effect class decides: retried, or `outcome_unknown`), a tool error fails the call with its
 * message (the model sees it).
 *
 * @category constructors
 * @since 0.1.0
 */
export const tools = (
  source: Source,
  applicationPolicies?: Readonly<Record<string, Policy.ToolPolicy>> | undefined
): ReadonlyArray<JsonSchemaTool> => {
  const policies = source.mergeToolPolicies(applicationPolicies)
  return source.tools.map((t): JsonSchemaTool => {
    const policy = Object.hasOwn(policies, t.name) ? policies[t.name] : undefined
    const effect = policy?.effect ?? t.effect
    return {
      name: t.name,
      description: t.description,
      parameters: t.parameters as { readonly [key: string]: unknown },
      ...(effect === undefined ? {} : { effect }),
      ...(policy?.requiresApproval === undefined ? {} : { requiresApproval: policy.requiresApproval }),
      ...(t.toolSourceReference === undefined ? {} : { toolSourceReference: t.toolSourceReference }),
      execute: (input, options) =>
        Effect.runPromiseExit(
          source.callTool({
            toolName: t.name,
            arguments: input,
            idempotencyKey: options.idempotencyKey,
            toolSourceReference: t.toolSourceReference ?? null
          }),
          { signal: options.abortSignal }
        ).then((exit) => {
          if (Exit.isSuccess(exit)) return exit.value.output
          const error = Exit.findErrorOption(exit)
          if (Option.isSome(error)) {
            const e = error.value
            throw e._tag === "McpToolCallInterruptedError" ? new ToolRetryableError(e.message) : new Error(e.message)
          }
          throw new ToolRetryableError(`the tool call did not complete: ${String(exit.cause)}`)
        })
    }
  })
}

/**
 * A JSON-Schema tool's policy in a turn: the session's `ToolPolicy` for its name wins; else the tool's own
 * effect and approval; else the session's default.
 *
 * @category constructors
 * @since 0.1.0
 */
export const resolvePolicy = (
  turn: Pick<Runner.AgentTurnContext, "resolveToolPolicy" | "toolPolicies">,
  tool: Pick<JsonSchemaTool, "name" | "effect" | "requiresApproval">
): Policy.ResolvedToolPolicy => {
  const resolved = turn.resolveToolPolicy(tool.name, tool.effect)
  return Object.hasOwn(turn.toolPolicies, tool.name) || tool.requiresApproval === undefined
    ? resolved
    : { ...resolved, requiresApproval: tool.requiresApproval }
}
