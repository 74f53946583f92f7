/**
 * @durable-agent/runner-kit: what every framework runner of the durable agent session shares, so runners
 * depend on the kit and never on each other.
 *
 * - `ToolCall`: `ToolRetryableError` and running a framework tool call in its tool Step.
 * - `Replay`: the recorded results the model sees when a turn resumes.
 * - `RunState`: the run-state codec.
 * - `EffectClass`: the effect-class table and the one hints-to-effect mapping.
 * - `SourceTools`: a session tool source (MCP) as framework-neutral JSON-Schema tools calling `callTool`.
 * - `BuiltIns`: the session's built-in tools as an effect/ai Toolkit, and the ones a turn enabled.
 * - `DeltaBuffer`: merged text deltas.
 * - `@durable-agent/runner-kit/Conformance`: the runner conformance suite (a `@effect/vitest` suite).
 * - `@durable-agent/runner-kit/Bench`: the scaffolding of a runner's benchmark (timing, the durable and the
 *   in-memory turns, the result table, figures into `bench-results.json`).
 *
 * @since 0.1.0
 */
export * as BuiltIns from "./BuiltIns.ts"
export * as DeltaBuffer from "./DeltaBuffer.ts"
export * as EffectClass from "./EffectClass.ts"
export * as Replay from "./Replay.ts"
export * as RunState from "./RunState.ts"
export * as SourceTools from "./SourceTools.ts"
export * as ToolCall from "./ToolCall.ts"
export { type ToolCallOptions, ToolRetryableError } from "./ToolCall.ts"
