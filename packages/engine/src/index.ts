/**
 * @durable-agent/engine: the Dex programming model as an Effect port, with an embedded (SQLite)
 * and a distributed (Postgres) engine on effect/cluster + effect/sql.
 *
 * @since 0.1.0
 */
export * as Client from "./Client.ts"
export * as Engine from "./Engine.ts"
export * as EngineConfig from "./EngineConfig.ts"
export * from "./Errors.ts"
export * from "./Flow.ts"
export * as Health from "./Health.ts"
export * as Inspect from "./Inspect.ts"
export * as Metrics from "./Metrics.ts"
export * as NodeSqlite from "./NodeSqliteClient.ts"
export * as Worker from "./Worker.ts"
