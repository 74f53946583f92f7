/**
 * Stepwise, the built-in runner: an `AgentDefinition` (instructions, tools from the `ToolSource`, the model
 * from `ModelClient` or `resolveModel`) that makes exactly one model call per RunModel Step and defers every
 * tool call to the session.
 *
 * Its framework items are JSON objects with a `type` (`user`, `assistant_text`, `tool_call`,
 * `tool_result`); a stored item leaves out what the message's projection fields already hold (text,
 * arguments, output), so a message stores its content once. Its run state holds the turn's items after the
 * user message, without arguments and outputs (the turn's records hold them), and the pending tool call IDs.
 * Messages stored by another runner are read from their projection fields.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as BuiltInTools from "./BuiltInTools.ts"
import { EventWriter } from "./EventWriter.ts"
import {
  ModelClient,
  type ModelClientShape,
  type ModelMessage,
  type ModelRequest,
  type ModelToolCall
} from "./ModelClient.ts"
import { parseToolArguments } from "./Policy.ts"
import {
  AgentFrameworkRunner,
  type AgentFrameworkRunnerShape,
  type AgentTurnContext,
  AgentTurnOutcome,
  type ContextSummaryRequest,
  type ContextSummaryResult,
  type DeferredToolExecution,
  type FrameworkMessage,
  type ToolTaskCancellation,
  type ToolTaskPoll
} from "./Runner.ts"
import { ToolSource } from "./ToolSource.ts"
import * as Wire from "./wire/index.ts"

/**
 * What an instructions function sees.
 *
 * @category models
 * @since 0.1.0
 */
export interface InstructionContext {
  readonly flowId: string
  readonly turnId: string
  readonly sessionSettings: Wire.SessionSettings
}

/**
 * A Stepwise agent.
 *
 * @category models
 * @since 0.1.0
 */
export interface AgentDefinition {
  readonly name: string
  readonly instructions: string | ((context: InstructionContext) => string)
  /** Names of the `ToolSource` tools this agent offers; every tool of the source by default. */
  readonly tools?: ReadonlyArray<string> | undefined
  /** The model of a turn from its session settings; the `ModelClient` service when it returns `undefined`. */
  readonly resolveModel?: ((settings: Wire.SessionSettings) => ModelClientShape | undefined) | undefined
  /**
   * The tool choice of a planning turn (plan mode). `auto` (the default) lets the model answer in text, such as
   * with a clarifying question, and the turn then ends without a draft. `required` forces `write_todos` on the
   * first model call of a planning turn while no draft plan exists; some models, and Anthropic extended
   * thinking, refuse a forced tool.
   */
  readonly planningToolChoice?: "auto" | "required" | undefined
  /**
   * Whether the turn goes on (`decide_turn_continuation`). After an answer, a {@link TurnContinuation} stores
   * the answer and its message as user text and makes another model call in the same turn; anything else ends
   * the turn. After tool calls (once their results are in, before the next model call), a continuation's
   * message follows the tool results in that model call, and `"end"` ends the turn with the tool results as
   * its last messages, without a model call. At most {@link Wire.MAX_CONSECUTIVE_CONTINUATIONS} continuations
   * in a row; one more fails the turn with {@link Wire.TOO_MANY_CONTINUATIONS_ERROR}.
   */
  readonly decideTurnContinuation?:
    | ((context: TurnContinuationContext) => TurnContinuationDecision | Effect.Effect<TurnContinuationDecision>)
    | undefined
  /**
   * The most tokens a model call may answer with (`max_output_tokens`): compaction's summary request leaves
   * room for it in its budget. Default {@link DEFAULT_MAX_OUTPUT_TOKENS}.
   */
  readonly maxOutputTokens?: number | undefined
  /** The instructions of compaction's summary call; default {@link DEFAULT_SUMMARY_INSTRUCTIONS}. */
  readonly summaryInstructions?: string | undefined
}

