// MCP tools through the Claude Agent SDK runner, against @modelcontextprotocol/server-everything over stdio:
// the runner kit's shared MCP tests with the runner's JSON-Schema tools (`SourceTools.tools(source, policies)`,
// so each MCP tool is one more in-process MCP tool of the harness that calls the source's `callTool` with the
// session's idempotency key), the package's 150 s bound on the waits, and `readsInline`: a READ runs inside
// the RunModel (no tool Step, no record); a write is deferred to its own Step, whose record keeps the MCP
// tool's source reference.
import { mcpSuite } from "../../runner-kit/test/support/mcp-suite.ts"
import { harness } from "./harness.ts"

mcpSuite(harness, { timeout: "150 seconds", readsInline: true })
