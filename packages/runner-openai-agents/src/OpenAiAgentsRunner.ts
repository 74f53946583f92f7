/**
 * The OpenAI Agents SDK (@openai/agents 0.20) framework runner, in Step mode.
 *
 * Every function tool is built with {@link openAiAgentsTool}: it carries a `needsApproval` gate, so a
 * run stops with `interruptions` right after the model call that asked for tools. The runner stores the
 * SDK's `RunState` JSON as the framework run state, the session runs each call in its own Step, and the
 * next RunModel restores the state, approves each interruption whose record is final (the gated tool's
 * `execute` then returns the recorded result instead of running anything) or rejects it with the
 * rejection message, and lets the SDK make the next model call. Every run gets `maxTurns` of its current
 * turn plus one, so one RunModel makes at most one model call.
 *
 * What the SDK does on its own, and how the runner keeps one model call per RunModel:
 * - A handoff is not a function tool: the SDK runs it and would call the next agent's model in the same
 *   run. The `maxTurns` guard stops that second call, and the runner returns `TurnContinued` with the
 *   turn's items and the new agent's name as run state (a `RunState` saved right after a handoff does not
 *   restore in 0.20); the next RunModel runs the new agent on those items. An `openai_agents.handoff`
 *   event marks it.
 * - Argument text that is not JSON skips the approval gate: the SDK answers the call with its own error
 *   and would call the model again. The guard stops that call; the runner defers the call like any other,
 *   the session records it failed (`invalid <tool> arguments: arguments must be a JSON object`), and that
 *   text replaces the SDK's answer in the run state before the next model call.
 * - A run that makes more than one model call fails the RunModel attempt, and so does a run that stops
 *   unfinished without tool calls to defer (an approval the SDK dropped). A run that makes no model call
 *   and finishes is a tool-use behaviour (`toolUseBehavior`) ending the turn on a tool's output:
 *   `TurnCompleted` with zero model calls. A response that calls tools and hands off stops for the tools
 *   first; the resumed run hands off and makes the next agent's model call, its one call.
 *
 * The session's enabled built-in tools (`AgentTurnContext.enabledBuiltInTools`: ask_user, durable_wait,
 * write_todos) are offered like Stepwise offers them: `make` adds one gated function tool per built-in
 * (the JSON Schema of `BuiltInTools.definitions`, `strict: false`) to every agent of the graph, enabled
 * (`isEnabled`) only in this runner's runs of a session that enabled it, so the agents behave as before
 * anywhere else. The session routes their calls to its own Steps, and the resumed run answers them with
 * the recorded results like any deferred call. An agent tool named like an enabled built-in fails the
 * RunModel attempt. `AgentTurnContext.cancellationSignal` joins the run's `signal`, so `cancel_turn`
 * aborts the model request.
 *
 * It has the compaction capability (`AgentSessionOptions.compaction`). The SDK counts no tokens before a call,
 * so `estimateInputTokens` estimates a token per four characters of the input items' JSON (and 50 per tool);
 * `selectCompactionCutoff` is `Runner.selectCutoffWithin`, only at a turn's first model call (a saved
 * `RunState` holds the stored messages it was made over); `summarizeContext` runs one SDK run of a summarizer
 * agent on the entry agent's model, without tools, over the previous summary and the messages after it, with
 * the spec's note for messages left out of a request over the budget. After a compaction the input starts with
 * the summary as a user item.
 *
 * Tool kinds this runner cannot defer, which therefore run inside RunModel and are at-least-once (a
 * RunModel retry repeats them): hosted tools that the provider runs (web search, file search, code
 * interpreter). Handoffs are not tools: they only switch the agent.
 *
 * @since 0.1.0
 */

import { DeltaBuffer, EffectClass, Replay, SourceTools, ToolCall, ToolRetryableError } from "@durable-agent/runner-kit"
import {
  BuiltInTools,
  Errors,
  EventWriter,
  Runner as SessionRunner,
  SessionTracer,
  Stepwise,
  Wire
} from "@durable-agent/session"
import {
  Agent,
  type AgentInputItem,
  type FunctionTool,
  Handoff,
  MaxTurnsExceededError,
  type ModelProvider,
  RunContext,
  Runner,
  RunState,
  type RunStreamEvent,
  type ToolExecuteArgument,
  type ToolInputParameters,
  tool
} from "@openai/agents"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { fromStoredMessage, toFrameworkMessage, toUsage, userItem } from "./internal/items.ts"
import * as State from "./internal/state.ts"
import { recordSpans } from "./internal/tracing.ts"

