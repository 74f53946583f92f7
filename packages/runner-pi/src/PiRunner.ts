/**
 * The Pi framework runner, in Step mode. Each RunModel makes exactly one pi-ai model call with the turn's
 * context, the way Pi's agent loop makes its calls (`transformContext`, `getApiKey`, then the stream function,
 * pi-ai's `streamSimple` by default, with the turn's abort signal) but without the loop, which would go on to
 * run the tools. The tool calls come back as the session's tool calls and each runs in its own Step
 * (CallTool or CallSingleAttemptTool by its effect class), where the Pi `AgentTool`'s own `execute` runs after
 * its TypeBox schema validated the arguments (`prepareArguments`, then `validateToolArguments`, as the loop
 * does). The next RunModel continues the context with the recorded results as `toolResult` messages, the
 * context `agentLoopContinue` takes.
 *
 * The framework run state is Pi's context JSON for the turn: the turn's Pi messages after the stored
 * history, and the calls that wait for results. `buildUnfinishedTurnMessages` returns those messages with a
 * result for every call, so a steered, cancelled or failed turn keeps its exact transcript.
 *
 * The session's enabled built-in tools (`AgentTurnContext.enabledBuiltInTools`: ask_user, durable_wait,
 * write_todos) are offered as Pi tools with the JSON Schemas of `BuiltInTools.definitions`, like Stepwise
 * offers them; the session routes their calls to its own Steps. An enabled built-in's name wins over an
 * agent tool of that name. `AgentTurnContext.cancellationSignal` is the call's abort signal, so
 * `cancel_turn` aborts the provider request.
 *
 * Tool kinds this runner cannot defer, and which therefore run inside RunModel and are at-least-once: none.
 * The agent's tools are the runner's `tools`, and every one of them is deferred.
 *
 * @since 0.1.0
 */
import { BuiltIns, Replay, RunState, SourceTools, ToolCall } from "@durable-agent/runner-kit"
import { EventWriter, type ModelClient, Runner, Wire } from "@durable-agent/session"
import type {
  AgentMessage,
  AgentTool,
  AgentToolResult,
  AgentToolUpdateCallback,
  StreamFn
} from "@mariozechner/pi-agent-core"
import type { Api, AssistantMessage, Message, Model, SimpleStreamOptions, Tool, TSchema } from "@mariozechner/pi-ai"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { callModel } from "./internal/call.ts"
import { historyCache, toFrameworkMessages, toolCallsOf, toolResultMessage } from "./internal/messages.ts"
import { type DurableToolCall, decodeResult, durableCalls, runDeferred } from "./internal/tools.ts"

export type { DurableToolCall } from "./internal/tools.ts"

/**
 * A Pi `AgentTool` (a TypeBox schema as `parameters`, its own `execute`), with an optional effect class as
 * framework metadata; a `ToolPolicy` of the session wins over it.
 */
export type PiTool<TParameters extends TSchema = TSchema, TDetails = any> = AgentTool<TParameters, TDetails> & {
  readonly effect?: Wire.ToolEffect | undefined
}

/**
 * Any Pi tool, whatever its schema: `execute` as a method, so a tool whose arguments are typed by its
 * schema (`piTool`, `AgentTool<typeof schema>`) fits in a list of tools.
 */
export type AnyPiTool = Omit<PiTool<any>, "execute"> & {
  execute(
    toolCallId: string,
    params: any,
    signal?: AbortSignal,
    onUpdate?: AgentToolUpdateCallback<any>
  ): Promise<AgentToolResult<any>>
}

/** Declares a Pi tool with its `execute` arguments typed by its TypeBox schema. */
export const piTool = <TParameters extends TSchema, TDetails = any>(
  tool: PiTool<TParameters, TDetails>
): PiTool<TParameters, TDetails> => tool

/** What `model`, `systemPrompt` and `streamOptions` functions receive. */
export interface PiTurnInfo {
  readonly flowId: string
  readonly turnId: string
  readonly sessionSettings: Wire.SessionSettings
}

