/**
 * @durable-agent/runner-mastra: Mastra in Step mode for durable agent sessions — a framework runner
 * (`MastraRunner`) that makes one model call per RunModel Step and runs every tool call in its own Step.
 *
 * @since 0.1.0
 */
export * as MastraRunner from "./MastraRunner.ts"
export { type DurableToolCall, durableToolCall, type MastraTool, ToolRetryableError } from "./MastraRunner.ts"