/** What a tool's `execute` receives besides its input (the kit's `ToolCallOptions`). */
export type OpenAiAgentsToolCallOptions = ToolCall.ToolCallOptions

/**
 * A tool of the runner: a name, a description, parameters as a zod object or a JSON Schema (with
 * `strict: false`), its effect class, and the function the tool Step runs. A thrown
 * {@link ToolRetryableError} fails the attempt (the effect class then decides: retried, or
 * `outcome_unknown`); any other thrown error records the call `failed` with its message, which the model
 * sees.
 */
export interface OpenAiAgentsToolDefinition<TParameters extends ToolInputParameters> {
  readonly name: string
  readonly description: string
  readonly parameters: TParameters
  /** The SDK's strict JSON-schema mode; set `false` for a plain JSON Schema. */
  readonly strict?: boolean | undefined
  readonly effect?: Wire.ToolEffect | undefined
  readonly execute: (
    input: ToolExecuteArgument<TParameters>,
    options: OpenAiAgentsToolCallOptions
  ) => PromiseLike<unknown> | unknown
}

/** Thrown by a tool when this attempt failed in a way worth another attempt: the kit's one class. */
export { ToolRetryableError }

/** The tool definition behind each gated SDK tool, and the recorded results of one resumed run. */
const definitions = new WeakMap<object, OpenAiAgentsToolDefinition<any>>()
const recordedResults = new WeakMap<object, ReadonlyMap<string, string>>()

/**
 * A gated tool's `execute`: on resume it answers with the result the session recorded for the call, and fails
 * the run when there is none (a missing result must not become a model-visible error string).
 */
const answerFromRecord =
  (what: string) =>
  (
    _input: unknown,
    runContext: RunContext<unknown> | undefined,
    details?: { readonly toolCall?: { readonly callId?: string } }
  ): string => {
    const callId = details?.toolCall?.callId
    const result = runContext === undefined ? undefined : recordedResults.get(runContext)?.get(callId ?? "")
    if (result === undefined) throw new Error(`no recorded result for ${what} ${callId}`)
    return result
  }

/**
 * Declares a tool: an SDK function tool to put in an `Agent`'s `tools`, gated by `needsApproval`, whose
 * SDK-side `execute` only returns the result the session recorded. The real `execute` runs in the tool
 * Step.
 */
export const openAiAgentsTool = <TParameters extends ToolInputParameters>(
  definition: OpenAiAgentsToolDefinition<TParameters>
): FunctionTool<unknown, TParameters, string> => {
  const gated = tool({
    name: definition.name,
    description: definition.description,
    parameters: definition.parameters,
    ...(definition.strict === undefined ? {} : { strict: definition.strict }),
    needsApproval: true,
    // a missing result must fail the run, not become a model-visible error string
    errorFunction: null,
    execute: answerFromRecord("tool call")
    // the SDK's option union (strict vs non-strict schemas) does not narrow on a generic parameter type
  } as any) as FunctionTool<unknown, TParameters, string>
  definitions.set(gated, definition)
  return gated
}

/** The enabled built-ins of each run, by the run's context value (`RunContext.context`). */
const enabledBuiltIns = new WeakMap<object, ReadonlySet<string>>()

/** A run's context value, which enables the session's built-ins in that run. */
const runContextValue = (turn: SessionRunner.AgentTurnContext): object => {
  const value = {}
  enabledBuiltIns.set(value, new Set<string>(turn.enabledBuiltInTools ?? []))
  return value
}

/**
 * The built-ins as gated SDK function tools, one instance each for every runner: enabled only in a run
 * whose context enables them, answered on resume from the session's record like the agent's own tools.
 */
