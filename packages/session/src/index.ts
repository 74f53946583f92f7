/**
 * @durable-agent/session: the durable agent session Flow in Step mode on the engine port: Steps, RPCs,
 * events, the persistence schema, the wire codecs, the runner interface, the built-in Stepwise loop,
 * `ModelClient` (with a scripted layer), `ToolSource`, `AgentSessionClient`, and `Tracer` (the session's
 * OpenTelemetry GenAI spans; the OpenTelemetry SDK layer is the separate `@durable-agent/session/OpenTelemetry`
 * entry, so nothing OpenTelemetry loads unless it is imported).
 *
 * Every module is a namespace, as effect's own packages export theirs:
 *
 * ```ts
 * import { AgentSessionClient, AgentSessionFlow, ModelClient, ToolSource } from "@durable-agent/session"
 *
 * const client = yield* AgentSessionClient.AgentSessionClient
 * const model = ModelClient.scripted([{ text: "Hello." }])
 * ```
 *
 * The codecs alone, for browsers, are the `@durable-agent/session/wire` entry (here as `Wire`).
 *
 * @since 0.1.0
 */
export * as AgentSessionClient from "./AgentSessionClient.ts"
export * as AgentSessionFlow from "./AgentSessionFlow.ts"
export * as BuiltInTools from "./BuiltInTools.ts"
export * as Errors from "./Errors.ts"
export * as EventWriter from "./EventWriter.ts"
export * as Heartbeat from "./Heartbeat.ts"
export * as ModelClient from "./ModelClient.ts"
export * as Persistence from "./Persistence.ts"
export * as Policy from "./Policy.ts"
export * as Runner from "./Runner.ts"
export * as SessionMetrics from "./SessionMetrics.ts"
export * as Stepwise from "./Stepwise.ts"
export * as ToolkitSource from "./ToolkitSource.ts"
export * as ToolSource from "./ToolSource.ts"
export * as SessionTracer from "./Tracer.ts"
export * as Wire from "./wire/index.ts"
