/**
 * `ModelClient`: one model call of the built-in Stepwise loop, and `ModelClient.layerScripted`, a scripted
 * model for users' tests and examples (text, reasoning, tool calls, parallel tool calls, usage, delays and
 * failures) that needs no model key.
 *
 * @since 0.1.0
 */
import * as LanguageModel from "effect/ai/LanguageModel"
import type * as Prompt from "effect/ai/Prompt"
import type * as Response from "effect/ai/Response"
import * as Tool from "effect/ai/Tool"
import * as Toolkit from "effect/ai/Toolkit"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { ModelCallError } from "./Errors.ts"

/**
 * A tool call the model asked for. `arguments` is the model's JSON text, unparsed.
 *
 * @category models
 * @since 0.1.0
 */
export interface ModelToolCall {
  readonly toolCallId: string
  readonly toolName: string
  readonly arguments: string
}

/**
 * One message of a model request.
 *
 * @category models
 * @since 0.1.0
 */
export type ModelMessage =
  | { readonly role: "user"; readonly text: string }
  | { readonly role: "assistant"; readonly text: string | null; readonly toolCalls: ReadonlyArray<ModelToolCall> }
  | { readonly role: "tool"; readonly toolCallId: string; readonly toolName: string; readonly output: string }

/**
 * A tool the model may call: its name, description and JSON Schema of its arguments.
 *
 * @category models
 * @since 0.1.0
 */
export interface ModelToolDefinition {
  readonly name: string
  readonly description: string
  readonly parameters: { readonly [key: string]: unknown }
}

/**
 * Which tools the model must call: `auto` lets it choose (or answer in text), `required` makes it call one of
 * the offered tools, and `{ tool }` makes it call that tool.
 *
 * @category models
 * @since 0.1.0
 */
export type ModelToolChoice = "auto" | "required" | { readonly tool: string }

/**
 * One model call's request.
 *
 * @category models
 * @since 0.1.0
 */
export interface ModelRequest {
  readonly instructions: string
  readonly messages: ReadonlyArray<ModelMessage>
  readonly tools: ReadonlyArray<ModelToolDefinition>
  /** Which tools the model must call; `auto` when absent. */
  readonly toolChoice?: ModelToolChoice | undefined
  /** Called with each piece of answer text as it streams in. */
  readonly onTextDelta?: ((text: string) => Effect.Effect<void>) | undefined
  /** Called with each piece of reasoning text as it streams in. */
  readonly onReasoningDelta?: ((text: string) => Effect.Effect<void>) | undefined
  /** Aborts when the turn is cancelled (`cancel_turn`); a client passes it to the provider request. */
  readonly cancellationSignal?: AbortSignal | undefined
}

/**
 * Token counts of one model call.
 *
 * @category models
 * @since 0.1.0
 */
export interface ModelUsage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedInputTokens: number
  readonly reasoningTokens: number
}

/**
 * Names of a model call for its span; the session never stores them ("Adapter interface").
 *
 * @category models
 * @since 0.1.0
 */
export interface ModelCallMetadata {
  readonly requestModel?: string | undefined
  readonly responseModel?: string | undefined
  readonly providerName?: string | undefined
  readonly responseId?: string | undefined
  readonly finishReasons?: ReadonlyArray<string> | undefined
}

/**
 * One model call's response: answer text, reasoning, the tool calls it asks for, and usage.
 *
 * @category models
 * @since 0.1.0
 */
export interface ModelResponse {
  readonly text: string | null
  readonly reasoning: string | null
  readonly toolCalls: ReadonlyArray<ModelToolCall>
  readonly usage: ModelUsage
  readonly metadata?: ModelCallMetadata | undefined
}

/**
 * The service shape of {@link ModelClient}.
 *
 * @category models
 * @since 0.1.0
 */
export interface ModelClientShape {
  /** Makes exactly one model call. */
  readonly generate: (request: ModelRequest) => Effect.Effect<ModelResponse, ModelCallError>
  /**
   * The input tokens `generate` would send for `request`, by the provider's own count; optional. Stepwise's
   * compaction (`estimateInputTokens`) uses it when present and an estimate from the text otherwise.
   */
  readonly countInputTokens?: ((request: ModelRequest) => Effect.Effect<number, ModelCallError>) | undefined
}

/**
 * A tool call of a scripted response. Object arguments are encoded as JSON; string arguments are passed
 * through unchanged, so a script can send text that is not JSON.
 *
 * @category models
 * @since 0.1.0
 */
export interface ScriptedToolCall {
  readonly id: string
  readonly name: string
  readonly arguments?: string | { readonly [key: string]: unknown } | undefined
}

