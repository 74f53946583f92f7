/**
 * MCP servers as more tools of the chat: `--mcp <file>` names a servers file in the shape other MCP clients
 * use (`{ "mcpServers": { "<name>": { "command", "args", "env" } | { "url", "headers" } } }`). Each server's
 * tools join the agent's as `<server>__<tool>`, with the effect their annotations give (a read runs at once,
 * a write without an idempotent or read-only annotation asks for approval), and each call runs in its own
 * tool Step on a new connection to its server.
 */
import { readFile } from "node:fs/promises"
import { resolve } from "node:path"
import { McpServerConfig, McpToolSource } from "@durable-agent/mcp"
import { type AiSdkTool, aiSdkTool, ToolRetryableError } from "@durable-agent/runner-ai-sdk"
import { jsonSchema } from "ai"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { flagValue } from "./config.ts"

/**
 * The file after `--mcp` (or `--mcp=<file>`) on the command line, resolved from the working directory; a bare
 * `--mcp` throws.
 */
export const mcpFileArgument = (argv: ReadonlyArray<string>): Option.Option<string> =>
  Option.map(Option.fromNullishOr(flagValue(argv, "--mcp")), (file) => resolve(file))

/** The tools of one MCP source as AI SDK runner tools. */
export const toAiSdkTools = (source: McpToolSource.McpToolSourceShape): Record<string, AiSdkTool> =>
  Object.fromEntries(
    source.tools.map((t) => [
      t.name,
      aiSdkTool({
        description: t.description,
        inputSchema: jsonSchema<{ readonly [key: string]: unknown }>(t.parameters),
        effect: t.effect,
        execute: (input, options) =>
          Effect.runPromise(
            source
              .callTool({
                toolName: t.name,
                arguments: input,
                idempotencyKey: options.idempotencyKey,
                toolSourceReference: t.toolSourceReference
              })
              .pipe(
                Effect.map((result) => result.output),
                // sent without a result: the attempt fails and the effect class decides; else the model sees it
                Effect.mapError((e) =>
                  e._tag === "McpToolCallInterruptedError" ? new ToolRetryableError(e.message) : new Error(e.message)
                )
              )
          )
      })
    ])
  )

/** Lists the servers of a servers file (a server that cannot be listed is left out with a warning). */
export const loadMcpTools = (file: string) =>
  Effect.gen(function* () {
    const text = yield* Effect.tryPromise({
      try: () => readFile(file, "utf8"),
      catch: (error) => new McpServerConfig.McpServersFileError({ message: `cannot read ${file}: ${String(error)}` })
    })
    const servers = yield* McpServerConfig.parseServersFile(text)
    const source = yield* McpToolSource.make({ servers })
    return { servers: Object.keys(servers), tools: toAiSdkTools(source) }
  })
