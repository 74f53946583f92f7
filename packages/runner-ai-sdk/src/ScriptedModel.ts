/**
 * A scripted AI SDK model: `MockLanguageModelV4` from `ai/test` answering from a script of the
 * session's `ScriptedResponse` shape (text, streamed deltas, reasoning, tool calls, usage, delays,
 * failures). Tests and demos use it in place of a provider: no API key, same code path.
 *
 * @since 0.1.0
 */
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import type { ModelClient } from "@durable-agent/session"
import { MockLanguageModelV4 } from "ai/test"
import * as Duration from "effect/Duration"

/** The call options a scripted step can look at (the prompt the SDK built). */
export type CallOptions = MockLanguageModelV4["doStreamCalls"][number]

/**
 * A scripted response; `providerMetadata` is attached to its text and tool-call parts, as real providers
 * do (the SDK turns it into `providerOptions` on the stored message parts).
 */
export type Response = ModelClient.ScriptedResponse & {
  readonly providerMetadata?: Record<string, Record<string, unknown>>
}

/** One scripted model call: a response, or a function (possibly async) of the call options and the call index. */
export type Step = Response | ((options: CallOptions, index: number) => Response | Promise<Response>)

const sleep = (ms: number, signal: AbortSignal | undefined, onAbort: () => void) =>
  new Promise<void>((resolve, reject) => {
    const abort = () => {
      clearTimeout(timer)
      onAbort()
      reject(signal?.reason ?? new Error("aborted"))
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", abort)
      resolve()
    }, ms)
    if (signal?.aborted === true) abort()
    else signal?.addEventListener("abort", abort, { once: true })
  })

/**
 * The scripted model: a `MockLanguageModelV4` that also records which calls saw their abort signal fire
 * while they waited out a scripted `delay`.
 */
export interface ScriptedLanguageModel extends MockLanguageModelV4 {
  /** The indexes of the calls aborted during their `delay`, in the order the aborts came. */
  readonly abortedCalls: ReadonlyArray<number>
}

/**
 * Builds the model. Calls beyond the script fail with "script exhausted". `doStreamCalls` records what
 * the SDK sent, and `abortedCalls` the calls whose abort signal fired during their delay, for assertions.
 */
export const make = (script: ReadonlyArray<Step>, options?: { readonly modelId?: string }): ScriptedLanguageModel => {
  let next = 0
  const abortedCalls: Array<number> = []
  const model: MockLanguageModelV4 = new MockLanguageModelV4({
    provider: "scripted",
    modelId: options?.modelId ?? "scripted-model",
    doStream: async (call) => {
      const index = next++
      const entry = script[index]
      if (entry === undefined) throw new Error(`script exhausted after ${script.length} model calls`)
      const response = typeof entry === "function" ? await entry(call, index) : entry
      if (response.delay !== undefined) {
        await sleep(Duration.toMillis(Duration.fromInputUnsafe(response.delay)), call.abortSignal, () =>
          abortedCalls.push(index)
        )
      }
      if (response.fail !== undefined) throw Object.assign(new Error(response.fail), { isRetryable: true })
      const meta = response.providerMetadata ? { providerMetadata: response.providerMetadata } : {}
      const parts: Array<any> = [{ type: "stream-start", warnings: [] }]
      parts.push({ type: "response-metadata", id: `scripted-${index}`, modelId: model.modelId })
      if (response.reasoning !== undefined) {
        parts.push({ type: "reasoning-start", id: "r" })
        parts.push({ type: "reasoning-delta", id: "r", delta: response.reasoning })
        parts.push({ type: "reasoning-end", id: "r" })
      }
      if (response.text !== undefined) {
        parts.push({ type: "text-start", id: "t" })
        for (const delta of response.textDeltas ?? [response.text]) parts.push({ type: "text-delta", id: "t", delta })
        parts.push({ type: "text-end", id: "t", ...meta })
      }
      for (const c of response.toolCalls ?? []) {
        parts.push({
          type: "tool-call",
          toolCallId: c.id,
          toolName: c.name,
          input: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}),
          ...meta
        })
      }
      const usage = response.usage ?? {}
      parts.push({
        type: "finish",
        finishReason: { unified: (response.toolCalls?.length ?? 0) > 0 ? "tool-calls" : "stop", raw: undefined },
        usage: {
          inputTokens: {
            total: usage.inputTokens ?? 0,
            noCache: usage.inputTokens ?? 0,
            cacheRead: usage.cachedInputTokens ?? 0,
            cacheWrite: 0
          },
          outputTokens: {
            total: usage.outputTokens ?? 0,
            text: usage.outputTokens ?? 0,
            reasoning: usage.reasoningTokens ?? 0
          }
        }
      })
      return {
        stream: new ReadableStream({
          start(controller) {
            for (const p of parts) controller.enqueue(p)
            controller.close()
          }
        })
      }
    }
  })
  return Object.assign(model, { abortedCalls })
}

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((p: { type?: string; text?: string }) => (p.type === "text" ? (p.text ?? "") : "")).join("")
      : ""

const resultsOf = (message: { readonly content: unknown }): Array<Conformance.PromptToolResult> =>
  (Array.isArray(message.content) ? message.content : [])
    .filter((p: { type?: string }) => p.type === "tool-result")
    .map((p: { toolCallId: string; toolName: string; output?: { type?: string; value?: unknown } }) => ({
      toolCallId: p.toolCallId,
      toolName: p.toolName,
      text: typeof p.output?.value === "string" ? p.output.value : (JSON.stringify(p.output?.value) ?? "")
    }))

/**
 * The conformance suite's view of a call's prompt (`Conformance.ModelCallView`): user texts, tool results,
 * the offered tool names.
 */
export const promptView = (call: CallOptions): Conformance.ModelCallView => {
  const prompt = call.prompt as ReadonlyArray<{ readonly role: string; readonly content: unknown }>
  const last = prompt[prompt.length - 1]
  return {
    userTexts: prompt.filter((m) => m.role === "user").map((m) => textOf(m.content)),
    toolResults: prompt.filter((m) => m.role === "tool").flatMap(resultsOf),
    lastToolResults: last?.role === "tool" ? resultsOf(last) : [],
    offeredTools: (call.tools ?? []).map((t) => t.name)
  }
}

/**
 * A scripted model that plays the conformance suite's script (`Conformance.ScriptPlayer`): every call is
 * answered with `player.play(promptView(call), call.abortSignal)`. Any runner over AI SDK models (the AI
 * SDK runner, Mastra) builds its conformance harness on it.
 */
export const fromPlayer = (
  player: Conformance.ScriptPlayer,
  options?: { readonly calls?: number }
): ScriptedLanguageModel =>
  make(
    Array.from(
      { length: options?.calls ?? 200 },
      () => (call: CallOptions) => player.play(promptView(call), call.abortSignal)
    )
  )
