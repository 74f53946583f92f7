// One AI SDK model call with `streamText`: tools without `execute`, one step, no SDK retries.
import { DeltaBuffer } from "@durable-agent/runner-kit"
import { Errors, type ModelClient, SessionTracer } from "@durable-agent/session"
import {
  isStepCount,
  type LanguageModel,
  type LanguageModelUsage,
  type ModelMessage,
  type StreamTextEndEvent,
  streamText,
  type ToolSet
} from "ai"
import * as Effect from "effect/Effect"
import { toJsonSafe } from "./convert.ts"
import { recordTelemetry } from "./telemetry.ts"

export interface CallOptions {
  readonly model: LanguageModel
  readonly instructions: string | undefined
  readonly messages: ReadonlyArray<ModelMessage>
  readonly tools: ToolSet
  readonly providerOptions?: Record<string, any> | undefined
  readonly maxOutputTokens?: number | undefined
  /** The AI SDK `toolChoice`; the SDK's default (`auto`) when absent. */
  readonly toolChoice?: "auto" | "required" | { readonly type: "tool"; readonly toolName: string } | undefined
  readonly onTextDelta?: ((text: string) => Effect.Effect<void>) | undefined
  readonly onReasoningDelta?: ((text: string) => Effect.Effect<void>) | undefined
  /** The turn's cancellation signal (`AgentTurnContext.cancellationSignal`); aborting it aborts the call. */
  readonly abortSignal?: AbortSignal | undefined
}

export interface CallResult {
  readonly text: string
  readonly reasoning: string
  readonly toolCalls: ReadonlyArray<{ readonly toolCallId: string; readonly toolName: string; readonly input: unknown }>
  /** The response messages, JSON-safe, with `providerOptions` on their parts. */
  readonly responseMessages: ReadonlyArray<ModelMessage>
  readonly usage: LanguageModelUsage | undefined
  readonly metadata: ModelClient.ModelCallMetadata
}

const errorMessage = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : JSON.stringify(error)

/**
 * Makes exactly one model call. The SDK's abort signal combines the caller's `abortSignal` (the turn's
 * cancellation signal) with the fiber's interruption, so `cancel_turn`, a method timeout or any other
 * interruption of the Step aborts the HTTP request.
 */
export const callModel = (options: CallOptions): Effect.Effect<CallResult, Errors.ModelCallError> =>
  Effect.gen(function* () {
    // with the session's tracing on, the SDK's own telemetry nests under the attempt's chat span
    const frameworkSpans = yield* SessionTracer.FrameworkSpans
    if (!frameworkSpans.enabled) return yield* streamCall(options, undefined)
    const telemetry = recordTelemetry(frameworkSpans)
    return yield* Effect.ensuring(
      streamCall(options, telemetry),
      Effect.sync(() => telemetry.finish("the call ended without a result"))
    )
  })

/** The call itself, with the SDK's telemetry recorded by `telemetry` when tracing is on. */
const streamCall = (
  options: CallOptions,
  telemetry: ReturnType<typeof recordTelemetry> | undefined
): Effect.Effect<CallResult, Errors.ModelCallError> =>
  Effect.gen(function* () {
    const text = DeltaBuffer.make(options.onTextDelta ?? (() => Effect.void))
    const reasoning = DeltaBuffer.make(options.onReasoningDelta ?? (() => Effect.void))
    let fullText = ""
    let fullReasoning = ""
    let streamError: unknown
    const controller = new AbortController()
    const signal =
      options.abortSignal === undefined ? controller.signal : AbortSignal.any([controller.signal, options.abortSignal])
    // the call's final values, from the SDK's `onEnd` (its result getters would each replay the whole stream)
    let ended: StreamTextEndEvent | undefined
    const result = streamText({
      model: options.model,
      ...(options.instructions ? { instructions: options.instructions } : {}),
      messages: [...options.messages],
      tools: options.tools,
      stopWhen: isStepCount(1),
      maxRetries: 0,
      abortSignal: signal,
      // errors surface as ModelCallError below; the SDK's default would also log them to stderr
      onError: () => {},
      onEnd: (event: StreamTextEndEvent) => {
        ended = event
      },
      ...(telemetry === undefined ? {} : { telemetry: { isEnabled: true, integrations: [telemetry.integration] } }),
      ...(options.providerOptions ? { providerOptions: options.providerOptions } : {}),
      ...(options.maxOutputTokens ? { maxOutputTokens: options.maxOutputTokens } : {}),
      ...(options.toolChoice === undefined ? {} : { toolChoice: options.toolChoice })
    } as Parameters<typeof streamText>[0])
    // the stream's parts, read without the fiber up to the next delta (the only part that needs it for its event);
    // the fiber's interruption aborts the call
    const parts = (result.stream as AsyncIterable<any>)[Symbol.asyncIterator]()
    const nextDelta = async (): Promise<{ readonly type: string; readonly text: string } | undefined> => {
      while (true) {
        const next = await parts.next()
        if (next.done === true) return undefined
        const part = next.value
        if (part.type === "text-delta" || part.type === "reasoning-delta") return part
        if (part.type === "error") streamError = part.error
      }
    }
    const readDelta = Effect.tryPromise({
      try: nextDelta,
      catch: (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    })
    yield* Effect.gen(function* () {
      while (true) {
        const delta = yield* readDelta
        if (delta === undefined) return
        if (delta.type === "text-delta") {
          fullText += delta.text
          yield* text.push(delta.text)
        } else {
          fullReasoning += delta.text
          yield* reasoning.push(delta.text)
        }
      }
    }).pipe(Effect.onInterrupt(() => Effect.sync(() => controller.abort())))
    yield* text.flush
    yield* reasoning.flush
    // an aborted call is never an answer, however the SDK ended the stream
    if (signal.aborted) return yield* new Errors.ModelCallError({ message: "the model call was cancelled" })
    if (streamError !== undefined) {
      return yield* new Errors.ModelCallError({ message: errorMessage(streamError) })
    }
    // the SDK calls `onEnd` before it closes the stream; without it the call ended without a result
    if (ended === undefined) {
      return yield* new Errors.ModelCallError({ message: "the model call ended without a result" })
    }
    return {
      text: fullText,
      reasoning: fullReasoning,
      toolCalls: ended.toolCalls
        .filter((c) => c.providerExecuted !== true)
        .map((c) => ({ toolCallId: c.toolCallId, toolName: c.toolName, input: c.input })),
      responseMessages: toJsonSafe(ended.responseMessages) as ReadonlyArray<ModelMessage>,
      usage: ended.totalUsage,
      metadata: {
        requestModel: typeof options.model === "string" ? options.model : options.model.modelId,
        responseModel: ended.finalStep?.response?.modelId,
        providerName: typeof options.model === "string" ? undefined : options.model.provider,
        responseId: ended.finalStep?.response?.id,
        finishReasons: [ended.finishReason]
      }
    } satisfies CallResult
  })
