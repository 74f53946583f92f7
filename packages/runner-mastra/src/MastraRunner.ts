/**
 * The Mastra framework runner, in Step mode. Each RunModel runs a Mastra `Agent` once with the agent's
 * tools offered as client tools (no `execute`) and `maxSteps: 1`, so Mastra stops after one model call
 * and hands back the tool calls; the session runs each call in its own Step, and the next RunModel feeds
 * the final results back as `tool-result` parts. The framework run state is the turn's Mastra messages
 * (format 2, plain JSON) and the calls that wait for results.
 *
 * The runner guards the places where Mastra would break a Step rule without a word:
 * - a second model call in one run is refused before it reaches the provider, and the turn ends with
 *   `turnError` (`maxSteps: 1` already keeps Mastra to one call; the guard holds whatever Mastra changes);
 * - a processor that rejects a response and asks for a retry makes Mastra end the run with finish reason
 *   `retry` and no answer: the runner fails the attempt instead, so the RunModel Step retries;
 * - a tool call whose result Mastra would leave out of the prompt is refused the same way;
 * - Mastra mutates the messages it is given: every run gets a deep copy;
 * - sequential rounds are merged into one assistant step: a `step-start` part marks each new round;
 * - a tool name the agent does not have comes back as a call: it is deferred as a call that fails with
 *   `unknown tool <name>` (read, no approval, since nothing runs);
 * - argument text that is not a JSON object becomes `{}` in Mastra: the runner passes the model's own
 *   text on, and the session records the call `failed` with `arguments must be a JSON object`.
 *
 * The session's enabled built-in tools (`AgentTurnContext.enabledBuiltInTools`: ask_user, durable_wait,
 * write_todos) are offered as client tools with the JSON Schemas of `BuiltInTools.definitions`, like
 * Stepwise offers them; the session routes their calls to its own Steps. An enabled built-in's name wins
 * over an agent tool of that name. `AgentTurnContext.cancellationSignal` is part of the run's
 * `abortSignal`, so `cancel_turn` aborts the provider request.
 *
 * It has the compaction capability (`AgentSessionOptions.compaction`), counting tokens with Mastra's own
 * estimator (`TokenLimiterProcessor.countMessage`, the count Mastra's token limiter trims by): the next input's
 * messages, the instructions, Mastra's per-conversation overhead and an estimate of 50 per offered tool.
 * `selectCompactionCutoff` is `Runner.selectCutoffWithin` with each stored message counted the same way;
 * `summarizeContext` runs a Mastra agent once, without tools, over the previous summary and the messages after
 * it, leaving out the oldest messages with the spec's note when the input and the answer's room
 * (`modelSettings.maxOutputTokens`, default `Stepwise.DEFAULT_MAX_OUTPUT_TOKENS`) would exceed the budget.
 * After a compaction the model input starts with the summary as a user message.
 *
 * Tool kinds this runner cannot defer, and which therefore run inside RunModel and are at-least-once:
 * none. The agent's tools are the runner's `tools`, and every one of them is deferred.
 *
 * @since 0.1.0
 */
import {
  BuiltIns,
  EffectClass,
  Replay,
  RunState,
  SourceTools,
  ToolCall,
  ToolRetryableError
} from "@durable-agent/runner-kit"
import { Errors, EventWriter, type ModelClient, Runner, SessionTracer, Stepwise, Wire } from "@durable-agent/session"
import { Agent, type ToolsInput } from "@mastra/core/agent"
import type { MastraModelConfig } from "@mastra/core/llm"
import { type IMastraLogger, noopLogger } from "@mastra/core/logger"
import {
  type InputProcessorOrWorkflow,
  type OutputProcessorOrWorkflow,
  TokenLimiterProcessor
} from "@mastra/core/processors"
import { RequestContext } from "@mastra/core/request-context"
import { createTool, type ToolAnnotations } from "@mastra/core/tools"
import { jsonSchema } from "ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type RunUsage, run } from "./internal/call.ts"
import * as Guard from "./internal/guard.ts"
import {
  copy,
  type DbMessage,
  fromStoredMessages,
  markNewRounds,
  partCounts,
  resultText,
  toFrameworkMessages,
  toolCallIds,
  withResults
} from "./internal/messages.ts"
import { recordSpans } from "./internal/tracing.ts"

