// One Mastra agent run with `agent.stream`: client tools only, one step, no framework retries, the turn's
// cancellation signal and the fiber's interruption wired to the run's abort signal, text and reasoning deltas
// streamed as they arrive.
import { DeltaBuffer } from "@durable-agent/runner-kit"
import { Errors } from "@durable-agent/session"
import type { Agent, ToolsInput } from "@mastra/core/agent"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { Guard } from "./guard.ts"
import type { DbMessage } from "./messages.ts"

export interface RunOptions {
  readonly agent: Agent
  readonly guard: Guard
  /** Deep-copied by the caller: Mastra mutates it. */
  readonly messages: Array<DbMessage | Record<string, unknown>>
  readonly clientTools: ToolsInput
  readonly streamOptions: Record<string, unknown>
  readonly onTextDelta: (text: string) => Effect.Effect<void>
  readonly onReasoningDelta: (text: string) => Effect.Effect<void>
  /** The turn's cancellation signal (`AgentTurnContext.cancellationSignal`); aborting it aborts the run. */
  readonly abortSignal?: AbortSignal | undefined
  /** Where Mastra makes its spans when the session traces the attempt (`internal/tracing.ts`). */
  readonly tracingContext?: { readonly currentSpan: never } | undefined
}

export interface RunUsage {
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
  readonly cachedInputTokens?: number | undefined
  readonly reasoningTokens?: number | undefined
}

export interface RunResult {
  /** The full message list after the run (input and response), as Mastra keeps it. */
  readonly messages: ReadonlyArray<DbMessage>
  readonly toolCalls: ReadonlyArray<{ readonly toolCallId: string; readonly toolName: string; readonly args: unknown }>
  readonly usage: RunUsage
  readonly finishReason: string | undefined
  readonly responseModel: string | undefined
  readonly responseId: string | undefined
  /** Set when a Mastra processor stopped the run (a tripwire). */
  readonly tripwire: string | undefined
}

/** Either the run's result, or the Step rule the guard refused (with what the run used before that). */
export type RunOutcome =
  | { readonly _tag: "Completed"; readonly result: RunResult }
  | { readonly _tag: "Refused"; readonly reason: string; readonly usage: RunUsage }

const errorMessage = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : JSON.stringify(error)

interface Chunk {
  readonly type: string
  readonly payload?: { readonly text?: string; readonly error?: unknown; readonly reason?: string }
}

/**
 * Runs the agent once. Aborting `abortSignal` or interrupting the fiber aborts the run (and the provider
 * request).
 */
export const run = (options: RunOptions): Effect.Effect<RunOutcome, Errors.ModelCallError> =>
  Effect.suspend(() => {
    const controller = new AbortController()
    return runWith(options, controller).pipe(Effect.onInterrupt(() => Effect.sync(() => controller.abort())))
  })

const runWith = (options: RunOptions, controller: AbortController): Effect.Effect<RunOutcome, Errors.ModelCallError> =>
  Effect.gen(function* () {
    const text = DeltaBuffer.make(options.onTextDelta)
    const reasoning = DeltaBuffer.make(options.onReasoningDelta)
    let streamError: unknown
    let tripwire: string | undefined
    let usage: RunUsage = {}
    const signal =
      options.abortSignal === undefined ? controller.signal : AbortSignal.any([controller.signal, options.abortSignal])
    const output = yield* Effect.tryPromise({
      try: () =>
        options.agent.stream(options.messages as Parameters<Agent["stream"]>[0], {
          ...options.streamOptions,
          clientTools: options.clientTools,
          maxSteps: 1,
          abortSignal: signal,
          ...(options.tracingContext === undefined ? {} : { tracingContext: options.tracingContext }),
          modelSettings: { ...(options.streamOptions.modelSettings as object | undefined), maxRetries: 0 },
          onStepFinish: (step: { usage?: RunUsage }) => {
            if (step.usage !== undefined) usage = step.usage
          }
        }),
      catch: (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    })
    yield* Stream.fromAsyncIterable(
      output.fullStream as AsyncIterable<Chunk>,
      (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    ).pipe(
      Stream.runForEach((chunk) => {
        switch (chunk.type) {
          case "text-delta":
            return text.push(chunk.payload?.text ?? "")
          case "reasoning-delta":
            return reasoning.push(chunk.payload?.text ?? "")
          case "error":
            streamError ??= chunk.payload?.error
            return Effect.void
          case "tripwire":
            tripwire ??= chunk.payload?.reason ?? "a processor stopped the run"
            return Effect.void
          default:
            return Effect.void
        }
      })
    )
    yield* text.flush
    yield* reasoning.flush
    // an aborted run ends quietly in Mastra (finish reason `aborted`, no answer): it must not read as one
    if (signal.aborted) return yield* new Errors.ModelCallError({ message: "the model call was cancelled" })
    const violation = options.guard.violation()
    if (violation !== undefined) return { _tag: "Refused", reason: violation, usage } as const
    if (streamError !== undefined) return yield* new Errors.ModelCallError({ message: errorMessage(streamError) })
    const full = yield* Effect.tryPromise({
      try: () => output.getFullOutput(),
      catch: (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    })
    // a violation can also surface only when the run settles
    const late = options.guard.violation()
    if (late !== undefined) return { _tag: "Refused", reason: late, usage } as const
    if (full.finishReason === "retry") {
      // with one step allowed, Mastra drops the rejected response and ends the run with nothing
      return yield* new Errors.ModelCallError({
        message: "a Mastra processor rejected the response and asked for another model call; the Step retries instead"
      })
    }
    const response = full.response as { modelId?: string; id?: string } | undefined
    return {
      _tag: "Completed",
      result: {
        messages: full.messages as unknown as ReadonlyArray<DbMessage>,
        toolCalls: (full.toolCalls as ReadonlyArray<{ payload: RunResult["toolCalls"][number] }>).map((c) => ({
          toolCallId: c.payload.toolCallId,
          toolName: c.payload.toolName,
          args: c.payload.args
        })),
        usage: (full.usage as RunUsage | undefined) ?? usage,
        finishReason: full.finishReason,
        responseModel: response?.modelId,
        responseId: response?.id,
        tripwire: tripwire ?? ((full as { tripwire?: { reason?: string } }).tripwire?.reason || undefined)
      }
    } as const
  })