/**
 * The default {@link AgentDefinition.maxOutputTokens}.
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4_096

/**
 * The default instructions of Stepwise's summary call (`summarizeContext`).
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_SUMMARY_INSTRUCTIONS =
  "You summarize a conversation between a user and an assistant so that the assistant can continue it from the summary alone. Keep the user's goals and preferences, the decisions made, the facts and tool results that still matter, and the open tasks. Answer with the summary only."

/**
 * The last user text of Stepwise's summary call, after the messages it summarizes.
 *
 * @category constants
 * @since 0.1.0
 */
export const SUMMARY_REQUEST_TEXT = "Summarize the conversation above, folding in any earlier summary."

/** Characters per token of Stepwise's estimate, when the model client does not count tokens. */
const CHARS_PER_TOKEN = 4
/** What each message adds to the estimate beyond its text (role and framing). */
const MESSAGE_OVERHEAD_TOKENS = 4

/**
 * Stepwise's token estimate of a model request when the client does not count (`countInputTokens`): a token
 * per four characters of the instructions, the messages and the tool definitions, and four per message.
 *
 * @category compaction
 * @since 0.1.0
 */
export const estimateRequestTokens = (request: Pick<ModelRequest, "instructions" | "messages" | "tools">): number =>
  Math.ceil(
    (request.instructions.length + (request.tools.length === 0 ? 0 : JSON.stringify(request.tools).length)) /
      CHARS_PER_TOKEN
  ) + request.messages.reduce((sum, m) => sum + estimateModelMessageTokens(m), 0)

const estimateModelMessageTokens = (m: ModelMessage): number => {
  const chars =
    m.role === "user"
      ? m.text.length
      : m.role === "tool"
        ? m.output.length + m.toolName.length + m.toolCallId.length
        : (m.text?.length ?? 0) +
          m.toolCalls.reduce((n, c) => n + c.arguments.length + c.toolName.length + c.toolCallId.length, 0)
  return Math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS
}

/** The estimate of one stored message as the model sees it. */
const estimateStoredTokens = (message: Wire.AgentMessage): number =>
  toModelMessages([fromStoredMessage(message)]).reduce((sum, m) => sum + estimateModelMessageTokens(m), 0)

/**
 * The positions after which a list of stored messages may be cut ("Adapter interface", Stepwise): between
 * model responses whose tool calls all have stored results. `cuts[i]` is true when a cut after message `i`
 * leaves no tool call without its result on either side.
 *
 * @category compaction
 * @since 0.1.0
 */
export const validCuts = (messages: ReadonlyArray<Wire.AgentMessage>): Array<boolean> => {
  const open = new Set<string>()
  return messages.map((m, i) => {
    const item = fromStoredMessage(m)
    if (item.type === "tool_call") open.add(item.tool_call_id)
    if (item.type === "tool_result") open.delete(item.tool_call_id)
    const next = messages[i + 1]
    return open.size === 0 && (next === undefined || fromStoredMessage(next).type !== "tool_result")
  })
}

/** The summary as the first item of a model input. */
const summaryItem = (summary: Wire.ContextSummary): StepwiseItem => ({
  type: "user",
  text: `${Wire.CONTEXT_SUMMARY_PREFIX}\n${summary.text}`
})

/**
 * A continuation: another model call in the same turn, with `message` as the user text that the model reads
 * next.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnContinuation {
  readonly message: string
}

/**
 * What `decideTurnContinuation` returns: a continuation, `"end"` (after tool calls: end the turn without
 * another model call), or `undefined` for the default (after an answer the turn ends; after tool calls the
 * model is called with their results).
 *
 * @category models
 * @since 0.1.0
 */
export type TurnContinuationDecision = TurnContinuation | "end" | undefined

/**
 * What `decideTurnContinuation` sees.
 *
 * @category models
 * @since 0.1.0
 */
export interface TurnContinuationContext {
  readonly flowId: string
  readonly turnId: string
  readonly sessionSettings: Wire.SessionSettings
  /** `answer` after a model call that called no tool; `tool_calls` once a response's tool calls are final. */
  readonly after: "answer" | "tool_calls"
  /** The answer's text after an answer (`null` when it has none); `null` after tool calls. */
  readonly answer: string | null
  /** The turn's tool call records, all final. */
  readonly toolCalls: ReadonlyArray<Wire.AgentToolCall>
  /** How many continuations in a row led here. */
  readonly consecutiveContinuations: number
}

