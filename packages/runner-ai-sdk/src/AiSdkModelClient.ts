/**
 * A `ModelClient` for the built-in Stepwise runner over any AI SDK `LanguageModel` (so any provider
 * package works): one `streamText` call per RunModel with tools that have no `execute`, one step,
 * `maxRetries: 0` (the engine owns retries), `ModelRequest.cancellationSignal` and the fiber's
 * interruption as the abort signal, and text and reasoning deltas merged for up to 100 ms or 1,024
 * characters.
 *
 * @since 0.1.0
 */
import { ModelClient } from "@durable-agent/session"
import { jsonSchema, type LanguageModel, type ToolSet, tool } from "ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { callModel } from "./internal/call.ts"
import { sessionToAiSdk, toUsage } from "./internal/convert.ts"

/** Options of the AI SDK model client. */
export interface AiSdkModelClientOptions {
  /** Passed to every call, e.g. `{ openai: { reasoningEffort: "low" } }`. */
  readonly providerOptions?: Record<string, any> | undefined
  readonly maxOutputTokens?: number | undefined
}

/** Builds a `ModelClient` over an AI SDK language model. */
export const make = (model: LanguageModel, options?: AiSdkModelClientOptions): ModelClient.ModelClientShape => ({
  generate: Effect.fnUntraced(function* (request: ModelClient.ModelRequest) {
    const tools: ToolSet = {}
    for (const t of request.tools) {
      tools[t.name] = tool({
        description: t.description,
        inputSchema: jsonSchema(t.parameters as any),
        outputSchema: jsonSchema({})
      })
    }
    const result = yield* callModel({
      model,
      instructions: request.instructions,
      messages: sessionToAiSdk(request.messages),
      tools,
      providerOptions: options?.providerOptions,
      maxOutputTokens: options?.maxOutputTokens,
      toolChoice:
        request.toolChoice === undefined || typeof request.toolChoice === "string"
          ? request.toolChoice
          : { type: "tool", toolName: request.toolChoice.tool },
      onTextDelta: request.onTextDelta,
      onReasoningDelta: request.onReasoningDelta,
      abortSignal: request.cancellationSignal
    })
    return {
      text: result.text === "" ? null : result.text,
      reasoning: result.reasoning === "" ? null : result.reasoning,
      toolCalls: result.toolCalls.map((c) => ({
        toolCallId: c.toolCallId,
        toolName: c.toolName,
        arguments: JSON.stringify(c.input ?? {})
      })),
      usage: toUsage(result.usage),
      metadata: result.metadata
    } satisfies ModelClient.ModelResponse
  })
})

/** The `ModelClient` layer over an AI SDK language model. */
export const layer = (model: LanguageModel, options?: AiSdkModelClientOptions): Layer.Layer<ModelClient.ModelClient> =>
  Layer.succeed(ModelClient.ModelClient, make(model, options))
