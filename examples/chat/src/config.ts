/**
 * The chat's settings, from the environment:
 *
 * - `CHAT_DB`: the SQLite file of the embedded engine (default `examples/chat/.data/chat.db`).
 * - `CHAT_WORKSPACE`: the folder the agent's file tools work in (default `examples/chat/workspace`).
 * - `OPENAI_API_KEY`: when set, a real OpenAI model answers instead of the scripted demo model.
 * - `CHAT_MODEL`: the OpenAI model ID (default `gpt-4.1-mini`).
 */
import { dirname, resolve } from "node:path"
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
  const model: ModelChoice = Option.match(
    Option.filter(apiKey, (key) => Redacted.value(key).trim().length > 0),
    {
      onNone: () => ({ _tag: "Demo" }),
      onSome: (key) => ({ _tag: "OpenAI", apiKey: key, modelId: Option.getOrElse(modelId, () => DEFAULT_OPENAI_MODEL) })
    }
  )
  return {
    database: resolve(Option.getOrElse(database, () => resolve(exampleDir, ".data", "chat.db"))),
    workspace: resolve(Option.getOrElse(workspace, () => resolve(exampleDir, "workspace"))),
    model
  } satisfies ChatConfig
})