/**
 * `build_plan_note(plan, interaction_mode)`: the user text Stepwise shows the model before the turn's
 * messages. A plan shows as `[Dex] The current plan, revision <n>, is <status>:` with one `- [<task status>]
 * <content>` line per task; a planning turn adds the line that it only plans, and shows a missing or cleared
 * plan as `[Dex] There is no plan yet.`; outside a planning turn such a plan shows nothing (`undefined`).
 *
 * @category plan mode
 * @since 0.1.0
 */
export const buildPlanNote: (
  plan: Pick<Wire.AgentPlan, "revision" | "status" | "tasks"> | null,
  interactionMode: Wire.InteractionMode
) => string | undefined = Wire.buildPlanNote

/**
 * The history as the model sees it in plan mode: the plan note, as user text, before the turn's messages.
 */
const withPlanNote = (
  history: ReadonlyArray<StepwiseItem>,
  messages: ReadonlyArray<Wire.AgentMessage>,
  turn: AgentTurnContext
): ReadonlyArray<StepwiseItem> => {
  const note = buildPlanNote(turn.plan ?? null, turn.interactionMode)
  if (note === undefined) return history
  const start = messages.findIndex((m) => m.turnId === turn.turnId)
  const at = start === -1 ? history.length : start
  return [...history.slice(0, at), { type: "user", text: note }, ...history.slice(at)]
}

/**
 * One Stepwise framework item.
 *
 * @category models
 * @since 0.1.0
 */
export type StepwiseItem =
  | { readonly type: "user"; readonly text: string }
  | { readonly type: "assistant_text"; readonly text: string }
  | {
      readonly type: "tool_call"
      readonly tool_call_id: string
      readonly tool_name: string
      readonly arguments: string
    }
  | { readonly type: "tool_result"; readonly tool_call_id: string; readonly tool_name: string; readonly output: string }

interface RunState {
  readonly version: 1
  /** The turn's items; tool calls without `arguments` and results without `output` (the records hold them). */
  readonly items: ReadonlyArray<StepwiseItem | RunStateReference>
  readonly pending: ReadonlyArray<string>
  /** Continuations in a row; present only after a continuation. */
  readonly consecutive_continuations?: number
}

/** A tool call or result in the run state, by reference to its record. */
type RunStateReference =
  | { readonly type: "tool_call"; readonly tool_call_id: string; readonly tool_name: string }
  | { readonly type: "tool_result"; readonly tool_call_id: string; readonly tool_name: string }

const toRunStateItem = (item: StepwiseItem): StepwiseItem | RunStateReference => {
  switch (item.type) {
    case "tool_call":
      return { type: "tool_call", tool_call_id: item.tool_call_id, tool_name: item.tool_name }
    case "tool_result":
      return { type: "tool_result", tool_call_id: item.tool_call_id, tool_name: item.tool_name }
    default:
      return item
  }
}

/** A run state item with its arguments or output read back from the turn's records. */
const fromRunStateItem = (
  item: StepwiseItem | RunStateReference,
  records: ReadonlyArray<Wire.AgentToolCall>
): StepwiseItem => {
  if (item.type === "user" || item.type === "assistant_text") return item
  if ("arguments" in item || "output" in item) return item as StepwiseItem
  const record = records.find((r) => r.toolCallId === item.tool_call_id)
  if (item.type === "tool_call") return { ...item, arguments: record?.arguments ?? "{}" }
  return { ...item, output: toolResultText(record) }
}

/** What the model sees of a call: its final record's result, else the unknown outcome. */
const toolResultText = (record: Wire.AgentToolCall | undefined): string =>
  record !== undefined && Wire.isAgentToolCallFinalStatus(record.status)
    ? Wire.modelVisibleResult({ ...record, status: record.status })
    : Wire.OUTCOME_UNKNOWN_TEXT

/**
 * The stored form of a Stepwise item.
 *
 * @category conversions
 * @since 0.1.0
 */