const builtInTools: ReadonlyArray<FunctionTool<unknown, ToolInputParameters, string>> = BuiltInTools.definitions.map(
  (d) =>
    tool({
      name: d.name,
      description: d.description,
      parameters: d.parameters,
      strict: false,
      needsApproval: true,
      errorFunction: null,
      isEnabled: ({ runContext }: { runContext: RunContext<unknown> }) =>
        enabledBuiltIns.get(runContext.context as object)?.has(d.name) === true,
      execute: answerFromRecord("built-in call")
      // a plain JSON Schema with `strict: false`; the SDK's option union does not narrow on it
    } as any) as FunctionTool<unknown, ToolInputParameters, string>
)
const builtInToolSet = new Set<object>(builtInTools)

/** The runner's configuration. */
export interface OpenAiAgentsDefinition {
  /** The agent each turn starts with; its handoffs (and theirs) make up the agent graph. */
  readonly agent: Agent<any, any>
  /** Resolves string model names (the SDK's OpenAI provider by default). */
  readonly modelProvider?: ModelProvider | undefined
  /**
   * JSON-Schema tools, such as an MCP source's (`SourceTools.tools(source, toolPolicies)`): each becomes a
   * gated function tool (`strict: false`) of every agent of the graph and runs in its own tool Step; its
   * policy is its own effect and approval unless the session has a `ToolPolicy` for it. An agent's own tool
   * of the same name wins.
   */
  readonly jsonSchemaTools?: ReadonlyArray<SourceTools.JsonSchemaTool> | undefined
}

interface AgentGraph {
  readonly agents: ReadonlyMap<string, Agent<any, any>>
  readonly tools: Map<string, OpenAiAgentsToolDefinition<any>>
}

/** Walks the agent graph; refuses a function tool not made with `openAiAgentsTool` and clashing names. */
const agentGraph = (entry: Agent<any, any>): AgentGraph => {
  const agents = new Map<string, Agent<any, any>>()
  const tools = new Map<string, OpenAiAgentsToolDefinition<any>>()
  const visit = (agent: Agent<any, any>) => {
    const seen = agents.get(agent.name)
    if (seen === agent) return
    if (seen !== undefined) throw new Error(`two agents are named ${agent.name}; restoring a run finds agents by name`)
    agents.set(agent.name, agent)
    for (const t of agent.tools) {
      if (t.type !== "function" || builtInToolSet.has(t)) continue
      const definition = definitions.get(t)
      if (definition === undefined) {
        throw new Error(`tool ${t.name} of agent ${agent.name} must be made with openAiAgentsTool to run in Step mode`)
      }
      const other = tools.get(t.name)
      if (other !== undefined && other !== definition) throw new Error(`two different tools are named ${t.name}`)
      tools.set(t.name, definition)
    }
    for (const h of agent.handoffs) visit(h instanceof Handoff ? h.agent : h)
  }
  visit(entry)
  // the built-ins join every agent once (an agent may be in several runners' graphs, or share its array)
  for (const agent of agents.values()) {
    for (const t of builtInTools) if (!agent.tools.includes(t)) agent.tools.push(t)
  }
  return { agents, tools }
}

const errorMessage = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : JSON.stringify(error)

/** The text of a raw model event that carries an answer delta. */
const textDelta = (event: RunStreamEvent): string | undefined =>
  event.type === "raw_model_stream_event" && event.data.type === "output_text_delta" ? event.data.delta : undefined

type Json = { [key: string]: any }

const count = (value: unknown): number => (Array.isArray(value) ? value.length : 0)

/** The state's JSON without the first `stored` items of its original input (the session holds them). */
const withoutStored = (state: RunState<any, any>, stored: number): { [key: string]: unknown } => {
  const full = state._originalInput
  state._originalInput = Array.isArray(full) ? full.slice(stored) : full
  try {
    return state.toJSON() as { [key: string]: unknown }
  } finally {
    state._originalInput = full
  }
}

/** The `function_call` items of a model response. */
const functionCalls = (response: Json | undefined): Array<Json> =>
  Array.isArray(response?.output) ? response.output.filter((item: Json) => item?.type === "function_call") : []

/** What one run ended with: the SDK's state, and whether the `maxTurns` guard stopped it. */
interface RunEnd {
  readonly state: RunState<any, any>
  readonly guarded: boolean
}

