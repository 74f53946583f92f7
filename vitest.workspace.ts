/**
 * The list of vitest projects, one per package. vitest 5 no longer reads this file on its own:
 * `vitest.config.ts` imports it.
 */
export const projects = [
  "packages/engine",
  "packages/session",
  "packages/runner-kit",
  "packages/runner-ai-sdk",
  "packages/runner-openai-agents",
  "packages/runner-mastra",
  "packages/runner-claude-agent-sdk",
  "packages/mcp",
  "packages/ui-stream",
  "examples/chat",
  "examples/basics",
  "examples/web",
  "examples/cluster"
] as const