export const toFrameworkMessage = (item: StepwiseItem): FrameworkMessage => {
  const base = { text: null, toolCallId: null, toolName: null, toolArguments: null, toolOutput: null }
  switch (item.type) {
    case "user":
      return { ...base, role: "user", text: item.text, frameworkItem: JSON.stringify({ type: "user" }) }
    case "assistant_text":
      return { ...base, role: "assistant", text: item.text, frameworkItem: JSON.stringify({ type: "assistant_text" }) }
    case "tool_call":
      return {
        ...base,
        role: "assistant",
        toolCallId: item.tool_call_id,
        toolName: item.tool_name,
        toolArguments: item.arguments,
        frameworkItem: JSON.stringify({ type: "tool_call", tool_call_id: item.tool_call_id, tool_name: item.tool_name })
      }
    case "tool_result":
      return {
        ...base,
        role: "tool",
        toolCallId: item.tool_call_id,
        toolName: item.tool_name,
        toolOutput: item.output,
        frameworkItem: JSON.stringify({
          type: "tool_result",
          tool_call_id: item.tool_call_id,
          tool_name: item.tool_name
        })
      }
  }
}

const itemTypes = new Set(["user", "assistant_text", "tool_call", "tool_result"])

/**
 * Reads a stored message as a Stepwise item: its framework item when Stepwise wrote it, else its projection.
 *
 * @category conversions
 * @since 0.1.0
 */
export const fromStoredMessage = (message: Wire.AgentMessage): StepwiseItem => {
  const known = storedItems.get(message)
  if (known !== undefined) return known
  const item = readStoredMessage(message)
  storedItems.set(message, item)
  return item
}

/**
 * The items of stored messages already read, by message: a stored message is an immutable decoded value that
 * the engine's decode cache hands to every Step, so a long session's history is parsed once, not once per turn.
 */
const storedItems = new WeakMap<Wire.AgentMessage, StepwiseItem>()

/** A list of stored messages read as items, kept by its first message to read the next list from. */
interface ReadHistory {
  readonly messages: ReadonlyArray<Wire.AgentMessage>
  readonly items: ReadonlyArray<StepwiseItem>
}

const readHistories = new WeakMap<Wire.AgentMessage, ReadHistory>()

/**
 * A turn's stored messages as items, in order. A session's next turn reads the same stored messages again
 * (the same decoded values) and some more: the items of the messages it shares with the list read last are
 * reused, and only the rest is read, so a long session's turn does not look every stored message up again.
 */
const storedHistory = (messages: ReadonlyArray<Wire.AgentMessage>): ReadonlyArray<StepwiseItem> => {
  const first = messages[0]
  if (first === undefined) return []
  const known = readHistories.get(first)
  let same = 0
  if (known !== undefined) {
    const n = Math.min(known.messages.length, messages.length)
    while (same < n && known.messages[same] === messages[same]) same++
  }
  const items = same === 0 ? [] : known!.items.slice(0, same)
  for (let i = same; i < messages.length; i++) items.push(fromStoredMessage(messages[i]!))
  readHistories.set(first, { messages, items })
  return items
}

