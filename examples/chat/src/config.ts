/**
 * The chat's settings, from the environment:
 *
 * - `CHAT_DB`: the SQLite file of the embedded engine (default `chat.db` in the state folder, below).
 * - `CHAT_WORKSPACE`: the folder the agent's file tools work in (default `workspace` in the state folder, seeded
 *   from `examples/chat/workspace` when it does not exist yet).
 * - `XDG_STATE_HOME`: the state folder is `$XDG_STATE_HOME/durable-agent-session/chat` (default
 *   `~/.local/state/durable-agent-session/chat`): what the demo writes stays out of the repository.
 * - `OPENAI_API_KEY`: when set, a real OpenAI model answers instead of the scripted demo model.
 * - `CHAT_MODEL`: the OpenAI model ID (default `gpt-4.1-mini`).
 *
 * And from the command line: `--db <file>` (over `CHAT_DB`), `--mcp <servers.json>`, `--runner <name>`; a flag
 * without its value, or a flag the chat does not know, is an error rather than ignored.
 */
import { homedir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

/** The example's own folder (`examples/chat`), so defaults do not depend on the working directory. */
export const exampleDir = resolve(dirname(fileURLToPath(import.meta.url)), "..")

/** Which model answers. */
export type ModelChoice =
  | { readonly _tag: "Demo" }
  | { readonly _tag: "OpenAI"; readonly apiKey: Redacted.Redacted<string>; readonly modelId: string }

export interface ChatConfig {
  /** Absolute path of the SQLite file. */
  readonly database: string
  /** Absolute path of the workspace folder. */
  readonly workspace: string
  /** The tracked seed files' folder to copy into the workspace when it does not exist (the default workspace). */
  readonly seedWorkspace?: string | null
  readonly model: ModelChoice
}

export const DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"

const nonEmpty = (name: string) =>
  Config.option(Config.String(name)).pipe(Config.map(Option.filter((value) => value.trim().length > 0)))

/** Reads the settings from the environment. */
export const loadConfig = Effect.gen(function* () {
  const database = yield* nonEmpty("CHAT_DB")
  const workspace = yield* nonEmpty("CHAT_WORKSPACE")
  const apiKey = yield* Config.option(Config.Redacted("OPENAI_API_KEY"))
  const modelId = yield* nonEmpty("CHAT_MODEL")
  const stateHome = yield* nonEmpty("XDG_STATE_HOME")
  const stateDir = resolve(
    Option.getOrElse(stateHome, () => join(homedir(), ".local", "state")),
    "durable-agent-session",
    "chat"
  )
  const model: ModelChoice = Option.match(
    Option.filter(apiKey, (key) => Redacted.value(key).trim().length > 0),
    {
      onNone: () => ({ _tag: "Demo" }),
      onSome: (key) => ({ _tag: "OpenAI", apiKey: key, modelId: Option.getOrElse(modelId, () => DEFAULT_OPENAI_MODEL) })
    }
  )
  return {
    database: resolve(Option.getOrElse(database, () => join(stateDir, "chat.db"))),
    workspace: resolve(Option.getOrElse(workspace, () => join(stateDir, "workspace"))),
    seedWorkspace: Option.isNone(workspace) ? resolve(exampleDir, "workspace") : null,
    model
  } satisfies ChatConfig
})

/** The flags the chat takes, each with a value (`--flag value` or `--flag=value`). */
const FLAGS = ["--db", "--mcp", "--runner"] as const

/**
 * The value of a flag on the command line, if it is there; throws for a flag without a value (`--mcp` at the
 * end, or followed by another flag), so a mistyped command line is not silently ignored.
 */
export const flagValue = (argv: ReadonlyArray<string>, flag: (typeof FLAGS)[number]): string | undefined => {
  for (const [i, arg] of argv.entries()) {
    if (arg.startsWith(`${flag}=`)) {
      const value = arg.slice(flag.length + 1)
      if (value.length === 0) throw new Error(`${flag} needs a value: ${usage(flag)}`)
      return value
    }
    if (arg === flag) {
      const value = argv[i + 1]
      if (value === undefined || value.startsWith("--")) throw new Error(`${flag} needs a value: ${usage(flag)}`)
      return value
    }
  }
  return undefined
}

const usage = (flag: (typeof FLAGS)[number]) =>
  flag === "--db" ? "--db <file.db>" : flag === "--mcp" ? "--mcp <servers.json>" : "--runner <name>"

/** Checks the command line: every argument is a known flag or its value; throws for anything else. */
export const checkArguments = (argv: ReadonlyArray<string>): void => {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const flag = FLAGS.find((f) => arg === f || arg.startsWith(`${f}=`))
    if (flag === undefined) {
      throw new Error(`unknown argument ${arg}: the chat takes ${FLAGS.map(usage).join(", ")}`)
    }
    flagValue([arg, ...argv.slice(i + 1, i + 2)], flag)
    if (arg === flag) i++
  }
}

/** The settings with the command line's `--db` applied (a path resolved from the working directory). */
export const withArguments = (config: ChatConfig, argv: ReadonlyArray<string>): ChatConfig => {
  const database = flagValue(argv, "--db")
  return database === undefined ? config : { ...config, database: resolve(database) }
}