/** Builds the runner. */
export const make = (definition: OpenAiAgentsDefinition): SessionRunner.AgentFrameworkRunnerShape => {
  const entry = definition.agent
  const graph = agentGraph(entry)
  const jsonTools = new Map<string, SourceTools.JsonSchemaTool>()
  for (const t of definition.jsonSchemaTools ?? []) {
    const gated = openAiAgentsTool({
      name: t.name,
      description: t.description,
      parameters: t.parameters as any,
      strict: false,
      effect: t.effect,
      execute: (input, options) => t.execute(input as { readonly [key: string]: unknown }, options)
    })
    // the SDK makes the name a valid function name (`-` becomes `_`): the model calls it by that name
    if (graph.tools.has(gated.name) || jsonTools.has(gated.name)) continue
    jsonTools.set(gated.name, t)
    graph.tools.set(gated.name, definitions.get(gated)!)
    for (const agent of graph.agents.values()) agent.tools.push(gated)
  }
  const sdk = new Runner({
    tracingDisabled: true,
    ...(definition.modelProvider === undefined ? {} : { modelProvider: definition.modelProvider })
  })
  // the runs the session traces: the SDK's spans, without content, go to its processors and the chat span
  const tracedSdk = new Runner({
    tracingDisabled: false,
    traceIncludeSensitiveData: false,
    workflowName: entry.name,
    ...(definition.modelProvider === undefined ? {} : { modelProvider: definition.modelProvider })
  })
  const agentNamed = (name: string) =>
    Effect.fromNullishOr(graph.agents.get(name)).pipe(
      Effect.mapError(
        () => new Errors.ModelCallError({ message: `the run state names agent ${name}, not in the agent graph` })
      )
    )

  /** Restores an interrupted run, answering each interruption from the turn's records. */
  const resume = (
    saved: State.InterruptedState,
    stored: ReadonlyArray<AgentInputItem>,
    turn: SessionRunner.AgentTurnContext,
    contextValue: object
  ) =>
    Effect.gen(function* () {
      if (saved.stored !== stored.length) {
        return yield* new Errors.ModelCallError({
          message: `the run state was saved over ${saved.stored} stored messages, the session has ${stored.length}`
        })
      }
      const agent = yield* agentNamed(saved.agent)
      // `saved` was parsed for this call alone, so its items may be patched in place
      const json = saved.runState as Json
      // calls the SDK answered itself (arguments that are not JSON): the model sees the session's record
      for (const item of Array.isArray(json.generatedItems) ? json.generatedItems : []) {
        const record =
          item?.type === "tool_call_output_item" ? Replay.finalRecord(turn.toolCalls, item.rawItem?.callId) : undefined
        if (record !== undefined) {
          const text = Wire.modelVisibleResult(record)
          item.rawItem = { ...item.rawItem, output: { type: "text", text } }
          if ("output" in item) item.output = text
        }
      }
      const context = new RunContext<unknown>(contextValue)
      const results = new Map<string, string>()
      recordedResults.set(context, results)
      const state = yield* Effect.tryPromise({
        try: () => RunState.fromStringWithContext(agent, JSON.stringify(json), context),
        catch: (e) => new Errors.ModelCallError({ message: `the run state does not restore: ${errorMessage(e)}` })
      })
      // the stored messages go back in front of the turn's own input after the restore, which thus parses
      // and checks only the turn's part
      state._originalInput = [...stored, ...(Array.isArray(json.originalInput) ? json.originalInput : [])]
      for (const interruption of state.getInterruptions()) {
        const callId = (interruption.rawItem as Json).callId as string | undefined
        const record = callId === undefined ? undefined : Replay.finalRecord(turn.toolCalls, callId)
        if (record === undefined) {
          // cannot happen while the session keeps its rule (RunModel runs once every record is final)
          state.reject(interruption, { message: Wire.OUTCOME_UNKNOWN_TEXT })
          continue
        }
        const text = Wire.modelVisibleResult(record)
        if (record.status === "rejected") {
          state.reject(interruption, { message: text })
        } else {
          results.set(record.toolCallId, text)
          state.approve(interruption)
        }
      }
      return {
        agent,
        input: state,
        maxTurns: Number(json.currentTurn ?? 0) + 1,
        responsesBefore: count(json.modelResponses),
        itemsBefore: count(json.generatedItems)
      }
    })

  /**
   * One SDK run, streamed: text deltas merged into `text_delta` events. The run's `signal` combines the
   * turn's cancellation signal with the fiber's interruption, so `cancel_turn` aborts the model request.
   */
  const runOnce = (
    agent: Agent<any, any>,
    input: Array<AgentInputItem> | RunState<any, any>,
    maxTurns: number,
    events: typeof EventWriter.EventWriter.Service,
    cancellationSignal: AbortSignal | undefined,
    contextValue: object,
    tracing: ReturnType<typeof recordSpans> | undefined
  ) =>
    Effect.suspend(() => {
      const controller = new AbortController()
      const signal =
        cancellationSignal === undefined ? controller.signal : AbortSignal.any([controller.signal, cancellationSignal])
      return Effect.gen(function* () {
        const raw = yield* Effect.tryPromise({
          // a restored RunState brings its own context (made with `contextValue` in `resume`)
          try: () => {
            const options = {
              stream: true,
              maxTurns,
              signal,
              ...(Array.isArray(input) ? { context: contextValue } : {})
            } as const
            return tracing === undefined
              ? sdk.run(agent, input, options)
              : tracing.run(() => tracedSdk.run(agent, input, options))
          },
          catch: (e) => e
        })
        // merged deltas: written at 1,024 characters, when the first piece is 100 ms old, and at the end
        const text = DeltaBuffer.make(events.textDelta)
        yield* Stream.fromAsyncIterable(raw, (e) => e).pipe(
          Stream.runForEach((event) => {
            const delta = textDelta(event)
            return delta === undefined ? Effect.void : text.push(delta)
          })
        )
        yield* text.flush
        yield* Effect.tryPromise({ try: () => raw.completed, catch: (e) => e })
        // an aborted run is never an answer, however the SDK ended its stream
        if (signal.aborted)
          return yield* Effect.fail(new Errors.ModelCallError({ message: "the model call was cancelled" }))
        if (raw.error !== null && raw.error !== undefined) return yield* Effect.fail(raw.error)
        return { state: raw.state, guarded: false } satisfies RunEnd
      }).pipe(Effect.onInterrupt(() => Effect.sync(() => controller.abort())))
    }).pipe(
      Effect.catch((error: unknown) =>
        error instanceof MaxTurnsExceededError && error.state !== undefined
          ? Effect.succeed({ state: error.state as RunState<any, any>, guarded: true })
          : Effect.fail(new Errors.ModelCallError({ message: errorMessage(error) }))
      )
    )

  const runModelStep = Effect.fn(function* (turn: SessionRunner.AgentTurnContext) {
    const events = yield* EventWriter.EventWriter
    const stored = storedItems(turn)
    const saved = State.decode(turn.frameworkRunState)
    const enabled = new Set<string>(turn.enabledBuiltInTools ?? [])
    const clash = [...enabled].find((name) => graph.tools.has(name))
    if (clash !== undefined) {
      return yield* new Errors.ModelCallError({
        message: `the agent has a tool named ${clash}, the name of an enabled built-in tool; rename it`
      })
    }
    const contextValue = runContextValue(turn)
    const start =
      saved?.kind === "run_state"
        ? yield* resume(saved, stored, turn, contextValue)
        : {
            agent: saved === undefined ? entry : yield* agentNamed(saved.agent),
            input: [...stored, ...structuredClone(saved?.items ?? [])],
            maxTurns: 1,
            responsesBefore: 0,
            itemsBefore: 0
          }
    // with the session's tracing on, the SDK's own spans nest under the attempt's chat span
    const frameworkSpans = yield* SessionTracer.FrameworkSpans
    const tracing = frameworkSpans.enabled ? recordSpans(frameworkSpans) : undefined
    const end = yield* runOnce(
      start.agent,
      start.input,
      start.maxTurns,
      events,
      turn.cancellationSignal,
      contextValue,
      tracing
    ).pipe(
      Effect.onExit((exit) =>
        Effect.sync(() => tracing?.finish(exit._tag === "Failure" ? "the run failed" : undefined))
      )
    )
    // the state's own fields: its JSON is built only for a run state the session stores
    const state = end.state
    const made: ReadonlyArray<Json> = state._modelResponses.slice(start.responsesBefore)
    const stepRule = (what: string) =>
      new Errors.ModelCallError({ message: `${what}; Step mode allows one model call per RunModel` })
    if (made.length > 1) return yield* stepRule(`the framework made ${made.length} model calls in one RunModel`)
    const usage = toUsage(made)
    const last: Json | undefined = made[0]
    const modelCallMetadata = {
      requestModel: typeof start.agent.model === "string" ? start.agent.model : undefined,
      responseId: typeof last?.responseId === "string" ? last.responseId : undefined
    }
    const handoffs = state._generatedItems
      .slice(start.itemsBefore)
      .flatMap((item) => (item.type === "handoff_output_item" ? [item] : []))
    for (const item of handoffs) {
      yield* events.write({
        type: "openai_agents.handoff",
        payload: {
          from_agent: item.sourceAgent.name,
          to_agent: item.targetAgent.name,
          tool_call_id: item.rawItem.callId
        }
      })
    }
    const history = state.history
    if (end.guarded && handoffs.length > 0) {
      // the guard stopped the next agent's model call: the next RunModel makes it
      return SessionRunner.AgentTurnOutcome.turnContinued({
        frameworkRunState: State.encode({
          v: 1,
          kind: "history",
          agent: state.currentAgent.name,
          items: history.slice(stored.length)
        }),
        newMessages: [],
        usage,
        modelCallMetadata
      })
    }
    const waiting = state._currentStep?.type === "next_step_interruption"
    const calls: Array<SessionRunner.DeferredToolCall> = functionCalls(last)
      .filter((c) => graph.tools.has(c.name) || enabled.has(c.name))
      .map((c) => ({
        toolCallId: String(c.callId),
        toolName: String(c.name),
        arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}),
        ...(jsonTools.has(c.name)
          ? {
              policy: SourceTools.resolvePolicy(turn, jsonTools.get(c.name)!),
              ...(jsonTools.get(c.name)!.toolSourceReference === undefined
                ? {}
                : { toolSourceReference: jsonTools.get(c.name)!.toolSourceReference })
            }
          : { policy: EffectClass.resolve(turn, c.name, graph.tools.get(c.name)) })
      }))
    if (calls.length > 0 && (waiting || end.guarded)) {
      return SessionRunner.AgentTurnOutcome.toolCallsRequested({
        frameworkRunState: State.encode(
          State.interrupted(start.agent.name, stored.length, withoutStored(state, stored.length))
        ),
        toolCalls: calls,
        usage,
        modelCallMetadata
      })
    }
    if (waiting || end.guarded) {
      // a run that stops without tool calls to defer would wait forever (an approval the SDK dropped), or
      // would need a second model call
      return yield* stepRule(
        made.length === 0
          ? "the run made no model call and did not finish"
          : "the run stopped after its model call without tool calls to defer or a final answer"
      )
    }
    // finished: a final answer, or a tool's output as the final output (`toolUseBehavior`, no model call)
    return SessionRunner.AgentTurnOutcome.turnCompleted({
      newMessages: history.slice(stored.length).map(toFrameworkMessage),
      usage,
      modelCallMetadata
    })
  })

  // the turn's own items are in the saved state: a handoff's items, or an interrupted run's (the run state JSON)
  const estimateInputTokens = (turn: SessionRunner.AgentTurnContext) => {
    const saved = State.decode(turn.frameworkRunState)
    const own = saved === undefined ? [] : saved.kind === "history" ? saved.items : [saved.runState]
    return estimateTokens([...storedItems(turn), ...own]) + 50 * graph.tools.size
  }

  const summarizeContext = Effect.fn(function* (request: SessionRunner.ContextSummaryRequest) {
    const cuts = SessionRunner.compactionCuts(request.messages)
    const maxOutput = Stepwise.DEFAULT_MAX_OUTPUT_TOKENS
    const build = (from: number): Array<AgentInputItem> => [
      ...(request.previousSummary === null ? [] : [summaryItem(request.previousSummary.text)]),
      ...(from > 0 ? [userItem(Wire.omittedMessagesNote(from))] : []),
      ...request.messages.slice(from).map(fromStoredMessage),
      userItem(Stepwise.SUMMARY_REQUEST_TEXT)
    ]
    const instructionTokens = Math.ceil(Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS.length / 4)
    let from = 0
    let items = build(from)
    while (
      from < request.messages.length &&
      instructionTokens + estimateTokens(items) + maxOutput > request.inputTokenBudget
    ) {
      let next = from
      while (next < request.messages.length && !cuts[next]) next++
      from = next + 1
      items = build(from)
    }
    const summarizer = new Agent({
      name: `${entry.name}-summarizer`,
      instructions: Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS,
      model: entry.model
    })
    const result = yield* Effect.tryPromise({
      try: () =>
        sdk.run(summarizer, items, {
          maxTurns: 1,
          ...(request.cancellationSignal === undefined ? {} : { signal: request.cancellationSignal })
        }),
      catch: (e) => new Errors.ModelCallError({ message: errorMessage(e) })
    })
    const output = result.finalOutput
    return {
      text: typeof output === "string" ? output : "",
      usage: toUsage(result.rawResponses),
      modelCallMetadata: { requestModel: typeof entry.model === "string" ? entry.model : undefined }
    } satisfies SessionRunner.ContextSummaryResult
  })

  const executeDeferredToolCall = Effect.fn(function* (call: SessionRunner.DeferredToolExecution) {
    const t = graph.tools.get(call.toolCall.toolName)
    if (t === undefined) return yield* ToolCall.unknownTool(call)
    return yield* ToolCall.run(call, { validate: (raw) => validate(t, raw), execute: t.execute })
  })

  return {
    name: entry.name,
    buildUserMessage: (text: string): SessionRunner.FrameworkMessage => toFrameworkMessage(userItem(text)),
    runModelStep,
    executeDeferredToolCall,
    estimateInputTokens,
    // only at a turn's first model call: a saved run state was made over the stored messages as they were
    selectCompactionCutoff: (turn: SessionRunner.AgentTurnContext, retainedTokenBudget: number) =>
      turn.frameworkRunState === null ? SessionRunner.selectCutoffWithin(turn.messages, retainedTokenBudget) : null,
    summarizeContext
  }
}

