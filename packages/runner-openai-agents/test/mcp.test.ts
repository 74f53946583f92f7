// MCP tools in this runner against @modelcontextprotocol/server-everything (the runner kit's shared MCP tests).
import { mcpSuite } from "../../runner-kit/test/support/mcp-suite.ts"
import { harness } from "./harness.ts"

mcpSuite(harness)
