/**
 * The session's built-in tools (docs/session-contract.md, "Built-in tools"): `ask_user` asks the user a
 * question and waits for the answer, `durable_wait` waits on a durable timer, and `write_todos` replaces
 * the session's plan. Enable them with `AgentSessionOptions.builtInTools`; RunModel routes their calls to
 * the session's own Steps (no approval, the read effect) and validates their arguments in its commit.
 *
 * @since 0.1.0
 */
import type { ModelToolDefinition } from "./ModelClient.ts"
import * as Wire from "./wire/index.ts"

/**
 * What the model sees of each built-in tool; a runner offers the enabled ones like any tool.
 *
 * @category constants
 * @since 0.1.0
 */
export const definitions: ReadonlyArray<ModelToolDefinition & { readonly name: Wire.BuiltInToolName }> = [
  {
    name: "ask_user",
    description:
      "Ask the user a question and wait for the answer. Give choices when the answer is one of a few options.",
    parameters: {
      type: "object",
      properties: {
        question: { type: "string", description: "The question, as the user reads it." },
        choices: { type: ["array", "null"], items: { type: "string" }, description: "Answers to choose from." },
        allows_free_text: {
          type: ["boolean", "null"],
          description: "Whether the user may answer in their own words (default true)."
        }
      },
      required: ["question"],
      additionalProperties: false
    }
  },
  {
    name: "durable_wait",
    description: "Wait for a number of seconds before going on; the wait survives restarts.",
    parameters: {
      type: "object",
      properties: {
        seconds: { type: "number", description: "How long to wait, in seconds (at least 1)." },
        reason: { type: ["string", "null"], description: "Why the wait is needed." }
      },
      required: ["seconds"],
      additionalProperties: false
    }
  },
  {
    name: "write_todos",
    description: "Replace the plan: the whole task list with each task's status. An empty list clears the plan.",
    parameters: {
      type: "object",
      properties: {
        todos: {
          type: "array",
          items: {
            type: "object",
            properties: {
              content: { type: "string" },
              status: { type: "string", enum: ["pending", "in_progress", "completed"] }
            },
            required: ["content", "status"],
            additionalProperties: false
          }
        }
      },
      required: ["todos"],
      additionalProperties: false
    }
  }
]

/**
 * Whether a tool name is a built-in.
 *
 * @category guards
 * @since 0.1.0
 */
export const isBuiltInToolName = (name: string): name is Wire.BuiltInToolName =>
  (Wire.BuiltInToolName.literals as ReadonlyArray<string>).includes(name)

/**
 * Valid `ask_user` arguments.
 *
 * @category models
 * @since 0.1.0
 */
export interface AskUserArguments {
  readonly question: string
  readonly choices: ReadonlyArray<string>
  readonly allowsFreeText: boolean
}

/**
 * Valid `durable_wait` arguments.
 *
 * @category models
 * @since 0.1.0
 */
export interface DurableWaitArguments {
  readonly seconds: number
  readonly reason: string
}

/**
 * A validation result: the arguments, or the reason they are refused.
 *
 * @category models
 * @since 0.1.0
 */
export type Validated<A> =
  | { readonly _tag: "Valid"; readonly value: A }
  | { readonly _tag: "Invalid"; readonly reason: string }

const invalid = (reason: string): Validated<never> => ({ _tag: "Invalid", reason })
const valid = <A>(value: A): Validated<A> => ({ _tag: "Valid", value })

/** The arguments as a JSON object; strict JSON only (no NaN). */
const parseObject = (text: string): Validated<Record<string, unknown>> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return invalid(Wire.ARGUMENTS_NOT_JSON_OBJECT_REASON)
  }
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
    ? valid(parsed as Record<string, unknown>)
    : invalid(Wire.ARGUMENTS_NOT_JSON_OBJECT_REASON)
}