/** The summary as the first input item ("Compaction changes the model input"). */
const summaryItem = (text: string): AgentInputItem => userItem(`${Wire.CONTEXT_SUMMARY_PREFIX}\n${text}`)

/** The stored history as the SDK's input: after a compaction, the summary first. */
const storedItems = (turn: SessionRunner.AgentTurnContext): Array<AgentInputItem> => [
  ...(turn.contextSummary == null ? [] : [summaryItem(turn.contextSummary.text)]),
  ...turn.messages.map(fromStoredMessage)
]

/** The SDK counts no tokens before a call: a token per four characters of the items' JSON. */
const estimateTokens = (items: ReadonlyArray<unknown>): number => Math.ceil(JSON.stringify(items).length / 4)

/** Validates tool input with a zod (or other `safeParse`) schema; JSON Schema parameters pass as they are. */
const validate = (t: OpenAiAgentsToolDefinition<any>, raw: unknown) =>
  Effect.gen(function* () {
    const schema = t.parameters as {
      readonly safeParse?: (value: unknown) => { success: boolean; data?: unknown; error?: { message: string } }
    }
    if (typeof schema?.safeParse !== "function") return raw
    const parsed = schema.safeParse(raw)
    if (!parsed.success) {
      return yield* new Errors.ToolExecutionError({
        message: `invalid ${t.name} arguments: ${parsed.error?.message ?? ""}`
      })
    }
    return parsed.data
  })

/** The runner as the session's `AgentFrameworkRunner` layer. */
export const layer = (definition: OpenAiAgentsDefinition): Layer.Layer<SessionRunner.AgentFrameworkRunner> =>
  Layer.sync(SessionRunner.AgentFrameworkRunner, () => make(definition))