export { ToolRetryableError }

/** A language model object as Mastra takes it: an AI SDK provider's model (specification v2, v3 or v4). */
export type MastraModel = Guard.GuardedModel

/**
 * A Mastra tool with `execute`, as `createTool({ id, description, inputSchema, execute })` makes it. The
 * runner offers the model its schema and runs `execute` in the tool Step. `mcp.annotations` give its
 * effect class (`readOnlyHint`: read, `idempotentHint`: idempotent_write) unless `toolEffects` names one.
 */
export interface MastraTool {
  readonly id: string
  readonly description: string
  readonly inputSchema?: unknown
  readonly execute?: ((inputData: never, context: never) => Promise<unknown>) | undefined
  readonly toModelOutput?: ((output: never) => unknown) | undefined
  readonly mcp?: { readonly annotations?: ToolAnnotations | undefined } | undefined
  readonly strict?: boolean | undefined
  readonly providerOptions?: Record<string, Record<string, unknown>> | undefined
}

/** What a tool's `execute` finds under {@link TOOL_CALL_KEY} in its `requestContext`. */
export interface DurableToolCall {
  readonly toolCallId: string
  /** `<flowId>/<turnId>/<toolCallId>`: the same on every attempt; pass it to the system you write to. */
  readonly idempotencyKey: string
  readonly attempt: number
}

/** The `requestContext` key of the {@link DurableToolCall} a tool Step passes to `execute`. */
export const TOOL_CALL_KEY = "durable-agent/tool-call"

/** The durable call a tool runs in, read from its execution context (`undefined` outside a tool Step). */
export const durableToolCall = (context: {
  readonly requestContext?: { get(key: string): unknown } | undefined
}): DurableToolCall | undefined => context.requestContext?.get(TOOL_CALL_KEY) as DurableToolCall | undefined

/** What `instructions` and `model` functions receive. */
export interface MastraTurnInfo {
  readonly flowId: string
  readonly turnId: string
  readonly sessionSettings: Wire.SessionSettings
}

/** An agent on Mastra: what `new Agent(...)` takes, less what Step mode decides (tools, steps, memory). */
export interface MastraAgent {
  readonly name: string
  /** An AI SDK model object (not a model-router string: the runner wraps the object it calls). */
  readonly model: MastraModel | ((turn: MastraTurnInfo) => MastraModel)
  readonly instructions?: string | ((turn: MastraTurnInfo) => string) | undefined
  readonly tools?: Readonly<Record<string, MastraTool>> | undefined
  /**
   * JSON-Schema tools, such as an MCP source's (`SourceTools.tools(source, toolPolicies)`): each becomes a
   * Mastra tool over its JSON Schema that runs in its own tool Step; its policy is its own effect and approval
   * unless the session has a `ToolPolicy` for it. A name of `tools` wins.
   */
  readonly jsonSchemaTools?: ReadonlyArray<SourceTools.JsonSchemaTool> | undefined
  /** Effect classes by tool name; wins over `mcp.annotations`. */
  readonly toolEffects?: Readonly<Record<string, Wire.ToolEffect>> | undefined
  /** Mastra processors (guardrails and the like); a retry they ask for would be a second model call. */
  readonly inputProcessors?: ReadonlyArray<InputProcessorOrWorkflow> | undefined
  readonly outputProcessors?: ReadonlyArray<OutputProcessorOrWorkflow> | undefined
  readonly maxProcessorRetries?: number | undefined
  /** Model settings (temperature, maxOutputTokens, ...); `maxRetries` is always 0: the Step retries. */
  readonly modelSettings?: Record<string, unknown> | undefined
  readonly providerOptions?: Record<string, Record<string, unknown>> | undefined
  /** Mastra's logger; silent by default (failures surface as Step errors). */
  readonly logger?: IMastraLogger | undefined
}

