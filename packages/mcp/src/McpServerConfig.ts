/**
 * MCP server configurations as a Worker gives them to `McpToolSource`: a local server started over stdio,
 * or a remote one reached over Streamable HTTP. `parseServersFile` reads the JSON shape other MCP clients
 * use (`{ "mcpServers": { "<name>": { "command", "args", "env" } | { "url", "headers" } } }`).
 *
 * Configurations come from the process that runs the Worker only, never from a session's input.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * A server the source starts as a child process and talks to over stdio (one process per request).
 *
 * @category models
 * @since 0.1.0
 */
export const StdioServerConfig = Schema.Struct({
  type: Schema.optionalKey(Schema.Literal("stdio")),
  command: Schema.String,
  args: Schema.optionalKey(Schema.Array(Schema.String)),
  env: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
  cwd: Schema.optionalKey(Schema.String)
})

/**
 * @category models
 * @since 0.1.0
 */
export type StdioServerConfig = typeof StdioServerConfig.Type

/**
 * A server reached over Streamable HTTP at `url`; `headers` go with every request (an API key, say).
 *
 * @category models
 * @since 0.1.0
 */
export const HttpServerConfig = Schema.Struct({
  type: Schema.optionalKey(Schema.Literals(["http", "streamable-http", "streamableHttp"])),
  url: Schema.String,
  headers: Schema.optionalKey(Schema.Record(Schema.String, Schema.String))
})

/**
 * @category models
 * @since 0.1.0
 */
export type HttpServerConfig = typeof HttpServerConfig.Type

/**
 * One server's configuration.
 *
 * @category models
 * @since 0.1.0
 */
export const ServerConfig = Schema.Union([StdioServerConfig, HttpServerConfig])

/**
 * @category models
 * @since 0.1.0
 */
export type ServerConfig = typeof ServerConfig.Type

/**
 * The servers of a source by name; the name prefixes each tool (`<server>__<tool>`).
 *
 * @category models
 * @since 0.1.0
 */
export type Servers = Readonly<Record<string, ServerConfig>>

/**
 * Whether a configuration names a stdio server.
 *
 * @category guards
 * @since 0.1.0
 */
export const isStdio = (config: ServerConfig): config is StdioServerConfig => "command" in config

/**
 * The file shape shared with other MCP clients.
 *
 * @category models
 * @since 0.1.0
 */
export const ServersFile = Schema.Struct({
  mcpServers: Schema.Record(Schema.String, ServerConfig)
})

/**
 * A servers file that cannot be read or does not have the expected shape.
 *
 * @category errors
 * @since 0.1.0
 */
export class McpServersFileError extends Schema.TaggedError<McpServersFileError>()("McpServersFileError", {
  message: Schema.String
}) {}

/**
 * Parses the text of a servers file (`{ "mcpServers": { ... } }`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const parseServersFile = (text: string): Effect.Effect<Servers, McpServersFileError> =>
  Schema.decodeUnknownEffect(Schema.fromJsonString(ServersFile))(text).pipe(
    Effect.map((file) => file.mcpServers),
    Effect.mapError((error) => new McpServersFileError({ message: `invalid MCP servers file: ${error.message}` }))
  )
