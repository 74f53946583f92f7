/**
 * @durable-agent/mcp: MCP servers as a durable tool source of the agent session. `McpToolSource` lists the
 * Worker's stdio and Streamable HTTP servers and runs each call in the session's tool Steps;
 * `McpServerConfig` reads the servers file other MCP clients use.
 *
 * @since 0.1.0
 */
export * as McpServerConfig from "./McpServerConfig.ts"
export * as McpToolSource from "./McpToolSource.ts"