/** An agent on Pi. */
export interface PiAgent {
  readonly name: string
  /** A pi-ai model (`getModel("openai", "gpt-4.1-mini")`, a custom `Model`), or a function of the turn. */
  readonly model: Model<Api> | ((turn: PiTurnInfo) => Model<Api>)
  readonly systemPrompt?: string | ((turn: PiTurnInfo) => string) | undefined
  readonly tools?: ReadonlyArray<AnyPiTool> | undefined
  /**
   * JSON-Schema tools, such as an MCP source's (`SourceTools.tools(source, toolPolicies)` of the runner kit):
   * each is offered to the model as a Pi tool with its JSON Schema (pi-ai validates the arguments against it)
   * and runs in its own tool Step; its policy is its own effect and approval unless the session has a
   * `ToolPolicy` for it, and its record keeps its `toolSourceReference`. A name of `tools` wins.
   */
  readonly jsonSchemaTools?: ReadonlyArray<SourceTools.JsonSchemaTool> | undefined
  /** Effect classes by tool name; wins over a tool's own `effect`. */
  readonly toolEffects?: Readonly<Record<string, Wire.ToolEffect>> | undefined
  /** pi-ai stream options (API key, reasoning level, max tokens, headers, ...); `maxRetries` is always 0. */
  readonly streamOptions?: SimpleStreamOptions | ((turn: PiTurnInfo) => SimpleStreamOptions) | undefined
  /** Resolves the API key before each call (pi-agent-core's `getApiKey`). */
  readonly getApiKey?: ((provider: string) => Promise<string | undefined> | string | undefined) | undefined
  /** Pi's context transform before each call (pi-agent-core's `transformContext`). */
  readonly transformContext?: ((messages: AgentMessage[], signal?: AbortSignal) => Promise<AgentMessage[]>) | undefined
  /** The stream function of the call (default pi-ai's `streamSimple`), such as Pi's proxy stream. */
  readonly streamFn?: StreamFn | undefined
}

/**
 * The framework run state between RunModel Steps of one turn: the turn's part of Pi's context (its Pi
 * messages after the stored history, the last one the assistant message that asked for tools) and the calls
 * that wait for results.
 */
const runState = RunState.pending<Message>()

/** The durable call the current tool runs in, inside a Pi tool's `execute` in a tool Step (else `undefined`). */
export const currentToolCall = (): DurableToolCall | undefined => durableCalls.getStore()

/** The enabled built-ins as Pi tools (their JSON Schemas; a TypeBox schema is JSON Schema), never executed here. */
const builtInTools = (turn: Runner.AgentTurnContext): Array<AgentTool<any>> =>
  BuiltIns.enabled(turn).map((d) => ({
    name: d.name,
    label: d.name,
    description: d.description,
    parameters: d.parameters as unknown as TSchema,
    execute: () => Promise.reject(new Error("a built-in tool runs in the session's own Steps"))
  }))

const toUsage = (message: AssistantMessage): Wire.AgentUsage => ({
  modelCalls: 1,
  inputTokens: message.usage.input + message.usage.cacheRead + message.usage.cacheWrite,
  outputTokens: message.usage.output,
  cachedInputTokens: message.usage.cacheRead,
  reasoningTokens: 0
})

/**
 * The turn's messages from run state, with a result for every call that waited for one: a succeeded call of a
 * Pi tool whose result had images or details gets them back (`decodeResult`), as Pi's loop would give them.
 */
const turnMessages = (
  turn: Runner.AgentTurnContext,
  state: RunState.PendingState<Message> | undefined,
  timestamp: number
): Array<Message> => [
  ...(state?.messages ?? []),
  ...(state?.pending ?? []).map((p): Message => {
    // the runner kit's `Replay.replay` text, from the one lookup of the call's final record
    const record = Replay.finalRecord(turn.toolCalls, p.toolCallId)
    const succeeded = record?.status === "succeeded"
    const recorded = succeeded ? decodeResult(record.output) : undefined
    return recorded === undefined
      ? toolResultMessage(
          p,
          record === undefined ? Wire.OUTCOME_UNKNOWN_TEXT : Wire.modelVisibleResult(record),
          !succeeded,
          timestamp
        )
      : {
          role: "toolResult",
          toolCallId: p.toolCallId,
          toolName: p.toolName,
          content: [...recorded.content],
          ...(recorded.details === undefined ? {} : { details: recorded.details }),
          isError: false,
          timestamp
        }
  })
]

