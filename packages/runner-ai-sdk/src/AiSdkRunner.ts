/**
 * The Vercel AI SDK framework runner, in Step mode. Each RunModel makes exactly one `streamText` call
 * with the agent's tools offered without `execute`, so the SDK stops after the model call and hands
 * back the tool calls; the session runs each call in its own Step and resumes the turn with the final
 * results appended as a `tool` message. The framework run state is the turn's plain-JSON
 * `ModelMessage[]`, with `providerOptions` kept on every part (real providers need them on the next
 * call) and binary file data stored as base64 text.
 *
 * The session's enabled built-in tools (`AgentTurnContext.enabledBuiltInTools`: ask_user, durable_wait,
 * write_todos) are offered with their `BuiltInTools.definitions`, like Stepwise offers them; the session
 * routes their calls to its own Steps. An enabled built-in's name wins over an agent tool of that name.
 * `AgentTurnContext.cancellationSignal` is the SDK call's `abortSignal`, so `cancel_turn` aborts the
 * provider request.
 *
 * It has the compaction capability (`AgentSessionOptions.compaction`): the AI SDK counts no tokens before a
 * call, so `estimateInputTokens` estimates a token per four characters of the request's JSON;
 * `selectCompactionCutoff` is `Runner.selectCutoffWithin`; `summarizeContext` makes one `streamText` call
 * without tools over the previous summary and the messages after it, leaving out the oldest messages with the
 * spec's note when the request and `maxOutputTokens` would exceed the budget. After a compaction the model
 * input starts with the summary as a user message.
 *
 * Tool kinds this runner cannot defer, and which therefore run inside RunModel and are at-least-once
 * (a RunModel retry repeats them): provider-executed tools (`providerExecuted`, such as a provider's
 * web search). Every tool defined here is deferred.
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
import { Errors, EventWriter, Runner, Stepwise, Wire } from "@durable-agent/session"
import {
  asSchema,
  type FlexibleSchema,
  jsonSchema,
  type LanguageModel,
  type ModelMessage,
  type ToolSet,
  tool
} from "ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { callModel } from "./internal/call.ts"
import { fromStoredMessages, toFrameworkMessages, toUsage } from "./internal/convert.ts"

/** What a tool's `execute` receives besides its input (the kit's `ToolCallOptions`). */
export type AiSdkToolCallOptions = ToolCall.ToolCallOptions

/**
 * A tool of the runner: an AI SDK input schema (zod, `jsonSchema(...)`, any Standard Schema), its
 * effect class, and the function the tool Step runs. A thrown {@link ToolRetryableError} fails the
 * attempt (the effect class then decides: retried, or `outcome_unknown`); any other thrown error
 * records the call `failed` with its message, which the model sees.
 */
export interface AiSdkTool<Input = any> {
  readonly description?: string | undefined
  readonly inputSchema: FlexibleSchema<Input>
  readonly effect?: Wire.ToolEffect | undefined
  readonly execute: (input: Input, options: AiSdkToolCallOptions) => PromiseLike<unknown> | unknown
}

/** Declares a tool with its input type inferred from the schema. */
export const aiSdkTool = <Input>(definition: AiSdkTool<Input>): AiSdkTool<Input> => definition

/** Thrown by a tool when this attempt failed in a way worth another attempt: the kit's one class. */
export { ToolRetryableError }

/** What `instructions` and `model` functions receive. */
export interface AiSdkTurnInfo {
  readonly flowId: string
  readonly turnId: string
  readonly sessionSettings: Wire.SessionSettings
}

/** An agent on the AI SDK. */
export interface AiSdkAgent {
  readonly name: string
  /** Any AI SDK `LanguageModel`, or a function of the turn's session settings. */
  readonly model: LanguageModel | ((turn: AiSdkTurnInfo) => LanguageModel)
  readonly instructions?: string | ((turn: AiSdkTurnInfo) => string) | undefined
  readonly tools?: Readonly<Record<string, AiSdkTool>> | undefined
  /**
   * JSON-Schema tools, such as an MCP source's (`SourceTools.tools(source, toolPolicies)`): each is offered as
   * an SDK tool with its JSON Schema and runs in its own tool Step; its policy is its own effect and approval
   * unless the session has a `ToolPolicy` for it. A name of `tools` wins.
   */
  readonly jsonSchemaTools?: ReadonlyArray<SourceTools.JsonSchemaTool> | undefined
  readonly providerOptions?: Record<string, any> | undefined
  readonly maxOutputTokens?: number | undefined
}

/** The framework run state between RunModel Steps of one turn: the turn's SDK messages and the calls it waits for. */
const runState = RunState.pending<ModelMessage>()

const toolSet = (tools: Readonly<Record<string, AiSdkTool>>): ToolSet => {
  const set: ToolSet = {}
  for (const [name, t] of Object.entries(tools)) {
    // no `execute`: the SDK returns the call instead of running it; `outputSchema` keeps it a valid ToolSet
    set[name] = tool({
      ...(t.description !== undefined ? { description: t.description } : {}),
      inputSchema: t.inputSchema,
      outputSchema: jsonSchema({})
    } as any)
  }
  return set
}

