// One pi-ai model call, made the way Pi's agent loop makes its calls (pi-agent-core's `streamAssistantResponse`:
// `transformContext`, then the conversion to LLM messages, then `getApiKey`, then the stream function with the
// context, the tools and the abort signal) but without the loop around it, which would go on to run or block the
// tools. The turn's cancellation signal and the fiber's interruption abort the call. Text, thinking and tool-call
// deltas are merged as the runner kit's DeltaBuffer merges them (1,024 characters or 100 ms) and written in order while the
// call streams.
import { Errors } from "@durable-agent/session"
import type { AgentMessage, StreamFn } from "@mariozechner/pi-agent-core"
import {
  type AssistantMessage,
  type AssistantMessageEvent,
  type Message,
  type Model,
  type SimpleStreamOptions,
  streamSimple,
  type Tool
} from "@mariozechner/pi-ai"
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

export interface CallOptions {
  readonly model: Model<any>
  readonly systemPrompt: string
  /** The call's context messages: an array of this call's own, which the call may give a transform. */
  readonly messages: ReadonlyArray<Message>
  /** The tools the model sees, as pi-ai's `Tool`s (name, description, parameters). */
  readonly tools: ReadonlyArray<Tool>
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
 * Writes are best effort (an `EventWriter` never fails), so a failed one is dropped. `inFlight` tells whether a
 * write has not ended yet, so the call's end waits for the writes only when there are some.
 */
const orderedWrites = () => {
  let last: Promise<unknown> = Promise.resolve()
  let inFlight = 0
  const ended = () => {
    inFlight--
  }
  return {
    write: (effect: Effect.Effect<void>) => {
      inFlight++
      last = last.then(() => Effect.runPromiseExit(effect)).then(ended)
    },
    inFlight: () => inFlight > 0,
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
  Effect.clockWith((clock) => {
    const writes = orderedWrites()
    // what the buffers flush once the call has ended: written by the fiber itself, after the writes in flight
    let tail: Array<Effect.Effect<void>> | undefined
    // merged as the runner kit's DeltaBuffer merges (1,024 characters or 100 ms), synchronously in the
    // stream's loop; what it flushes is written in order while the call streams
    const buffer = (emit: (text: string) => Effect.Effect<void>) =>
      syncDeltaBuffer(clock, (t) => {
        if (tail === undefined) writes.write(emit(t))
        else tail.push(emit(t))
      })
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
    return Effect.tryPromise({
      try: async (interrupted) => {
        // the fiber's interruption or the turn's cancellation: forwarded to one signal by hand (cheaper than
        // `AbortSignal.any`, which also keeps a registry of the signals it follows)
        const cancellation = options.abortSignal
        let signal = interrupted
        let forward: (() => void) | undefined
        if (cancellation !== undefined) {
          const controller = new AbortController()
          signal = controller.signal
          if (interrupted.aborted) controller.abort(interrupted.reason)
          else if (cancellation.aborted) controller.abort(cancellation.reason)
          else {
            forward = () => controller.abort(interrupted.aborted ? interrupted.reason : cancellation.reason)
            interrupted.addEventListener("abort", forward, { once: true })
            cancellation.addEventListener("abort", forward, { once: true })
          }
        }
        try {
          // `options.messages` is this call's own array (its messages may be shared with the runner's rebuilt
          // history, as Pi's loop shares its own context's messages)
          const input = options.messages as Array<AgentMessage>
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
            { systemPrompt: options.systemPrompt, messages, tools: options.tools as Array<Tool> },
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
          // an abort stays: the signal tells whether the call was aborted at any point until it ended
          aborted = signal.aborted
          if (forward !== undefined) {
            interrupted.removeEventListener("abort", forward)
            cancellation!.removeEventListener("abort", forward)
          }
        }
      },
      catch: (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    }).pipe(
      Effect.ensuring(
        Effect.suspend(() => {
          tail = []
          for (const b of [text, reasoning, ...toolCallDeltas.values()]) b.flush()
          const rest =
            tail.length === 0
              ? Effect.void
              : tail.length === 1
                ? tail[0]!
                : Effect.forEach(tail, (w) => w, { discard: true })
          return writes.inFlight() ? Effect.andThen(Effect.promise(writes.done), rest) : rest
        })
      ),
      Effect.flatMap((final) =>
        // an aborted call is never an answer, however the provider ended the stream
        aborted || final.stopReason === "aborted"
          ? Effect.fail(new Errors.ModelCallError({ message: "the model call was cancelled" }))
          : final.stopReason === "error"
            ? Effect.fail(new Errors.ModelCallError({ message: final.errorMessage ?? "the model call failed" }))
            : Effect.succeed(final)
      )
    )
  })