/**
 * The framework run state between RunModel Steps of one turn: the turn's Mastra messages after the stored
 * history (the calls of the last round in state `call`) and the calls that wait for results.
 */
const runState = RunState.pending<DbMessage>()

const clientTools = (tools: Readonly<Record<string, MastraTool>>): ToolsInput => {
  const set: ToolsInput = {}
  for (const [name, t] of Object.entries(tools)) {
    // no `execute`: Mastra stops with the call instead of running it
    set[name] = createTool({
      id: t.id,
      description: t.description,
      // the schema createTool already normalised; its type is generic over the tool's input
      ...(t.inputSchema !== undefined ? { inputSchema: t.inputSchema as any } : {}),
      ...(t.strict !== undefined ? { strict: t.strict } : {}),
      ...(t.providerOptions !== undefined ? { providerOptions: t.providerOptions } : {})
    })
  }
  return set
}

/** The enabled built-ins as client tools (no `execute`), with their JSON Schemas. */
const builtInClientTools = (turn: Runner.AgentTurnContext): ToolsInput => {
  const set: ToolsInput = {}
  for (const d of BuiltIns.enabled(turn)) {
    // a plain JSON Schema object; `jsonSchema` takes the SDK's own JSONSchema7 type
    set[d.name] = createTool({ id: d.name, description: d.description, inputSchema: jsonSchema(d.parameters as any) })
  }
  return set
}

const toUsage = (usage: RunUsage, modelCalls: number): Wire.AgentUsage => ({
  modelCalls,
  inputTokens: usage.inputTokens ?? 0,
  outputTokens: usage.outputTokens ?? 0,
  cachedInputTokens: usage.cachedInputTokens ?? 0,
  reasoningTokens: usage.reasoningTokens ?? 0
})

/** Mastra's answer to input that fails the tool's schema: `{ error: true, message, validationErrors }`. */
const isValidationError = (value: unknown): value is { readonly message: string } =>
  typeof value === "object" &&
  value !== null &&
  (value as { error?: unknown }).error === true &&
  typeof (value as { message?: unknown }).message === "string" &&
  "validationErrors" in value

/** A JSON-Schema tool as a Mastra tool: its `execute` reads the durable call from the request context. */
const fromJsonSchemaTool = (t: SourceTools.JsonSchemaTool): MastraTool =>
  createTool({
    id: t.name,
    description: t.description,
    // a plain JSON Schema object; `jsonSchema` takes the SDK's own JSONSchema7 type
    inputSchema: jsonSchema(t.parameters as any),
    execute: async (input: unknown, context: any) => {
      const call = durableToolCall(context)
      return t.execute(input as { readonly [key: string]: unknown }, {
        toolCallId: call?.toolCallId ?? "",
        idempotencyKey: call?.idempotencyKey ?? "",
        attempt: call?.attempt ?? 0,
        abortSignal: context?.abortSignal ?? new AbortController().signal
      })
    }
  }) as MastraTool

/** A user message of the runner's own (the summary, the summary call's note and request). */
const userMessage = (id: string, text: string, at: number): DbMessage => ({
  id,
  role: "user",
  createdAt: new Date(at).toISOString(),
  content: { format: 2, parts: [{ type: "text", text }] }
})

/**
 * The summary as the first user message of a model input ("Compaction changes the model input"); dated before
 * the stored history, whose messages are dated by their index from the epoch.
 */
const summaryMessage = (text: string): DbMessage =>
  userMessage("context-summary", `${Wire.CONTEXT_SUMMARY_PREFIX}\n${text}`, -2)

/** Mastra's token estimator, as its token limiter counts a stored message (no limit of its own is used). */
const counter = new TokenLimiterProcessor({ limit: Number.MAX_SAFE_INTEGER })