/** The first unknown argument name, the lowest by code point. */
const unknownName = (args: Record<string, unknown>, known: ReadonlyArray<string>): string | undefined =>
  Object.keys(args)
    .filter((k) => !known.includes(k))
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))[0]

/**
 * Validates `ask_user` arguments: a non-blank `question`, optional `choices` (non-blank strings) and
 * `allows_free_text`; `null` means absent. Without free text there must be choices.
 *
 * @category validation
 * @since 0.1.0
 */
export const validateAskUser = (text: string): Validated<AskUserArguments> => {
  const parsed = parseObject(text)
  if (parsed._tag === "Invalid") return parsed
  const args = parsed.value
  const unknown = unknownName(args, ["question", "choices", "allows_free_text"])
  if (unknown !== undefined) return invalid(`unknown argument ${unknown}`)
  if (typeof args.question !== "string" || args.question.trim().length === 0) {
    return invalid("question must be a non-blank string")
  }
  const choices = args.choices ?? []
  if (!Array.isArray(choices) || !choices.every((c) => typeof c === "string" && c.trim().length > 0)) {
    return invalid("choices must be a list of non-blank strings")
  }
  const allowsFreeText = args.allows_free_text ?? true
  if (typeof allowsFreeText !== "boolean") return invalid("allows_free_text must be a boolean")
  if (!allowsFreeText && choices.length === 0) return invalid("choices are required when allows_free_text is false")
  return valid({ question: args.question, choices: choices as ReadonlyArray<string>, allowsFreeText })
}

/**
 * Validates `durable_wait` arguments: `seconds`, a number from 1 to `maxSeconds` (rounded up to whole
 * seconds), and an optional `reason`.
 *
 * @category validation
 * @since 0.1.0
 */
export const validateDurableWait = (text: string, maxSeconds: number): Validated<DurableWaitArguments> => {
  const parsed = parseObject(text)
  if (parsed._tag === "Invalid") return parsed
  const args = parsed.value
  const unknown = unknownName(args, ["seconds", "reason"])
  if (unknown !== undefined) return invalid(`unknown argument ${unknown}`)
  const seconds = args.seconds
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds <= 0) {
    return invalid("seconds must be a positive number")
  }
  const whole = Math.max(1, Math.ceil(seconds))
  if (whole > maxSeconds) return invalid(`seconds must be at most ${maxSeconds}`)
  const reason = args.reason ?? ""
  if (typeof reason !== "string") return invalid("reason must be a string")
  return valid({ seconds: whole, reason })
}

/**
 * Validates `write_todos` arguments: `todos`, a list of `{content, status}` with non-blank content.
 *
 * @category validation
 * @since 0.1.0
 */
export const validateWriteTodos = (text: string): Validated<ReadonlyArray<Wire.AgentPlanTask>> => {
  const parsed = parseObject(text)
  if (parsed._tag === "Invalid") return parsed
  const args = parsed.value
  const unknown = unknownName(args, ["todos"])
  if (unknown !== undefined) return invalid(`unknown argument ${unknown}`)
  if (!Array.isArray(args.todos)) return invalid("todos must be a list")
  const tasks: Array<Wire.AgentPlanTask> = []
  for (const [i, todo] of args.todos.entries()) {
    if (typeof todo !== "object" || todo === null || Array.isArray(todo)) return invalid(`todo ${i} must be an object`)
    const t = todo as Record<string, unknown>
    const extra = unknownName(t, ["content", "status"])
    if (extra !== undefined) return invalid(`todo ${i} has an unknown field ${extra}`)
    if (typeof t.content !== "string" || t.content.trim().length === 0) {
      return invalid(`todo ${i} needs non-blank content`)
    }
    if (t.status !== "pending" && t.status !== "in_progress" && t.status !== "completed") {
      return invalid(`todo ${i} has status ${JSON.stringify(t.status)}, not pending, in_progress or completed`)
    }
    tasks.push({ content: t.content, status: t.status })
  }
  return valid(tasks)
}
