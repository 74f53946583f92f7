/**
 * A scripted pi-ai provider: pi-ai's own faux provider (`registerFauxProvider`) answering from a script of
 * the session's `ScriptedResponse` shape (text, reasoning, tool calls, usage, delays, failures), behind a
 * pi-ai `Model` whose API is registered in pi-ai's API registry. The runner calls it through `streamSimple`
 * like any real provider, so tests and demos need no API key and take the same code path.
 *
 * The faux provider streams the text, thinking and tool-call arguments in small deltas. It estimates usage
 * from the prompt; a scripted `usage` replaces the estimate, and its cost comes from the model's price table
 * (`cost`, dollars per million tokens) with pi-ai's `calculateCost`.
 *
 * @since 0.1.0
 */
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import type { ModelClient } from "@durable-agent/session"
import {
  type AssistantMessage,
  type AssistantMessageEvent,
  type Context,
  calculateCost,
  createAssistantMessageEventStream,
  fauxAssistantMessage,
  fauxText,
  fauxThinking,
  fauxToolCall,
  getApiProvider,
  type Model,
  registerApiProvider,
  registerFauxProvider,
  type SimpleStreamOptions,
  type ToolCall,
  type Usage,
  unregisterApiProviders
} from "@mariozechner/pi-ai"
import * as Duration from "effect/Duration"

/** A scripted response: the session's `ScriptedResponse` (text, reasoning, tool calls, usage, delay, fail). */
export type Response = ModelClient.ScriptedResponse

/**
 * One scripted model call: a response, or a function (possibly async) of the context pi-ai was given and the
 * call index. A function that rejects makes the call end in an error (pi-ai's `stopReason: "error"`).
 */
export type Step = Response | ((context: Context, index: number, signal?: AbortSignal) => Response | Promise<Response>)

/** A model's price, in dollars per million tokens (pi-ai's `Model.cost`). */
export interface Price {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
}

/** Options of {@link make}. */
export interface ScriptedProviderOptions {
  readonly modelId?: string | undefined
  readonly provider?: string | undefined
  /** The model's price; `usage` of a scripted response is priced with it. Default: free. */
  readonly cost?: Price | undefined
  /** Whether the model reasons (pi-ai's `Model.reasoning`). */
  readonly reasoning?: boolean | undefined
  /** The faux provider's streaming speed; default: every delta at once. */
  readonly tokensPerSecond?: number | undefined
  /** Whether `calls` and `options` keep a copy of every call's context and options (default `true`). */
  readonly recordCalls?: boolean | undefined
}

/** The scripted provider: its model, what it was asked, and the calls aborted during their scripted delay. */
export interface ScriptedProvider {
  /** The pi-ai model to give the runner (or `streamSimple`). */
  readonly model: Model<string>
  /** The context of every call, in call order (a deep copy, as the provider received it). */
  readonly calls: ReadonlyArray<Context>
  /** The options of every call (the abort signal omitted). */
  readonly options: ReadonlyArray<Omit<SimpleStreamOptions, "signal">>
  /** The indexes of the calls whose abort signal fired during their `delay`, in the order the aborts came. */
  readonly abortedCalls: ReadonlyArray<number>
  /** Removes the provider from pi-ai's API registry. */
  readonly unregister: () => void
}

const sleep = (ms: number, signal: AbortSignal | undefined, onAbort: () => void) =>
  new Promise<boolean>((resolve) => {
    const abort = () => {
      clearTimeout(timer)
      onAbort()
      resolve(false)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", abort)
      resolve(true)
    }, ms)
    if (signal?.aborted === true) abort()
    else signal?.addEventListener("abort", abort, { once: true })
  })

const content = (response: ModelClient.ScriptedResponse) => [
  ...(response.reasoning !== undefined ? [fauxThinking(response.reasoning)] : []),
  ...(response.text !== undefined ? [fauxText(response.text)] : []),
  ...(response.toolCalls ?? []).map(
    (c): ToolCall =>
      fauxToolCall(
        c.name,
        // the faux provider streams JSON.stringify(arguments): argument text that is not JSON stays text
        (typeof c.arguments === "string" ? safeParse(c.arguments) : (c.arguments ?? {})) as ToolCall["arguments"],
        { id: c.id }
      )
  )
]

const safeParse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return { _unparsed: text }
  }
}

/**
 * Builds and registers the provider. Calls past the end of the script end with the faux provider's error
 * (`No more faux responses queued`), which the runner reports as a failed model call.
 */