/** The tokens Mastra's token limiter adds per request beside the messages (`TOKENS_PER_CONVERSATION`). */
const TOKENS_PER_CONVERSATION = 24
/** What an offered tool's definition is estimated to cost (Mastra's limiter does not count tools). */
const TOKENS_PER_TOOL = 50

/** The tokens of messages by Mastra's count. */
const countMessages = (messages: ReadonlyArray<DbMessage>): Effect.Effect<number, Errors.ModelCallError> =>
  Effect.tryPromise({
    try: async () => {
      let n = 0
      // the runner's messages are Mastra's stored format 2, as plain JSON
      for (const m of messages)
        n += await counter.countMessage(m as unknown as Parameters<typeof counter.countMessage>[0])
      return n
    },
    catch: (cause) => new Errors.ModelCallError({ message: `Mastra's token count failed: ${String(cause)}` })
  })

/** A whole request's tokens: instructions, messages, the conversation's overhead and the offered tools. */
const countRequest = (instructions: string, messages: ReadonlyArray<DbMessage>, toolCount: number) =>
  Effect.map(
    countMessages(instructions === "" ? messages : [userMessage("instructions", instructions, -3), ...messages]),
    (n) => n + TOKENS_PER_CONVERSATION + TOKENS_PER_TOOL * toolCount
  )

/** The text of the assistant messages a run added to `input`. */
const answerText = (messages: ReadonlyArray<DbMessage>, input: ReadonlyArray<DbMessage>): string => {
  const before = new Set(input.map((m) => m.id))
  return messages
    .filter((m) => m.role === "assistant" && !before.has(m.id))
    .flatMap((m) => m.content.parts.flatMap((p) => (p.type === "text" ? [String(p.text ?? "")] : [])))
    .join("")
}

