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
 * Tool kinds this runner cannot defer, and which therefore run inside RunModel and are at-least-once
 * (a RunModel retry repeats them): provider-executed tools (`providerExecuted`, such as a provider's
 * web search). Every tool defined here is deferred.
 *
 * @since 0.1.0
 */
import { BuiltIns, EffectClass, Replay, RunState, ToolCall, ToolRetryableError } from "@durable-agent/runner-kit"
import { Errors, EventWriter, Runner, type Wire } from "@durable-agent/session"
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

/** Builds the runner. */
export const make = (agent: AiSdkAgent): Runner.AgentFrameworkRunnerShape => {
  const tools = agent.tools ?? {}
  const offered = toolSet(tools)
  const info = (turn: Runner.AgentTurnContext): AiSdkTurnInfo => ({
    flowId: turn.flowId,
    turnId: turn.turnId,
    sessionSettings: turn.sessionSettings
  })

  const runModelStep = Effect.fn("AiSdkRunner.runModelStep")(function* (turn: Runner.AgentTurnContext) {
    const events = yield* EventWriter.EventWriter
    const history = fromStoredMessages(turn.messages)
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
    const model = typeof agent.model === "function" ? agent.model(info(turn)) : agent.model
    const instructions = typeof agent.instructions === "function" ? agent.instructions(info(turn)) : agent.instructions
    const result = yield* callModel({
      model,
      instructions,
      messages: [...history, ...turnMessages],
      tools: { ...offered, ...builtInToolSet(turn) },
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
        policy: EffectClass.resolve(turn, c.toolName, Object.hasOwn(tools, c.toolName) ? tools[c.toolName] : undefined)
      })),
      usage,
      modelCallMetadata: result.metadata
    })
  })

  const executeDeferredToolCall = Effect.fn("AiSdkRunner.executeDeferredToolCall")(function* (
    call: Runner.DeferredToolExecution
  ) {
    const name = call.toolCall.toolName
    const t = Object.hasOwn(tools, name) ? tools[name] : undefined
    if (t === undefined) return yield* ToolCall.unknownTool(call)
    const schema = asSchema(t.inputSchema)
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
    executeDeferredToolCall
  }
}

/** The runner as the session's `AgentFrameworkRunner` layer. */
export const layer = (agent: AiSdkAgent): Layer.Layer<Runner.AgentFrameworkRunner> =>
  Layer.succeed(Runner.AgentFrameworkRunner, make(agent))
