// One pi-ai model call, made the way Pi's agent loop makes its calls (pi-agent-core's `streamAssistantResponse`:
// `transformContext`, then the conversion to LLM messages, then `getApiKey`, then the stream function with the
// context, the tools and the abort signal) but without the loop around it, which would go on to run or block the
// tools. The turn's cancellation signal and the fiber's interruption abort the call. Text, thinking and tool-call
// deltas are merged by the runner kit's DeltaBuffer as they arrive and written in order while the call streams.
import { DeltaBuffer } from "@durable-agent/runner-kit"
import { Errors } from "@durable-agent/session"
import type { AgentMessage, AgentTool, StreamFn } from "@mariozechner/pi-agent-core"
import {
  type AssistantMessage,
  type AssistantMessageEvent,
  type Message,
  type Model,
  type SimpleStreamOptions,
  streamSimple
} from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"

export interface CallOptions {
  readonly model: Model<any>
  readonly systemPrompt: string
  readonly messages: ReadonlyArray<Message>
  /** The tools the model sees (their `execute` never runs here). */
  readonly tools: ReadonlyArray<AgentTool<any>>
  readonly streamFn?: StreamFn | undefined
  readonly streamOptions?: SimpleStreamOptions | undefined
  readonly getApiKey?: ((provider: string) => Promise<string | undefined> | string | undefined) | undefined
  readonly transformContext?: ((messages: AgentMessage[], signal?: AbortSignal) => Promise<AgentMessage[]>) | undefined
  readonly onTextDelta: (text: string) => Effect.Effect<void>
  readonly onReasoningDelta: (text: string) => Effect.Effect<void>
  /** A tool call's argument text as it streams (merged like text deltas), with the call's ID and tool name. */
  readonly onToolCallDelta: (delta: ToolCallDelta) => Effect.Effect<void>
  /** The turn's cancellation signal (`AgentTurnContext.cancellationSignal`); aborting it aborts the call. */
  readonly abortSignal?: AbortSignal | undefined
}

/** A piece of a tool call's argument text. */
export interface ToolCallDelta {
  readonly toolCallId: string
  readonly toolName: string
  readonly text: string
}

const errorMessage = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : JSON.stringify(error)

const isLlmMessage = (m: AgentMessage): m is Message =>
  (m as Message).role === "user" || (m as Message).role === "assistant" || (m as Message).role === "toolResult"

/**
 * Writes events in order, without holding up the stream: each write starts after the one before it ended.
 * Writes are best effort (an `EventWriter` never fails), so a failed one is dropped.
 */
const orderedWrites = () => {
  let last: Promise<unknown> = Promise.resolve()
  return {
    write: (effect: Effect.Effect<void>) => {
      last = last.then(() => Effect.runPromiseExit(effect))
    },
    done: () => last
  }
}

/**
 * Makes exactly one model call and returns the assistant message. An aborted call fails with
 * `ModelCallError` (it never reads as an answer), and so does a call that ended in an error.
 */
export const callModel = (options: CallOptions): Effect.Effect<AssistantMessage, Errors.ModelCallError> =>
  Effect.gen(function* () {
    const writes = orderedWrites()
    // DeltaBuffer merges synchronously; what it flushes is written in order while the call streams
    const buffer = (emit: (text: string) => Effect.Effect<void>) =>
      DeltaBuffer.make((text) => Effect.sync(() => writes.write(emit(text))))
    const text = buffer(options.onTextDelta)
    const reasoning = buffer(options.onReasoningDelta)
    const toolCallDeltas = new Map<number, DeltaBuffer.DeltaBuffer>()
    const toolCallBuffer = (index: number, partial: AssistantMessage): DeltaBuffer.DeltaBuffer => {
      let found = toolCallDeltas.get(index)
      if (found === undefined) {
        const block = partial.content[index]
        const toolCallId = block?.type === "toolCall" ? block.id : ""
        const toolName = block?.type === "toolCall" ? block.name : ""
        found = buffer((text) => options.onToolCallDelta({ toolCallId, toolName, text }))
        toolCallDeltas.set(index, found)
      }
      return found
    }
    const onEvent = (e: AssistantMessageEvent): Effect.Effect<void> => {
      switch (e.type) {
        case "text_delta":
          return text.push(e.delta)
        case "thinking_delta":
          return reasoning.push(e.delta)
        case "toolcall_delta":
          return toolCallBuffer(e.contentIndex, e.partial).push(e.delta)
        case "toolcall_end":
          return toolCallDeltas.get(e.contentIndex)?.flush ?? Effect.void
        default:
          return Effect.void
      }
    }
    let aborted = false
    const final = yield* Effect.tryPromise({
      try: async (interrupted) => {
        const signal =
          options.abortSignal === undefined ? interrupted : AbortSignal.any([interrupted, options.abortSignal])
        const onAbort = () => {
          aborted = true
        }
        signal.addEventListener("abort", onAbort, { once: true })
        if (signal.aborted) aborted = true
        try {
          // the messages are fresh objects of this call (parsed from the stored messages and the run state)
          const input: Array<AgentMessage> = [...options.messages]
          const transformed =
            options.transformContext === undefined ? input : await options.transformContext(input, signal)
          const apiKey =
            (options.getApiKey === undefined ? undefined : await options.getApiKey(options.model.provider)) ??
            options.streamOptions?.apiKey
          const stream = await (options.streamFn ?? streamSimple)(
            options.model,
            {
              systemPrompt: options.systemPrompt,
              messages: transformed.filter(isLlmMessage),
              tools: options.tools.map(({ name, description, parameters }) => ({ name, description, parameters }))
            },
            {
              ...options.streamOptions,
              ...(apiKey !== undefined ? { apiKey } : {}),
              // the engine owns retries: a failed call fails the Step attempt
              maxRetries: 0,
              signal
            }
          )
          for await (const event of stream) Effect.runSync(onEvent(event))
          return await stream.result()
        } finally {
          signal.removeEventListener("abort", onAbort)
        }
      },
      catch: (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    }).pipe(
      Effect.ensuring(
        Effect.suspend(() => {
          for (const b of [text, reasoning, ...toolCallDeltas.values()]) Effect.runSync(b.flush)
          return Effect.promise(writes.done)
        })
      )
    )
    // an aborted call is never an answer, however the provider ended the stream
    if (aborted || final.stopReason === "aborted") {
      return yield* new Errors.ModelCallError({ message: "the model call was cancelled" })
    }
    if (final.stopReason === "error") {
      return yield* new Errors.ModelCallError({ message: final.errorMessage ?? "the model call failed" })
    }
    return final
  })