/**
 * One scripted model call. `fail` makes the call fail with {@link ModelCallError}; `delay` waits before the
 * response (interruptibly); `textDeltas` overrides how the text streams (one delta by default).
 *
 * @category models
 * @since 0.1.0
 */
export interface ScriptedResponse {
  readonly text?: string | undefined
  readonly textDeltas?: ReadonlyArray<string> | undefined
  readonly reasoning?: string | undefined
  readonly toolCalls?: ReadonlyArray<ScriptedToolCall> | undefined
  readonly usage?: Partial<ModelUsage> | undefined
  readonly delay?: Duration.Input | undefined
  readonly fail?: string | undefined
}

/**
 * One entry of a script: a response, or a function of the request (and the call's zero-based index).
 *
 * @category models
 * @since 0.1.0
 */
export type ScriptedStep = ScriptedResponse | ((request: ModelRequest, index: number) => ScriptedResponse)

/**
 * Options of a scripted model.
 *
 * @category models
 * @since 0.1.0
 */
export interface ScriptedOptions {
  /** Called with every request before it is answered, for assertions. */
  readonly onRequest?: ((request: ModelRequest, index: number) => void) | undefined
  /** The script's token counts: the client's `countInputTokens`, which counts no call. */
  readonly countInputTokens?: ((request: ModelRequest) => number) | undefined
}

const zeroUsage: ModelUsage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }

/**
 * A model client that answers each call with the next entry of `script`. A failing entry is consumed like
 * any other, so a retried call gets the next entry. A call past the end fails with `script exhausted`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const scripted = (script: ReadonlyArray<ScriptedStep>, options?: ScriptedOptions): ModelClientShape => {
  let next = 0
  const count = options?.countInputTokens
  return {
    ...(count === undefined ? {} : { countInputTokens: (request: ModelRequest) => Effect.sync(() => count(request)) }),
    generate: Effect.fnUntraced(function* (request: ModelRequest) {
      const index = next++
      options?.onRequest?.(request, index)
      const entry = script[index]
      if (entry === undefined) {
        return yield* new ModelCallError({ message: `script exhausted after ${script.length} model calls` })
      }
      const response = typeof entry === "function" ? entry(request, index) : entry
      if (response.delay !== undefined) yield* Effect.sleep(Duration.fromInputUnsafe(response.delay))
      if (response.fail !== undefined) return yield* new ModelCallError({ message: response.fail })
      if (response.reasoning !== undefined && request.onReasoningDelta) {
        yield* request.onReasoningDelta(response.reasoning)
      }
      if (response.text !== undefined && request.onTextDelta) {
        for (const delta of response.textDeltas ?? [response.text]) yield* request.onTextDelta(delta)
      }
      return {
        text: response.text ?? null,
        reasoning: response.reasoning ?? null,
        toolCalls: (response.toolCalls ?? []).map((call) => ({
          toolCallId: call.id,
          toolName: call.name,
          arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {})
        })),
        usage: { ...zeroUsage, ...response.usage },
        metadata: { requestModel: "scripted", responseModel: "scripted", providerName: "scripted" }
      } satisfies ModelResponse
    })
  }
}

/** A model request as an effect/ai prompt: the instructions as the system message, then the conversation. */
const toPrompt = (request: ModelRequest): Array<Prompt.MessageEncoded> => [
  { role: "system", content: request.instructions },
  ...request.messages.map((m): Prompt.MessageEncoded => {
    switch (m.role) {
      case "user":
        return { role: "user", content: m.text }
      case "assistant":
        return {
          role: "assistant",
          content: [
            ...(m.text === null || m.text.length === 0 ? [] : [{ type: "text" as const, text: m.text }]),
            ...m.toolCalls.map((c) => ({
              type: "tool-call" as const,
              id: c.toolCallId,
              name: c.toolName,
              params: parseArguments(c.arguments),
              providerExecuted: false
            }))
          ]
        }
      default:
        return {
          role: "tool",
          content: [{ type: "tool-result", id: m.toolCallId, name: m.toolName, isFailure: false, result: m.output }]
        }
    }
  })
]

const parseArguments = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return {}
  }
}

/** The usage of a finish part in the session's terms. */
const usageOf = (usage: Response.Usage): ModelUsage => ({
  inputTokens: usage.inputTokens.total ?? 0,
  outputTokens: usage.outputTokens.total ?? 0,
  cachedInputTokens: usage.inputTokens.cacheRead ?? 0,
  reasoningTokens: usage.outputTokens.reasoning ?? 0
})