export const make = (script: ReadonlyArray<Step>, options?: ScriptedProviderOptions): ScriptedProvider => {
  const modelId = options?.modelId ?? "scripted-model"
  const cost = options?.cost ?? { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }
  const faux = registerFauxProvider({
    provider: options?.provider ?? "scripted",
    models: [{ id: modelId, cost: { ...cost }, reasoning: options?.reasoning ?? false }],
    ...(options?.tokensPerSecond !== undefined ? { tokensPerSecond: options.tokensPerSecond } : {})
  })
  const calls: Array<Context> = []
  const callOptions: Array<Omit<SimpleStreamOptions, "signal">> = []
  const abortedCalls: Array<number> = []
  const usages: Array<Usage | undefined> = []
  const record = options?.recordCalls ?? true
  let callCount = 0
  const model = { ...faux.getModel(), api: `${faux.api}:scripted` }
  faux.setResponses(
    script.map((entry, index) => async (context: Context, streamOptions: SimpleStreamOptions | undefined) => {
      const response = typeof entry === "function" ? await entry(context, index, streamOptions?.signal) : entry
      if (response.delay !== undefined) {
        const ms = Duration.toMillis(Duration.fromInputUnsafe(response.delay))
        const completed = await sleep(ms, streamOptions?.signal, () => abortedCalls.push(index))
        if (!completed) return fauxAssistantMessage([], { stopReason: "aborted", errorMessage: "Request was aborted" })
      }
      if (response.fail !== undefined)
        return fauxAssistantMessage([], { stopReason: "error", errorMessage: response.fail })
      if (response.usage !== undefined) {
        const u = response.usage
        const cacheRead = u.cachedInputTokens ?? 0
        const usage: Usage = {
          input: Math.max(0, (u.inputTokens ?? 0) - cacheRead),
          output: u.outputTokens ?? 0,
          cacheRead,
          cacheWrite: 0,
          totalTokens: (u.inputTokens ?? 0) + (u.outputTokens ?? 0),
          cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }
        }
        usage.cost = calculateCost(model, usage)
        usages[index] = usage
      }
      return fauxAssistantMessage(content(response), {
        stopReason: (response.toolCalls?.length ?? 0) > 0 ? "toolUse" : "stop",
        responseId: `scripted-${index}`
      })
    })
  )
  const inner = getApiProvider(faux.api)!
  const sourceId = `${faux.api}:scripted`
  // The faux provider streams; this layer records the call and puts a scripted usage on the final message.
  const stream = (m: Model<string>, context: Context, streamOptions?: SimpleStreamOptions) => {
    const index = callCount++
    if (record) {
      // a JSON copy: the tools' functions are not part of what a provider sees
      calls.push(JSON.parse(JSON.stringify(context)) as Context)
      const { signal: _signal, ...rest } = streamOptions ?? {}
      callOptions.push(rest)
    }
    const source = inner.streamSimple({ ...m, api: faux.api }, context, streamOptions)
    const outer = createAssistantMessageEventStream()
    const withUsage = (message: AssistantMessage): AssistantMessage =>
      usages[index] === undefined ? message : { ...message, usage: usages[index]! }
    void (async () => {
      for await (const event of source) {
        const e = event as AssistantMessageEvent
        if (e.type === "done") outer.push({ ...e, message: withUsage(e.message) })
        else if (e.type === "error") outer.push({ ...e, error: withUsage(e.error) })
        else outer.push(e)
      }
      outer.end(withUsage(await source.result()))
    })()
    return outer
  }
  registerApiProvider({ api: model.api, stream, streamSimple: stream }, sourceId)
  return {
    model,
    calls,
    options: callOptions,
    abortedCalls,
    unregister: () => {
      unregisterApiProviders(sourceId)
      faux.unregister()
    }
  }
}

const textOf = (content: string | ReadonlyArray<{ readonly type: string; readonly text?: string }>): string =>
  typeof content === "string" ? content : content.map((b) => (b.type === "text" ? (b.text ?? "") : "")).join("")

/** What the conformance suite reads of one call: its user texts, tool results and offered tools. */
export const promptView = (context: Context): Conformance.ModelCallView => {
  const results = (messages: Context["messages"]) =>
    messages.flatMap((m) =>
      m.role === "toolResult" ? [{ toolCallId: m.toolCallId, toolName: m.toolName, text: textOf(m.content) }] : []
    )
  let start = context.messages.length
  while (start > 0 && context.messages[start - 1]!.role === "toolResult") start--
  return {
    userTexts: context.messages.flatMap((m) => (m.role === "user" ? [textOf(m.content)] : [])),
    toolResults: results(context.messages),
    lastToolResults: results(context.messages.slice(start)),
    offeredTools: (context.tools ?? []).map((t) => t.name)
  }
}

/**
 * A scripted provider that plays the conformance suite's script (`Conformance.ScriptPlayer`): every call
 * is answered with `player.play(promptView(context), signal)`.
 */
export const fromPlayer = (
  player: Conformance.ScriptPlayer,
  options?: ScriptedProviderOptions & { readonly calls?: number | undefined }
): ScriptedProvider =>
  make(
    Array.from(
      { length: options?.calls ?? 200 },
      () => (context: Context, _index: number, signal?: AbortSignal) => player.play(promptView(context), signal)
    ),
    options
  )
