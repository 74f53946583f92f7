/**
 * @durable-agent/ui-stream: an agent session's turns as the AI SDK UI message stream and as plain SSE, with
 * resume tokens, a snapshot JSON, an authorization hook, Web-standard and effect/http handlers.
 *
 * @since 0.1.0
 */
export * as ChatHandler from "./ChatHandler.ts"
export * as HttpChat from "./HttpChat.ts"
export * as ResumeToken from "./ResumeToken.ts"
export * as UiMessageStream from "./UiMessageStream.ts"
export * as UiMessages from "./UiMessages.ts"