/** The enabled built-ins as SDK tools without `execute`, from their `BuiltInTools.definitions`. */
const builtInToolSet = (turn: Runner.AgentTurnContext): ToolSet => {
  const set: ToolSet = {}
  for (const d of BuiltIns.enabled(turn)) {
    set[d.name] = tool({
      description: d.description,
      // a plain JSON Schema object; the SDK's `jsonSchema` takes its own JSONSchema7 type
      inputSchema: jsonSchema(d.parameters as any),
      outputSchema: jsonSchema({})
    })
  }
  return set
}

/** The summary as the first user message of a model input ("Compaction changes the model input"). */
const summaryMessage = (text: string): ModelMessage => ({
  role: "user",
  content: `${Wire.CONTEXT_SUMMARY_PREFIX}\n${text}`
})

/**
 * The AI SDK counts no tokens before a call: a token per four characters of the instructions and the messages'
 * JSON, and 50 per offered tool.
 */
const estimateTokens = (
  instructions: string | undefined,
  messages: ReadonlyArray<ModelMessage>,
  toolCount: number
): number => Math.ceil(((instructions?.length ?? 0) + JSON.stringify(messages).length) / 4) + 50 * toolCount

/** Builds the runner. */
export const make = (agent: AiSdkAgent): Runner.AgentFrameworkRunnerShape => {
  const jsonTools = new Map(
    (agent.jsonSchemaTools ?? [])
      .filter((t) => !Object.hasOwn(agent.tools ?? {}, t.name))
      .map((t) => [t.name, t] as const)
  )
  const tools: Readonly<Record<string, AiSdkTool>> = {
    ...Object.fromEntries(
      [...jsonTools.values()].map((t) => [
        t.name,
        aiSdkTool({
          description: t.description,
          inputSchema: jsonSchema<{ readonly [key: string]: unknown }>(t.parameters as any),
          effect: t.effect,
          execute: t.execute
        })
      ])
    ),
    ...agent.tools
  }
  /**
   * Each tool's input schema as the SDK's `Schema`, made once: the SDK converts a zod or Standard Schema to JSON
   * Schema on first use of the `Schema` it makes and keeps it, so every call offers the tools without converting
   * them again, and a tool Step validates with the same validator. A lazy schema (a function) is resolved on its
   * first use, as the SDK would.
   */
  const schemas = new Map<string, ReturnType<typeof asSchema>>()
  const schemaOf = (name: string, t: AiSdkTool): ReturnType<typeof asSchema> => {
    let schema = schemas.get(name)
    if (schema === undefined) {
      schema = asSchema(t.inputSchema)
      schemas.set(name, schema)
    }
    return schema
  }
  const offered = toolSet(
    Object.fromEntries(
      Object.entries(tools).map(([name, t]) => [
        name,
        typeof t.inputSchema === "function" ? t : { ...t, inputSchema: schemaOf(name, t) }
      ])
    )
  )
  const info = (turn: Pick<Runner.AgentTurnContext, "flowId" | "turnId" | "sessionSettings">): AiSdkTurnInfo => ({
    flowId: turn.flowId,
    turnId: turn.turnId,
    sessionSettings: turn.sessionSettings
  })

  /** A requested call's policy, and the record's tool source reference for a JSON-Schema tool. */
  const policyOf = (turn: Runner.AgentTurnContext, name: string) => {
    const json = jsonTools.get(name)
    if (json !== undefined) {
      return {
        policy: SourceTools.resolvePolicy(turn, json),
        ...(json.toolSourceReference === undefined ? {} : { toolSourceReference: json.toolSourceReference })
      }
    }
    return { policy: EffectClass.resolve(turn, name, Object.hasOwn(tools, name) ? tools[name] : undefined) }
  }

  /** The turn's messages after the summary: the run state's, with the results of the calls it waits for. */
  const turnMessagesOf = (turn: Runner.AgentTurnContext): Array<ModelMessage> => {
    const state = runState.decode(turn.frameworkRunState)
    const turnMessages: Array<ModelMessage> = [...(state?.messages ?? [])]
    if (state !== undefined && state.pending.length > 0) {
      turnMessages.push({
        role: "tool",
        content: Replay.replay(turn, state.pending).map((p) => ({
          type: "tool-result" as const,
          toolCallId: p.toolCallId,
          toolName: p.toolName,
          output: { type: "text" as const, value: p.text }
        }))
      })
    }
    return turnMessages
  }

  /** The stored history as the model sees it: after a compaction, the summary first. */
  const historyOf = (turn: Runner.AgentTurnContext): Array<ModelMessage> => {
    const stored = fromStoredMessages(turn.messages)
    return turn.contextSummary == null ? stored : [summaryMessage(turn.contextSummary.text), ...stored]
  }

  const estimateInputTokens = (turn: Runner.AgentTurnContext) => {
    const instructions = typeof agent.instructions === "function" ? agent.instructions(info(turn)) : agent.instructions
    return estimateTokens(instructions, [...historyOf(turn), ...turnMessagesOf(turn)], Object.keys(offered).length)
  }

  const summarizeContext = Effect.fnUntraced(function* (request: Runner.ContextSummaryRequest) {
    const model = typeof agent.model === "function" ? agent.model(info(request)) : agent.model
    const maxOutput = agent.maxOutputTokens ?? Stepwise.DEFAULT_MAX_OUTPUT_TOKENS
    const cuts = Runner.compactionCuts(request.messages)
    const build = (from: number): Array<ModelMessage> => [
      ...(request.previousSummary === null ? [] : [summaryMessage(request.previousSummary.text)]),
      ...(from > 0 ? [{ role: "user" as const, content: Wire.omittedMessagesNote(from) }] : []),
      ...fromStoredMessages(request.messages.slice(from)),
      { role: "user" as const, content: Stepwise.SUMMARY_REQUEST_TEXT }
    ]
    let from = 0
    let messages = build(from)
    while (
      from < request.messages.length &&
      estimateTokens(Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS, messages, 0) + maxOutput > request.inputTokenBudget
    ) {
      let next = from
      while (next < request.messages.length && !cuts[next]) next++
      from = next + 1
      messages = build(from)
    }
    const result = yield* callModel({
      model,
      instructions: Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS,
      messages,
      tools: {},
      providerOptions: agent.providerOptions,
      maxOutputTokens: agent.maxOutputTokens,
      abortSignal: request.cancellationSignal
    })
    return {
      text: result.text,
      usage: { modelCalls: 1, ...toUsage(result.usage) },
      modelCallMetadata: result.metadata
    } satisfies Runner.ContextSummaryResult
  })

  const runModelStep = Effect.fnUntraced(function* (turn: Runner.AgentTurnContext) {
    const events = yield* EventWriter.EventWriter
    const history = historyOf(turn)
    const turnMessages = turnMessagesOf(turn)
    const model = typeof agent.model === "function" ? agent.model(info(turn)) : agent.model
    const instructions = typeof agent.instructions === "function" ? agent.instructions(info(turn)) : agent.instructions
    const result = yield* callModel({
      model,
      instructions,
      messages: [...history, ...turnMessages],
      tools:
        turn.enabledBuiltInTools === undefined || turn.enabledBuiltInTools.length === 0
          ? offered
          : { ...offered, ...builtInToolSet(turn) },
      providerOptions: agent.providerOptions,
      maxOutputTokens: agent.maxOutputTokens,
      onTextDelta: events.textDelta,
      onReasoningDelta: events.reasoningDelta,
      abortSignal: turn.cancellationSignal
    })
    const messages = [...turnMessages, ...result.responseMessages]
    const usage = { modelCalls: 1, ...toUsage(result.usage) }
    if (result.toolCalls.length === 0) {
      return Runner.AgentTurnOutcome.turnCompleted({
        newMessages: toFrameworkMessages(messages, (i) => `${turn.turnId}/${i}`),
        usage,
        modelCallMetadata: result.metadata
      })
    }
    return Runner.AgentTurnOutcome.toolCallsRequested({
      frameworkRunState: runState.encode({
        v: 1,
        messages,
        pending: result.toolCalls.map((c) => ({ toolCallId: c.toolCallId, toolName: c.toolName }))
      }),
      toolCalls: result.toolCalls.map((c) => ({
        toolCallId: c.toolCallId,
        toolName: c.toolName,
        arguments: typeof c.input === "string" ? c.input : JSON.stringify(c.input ?? {}),
        ...policyOf(turn, c.toolName)
      })),
      usage,
      modelCallMetadata: result.metadata
    })
  })

  const executeDeferredToolCall = Effect.fnUntraced(function* (call: Runner.DeferredToolExecution) {
    const name = call.toolCall.toolName
    const t = Object.hasOwn(tools, name) ? tools[name] : undefined
    if (t === undefined) return yield* ToolCall.unknownTool(call)
    const schema = schemaOf(name, t)
    return yield* ToolCall.run(call, {
      validate: (raw) =>
        Effect.flatMap(
          Effect.promise(async () => (schema.validate ? schema.validate(raw) : { success: true as const, value: raw })),
          (validated) =>
            validated.success
              ? Effect.succeed(validated.value)
              : Effect.fail(
                  new Errors.ToolExecutionError({ message: `invalid ${name} arguments: ${validated.error.message}` })
                )
        ),
      execute: t.execute
    })
  })

  return {
    name: agent.name,
    buildUserMessage: (text: string): Runner.FrameworkMessage =>
      toFrameworkMessages([{ role: "user", content: text }], () => `user/${crypto.randomUUID()}`)[0]!,
    runModelStep,
    executeDeferredToolCall,
    estimateInputTokens,
    selectCompactionCutoff: (turn: Runner.AgentTurnContext, retainedTokenBudget: number) =>
      Runner.selectCutoffWithin(turn.messages, retainedTokenBudget),
    summarizeContext
  }
}

/** The runner as the session's `AgentFrameworkRunner` layer. */
export const layer = (agent: AiSdkAgent): Layer.Layer<Runner.AgentFrameworkRunner> =>
  Layer.succeed(Runner.AgentFrameworkRunner, make(agent))
