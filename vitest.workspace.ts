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
  "packages/runner-pi",
  "packages/mcp",
  "packages/ui-stream",
  "examples/chat",
  "examples/basics",
  "examples/web",
  "examples/cluster",
  "packaging"
] as const

/**
 * The export condition that resolves the workspace's packages to their TypeScript sources (every entry of a
 * package's `exports` lists it first). vitest, tsc (`customConditions`) and every Node process the tests, the
 * examples and the npm scripts start (`--conditions=@durable-agent/source`, see `nodeFlags` in
 * `@durable-agent/engine/testing/ChildProcess`) use it, so nothing needs a build (CONTRIBUTING.md).
 */
export const sourceCondition = "@durable-agent/source"