/** A JSON-Schema tool as a Pi tool: its `execute` gets the durable call of the tool Step it runs in. */
const fromJsonSchemaTool = (t: SourceTools.JsonSchemaTool): PiTool<any> => ({
  name: t.name,
  label: t.name,
  description: t.description,
  // a JSON Schema; pi-ai validates and coerces arguments against it as against a TypeBox schema
  parameters: t.parameters as unknown as TSchema,
  ...(t.effect !== undefined ? { effect: t.effect } : {}),
  execute: async (toolCallId, params, signal) => {
    const call = durableCalls.getStore()
    const value = await t.execute(params as { readonly [key: string]: unknown }, {
      toolCallId,
      idempotencyKey: call?.idempotencyKey ?? "",
      attempt: call?.attempt ?? 1,
      abortSignal: signal ?? new AbortController().signal
    })
    return { content: [{ type: "text", text: ToolCall.outputText(value) }], details: undefined }
  }
})

/** Builds the runner. */
export const make = (agent: PiAgent): Runner.AgentFrameworkRunnerShape => {
  const ownTools = (agent.tools ?? []) as ReadonlyArray<PiTool<any>>
  const ownNames = new Set(ownTools.map((t) => t.name))
  const jsonTools = new Map(
    (agent.jsonSchemaTools ?? []).filter((t) => !ownNames.has(t.name)).map((t) => [t.name, t] as const)
  )
  const tools = [...ownTools, ...[...jsonTools.values()].map(fromJsonSchemaTool)]
  const byName = new Map(tools.map((t) => [t.name, t]))
  /** The tools as the model sees them (pi-ai's `Tool`), the same array on every call without built-ins. */
  const toLlmTool = ({ name, description, parameters }: AgentTool<any>): Tool => ({ name, description, parameters })
  const llmTools = tools.map(toLlmTool)
  const callTools = (builtIns: ReadonlyArray<AgentTool<any>>, builtInNames: ReadonlySet<string>): Array<Tool> =>
    builtIns.length === 0
      ? llmTools
      : [...tools.filter((t) => !builtInNames.has(t.name)).map(toLlmTool), ...builtIns.map(toLlmTool)]
  const info = (turn: Runner.AgentTurnContext): PiTurnInfo => ({
    flowId: turn.flowId,
    turnId: turn.turnId,
    sessionSettings: turn.sessionSettings
  })
  const effectOf = (name: string): Wire.ToolEffect | undefined =>
    agent.toolEffects !== undefined && Object.hasOwn(agent.toolEffects, name)
      ? agent.toolEffects[name]
      : byName.get(name)?.effect
  /** A requested call's policy, and the record's tool source reference for a JSON-Schema tool. */
  const policyOf = (turn: Runner.AgentTurnContext, name: string, builtInNames: ReadonlySet<string>) => {
    const overridden = agent.toolEffects !== undefined && Object.hasOwn(agent.toolEffects, name)
    const json = builtInNames.has(name) || overridden ? undefined : jsonTools.get(name)
    if (json !== undefined) {
      return {
        policy: SourceTools.resolvePolicy(turn, json),
        ...(json.toolSourceReference === undefined ? {} : { toolSourceReference: json.toolSourceReference })
      }
    }
    // an unknown tool runs nothing, so it needs no approval and fails in a plain CallTool
    return {
      policy:
        byName.has(name) || builtInNames.has(name)
          ? turn.resolveToolPolicy(name, effectOf(name))
          : { effect: "read" as const, requiresApproval: false }
    }
  }

  // each stored message is rebuilt once per session, not on every RunModel
  const history = historyCache()
  // the run state the last RunModel of a session wrote, so the next one need not parse it again
  const states = new Map<string, { readonly text: string; readonly state: RunState.PendingState<Message> }>()
  const encodeState = (flowId: string, state: RunState.PendingState<Message>): string => {
    const text = runState.encode(state)
    states.delete(flowId)
    states.set(flowId, { text, state })
    if (states.size > 256) states.delete(states.keys().next().value!)
    return text
  }
  const decodeState = (turn: Runner.AgentTurnContext): RunState.PendingState<Message> | undefined => {
    const cached = states.get(turn.flowId)
    return cached !== undefined && cached.text === turn.frameworkRunState
      ? cached.state
      : runState.decode(turn.frameworkRunState)
  }

  const runModelStep = Effect.fnUntraced(function* (turn: Runner.AgentTurnContext) {
    const events = yield* EventWriter.EventWriter
    const now = yield* Clock.currentTimeMillis
    const state = decodeState(turn)
    const current = turnMessages(turn, state, now)
    const builtIns = builtInTools(turn)
    const builtInNames = new Set(builtIns.map((t) => t.name))
    const model = typeof agent.model === "function" ? agent.model(info(turn)) : agent.model
    const systemPrompt = typeof agent.systemPrompt === "function" ? agent.systemPrompt(info(turn)) : agent.systemPrompt
    const streamOptions =
      typeof agent.streamOptions === "function" ? agent.streamOptions(info(turn)) : agent.streamOptions
    // the call's own array: the rebuilt history (the cache's, never changed here), then the turn's messages
    const stored = history.rebuild(turn.flowId, turn.messages)
    const messages: Array<Message> = new Array(stored.length + current.length)
    for (let i = 0; i < stored.length; i++) messages[i] = stored[i]!
    for (let i = 0; i < current.length; i++) messages[stored.length + i] = current[i]!
    const message = yield* callModel({
      model,
      systemPrompt: systemPrompt ?? "",
      messages,
      tools: callTools(builtIns, builtInNames),
      streamFn: agent.streamFn,
      streamOptions,
      getApiKey: agent.getApiKey,
      transformContext: agent.transformContext,
      onTextDelta: events.textDelta,
      onReasoningDelta: events.reasoningDelta,
      onToolCallDelta: (d) =>
        events.write({
          type: "pi.tool_call_delta",
          payload: { tool_call_id: d.toolCallId, tool_name: d.toolName, text: d.text }
        }),
      abortSignal: turn.cancellationSignal
    })
    const usage = toUsage(message)
    // the cost is pi-ai's, from the model's price table: the session's usage has no cost, so it is an event
    yield* events.write({
      type: "pi.usage",
      payload: {
        provider: message.provider,
        model: message.responseModel ?? message.model,
        input_tokens: message.usage.input,
        output_tokens: message.usage.output,
        cache_read_tokens: message.usage.cacheRead,
        cache_write_tokens: message.usage.cacheWrite,
        cost: {
          input: message.usage.cost.input,
          output: message.usage.cost.output,
          cache_read: message.usage.cost.cacheRead,
          cache_write: message.usage.cost.cacheWrite,
          total: message.usage.cost.total
        }
      }
    })
    const modelCallMetadata: ModelClient.ModelCallMetadata = {
      requestModel: model.id,
      responseModel: message.responseModel ?? message.model,
      providerName: model.provider,
      ...(message.responseId !== undefined ? { responseId: message.responseId } : {}),
      finishReasons: [message.stopReason]
    }
    const calls = toolCallsOf(message)
    const turnSoFar = [...current, message]
    if (calls.length === 0) {
      return Runner.AgentTurnOutcome.turnCompleted({
        newMessages: toFrameworkMessages(
          turnSoFar,
          (i) => `${turn.turnId}/${turn.stepExecutionId}/${i}`,
          history.writing(turn.flowId)
        ),
        usage,
        modelCallMetadata
      })
    }
    return Runner.AgentTurnOutcome.toolCallsRequested({
      frameworkRunState: encodeState(turn.flowId, {
        v: 1,
        messages: turnSoFar,
        pending: calls.map((c) => ({ toolCallId: c.id, toolName: c.name }))
      }),
      toolCalls: calls.map((c) => ({
        toolCallId: c.id,
        toolName: c.name,
        arguments: JSON.stringify(c.arguments ?? {}),
        ...policyOf(turn, c.name, builtInNames)
      })),
      usage,
      modelCallMetadata
    })
  })

  const executeDeferredToolCall = (call: Runner.DeferredToolExecution) =>
    runDeferred(byName.get(call.toolCall.toolName), call)

  const buildUnfinishedTurnMessages = (turn: Runner.AgentTurnContext) =>
    Effect.map(Clock.currentTimeMillis, (now) =>
      toFrameworkMessages(turnMessages(turn, decodeState(turn), now), (i) => `${turn.turnId}/unfinished/${i}`)
    )

  return {
    name: agent.name,
    buildUserMessage: (text: string): Runner.FrameworkMessage =>
      toFrameworkMessages([{ role: "user", content: text, timestamp: Date.now() }], () => "user", history.built)[0]!,
    runModelStep,
    executeDeferredToolCall,
    buildUnfinishedTurnMessages
  }
}

/** The runner as the session's `AgentFrameworkRunner` layer. */
export const layer = (agent: PiAgent): Layer.Layer<Runner.AgentFrameworkRunner> =>
  Layer.succeed(Runner.AgentFrameworkRunner, make(agent))