/** Builds the runner. */
export const make = (agent: MastraAgent): Runner.AgentFrameworkRunnerShape => {
  const jsonTools = new Map(
    (agent.jsonSchemaTools ?? [])
      .filter((t) => !Object.hasOwn(agent.tools ?? {}, t.name))
      .map((t) => [t.name, t] as const)
  )
  const tools: Readonly<Record<string, MastraTool>> = {
    ...Object.fromEntries([...jsonTools.values()].map((t) => [t.name, fromJsonSchemaTool(t)])),
    ...agent.tools
  }
  const offered = clientTools(tools)
  const info = (turn: Pick<Runner.AgentTurnContext, "flowId" | "turnId" | "sessionSettings">): MastraTurnInfo => ({
    flowId: turn.flowId,
    turnId: turn.turnId,
    sessionSettings: turn.sessionSettings
  })
  const toolNamed = (name: string): MastraTool | undefined => (Object.hasOwn(tools, name) ? tools[name] : undefined)
  const effectOf = (name: string): Wire.ToolEffect | undefined => {
    const t = toolNamed(name)
    const named = agent.toolEffects !== undefined && Object.hasOwn(agent.toolEffects, name)
    return named ? agent.toolEffects![name] : EffectClass.fromHints(t?.mcp?.annotations)
  }

  /** The stored history as the model sees it: after a compaction, the summary first. */
  const historyOf = (turn: Runner.AgentTurnContext): Array<DbMessage> => [
    ...(turn.contextSummary == null ? [] : [summaryMessage(turn.contextSummary.text)]),
    ...fromStoredMessages(turn.messages)
  ]
  const instructionsOf = (turn: Pick<Runner.AgentTurnContext, "flowId" | "turnId" | "sessionSettings">) =>
    (typeof agent.instructions === "function" ? agent.instructions(info(turn)) : agent.instructions) ?? ""

  // the next input as runModelStep would send it: the history, the turn's messages with the results they wait for
  const estimateInputTokens = (turn: Runner.AgentTurnContext) => {
    const state = runState.decode(turn.frameworkRunState)
    const turnMessages = withResults(state?.messages ?? [], Replay.results(turn, state?.pending ?? []))
    const toolCount = Object.keys(offered).length + BuiltIns.enabled(turn).length
    return countRequest(instructionsOf(turn), [...historyOf(turn), ...turnMessages], toolCount)
  }

  // each stored message counted as Mastra counts it in the rebuilt history (a result counts in its call's part)
  const selectCompactionCutoff = Effect.fnUntraced(function* (
    turn: Runner.AgentTurnContext,
    retainedTokenBudget: number
  ) {
    const tokens = new Map<Wire.AgentMessage, number>()
    for (const m of turn.messages) tokens.set(m, yield* countMessages(fromStoredMessages([m])))
    return Runner.selectCutoffWithin(turn.messages, retainedTokenBudget, (m) => tokens.get(m) ?? 0)
  })

  // one run of a Mastra agent without tools: the previous summary, then the messages after it; when the input
  // and the answer's room exceed the budget, the oldest messages are left out up to a cut, with the note
  const summarizeContext = Effect.fn(function* (request: Runner.ContextSummaryRequest) {
    const model = typeof agent.model === "function" ? agent.model(info(request)) : agent.model
    const configured = agent.modelSettings?.maxOutputTokens
    const maxOutput = typeof configured === "number" ? configured : Stepwise.DEFAULT_MAX_OUTPUT_TOKENS
    const cuts = Runner.compactionCuts(request.messages)
    const build = (from: number): Array<DbMessage> => [
      ...(request.previousSummary === null ? [] : [summaryMessage(request.previousSummary.text)]),
      ...(from > 0 ? [userMessage("omitted-messages", Wire.omittedMessagesNote(from), -1)] : []),
      ...fromStoredMessages(request.messages.slice(from)),
      userMessage("summary-request", Stepwise.SUMMARY_REQUEST_TEXT, request.messages.length + 1)
    ]
    let from = 0
    let messages = build(from)
    while (
      from < request.messages.length &&
      (yield* countRequest(Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS, messages, 0)) + maxOutput > request.inputTokenBudget
    ) {
      let next = from
      while (next < request.messages.length && !cuts[next]) next++
      from = next + 1
      messages = build(from)
    }
    const guard = Guard.make(model, toolCallIds(messages, "result"))
    const summarizer = new Agent({
      id: `${agent.name}-summarizer`,
      name: `${agent.name}-summarizer`,
      instructions: Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS,
      // as for the turn's agent: the same model object, under Mastra's own model type
      model: guard.model as unknown as MastraModelConfig
    })
    summarizer.__setLogger(agent.logger ?? noopLogger)
    const outcome = yield* run({
      agent: summarizer,
      guard,
      messages: copy(messages),
      clientTools: {},
      streamOptions: {
        ...(agent.modelSettings !== undefined ? { modelSettings: agent.modelSettings } : {}),
        ...(agent.providerOptions !== undefined ? { providerOptions: agent.providerOptions } : {})
      },
      onTextDelta: () => Effect.void,
      onReasoningDelta: () => Effect.void,
      abortSignal: request.cancellationSignal
    })
    if (outcome._tag === "Refused") return yield* new Errors.ModelCallError({ message: outcome.reason })
    const result = outcome.result
    return {
      text: answerText(result.messages, messages),
      usage: toUsage(result.usage, guard.calls()),
      modelCallMetadata: {
        requestModel: model.modelId,
        providerName: model.provider,
        ...(result.responseModel !== undefined ? { responseModel: result.responseModel } : {}),
        ...(result.responseId !== undefined ? { responseId: result.responseId } : {}),
        finishReasons: result.finishReason !== undefined ? [result.finishReason] : []
      }
    } satisfies Runner.ContextSummaryResult
  })

  const runModelStep = Effect.fn(function* (turn: Runner.AgentTurnContext) {
    const events = yield* EventWriter.EventWriter
    const history = historyOf(turn)
    const historyParts = partCounts(history)
    const state = runState.decode(turn.frameworkRunState)
    const turnMessages = copy(state?.messages ?? [])
    // every call of the last round gets a result: the record's, or "unknown" for a record that is not final
    const results = Replay.results(turn, state?.pending ?? [])
    const resultMessage =
      state !== undefined && state.pending.length > 0
        ? [
            {
              role: "tool",
              content: state.pending.map((p) => ({
                type: "tool-result",
                toolCallId: p.toolCallId,
                toolName: p.toolName,
                output: { type: "text", value: results.get(p.toolCallId)! }
              }))
            }
          ]
        : []
    const model = typeof agent.model === "function" ? agent.model(info(turn)) : agent.model
    // each call the input holds with a result must reach the model with it (Mastra drops calls without one)
    const guard = Guard.make(model, [...toolCallIds(history, "result"), ...toolCallIds(turnMessages)])
    const mastra = new Agent({
      id: agent.name,
      name: agent.name,
      instructions: instructionsOf(turn),
      // Mastra's types pin other @ai-sdk/provider versions than the model's; the object is the same at runtime
      model: guard.model as unknown as MastraModelConfig,
      ...(agent.inputProcessors !== undefined ? { inputProcessors: [...agent.inputProcessors] } : {}),
      ...(agent.outputProcessors !== undefined ? { outputProcessors: [...agent.outputProcessors] } : {}),
      ...(agent.maxProcessorRetries !== undefined ? { maxProcessorRetries: agent.maxProcessorRetries } : {})
    })
    mastra.__setLogger(agent.logger ?? noopLogger)
    const before = partCounts(turnMessages)
    // with the session's tracing on, Mastra's own spans nest under the attempt's chat span
    const frameworkSpans = yield* SessionTracer.FrameworkSpans
    const tracing = frameworkSpans.enabled ? yield* recordSpans(frameworkSpans) : undefined
    const outcome = yield* run({
      agent: mastra,
      guard,
      // a deep copy: Mastra appends the response to the message objects it is given
      messages: copy([...history, ...turnMessages, ...resultMessage]),
      clientTools: { ...offered, ...builtInClientTools(turn) },
      streamOptions: {
        ...(agent.modelSettings !== undefined ? { modelSettings: agent.modelSettings } : {}),
        ...(agent.providerOptions !== undefined ? { providerOptions: agent.providerOptions } : {})
      },
      onTextDelta: events.textDelta,
      onReasoningDelta: events.reasoningDelta,
      abortSignal: turn.cancellationSignal,
      tracingContext: tracing?.tracingContext
    }).pipe(Effect.ensuring(Effect.sync(() => tracing?.finish())))
    const metadata = (finishReason: string | undefined, responseModel?: string, responseId?: string) =>
      ({
        requestModel: model.modelId,
        providerName: model.provider,
        ...(responseModel !== undefined ? { responseModel } : {}),
        ...(responseId !== undefined ? { responseId } : {}),
        finishReasons: finishReason !== undefined ? [finishReason] : []
      }) satisfies ModelClient.ModelCallMetadata
    const endWithError = (reason: string, usage: RunUsage) =>
      Runner.AgentTurnOutcome.turnCompleted({
        // the turn's messages so far, with the last round's results, so the history keeps what ran
        newMessages: toFrameworkMessages(withResults(turnMessages, results)),
        usage: toUsage(usage, guard.calls()),
        turnError: reason,
        modelCallMetadata: metadata(undefined)
      })
    if (outcome._tag === "Refused") return endWithError(outcome.reason, outcome.usage)
    const result = outcome.result
    // Mastra must not have written into the stored history (it merges into the message it continues)
    const touched = result.messages.filter(
      (m) => historyParts.has(m.id) && historyParts.get(m.id) !== m.content.parts.length
    )
    if (touched.length > 0) {
      return endWithError(`Mastra changed stored message ${touched[0]!.id}; the turn cannot be stored`, result.usage)
    }
    if (result.tripwire !== undefined) {
      return endWithError(`a Mastra processor stopped the turn: ${result.tripwire}`, result.usage)
    }
    const newTurnMessages = copy(result.messages.filter((m) => !historyParts.has(m.id)))
    markNewRounds(newTurnMessages, before)
    const usage = toUsage(result.usage, guard.calls())
    const modelCallMetadata = metadata(result.finishReason, result.responseModel, result.responseId)
    if (result.toolCalls.length === 0) {
      return Runner.AgentTurnOutcome.turnCompleted({
        newMessages: toFrameworkMessages(newTurnMessages),
        usage,
        modelCallMetadata
      })
    }
    return Runner.AgentTurnOutcome.toolCallsRequested({
      frameworkRunState: runState.encode({
        v: 1,
        messages: newTurnMessages,
        pending: result.toolCalls.map((c) => ({ toolCallId: c.toolCallId, toolName: c.toolName }))
      }),
      toolCalls: result.toolCalls.map((c) => {
        const known = toolNamed(c.toolName) !== undefined
        return {
          toolCallId: c.toolCallId,
          toolName: c.toolName,
          // the model's own text: Mastra turns text that is not JSON into `{}`
          arguments: guard.rawArguments.get(c.toolCallId) ?? JSON.stringify(c.args ?? {}),
          // an unknown tool runs nothing, so it needs no approval and fails in a plain CallTool
          ...(jsonTools.has(c.toolName)
            ? {
                policy: SourceTools.resolvePolicy(turn, jsonTools.get(c.toolName)!),
                ...(jsonTools.get(c.toolName)!.toolSourceReference === undefined
                  ? {}
                  : { toolSourceReference: jsonTools.get(c.toolName)!.toolSourceReference })
              }
            : {
                policy: known
                  ? turn.resolveToolPolicy(c.toolName, effectOf(c.toolName))
                  : { effect: "read" as const, requiresApproval: false }
              })
        }
      }),
      usage,
      modelCallMetadata
    })
  })

  const executeDeferredToolCall = Effect.fn(function* (call: Runner.DeferredToolExecution) {
    const t = toolNamed(call.toolCall.toolName)
    if (t?.execute === undefined) return yield* ToolCall.unknownTool(call)
    // Mastra's execute types are generic over the tool's schema; the input was validated by Mastra's wrapper
    const execute = t.execute as (input: unknown, context: unknown) => Promise<unknown>
    return yield* ToolCall.run(call, {
      execute: (input, options) => {
        const durable: DurableToolCall = {
          toolCallId: options.toolCallId,
          idempotencyKey: options.idempotencyKey,
          attempt: options.attempt
        }
        return execute(input, {
          abortSignal: options.abortSignal,
          requestContext: new RequestContext([[TOOL_CALL_KEY, durable]])
        })
      },
      output: (value) => {
        if (isValidationError(value)) return Effect.fail(new Errors.ToolExecutionError({ message: value.message }))
        const visible = t.toModelOutput !== undefined ? (t.toModelOutput as (output: unknown) => unknown)(value) : value
        return Effect.succeed(resultText(visible ?? null))
      }
    })
  })

  return {
    name: agent.name,
    buildUserMessage: (text: string): Runner.FrameworkMessage =>
      toFrameworkMessages([
        {
          id: crypto.randomUUID(),
          role: "user",
          createdAt: new Date().toISOString(),
          content: { format: 2, parts: [{ type: "text", text }] }
        }
      ])[0]!,
    runModelStep,
    executeDeferredToolCall,
    estimateInputTokens,
    selectCompactionCutoff,
    summarizeContext
  }
}

/** The runner as the session's `AgentFrameworkRunner` layer. */
export const layer = (agent: MastraAgent): Layer.Layer<Runner.AgentFrameworkRunner> =>
  Layer.succeed(Runner.AgentFrameworkRunner, make(agent))