const readStoredMessage = (message: Wire.AgentMessage): StepwiseItem => {
  const parsed = parseToolArguments(message.frameworkItem)
  if (Option.isSome(parsed) && typeof parsed.value.type === "string" && itemTypes.has(parsed.value.type)) {
    // The item's own fields, else the projection's (items stored before 0.1.1 carry both)
    const item = parsed.value
    switch (item.type) {
      case "user":
        return { type: "user", text: typeof item.text === "string" ? item.text : (message.text ?? "") }
      case "assistant_text":
        return { type: "assistant_text", text: typeof item.text === "string" ? item.text : (message.text ?? "") }
      case "tool_call":
        return {
          type: "tool_call",
          tool_call_id: String(item.tool_call_id ?? message.toolCallId ?? ""),
          tool_name: String(item.tool_name ?? message.toolName ?? ""),
          arguments: typeof item.arguments === "string" ? item.arguments : (message.toolArguments ?? "{}")
        }
      default:
        return {
          type: "tool_result",
          tool_call_id: String(item.tool_call_id ?? message.toolCallId ?? ""),
          tool_name: String(item.tool_name ?? message.toolName ?? ""),
          output: typeof item.output === "string" ? item.output : (message.toolOutput ?? "")
        }
    }
  }
  if (message.role === "user") return { type: "user", text: message.text ?? "" }
  if (message.role === "tool") {
    return {
      type: "tool_result",
      tool_call_id: message.toolCallId ?? "",
      tool_name: message.toolName ?? "",
      output: message.toolOutput ?? ""
    }
  }
  if (message.toolCallId !== null) {
    return {
      type: "tool_call",
      tool_call_id: message.toolCallId,
      tool_name: message.toolName ?? "",
      arguments: message.toolArguments ?? "{}"
    }
  }
  return { type: "assistant_text", text: message.text ?? "" }
}

/**
 * The model messages of a list of items: consecutive assistant text and tool calls form one assistant message.
 *
 * @category conversions
 * @since 0.1.0
 */
export const toModelMessages = (items: ReadonlyArray<StepwiseItem>): Array<ModelMessage> => {
  const out: Array<ModelMessage> = []
  for (const item of items) {
    const last = out[out.length - 1]
    switch (item.type) {
      case "user":
        out.push({ role: "user", text: item.text })
        break
      case "tool_result":
        out.push({ role: "tool", toolCallId: item.tool_call_id, toolName: item.tool_name, output: item.output })
        break
      case "assistant_text":
        if (last?.role === "assistant" && last.toolCalls.length === 0) {
          out[out.length - 1] = { ...last, text: `${last.text ?? ""}${item.text}` }
        } else out.push({ role: "assistant", text: item.text, toolCalls: [] })
        break
      case "tool_call": {
        const call: ModelToolCall = {
          toolCallId: item.tool_call_id,
          toolName: item.tool_name,
          arguments: item.arguments
        }
        if (last?.role === "assistant") out[out.length - 1] = { ...last, toolCalls: [...last.toolCalls, call] }
        else out.push({ role: "assistant", text: null, toolCalls: [call] })
        break
      }
    }
  }
  return out
}

/**
 * The turn's items that the session has not stored: the run state's items with their arguments and outputs
 * read back from the records, then a result for each pending call (the unknown outcome while its record is
 * not final), so every stored tool call has its result.
 */
const unstoredItems = (turn: AgentTurnContext, runState: RunState | undefined): Array<StepwiseItem> => {
  const items: Array<StepwiseItem> = (runState?.items ?? []).map((item) => fromRunStateItem(item, turn.toolCalls))
  for (const id of runState?.pending ?? []) {
    const record = turn.toolCalls.find((r) => r.toolCallId === id)
    items.push({
      type: "tool_result",
      tool_call_id: id,
      tool_name: record?.toolName ?? "",
      output: toolResultText(record)
    })
  }
  return items
}

const ZERO_USAGE: Wire.AgentUsage = {
  modelCalls: 0,
  inputTokens: 0,
  outputTokens: 0,
  cachedInputTokens: 0,
  reasoningTokens: 0
}

const parseRunState = (text: string | null): RunState | undefined => {
  if (text === null) return undefined
  const parsed = parseToolArguments(text)
  if (Option.isNone(parsed) || parsed.value.version !== 1) return undefined
  return parsed.value as unknown as RunState
}

