/**
 * @durable-agent/session: the durable agent session Flow in Step mode on the engine port: Steps, RPCs,
 * events, the persistence schema, the wire codecs, the runner interface, the built-in Stepwise loop,
 * `ModelClient` (with a scripted layer), `ToolSource`, and `AgentSessionClient`.
 *
 * @since 0.1.0
 */
export * as AgentSessionFlow from "./AgentSessionFlow.ts"
export * as BuiltInTools from "./BuiltInTools.ts"
export * from "./Client.ts"
export * from "./Errors.ts"
export * from "./ModelClient.ts"
export * as Persistence from "./Persistence.ts"
export * from "./Policy.ts"
export * from "./Runner.ts"
export * from "./Services.ts"
export * as Stepwise from "./Stepwise.ts"
export * as ToolkitSource from "./ToolkitSource.ts"
export * from "./ToolSource.ts"
export * from "./wire/index.ts"
