/**
 * The Claude Agent SDK runner of the durable agent session (a whole-turn harness) and the scripted
 * Anthropic Messages API server its tests run the real binary against.
 *
 * @since 0.1.0
 */
export * as ClaudeAgentSdkRunner from "./ClaudeAgentSdkRunner.ts"
export * as ScriptedAnthropic from "./ScriptedAnthropic.ts"
export * as SqlSessionStore from "./SqlSessionStore.ts"
