/**
 * @durable-agent/runner-ai-sdk: the Vercel AI SDK in Step mode for durable agent sessions — a
 * framework runner (`AiSdkRunner`), a `ModelClient` for the built-in Stepwise runner
 * (`AiSdkModelClient`), and a scripted model for tests and demos (`ScriptedModel`).
 *
 * @since 0.1.0
 */
export * as AiSdkModelClient from "./AiSdkModelClient.ts"
export * as AiSdkRunner from "./AiSdkRunner.ts"
export { type AiSdkTool, aiSdkTool, ToolRetryableError } from "./AiSdkRunner.ts"
export * as ScriptedModel from "./ScriptedModel.ts"
