/**
 * The session's metrics as effect `Metric`s, recorded by the session's Steps whether or not tracing is on.
 * They land in the engine layer's registry (see the engine's `Metrics`), so `Health`'s `/metrics` serves them
 * beside the engine's and effect/cluster's. Names and meanings are listed in the session README ("Metrics").
 *
 * @since 0.1.0
 */
import { Metrics } from "@durable-agent/engine"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import type * as Wire from "./wire/index.ts"

/** @category metrics @since 0.1.0 */
export const turnsStarted = Metric.counter("durable_agent_turns_started_total", {
  description: "Turns that started (a user message, a steer or a plan execution).",
  incremental: true
})
/** @category metrics @since 0.1.0 */
export const modelCalls = Metric.counter("durable_agent_model_calls_total", {
  description: "RunModel attempts by outcome (succeeded, failed, interrupted, no_call).",
  incremental: true
})
/** @category metrics @since 0.1.0 */
export const modelCallSeconds = Metric.histogram("durable_agent_model_call_seconds", {
  description: "Run time of a RunModel attempt, by outcome.",
  boundaries: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]
})
/** @category metrics @since 0.1.0 */
export const tokens = Metric.counter("durable_agent_tokens_total", {
  description: "Tokens the model calls reported, by type (input, output, cached_input, reasoning).",
  incremental: true
})
/** @category metrics @since 0.1.0 */
export const toolCalls = Metric.counter("durable_agent_tool_calls_total", {
  description:
    "Tool Step attempts (CallTool, CallSingleAttemptTool, PollToolTask) by effect class and the status of the record when the attempt ended (attempt_failed: the attempt failed and may be retried).",
  incremental: true
})

const tagged = <I, S>(metric: Metric.Metric<I, S>, attributes: Record<string, string>) =>
  Metrics.withAttributes(metric, attributes)

/** Counts a started turn. */
export const turnStarted: Effect.Effect<void> = Metric.update(turnsStarted, 1)

type ModelCallOutcome = "no_call" | "succeeded" | "interrupted" | "failed"

/** The series of one outcome and of each token type, tagged once instead of on every update. */
const outcomeSeries = (outcome: ModelCallOutcome) => ({
  calls: tagged(modelCalls, { outcome }),
  seconds: tagged(modelCallSeconds, { outcome })
})
const byOutcome: Record<ModelCallOutcome, ReturnType<typeof outcomeSeries>> = {
  no_call: outcomeSeries("no_call"),
  succeeded: outcomeSeries("succeeded"),
  interrupted: outcomeSeries("interrupted"),
  failed: outcomeSeries("failed")
}
const inputTokens = tagged(tokens, { type: "input" })
const outputTokens = tagged(tokens, { type: "output" })
const cachedInputTokens = tagged(tokens, { type: "cached_input" })
const reasoningTokens = tagged(tokens, { type: "reasoning" })

/** Counts a RunModel attempt, its run time and its tokens. */
export const modelCall = (
  exit: Exit.Exit<unknown, unknown>,
  usage: Wire.AgentUsage | undefined,
  startNanos: bigint
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const outcome: ModelCallOutcome = Exit.isSuccess(exit)
      ? usage === undefined || usage.modelCalls === 0
        ? "no_call"
        : "succeeded"
      : Cause.hasInterruptsOnly(exit.cause)
        ? "interrupted"
        : "failed"
    const series = byOutcome[outcome]
    const now = yield* Clock.currentTimeNanos
    yield* Metric.update(series.calls, 1)
    yield* Metric.update(series.seconds, Number(now - startNanos) / 1e9)
    if (usage === undefined) return
    yield* Metric.update(inputTokens, usage.inputTokens)
    yield* Metric.update(outputTokens, usage.outputTokens)
    yield* Metric.update(cachedInputTokens, usage.cachedInputTokens)
    yield* Metric.update(reasoningTokens, usage.reasoningTokens)
  })

/** Counts a tool Step attempt by effect class and the record's status. */
export const toolCall = (effect: Wire.ToolEffect, status: string): Effect.Effect<void> =>
  Metric.update(tagged(toolCalls, { effect, status }), 1)
