/**
 * @durable-agent/runner-pi: Pi (`@mariozechner/pi-ai` and `@mariozechner/pi-agent-core` 0.73) in Step mode
 * for durable agent sessions — a framework runner (`PiRunner`), Pi tools as a session `ToolSource`
 * (`PiToolSource`), and a scripted pi-ai provider for tests and demos (`ScriptedProvider`).
 *
 * @since 0.1.0
 */

export { ToolRetryableError } from "@durable-agent/runner-kit"
export * as PiRunner from "./PiRunner.ts"
export { type AnyPiTool, currentToolCall, type PiTool, piTool } from "./PiRunner.ts"
export * as PiToolSource from "./PiToolSource.ts"
export * as ScriptedProvider from "./ScriptedProvider.ts"
