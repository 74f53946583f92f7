// One pi-ai model call, made the way Pi's agent loop makes its calls (pi-agent-core's `streamAssistantResponse`:
// `transformContext`, then the conversion to LLM messages, then `getApiKey`, then the stream function with the
// context, the tools and the abort signal) but without the loop around it, which would go on to run or block the
// tools. The turn's cancellation signal and the fiber's interruption abort the call. Text, thinking and tool-call
// deltas are merged as the runner kit's DeltaBuffer merges them (1,024 characters or 100 ms) and written in order while the
// call streams.
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
import * as Clock from "effect/Clock"
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

/** The runner kit's `DeltaBuffer` merging, as plain functions called from the stream's loop. */
interface SyncDeltaBuffer {
  readonly push: (text: string) => void
  readonly flush: () => void
}

/** Merges pieces until 1,024 characters or the first piece is 100 ms old (checked on the next piece). */
const syncDeltaBuffer = (clock: Clock.Clock, emit: (text: string) => void): SyncDeltaBuffer => {
  let buffer = ""
  let since = 0
  const flush = () => {
    if (buffer === "") return
    const text = buffer
    buffer = ""
    emit(text)
  }
  return {
    push: (text) => {
      if (text === "") return
      const now = clock.currentTimeMillisUnsafe()
      if (buffer === "") since = now
      buffer += text
      if (buffer.length >= 1024 || now - since >= 100) flush()
    },
    flush
  }
}

/**
 * Makes exactly one model call and returns the assistant message. An aborted call fails with
 * `ModelCallError` (it never reads as an answer), and so does a call that ended in an error.
 */
export const callModel = (options: CallOptions): Effect.Effect<AssistantMessage, Errors.ModelCallError> =>
  Effect.gen(function* () {
    const writes = orderedWrites()
    const clock = yield* Clock.Clock
    // merged as the runner kit's DeltaBuffer merges (1,024 characters or 100 ms), synchronously in the
    // stream's loop; what it flushes is written in order while the call streams
    const buffer = (emit: (text: string) => Effect.Effect<void>) => syncDeltaBuffer(clock, (t) => writes.write(emit(t)))
    const text = buffer(options.onTextDelta)
    const reasoning = buffer(options.onReasoningDelta)
    const toolCallDeltas = new Map<number, SyncDeltaBuffer>()
    const toolCallBuffer = (index: number, partial: AssistantMessage): SyncDeltaBuffer => {
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
    const onEvent = (e: AssistantMessageEvent): void => {
      switch (e.type) {
        case "text_delta":
          text.push(e.delta)
          return
        case "thinking_delta":
          reasoning.push(e.delta)
          return
        case "toolcall_delta":
          toolCallBuffer(e.contentIndex, e.partial).push(e.delta)
          return
        case "toolcall_end":
          toolCallDeltas.get(e.contentIndex)?.flush()
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
          // a fresh array of this call (its messages may be shared with the runner's rebuilt history, as Pi's
          // loop shares its own context's messages)
          const input: Array<AgentMessage> = [...options.messages]
          // a transform may add custom messages, which the conversion to LLM messages leaves out
          const messages =
            options.transformContext === undefined
              ? (input as Array<Message>)
              : (await options.transformContext(input, signal)).filter(isLlmMessage)
          const apiKey =
            (options.getApiKey === undefined ? undefined : await options.getApiKey(options.model.provider)) ??
            options.streamOptions?.apiKey
          const stream = await (options.streamFn ?? streamSimple)(
            options.model,
            {
              systemPrompt: options.systemPrompt,
              messages,
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
          for await (const event of stream) onEvent(event)
          return await stream.result()
        } finally {
          signal.removeEventListener("abort", onAbort)
        }
      },
      catch: (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    }).pipe(
      Effect.ensuring(
        Effect.suspend(() => {
          for (const b of [text, reasoning, ...toolCallDeltas.values()]) b.flush()
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
