/**
 * Effect Schema codecs of every wire type of the agent session: snake_case JSON on the wire, camelCase in
 * TypeScript. Contract: `docs/session-contract.md`.
 *
 * @since 0.1.0
 */
export * from "./AgentEvent.ts"
export * from "./AgentInterrupt.ts"
export * from "./AgentMessage.ts"
export * from "./AgentPlan.ts"
export * from "./AgentState.ts"
export * from "./AgentToolCall.ts"
export * from "./Common.ts"
export * from "./EventLog.ts"
export * from "./Names.ts"
export * from "./Rpc.ts"
export * from "./Texts.ts"
export * from "./ToolResults.ts"
