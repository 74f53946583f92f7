// One pi-ai model call through Pi's own agent loop (`agentLoopContinue`): the loop stops after its first turn
// (`shouldStopAfterTurn`), every tool call is blocked before it runs (`beforeToolCall`), and the blocked
// placeholders it writes are dropped; the stream function refuses any second call. The turn's cancellation
// signal and the fiber's interruption abort the call; text, thinking and tool-call deltas stream as they come.
import { DeltaBuffer } from "@durable-agent/runner-kit"
import { Errors } from "@durable-agent/session"
import {
  type AgentContext,
  type AgentEvent,
  type AgentMessage,
  type AgentTool,
  agentLoopContinue,
  type StreamFn
} from "@mariozechner/pi-agent-core"
import {
  type AssistantMessage,
  createAssistantMessageEventStream,
  type Message,
  type Model,
  type SimpleStreamOptions,
  streamSimple
} from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"

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

/** A stream that ends at once with an error message (what a provider does for a failed request). */
const errorStream = (model: Model<any>, message: string) => {
  const stream = createAssistantMessageEventStream()
  const error: AssistantMessage = {
    role: "assistant",
    content: [],
    api: model.api,
    provider: model.provider,
    model: model.id,
    usage: {
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 0,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }
    },
    stopReason: "error",
    errorMessage: message,
    timestamp: Date.now()
  }
  stream.push({ type: "error", reason: "error", error })
  stream.end(error)
  return stream
}

const errorMessage = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : JSON.stringify(error)

/** Placeholders of the tools for the loop: the model sees them, `beforeToolCall` blocks every call. */
const offered = (tools: ReadonlyArray<AgentTool<any>>): Array<AgentTool<any>> =>
  tools.map((t) => ({
    name: t.name,
    label: t.label,
    description: t.description,
    parameters: t.parameters,
    execute: () => Promise.reject(new Error("a deferred tool runs in its tool Step"))
  }))

/**
 * Makes exactly one model call and returns the assistant message. An aborted call fails with
 * `ModelCallError` (it never reads as an answer), and so does a call that ended in an error.
 */
export const callModel = (options: CallOptions): Effect.Effect<AssistantMessage, Errors.ModelCallError> =>
  Effect.suspend(() => {
    const controller = new AbortController()
    return run(options, controller).pipe(Effect.onInterrupt(() => Effect.sync(() => controller.abort())))
  })

const run = (
  options: CallOptions,
  controller: AbortController
): Effect.Effect<AssistantMessage, Errors.ModelCallError> =>
  Effect.gen(function* () {
    const text = DeltaBuffer.make(options.onTextDelta)
    const reasoning = DeltaBuffer.make(options.onReasoningDelta)
    const signal =
      options.abortSignal === undefined ? controller.signal : AbortSignal.any([controller.signal, options.abortSignal])
    const toolCallDeltas = new Map<number, DeltaBuffer.DeltaBuffer>()
    const toolCallBuffer = (index: number, partial: AssistantMessage): DeltaBuffer.DeltaBuffer => {
      let buffer = toolCallDeltas.get(index)
      if (buffer === undefined) {
        const block = partial.content[index]
        const toolCallId = block?.type === "toolCall" ? block.id : ""
        const toolName = block?.type === "toolCall" ? block.name : ""
        buffer = DeltaBuffer.make((text) => options.onToolCallDelta({ toolCallId, toolName, text }))
        toolCallDeltas.set(index, buffer)
      }
      return buffer
    }
    let calls = 0
    const inner = options.streamFn ?? streamSimple
    // Pi's loop must never see this throw or reject (it would hang): a refused or failed call is an error stream
    const streamFn: StreamFn = async (model, context, streamOptions) => {
      calls++
      try {
        if (calls > 1) throw new Error("a second model call in one RunModel")
        return await inner(model, context, streamOptions)
      } catch (error) {
        return errorStream(model, errorMessage(error))
      }
    }
    const context: AgentContext = {
      systemPrompt: options.systemPrompt,
      // fresh copies: nothing the loop does to its context reaches the session's messages
      messages: structuredClone([...options.messages]),
      tools: offered(options.tools)
    }
    const events = yield* Effect.try({
      try: () =>
        agentLoopContinue(
          context,
          {
            ...options.streamOptions,
            model: options.model,
            // the engine owns retries: a failed call fails the Step attempt
            maxRetries: 0,
            convertToLlm: (messages) =>
              messages.filter(
                (m): m is Message =>
                  (m as Message).role === "user" ||
                  (m as Message).role === "assistant" ||
                  (m as Message).role === "toolResult"
              ),
            ...(options.transformContext !== undefined ? { transformContext: options.transformContext } : {}),
            ...(options.getApiKey !== undefined ? { getApiKey: options.getApiKey } : {}),
            beforeToolCall: async () => ({ block: true, reason: "deferred to the session" }),
            shouldStopAfterTurn: () => true
          },
          signal,
          streamFn
        ),
      catch: (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    })
    let final: AssistantMessage | undefined
    yield* Stream.fromAsyncIterable(
      events as AsyncIterable<AgentEvent>,
      (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    ).pipe(
      Stream.runForEach((event) => {
        if (event.type === "message_end" && (event.message as Message).role === "assistant") {
          final = event.message as AssistantMessage
          return Effect.void
        }
        if (event.type !== "message_update") return Effect.void
        const e = event.assistantMessageEvent
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
      })
    )
    yield* text.flush
    yield* reasoning.flush
    for (const buffer of toolCallDeltas.values()) yield* buffer.flush
    // an aborted call is never an answer, however the provider ended the stream
    if (signal.aborted || final?.stopReason === "aborted") {
      return yield* new Errors.ModelCallError({ message: "the model call was cancelled" })
    }
    if (calls !== 1 || final === undefined) {
      return yield* new Errors.ModelCallError({ message: `Pi's agent loop made ${calls} model calls instead of one` })
    }
    if (final.stopReason === "error") {
      return yield* new Errors.ModelCallError({ message: final.errorMessage ?? "the model call failed" })
    }
    return final
  })