/**
 * Builds the Stepwise runner of an agent from the `ModelClient` and `ToolSource` services.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (agent: AgentDefinition) {
  const defaultModel = yield* ModelClient
  const source = yield* ToolSource
  const offered = agent.tools === undefined ? undefined : new Set(agent.tools)
  const tools = source.tools
    .filter((t) => offered === undefined || offered.has(t.name))
    .map(({ name, description, parameters }) => ({ name, description, parameters }))
  const frameworkEffects = new Map(source.tools.map((t) => [t.name, t.effect]))
  const references = new Map(source.tools.map((t) => [t.name, t.toolSourceReference]))

  const decide = (turn: AgentTurnContext, fields: Pick<TurnContinuationContext, "after" | "answer">, count: number) => {
    if (agent.decideTurnContinuation === undefined) return Effect.succeed<TurnContinuationDecision>(undefined)
    const decision = agent.decideTurnContinuation({
      flowId: turn.flowId,
      turnId: turn.turnId,
      sessionSettings: turn.sessionSettings,
      toolCalls: turn.toolCalls,
      consecutiveContinuations: count,
      ...fields
    })
    return Effect.isEffect(decision) ? decision : Effect.succeed(decision)
  }

  const modelOf = (turn: { readonly sessionSettings: Wire.SessionSettings }) =>
    agent.resolveModel?.(turn.sessionSettings) ?? defaultModel

  /** The model request of a turn, without its callbacks: what `runModelStep` sends and compaction counts. */
  const modelRequest = (
    turn: AgentTurnContext,
    history: ReadonlyArray<StepwiseItem>,
    turnItems: ReadonlyArray<StepwiseItem>
  ): ModelRequest => {
    const instructions =
      typeof agent.instructions === "string"
        ? agent.instructions
        : agent.instructions({ flowId: turn.flowId, turnId: turn.turnId, sessionSettings: turn.sessionSettings })
    const builtIns = BuiltInTools.definitions.filter((d) => turn.enabledBuiltInTools?.includes(d.name) === true)
    // A planning turn offers only write_todos; `required` forces it on the turn's first call while no draft exists.
    const planning = turn.interactionMode === "planning"
    const forceWriteTodos =
      planning &&
      agent.planningToolChoice === "required" &&
      turn.frameworkRunState === null &&
      turn.plan?.status !== "draft"
    // After a compaction the input starts with the summary ("Compaction changes the model input").
    const summary = turn.contextSummary == null ? [] : [summaryItem(turn.contextSummary)]
    return {
      instructions,
      messages: toModelMessages([...summary, ...withPlanNote(history, turn.messages, turn), ...turnItems]),
      tools: planning ? builtIns.filter((d) => d.name === "write_todos") : [...tools, ...builtIns],
      ...(forceWriteTodos ? { toolChoice: { tool: "write_todos" } } : {})
    }
  }

  /** The tokens of a request: the client's count when it has one, else Stepwise's estimate. */
  const countTokens = (model: ModelClientShape, request: ModelRequest) =>
    model.countInputTokens === undefined
      ? Effect.succeed(estimateRequestTokens(request))
      : model.countInputTokens(request)

  /** The next model input of a turn, as `runModelStep` would send it (without a continuation's message). */
  const nextRequest = (turn: AgentTurnContext) =>
    modelRequest(turn, storedHistory(turn.messages), unstoredItems(turn, parseRunState(turn.frameworkRunState)))

  const estimateInputTokens = (turn: AgentTurnContext) => countTokens(modelOf(turn), nextRequest(turn))

  // The earliest cut whose later messages fit the retained budget. Each message's tokens are estimated and,
  // when the client counts, scaled by the ratio of its count to the estimate of the whole request.
  const selectCompactionCutoff = Effect.fnUntraced(function* (turn: AgentTurnContext, retainedTokenBudget: number) {
    const messages = turn.messages
    if (messages.length === 0) return null
    const request = nextRequest(turn)
    const model = modelOf(turn)
    const estimated = estimateRequestTokens(request)
    const scale =
      model.countInputTokens === undefined || estimated === 0 ? 1 : (yield* model.countInputTokens(request)) / estimated
    const tokens = messages.map((m) => estimateStoredTokens(m) * scale)
    const cuts = validCuts(messages)
    let after = tokens.reduce((a, b) => a + b, 0)
    for (let i = 0; i < messages.length; i++) {
      after -= tokens[i]!
      if (cuts[i] && after <= retainedTokenBudget) return messages[i]!.sequence
    }
    return null
  })

  // One model call: the previous summary, then the messages after it; when the request and the answer's room
  // exceed the budget, the oldest messages are left out up to a cut, with the note that says so.
  const summarizeContext = Effect.fnUntraced(function* (request: ContextSummaryRequest) {
    const model = modelOf(request)
    const maxOutput = agent.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS
    const cuts = validCuts(request.messages)
    const build = (from: number): ModelRequest => {
      const items: Array<StepwiseItem> = []
      if (request.previousSummary !== null) items.push(summaryItem(request.previousSummary))
      if (from > 0) items.push({ type: "user", text: Wire.omittedMessagesNote(from) })
      for (const m of request.messages.slice(from)) items.push(fromStoredMessage(m))
      items.push({ type: "user", text: SUMMARY_REQUEST_TEXT })
      return {
        instructions: agent.summaryInstructions ?? DEFAULT_SUMMARY_INSTRUCTIONS,
        messages: toModelMessages(items),
        tools: []
      }
    }
    let from = 0
    let body = build(from)
    while (from < request.messages.length && (yield* countTokens(model, body)) + maxOutput > request.inputTokenBudget) {
      // Leave out the oldest messages up to the next cut.
      let next = from
      while (next < request.messages.length && !cuts[next]) next++
      from = next + 1
      body = build(from)
    }
    const response = yield* model.generate({ ...body, cancellationSignal: request.cancellationSignal })
    return {
      text: response.text ?? "",
      usage: { modelCalls: 1, ...response.usage },
      modelCallMetadata: response.metadata
    } satisfies ContextSummaryResult
  })

  const runModelStep = Effect.fnUntraced(function* (turn: AgentTurnContext) {
    const events = yield* EventWriter
    const history = storedHistory(turn.messages)
    const runState = parseRunState(turn.frameworkRunState)
    const turnItems = unstoredItems(turn, runState)
    let continuations = runState?.consecutive_continuations ?? 0
    if ((runState?.pending.length ?? 0) > 0) {
      // The response's tool calls are final: the hook may end the turn here or add a message after the results.
      const decision = yield* decide(turn, { after: "tool_calls", answer: null }, continuations)
      if (decision === "end") {
        return AgentTurnOutcome.turnCompleted({ newMessages: turnItems.map(toFrameworkMessage), usage: ZERO_USAGE })
      }
      if (decision == null) continuations = 0
      else if (continuations >= Wire.MAX_CONSECUTIVE_CONTINUATIONS) {
        return AgentTurnOutcome.turnCompleted({
          newMessages: turnItems.map(toFrameworkMessage),
          usage: ZERO_USAGE,
          turnError: Wire.TOO_MANY_CONTINUATIONS_ERROR
        })
      } else {
        continuations += 1
        turnItems.push({ type: "user", text: decision.message })
      }
    }
    const model = modelOf(turn)
    const response = yield* model.generate({
      ...modelRequest(turn, history, turnItems),
      onTextDelta: events.textDelta,
      onReasoningDelta: events.reasoningDelta,
      cancellationSignal: turn.cancellationSignal
    })
    const usage: Wire.AgentUsage = { modelCalls: 1, ...response.usage }
    const responseItems: Array<StepwiseItem> = [
      ...(response.text !== null && response.text.length > 0
        ? [{ type: "assistant_text" as const, text: response.text }]
        : []),
      ...response.toolCalls.map(
        (c): StepwiseItem => ({
          type: "tool_call",
          tool_call_id: c.toolCallId,
          tool_name: c.toolName,
          arguments: c.arguments
        })
      )
    ]
    const items = [...turnItems, ...responseItems]
    if (response.toolCalls.length === 0) {
      const decision = yield* decide(turn, { after: "answer", answer: response.text }, continuations)
      if (decision == null || decision === "end") {
        return AgentTurnOutcome.turnCompleted({
          newMessages: items.map(toFrameworkMessage),
          usage,
          modelCallMetadata: response.metadata
        })
      }
      if (continuations >= Wire.MAX_CONSECUTIVE_CONTINUATIONS) {
        return AgentTurnOutcome.turnCompleted({
          newMessages: items.map(toFrameworkMessage),
          usage,
          turnError: Wire.TOO_MANY_CONTINUATIONS_ERROR,
          modelCallMetadata: response.metadata
        })
      }
      // The answer and the continuation's message are stored now, so the next request ends with a user message.
      return AgentTurnOutcome.turnContinued({
        frameworkRunState: JSON.stringify({
          version: 1,
          items: [],
          pending: [],
          consecutive_continuations: continuations + 1
        } satisfies RunState),
        newMessages: [...items, { type: "user" as const, text: decision.message }].map(toFrameworkMessage),
        usage,
        modelCallMetadata: response.metadata
      })
    }
    return AgentTurnOutcome.toolCallsRequested({
      frameworkRunState: JSON.stringify({
        version: 1,
        items: items.map(toRunStateItem),
        pending: response.toolCalls.map((c) => c.toolCallId),
        ...(continuations > 0 ? { consecutive_continuations: continuations } : {})
      } satisfies RunState),
      toolCalls: response.toolCalls.map((c) => ({
        toolCallId: c.toolCallId,
        toolName: c.toolName,
        arguments: c.arguments,
        policy: turn.resolveToolPolicy(c.toolName, frameworkEffects.get(c.toolName)),
        toolSourceReference: references.get(c.toolName) ?? null
      })),
      usage,
      modelCallMetadata: response.metadata
    })
  })

  const executeDeferredToolCall = (call: DeferredToolExecution) =>
    Effect.suspend(() => {
      const record = call.toolCall
      return source.call({
        flowId: call.flowId,
        turnId: call.turnId,
        toolCallId: record.toolCallId,
        toolName: record.toolName,
        arguments: Option.getOrElse(parseToolArguments(record.arguments), () => ({})),
        argumentsText: record.arguments,
        idempotencyKey: call.idempotencyKey,
        attempt: call.attempt,
        toolSourceReference: record.toolSourceReference,
        supportsToolTasks: source.pollToolTask !== undefined && call.supportsToolTasks === true,
        inputAnswers: call.inputAnswers ?? record.inputAnswers
      })
    })

  const taskRequest = (call: ToolTaskPoll | ToolTaskCancellation) => ({
    flowId: call.flowId,
    turnId: call.turnId,
    toolCallId: call.toolCall.toolCallId,
    toolName: call.toolCall.toolName,
    taskId: call.toolCall.taskId ?? "",
    pollIntervalSeconds: call.toolCall.taskPollIntervalSeconds ?? 1,
    continuation: call.toolCall.inputContinuation,
    toolSourceReference: call.toolCall.toolSourceReference,
    idempotencyKey: call.idempotencyKey,
    attempt: call.attempt,
    inputAnswers: "inputAnswers" in call ? call.inputAnswers : call.toolCall.inputAnswers,
    pendingAnswer: "pendingAnswer" in call ? call.pendingAnswer : null
  })
  const poll = source.pollToolTask
  const cancel = source.cancelToolTask

  return {
    name: agent.name,
    supportsPlanMode: true,
    buildUserMessage: (text) => toFrameworkMessage({ type: "user", text }),
    runModelStep,
    executeDeferredToolCall,
    estimateInputTokens,
    selectCompactionCutoff,
    summarizeContext,
    // A steered, cancelled or failed turn keeps its exact transcript: the unstored items, every result included.
    buildUnfinishedTurnMessages: (turn: AgentTurnContext) =>
      Effect.sync(() => unstoredItems(turn, parseRunState(turn.frameworkRunState)).map(toFrameworkMessage)),
    ...(poll === undefined ? {} : { pollToolTask: (call: ToolTaskPoll) => poll(taskRequest(call)) }),
    ...(cancel === undefined ? {} : { cancelToolTask: (call: ToolTaskCancellation) => cancel(taskRequest(call)) })
  } satisfies AgentFrameworkRunnerShape as AgentFrameworkRunnerShape
})

/**
 * The Stepwise runner of an agent as the session's `AgentFrameworkRunner`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (agent: AgentDefinition): Layer.Layer<AgentFrameworkRunner, never, ModelClient | ToolSource> =>
  Layer.effect(AgentFrameworkRunner, make(agent))
