/**
 * @durable-agent/runner-openai-agents: the OpenAI Agents SDK in Step mode for durable agent sessions — a
 * framework runner (`OpenAiAgentsRunner`) whose function tools (`openAiAgentsTool`) each run in their own
 * tool Step.
 *
 * @since 0.1.0
 */
export * as OpenAiAgentsRunner from "./OpenAiAgentsRunner.ts"
export { openAiAgentsTool, ToolRetryableError } from "./OpenAiAgentsRunner.ts"