/**
 * A model client over any effect/ai `LanguageModel`: one streamed call per request, text and reasoning deltas
 * passed on as they arrive, the tool calls left to the session (the toolkit only describes the tools), usage
 * from the finish part. Interrupting the call (a cancelled or timed-out Step) interrupts the stream, which
 * aborts the provider request. Failures are {@link ModelCallError}s, so RunModel retries them.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromLanguageModel = (model: LanguageModel.LanguageModel): ModelClientShape => ({
  generate: Effect.fnUntraced(function* (request: ModelRequest) {
    const toolkit = Toolkit.make(
      ...request.tools.map((t) =>
        Tool.dynamic(t.name, { description: t.description, parameters: t.parameters as Record<string, unknown> })
      )
    )
    let text = ""
    let reasoning = ""
    const toolCalls: Array<ModelToolCall> = []
    let usage: ModelUsage = zeroUsage
    const finishReasons: Array<string> = []
    let responseModel: string | undefined
    let responseId: string | undefined
    const options = {
      prompt: toPrompt(request),
      toolkit,
      disableToolCallResolution: true as const,
      ...(request.toolChoice === undefined ? {} : { toolChoice: request.toolChoice })
    }
    yield* model.streamText(options).pipe(
      Stream.runForEach((part) => {
        switch (part.type) {
          case "text-delta":
            text += part.delta
            return request.onTextDelta ? request.onTextDelta(part.delta) : Effect.void
          case "reasoning-delta":
            reasoning += part.delta
            return request.onReasoningDelta ? request.onReasoningDelta(part.delta) : Effect.void
          case "tool-call":
            toolCalls.push({ toolCallId: part.id, toolName: part.name, arguments: JSON.stringify(part.params ?? {}) })
            return Effect.void
          case "response-metadata":
            responseModel = part.modelId ?? responseModel
            responseId = part.id ?? responseId
            return Effect.void
          case "finish":
            usage = usageOf(part.usage)
            finishReasons.push(part.reason)
            return Effect.void
          default:
            return Effect.void
        }
      }),
      Effect.mapError((error) => new ModelCallError({ message: error.message }))
    )
    return {
      text: text.length > 0 ? text : null,
      reasoning: reasoning.length > 0 ? reasoning : null,
      toolCalls,
      usage,
      metadata: { responseModel, responseId, finishReasons }
    } satisfies ModelResponse
  })
})

/**
 * The model the built-in Stepwise loop calls. `AgentDefinition.resolveModel` may pick another client per
 * turn from the session settings.
 *
 * @category services
 * @since 0.1.0
 */
export class ModelClient extends Context.Service<ModelClient, ModelClientShape>()(
  "@durable-agent/session/ModelClient"
) {
  /** A client from a `generate` function. */
  static readonly make = (generate: ModelClientShape["generate"]): ModelClientShape => ({ generate })

  /** A layer from a `generate` function. */
  static readonly layer = (generate: ModelClientShape["generate"]): Layer.Layer<ModelClient> =>
    Layer.succeed(ModelClient, ModelClient.make(generate))

  /** A client over an effect/ai `LanguageModel` (see {@link fromLanguageModel}). */
  static readonly fromLanguageModel = fromLanguageModel

  /** The client over the `LanguageModel` service in context, such as a provider's model layer. */
  static readonly layerLanguageModel: Layer.Layer<ModelClient, never, LanguageModel.LanguageModel> = Layer.effect(
    ModelClient,
    Effect.map(LanguageModel.LanguageModel, fromLanguageModel)
  )

  /** A scripted model (see {@link scripted}); every build of the layer starts the script from the top. */
  static readonly layerScripted = (
    script: ReadonlyArray<ScriptedStep>,
    options?: ScriptedOptions
  ): Layer.Layer<ModelClient> => Layer.sync(ModelClient, () => scripted(script, options))
}

/**
 * A `ModelClientShape` from a function that makes one model call.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: (generate: ModelClientShape["generate"]) => ModelClientShape = ModelClient.make

/**
 * A `ModelClient` layer from a function that makes one model call.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: (generate: ModelClientShape["generate"]) => Layer.Layer<ModelClient> = ModelClient.layer

/**
 * A `ModelClient` on the effect/ai `LanguageModel` in context.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerLanguageModel: Layer.Layer<ModelClient, never, LanguageModel.LanguageModel> =
  ModelClient.layerLanguageModel

/**
 * A `ModelClient` that answers from a script, for tests and examples (see {@link scripted}).
 *
 * @category layers
 * @since 0.1.0
 */
export const layerScripted: (
  script: ReadonlyArray<ScriptedStep>,
  options?: ScriptedOptions
) => Layer.Layer<ModelClient> = ModelClient.layerScripted
