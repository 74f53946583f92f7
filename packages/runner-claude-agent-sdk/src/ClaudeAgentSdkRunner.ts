/**
 * The Claude Agent SDK runner: a whole-turn harness. Each RunModel runs one `query()` of the Claude Code
 * binary, whose session ID is a UUID derived from the session's Flow ID, so every RunModel of every turn
 * continues the same harness session (`sessionId` on its first query, `resume` after that).
 *
 * The agent's tools are given to the harness as one in-process MCP server (`createSdkMcpServer`, named
 * `app`, so the model sees `mcp__app__<name>`). A PreToolUse hook decides each call:
 * - a `read` tool without approval runs inline, inside the RunModel (the harness calls its handler in
 *   this process), so a RunModel retry runs it again;
 * - every other tool is deferred (`permissionDecision: "defer"`): the query ends with
 *   `terminal_reason: "tool_deferred"` and the RunModel returns that one call as `ToolCallsRequested`,
 *   which the session runs as its own CallTool / CallSingleAttemptTool Step with its approval, key and
 *   outcome rules. The next RunModel resumes the harness session; the hook fires again for the same
 *   `tool_use_id` and answers `allow`, and the tool's handler returns the recorded result instead of
 *   running the tool (or `deny` with the recorded text for a rejected call).
 *
 * `deferred_tool_use` is singular: two write calls in one model response become two RunModel /
 * tool Step rounds. Built-in Claude Code tools are off (`tools: []`) unless `builtInTools` lists some,
 * which run inside the harness and are at-least-once. Text deltas of the harness's model calls stream
 * through `EventWriter`; usage and the model's name come from the query's result message.
 * `turn.cancellationSignal` aborts the query.
 *
 * The harness writes its transcript while the query runs, outside the Step's transaction: each RunModel
 * records the transcript's position in its committed state, and each attempt first cuts the transcript back to
 * the committed position, so a retry continues from what the record knows (the prompt once; the inline reads
 * and model calls of the query again).
 *
 * @since 0.1.0
 */
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import {
  createSdkMcpServer,
  type HookCallback,
  type Options,
  query,
  type SDKMessage,
  type SDKResultMessage,
  tool
} from "@anthropic-ai/claude-agent-sdk"
import {
  BuiltIns,
  DeltaBuffer,
  EffectClass,
  Replay,
  RunState,
  SourceTools,
  ToolCall,
  ToolRetryableError
} from "@durable-agent/runner-kit"
import { BuiltInTools, Errors, EventWriter, Runner, SessionTracer, type Wire } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { z } from "zod"
import type * as SqlSessionStore from "./SqlSessionStore.ts"

/** The MCP server name the agent's tools are served under: the model sees `mcp__app__<tool>`. */
export const MCP_SERVER_NAME = "app"

const MCP_PREFIX = `mcp__${MCP_SERVER_NAME}__`

/**
 * The prompt a RunModel sends when it resumes a deferred tool call (the harness needs a prompt to go on),
 * followed by one line per resumed call with its recorded result (see {@link resumePrompt}).
 */
export const RESUME_PROMPT = "[Dex] The deferred tool call has its recorded result. Continue."

/**
 * The resume prompt with the recorded results: `RESUME_PROMPT`, then `- <tool> <tool_use_id>: <result>` per
 * call. The harness loses a deferred call's result when an inline call of the same model response ran after
 * it in a later model call of the query (it shows `[Tool result missing due to internal error]`), so the
 * model reads the result here too.
 */
export const resumePrompt = (
  calls: ReadonlyArray<{ readonly toolName: string; readonly toolCallId: string; readonly text: string }>
): string => [RESUME_PROMPT, ...calls.map((c) => `- ${c.toolName} ${c.toolCallId}: ${c.text}`)].join("\n")

/**
 * What the model sees for a second write call of one model response: the harness can defer only one call
 * per query, so the later ones are denied with this text and the model may call them again.
 */
export const ONE_WRITE_AT_A_TIME =
  "[Dex] This call was not run: only one write tool call can run at a time. Call it again after the previous call's result."

/** Thrown by a tool when this attempt failed in a way worth another attempt: the kit's one class. */
export { ToolRetryableError }

/** What a tool's `execute` receives besides its input (the kit's `ToolCallOptions`). */
export type ClaudeToolCallOptions = ToolCall.ToolCallOptions

/** A tool of the runner: a zod raw shape as its input schema, its effect class, and its function. */
export interface ClaudeTool<Shape extends z.ZodRawShape = z.ZodRawShape> {
  readonly description: string
  readonly inputSchema: Shape
  readonly effect?: Wire.ToolEffect | undefined
  readonly execute: (
    input: z.infer<z.ZodObject<Shape>>,
    options: ClaudeToolCallOptions
  ) => PromiseLike<unknown> | unknown
}

/** Declares a tool with its input type inferred from the shape. */
export const claudeTool = <Shape extends z.ZodRawShape>(definition: ClaudeTool<Shape>): ClaudeTool<Shape> => definition

/** An agent on the Claude Agent SDK. */
export interface ClaudeAgent {
  readonly name: string
  /** The model name passed to the harness (its default when absent). */
  readonly model?: string | undefined
  /** Appended to Claude Code's system prompt. */
  readonly instructions?: string | undefined
  readonly tools?: Readonly<Record<string, ClaudeTool<any>>> | undefined
  /**
   * JSON-Schema tools, such as an MCP source's (`SourceTools.tools(source, toolPolicies)` of the runner kit):
   * each is one more tool of the in-process MCP server, its input schema the zod form of its JSON Schema
   * (`z.fromJSONSchema`). Its policy is its own effect and approval unless the session has a `ToolPolicy` for
   * it (`SourceTools.resolvePolicy`); a read without approval runs inline like the agent's own reads, any
   * other call is deferred to its own tool Step, whose record keeps the tool's `toolSourceReference`. A name
   * of `tools` wins.
   */
  readonly jsonSchemaTools?: ReadonlyArray<SourceTools.JsonSchemaTool> | undefined
  /**
   * Built-in Claude Code tools to enable (such as `["Read", "Grep"]`); none by default. They run inside
   * the harness and are at-least-once: a RunModel retry repeats them.
   */
  readonly builtInTools?: ReadonlyArray<string> | undefined
  /**
   * The harness's config directory (`CLAUDE_CONFIG_DIR`), where it keeps session transcripts. A worker
   * that resumes a session must see the same directory.
   */
  readonly configDir: string
  /**
   * Where the harness mirrors its transcripts besides `configDir` (the SDK's alpha `sessionStore`), such as
   * `SqlSessionStore.make` on the engine's database. With it, a session resumes on any worker: the RunModel
   * resumes when the store holds the session, and the harness loads the transcript from it.
   */
  readonly sessionStore?: SqlSessionStore.ClaudeSessionStore | undefined
  /** The harness's working directory (default: `configDir`). */
  readonly cwd?: string | undefined
  /** Environment for the harness process (`ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`, ...), over `PATH`. */
  readonly env?: Readonly<Record<string, string>> | undefined
  /** The Claude Code executable (default: the SDK's platform package). */
  readonly pathToClaudeCodeExecutable?: string | undefined
  /** Called with the harness's stderr. */
  readonly stderr?: ((data: string) => void) | undefined
}

/**
 * The run state between RunModel Steps of one turn: the messages the turn produced so far (stored when it
 * ends), the deferred call it waits for, and the harness's cost so far.
 */
const RunStateSchema = Schema.Struct({
  v: Schema.Literal(1),
  messages: Schema.Array(Schema.Unknown),
  pending: Schema.Array(RunState.PendingCall),
  costUsd: Schema.Number,
  /** The harness transcript's position when the RunModel that wrote this state ended (absent before 0.1.0's transcript points). */
  transcript: Schema.optional(Schema.Number)
})
type TurnRunState = typeof RunStateSchema.Type
const runState = RunState.make(RunStateSchema)

/** A tool call of an earlier turn left in the harness transcript, that the model sees as not run. */
export const EARLIER_TURN_CALL =
  "[Dex] This call was not run: its turn ended before it ran (the user steered or stopped the turn)."

/** The harness session ID of a session Flow: a UUID (v5 layout) from the Flow ID's SHA-256. */
export const sessionIdOf = (flowId: string): string => {
  const h = Crypto.createHash("sha256").update(`durable-agent/claude-agent-sdk/${flowId}`).digest()
  h[6] = (h[6]! & 0x0f) | 0x50
  h[8] = (h[8]! & 0x3f) | 0x80
  const x = h.subarray(0, 16).toString("hex")
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`
}

/** The harness's local transcript files of this session under `configDir` (one per project directory). */
const localTranscripts = (configDir: string, sessionId: string): ReadonlyArray<string> => {
  const projects = Path.join(configDir, "projects")
  if (!Fs.existsSync(projects)) return []
  return Fs.readdirSync(projects)
    .map((d) => Path.join(projects, d, `${sessionId}.jsonl`))
    .filter((f) => Fs.existsSync(f))
}

const linesOf = (file: string): ReadonlyArray<string> =>
  Fs.readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")

/**
 * The harness transcript of a session as the runner reads and cuts it: the `sessionStore`'s main transcript
 * when there is one (the harness resumes from the store), else the JSONL file under `configDir`. A position
 * is a number of entries.
 */
interface Transcript {
  /** The position of the last entry, 0 when there is none. */
  readonly point: () => Promise<number>
  /**
   * Drops every entry after `point` (the local files too when `point` is 0) and makes this attempt the
   * store's writer of the session; the last position left.
   */
  readonly truncate: (point: number) => Promise<number>
  /** The `sessionStore` option of this attempt's query: the store as this attempt appends to it. */
  readonly sessionStore: Options["sessionStore"]
}

const transcriptOf = (agent: ClaudeAgent, sessionId: string, owner: string): Transcript => {
  const store = agent.sessionStore
  const dropLocal = () => {
    for (const f of localTranscripts(agent.configDir, sessionId)) Fs.rmSync(f, { force: true })
  }
  if (store !== undefined) {
    return {
      point: () => store.lastSeq(sessionId),
      truncate: async (point) => {
        // a fresh start (`sessionId`) must not find a local transcript of an attempt that never committed
        if (point <= 0) dropLocal()
        return store.truncate(sessionId, point, owner)
      },
      sessionStore: store.forAttempt(owner)
    }
  }
  return {
    sessionStore: undefined,
    point: async () => Math.max(0, ...localTranscripts(agent.configDir, sessionId).map((f) => linesOf(f).length)),
    truncate: async (point) => {
      if (point <= 0) {
        dropLocal()
        return 0
      }
      let left = 0
      for (const f of localTranscripts(agent.configDir, sessionId)) {
        const lines = linesOf(f)
        if (lines.length > point) Fs.writeFileSync(f, `${lines.slice(0, point).join("\n")}\n`)
        left = Math.max(left, Math.min(point, lines.length))
      }
      return left
    }
  }
}

/** The frameworkItem field that carries the harness transcript's position after the message's RunModel. */
const TRANSCRIPT_POINT = "transcriptPoint"

const itemOf = (m: Runner.FrameworkMessage): Record<string, unknown> | undefined => {
  try {
    const item: unknown = JSON.parse(m.frameworkItem)
    return typeof item === "object" && item !== null ? (item as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

/** The messages with the transcript position on the last one (whose RunModel ended there). */
const withPoint = (messages: ReadonlyArray<Runner.FrameworkMessage>, point: number): Array<Runner.FrameworkMessage> =>
  messages.map((m, i) =>
    i === messages.length - 1 ? { ...m, frameworkItem: JSON.stringify({ ...itemOf(m), [TRANSCRIPT_POINT]: point }) } : m
  )

/**
 * The harness transcript's position that the committed record knows when this RunModel starts: the run state's
 * (the turn's last committed RunModel), else the one on the history's last message from this runner (the
 * previous turn's end), else 0 when the history has no message from this runner (nothing committed yet).
 * `undefined` when the committed state predates transcript positions: the transcript is then used as it is.
 */
const committedPoint = (turn: Runner.AgentTurnContext, state: TurnRunState | undefined): number | undefined => {
  if (state !== undefined) return state.transcript
  let produced = false
  for (let i = turn.messages.length - 1; i >= 0; i--) {
    const m = turn.messages[i]!
    if (m.role === "user") continue
    produced = true
    const point = itemOf(m)?.[TRANSCRIPT_POINT]
    if (typeof point === "number") return point
  }
  return produced ? undefined : 0
}

const lastUserText = (turn: Runner.AgentTurnContext): string => {
  for (let i = turn.messages.length - 1; i >= 0; i--) {
    const m = turn.messages[i]!
    if (m.role === "user" && m.text !== null) return m.text
  }
  return ""
}

const errorMessage = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : JSON.stringify(error)

const textMessage = (text: string, item: Record<string, unknown>): Runner.FrameworkMessage => ({
  role: "assistant",
  text,
  toolCallId: null,
  toolName: null,
  toolArguments: null,
  toolOutput: null,
  frameworkItem: JSON.stringify({ type: "text", text, ...item })
})

const toolUseMessage = (id: string, name: string, input: unknown): Runner.FrameworkMessage => ({
  role: "assistant",
  text: null,
  toolCallId: id,
  toolName: name,
  toolArguments: JSON.stringify(input ?? {}),
  toolOutput: null,
  frameworkItem: JSON.stringify({ type: "tool_use", id, name, input: input ?? {} })
})

const toolResultMessage = (id: string, name: string, output: string): Runner.FrameworkMessage => ({
  role: "tool",
  text: null,
  toolCallId: id,
  toolName: name,
  toolArguments: null,
  toolOutput: output,
  frameworkItem: JSON.stringify({ type: "tool_result", tool_use_id: id, content: output })
})

const plainName = (name: string): string => (name.startsWith(MCP_PREFIX) ? name.slice(MCP_PREFIX.length) : name)

const resultText = (content: unknown): string =>
  Array.isArray(content)
    ? content.map((c: any) => (c?.type === "text" ? String(c.text) : "")).join("")
    : typeof content === "string"
      ? content
      : JSON.stringify(content ?? "")

/**
 * The prompt of a turn's first query: the user messages at the end of the history (the turn's message, or
 * every steered message, after a turn-failure note the harness has not seen).
 */
const promptOf = (turn: Runner.AgentTurnContext): string => {
  const texts: Array<string> = []
  for (let i = turn.messages.length - 1; i >= 0; i--) {
    const m = turn.messages[i]!
    if (m.role !== "user") break
    if (m.text !== null) texts.unshift(m.text)
  }
  return texts.length > 0 ? texts.join("\n\n") : lastUserText(turn)
}

/** The zod shapes of the session's built-in tools, from their JSON Schemas. */
const builtInShapes: Readonly<Record<string, z.ZodRawShape>> = Object.fromEntries(
  BuiltInTools.definitions.map((d) => {
    // the built-ins' parameters are JSON Schema objects; zod turns them into an object schema
    const schema = z.fromJSONSchema(d.parameters as Parameters<typeof z.fromJSONSchema>[0])
    return [d.name, schema instanceof z.ZodObject ? (schema.shape as z.ZodRawShape) : {}]
  })
)

/** A JSON Schema's zod object schema, or undefined when zod cannot read it. */
const zodOfJsonSchema = (parameters: { readonly [key: string]: unknown }): z.ZodObject | undefined => {
  try {
    const schema = z.fromJSONSchema(parameters as Parameters<typeof z.fromJSONSchema>[0])
    return schema instanceof z.ZodObject ? schema : undefined
  } catch {
    return undefined
  }
}

/**
 * A JSON-Schema tool as a runner tool: its zod shape (each property as `z.any()` when zod cannot read the
 * schema, so no argument is dropped) and the full schema its deferred calls are validated with.
 */
const fromJsonSchemaTool = (
  t: SourceTools.JsonSchemaTool
): { readonly tool: ClaudeTool; readonly schema: z.ZodObject | undefined } => {
  const schema = zodOfJsonSchema(t.parameters)
  const properties = (t.parameters.properties ?? {}) as Readonly<Record<string, unknown>>
  const shape: z.ZodRawShape =
    schema !== undefined
      ? (schema.shape as z.ZodRawShape)
      : Object.fromEntries(Object.keys(properties).map((k) => [k, z.any()]))
  return {
    tool: {
      description: t.description,
      inputSchema: shape,
      effect: t.effect,
      execute: (input, options) => t.execute(input as { readonly [key: string]: unknown }, options)
    },
    schema
  }
}

/** The turn's messages so far, with a result message for each call the run state waited for. */
const turnMessagesOf = (turn: Runner.AgentTurnContext, state: TurnRunState | undefined) => [
  ...((state?.messages ?? []) as ReadonlyArray<Runner.FrameworkMessage>),
  ...Replay.replay(turn, state?.pending ?? []).map((p) => toolResultMessage(p.toolCallId, p.toolName, p.text))
]

/** Builds the runner. */
export const make = (agent: ClaudeAgent): Runner.AgentFrameworkRunnerShape => {
  const ownTools: Readonly<Record<string, ClaudeTool<any>>> = agent.tools ?? {}
  const jsonTools = new Map(
    (agent.jsonSchemaTools ?? []).filter((t) => !Object.hasOwn(ownTools, t.name)).map((t) => [t.name, t] as const)
  )
  const converted = new Map([...jsonTools].map(([name, t]) => [name, fromJsonSchemaTool(t)] as const))
  const tools: Readonly<Record<string, ClaudeTool<any>>> = {
    ...Object.fromEntries([...converted].map(([name, c]) => [name, c.tool])),
    ...ownTools
  }
  const policyOf = (turn: Runner.AgentTurnContext, name: string) => {
    const json = jsonTools.get(name)
    return json !== undefined
      ? SourceTools.resolvePolicy(turn, json)
      : EffectClass.resolve(turn, name, Object.hasOwn(tools, name) ? tools[name] : undefined)
  }
  /** The record's tool source reference of a JSON-Schema tool (an MCP tool's server and name). */
  const sourceReferenceOf = (name: string) => {
    const reference = jsonTools.get(name)?.toolSourceReference
    return reference === undefined ? {} : { toolSourceReference: reference }
  }

  const runModelStep = Effect.fnUntraced(function* (turn: Runner.AgentTurnContext) {
    const events = yield* EventWriter.EventWriter
    const services = yield* Effect.context<never>()
    const runFork = Effect.runForkWith(services)
    const text = DeltaBuffer.make(events.textDelta)
    const reasoning = DeltaBuffer.make(events.reasoningDelta)
    const sessionId = sessionIdOf(turn.flowId)
    const state = runState.decode(turn.frameworkRunState)
    const builtIns = BuiltIns.enabled(turn).map((d) => d.name as string)
    const isOwnTool = (name: string) => Object.hasOwn(tools, name) || builtIns.includes(name)
    // the recorded results of the calls this turn deferred, by tool_use_id
    const recorded = new Map<string, { readonly text: string; readonly rejected: boolean }>()
    const pendingIds = new Set((state?.pending ?? []).map((p) => p.toolCallId))
    for (const p of Replay.replay(turn, state?.pending ?? [])) {
      const record = turn.toolCalls.find((c) => c.toolCallId === p.toolCallId)
      recorded.set(p.toolCallId, { text: p.text, rejected: record?.status === "rejected" })
    }
    // calls of earlier turns, as the session stored them (a steered or cancelled turn's unfinished calls): a
    // call left waiting in the harness transcript never runs, the model sees what the session recorded
    const earlier = new Map<string, string>()
    for (const m of turn.messages) {
      if (m.toolCallId === null) continue
      if (m.role === "tool") earlier.set(m.toolCallId, m.toolOutput ?? EARLIER_TURN_CALL)
      else if (!earlier.has(m.toolCallId)) earlier.set(m.toolCallId, EARLIER_TURN_CALL)
    }
    for (const [id, text] of earlier) if (!recorded.has(id)) recorded.set(id, { text, rejected: true })
    const messages: Array<Runner.FrameworkMessage> = turnMessagesOf(turn, state)
    const names = new Map<string, string>()
    for (const m of messages) if (m.toolCallId !== null && m.toolName !== null) names.set(m.toolCallId, m.toolName)
    let deferredId: string | undefined
    const hook: HookCallback = async (input) => {
      if (input.hook_event_name !== "PreToolUse") return {}
      const name = plainName(input.tool_name)
      if (!isOwnTool(name)) return {}
      // a deferred call with its record (or an earlier turn's call): the handler answers the recorded text
      if (recorded.has(input.tool_use_id)) {
        return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } }
      }
      const policy = policyOf(turn, name)
      if (!builtIns.includes(name) && policy.effect === "read" && !policy.requiresApproval) {
        return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } }
      }
      // the harness keeps one deferred call per query (`deferred_tool_use` is singular): a second one would
      // silently drop the first from its transcript, so every later write of this query is denied instead
      // (a hook's deny reason reaches the model as `PreToolUse:<tool> hook error: <reason>`, so the call is
      // allowed and its handler answers the text as an error result)
      if (deferredId !== undefined && deferredId !== input.tool_use_id) {
        recorded.set(input.tool_use_id, { text: ONE_WRITE_AT_A_TIME, rejected: true })
        return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } }
      }
      deferredId = input.tool_use_id
      return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "defer" } }
    }
    const replayed = (extra: any) => {
      const toolUseId = String(extra?._meta?.["claudecode/toolUseId"] ?? "")
      return { toolUseId, replay: recorded.get(toolUseId) }
    }
    const server = createSdkMcpServer({
      name: MCP_SERVER_NAME,
      alwaysLoad: true,
      tools: [
        ...Object.entries(tools).map(([name, t]) =>
          tool(name, t.description, t.inputSchema, async (args: any, extra: any) => {
            const { toolUseId, replay } = replayed(extra)
            if (replay !== undefined) {
              return {
                content: [{ type: "text" as const, text: replay.text }],
                ...(replay.rejected ? { isError: true } : {})
              }
            }
            // an inline read: run it here, in the RunModel
            try {
              const out = await t.execute(args, {
                toolCallId: toolUseId,
                idempotencyKey: `${turn.flowId}/${turn.turnId}/${toolUseId}`,
                attempt: turn.attempt,
                abortSignal: turn.cancellationSignal ?? new AbortController().signal
              } satisfies ClaudeToolCallOptions)
              return { content: [{ type: "text" as const, text: ToolCall.outputText(out) }] }
            } catch (e) {
              return { content: [{ type: "text" as const, text: errorMessage(e) }], isError: true }
            }
          })
        ),
        // the enabled session built-ins: always deferred to the session's own Steps, replayed from their records
        ...BuiltIns.enabled(turn).map((d) =>
          tool(d.name, d.description, builtInShapes[d.name] ?? {}, async (_args: any, extra: any) => {
            const { replay } = replayed(extra)
            return {
              content: [{ type: "text" as const, text: replay?.text ?? "a built-in tool runs in the session's Steps" }],
              ...(replay === undefined ? { isError: true } : {})
            }
          })
        )
      ]
    })
    // the harness appends to its transcript while the query runs, outside the Step's transaction: an attempt
    // that never committed (killed, failed, interrupted) may have left entries. Cut them back to what the
    // committed state knows, so that a retry continues the same point (one prompt, no call of a lost attempt)
    // this attempt's writer token: an earlier attempt whose harness still runs cannot append after the cut
    const transcript = transcriptOf(agent, sessionId, Crypto.randomUUID())
    const transcriptFailed = (cause: unknown) =>
      new Errors.ModelCallError({ message: `the harness transcript failed: ${errorMessage(cause)}` })
    const committed = committedPoint(turn, state)
    const resume =
      (yield* Effect.tryPromise({
        // a committed state older than transcript positions: nothing is cut (the whole transcript is kept)
        try: () => transcript.truncate(committed ?? Number.MAX_SAFE_INTEGER),
        catch: transcriptFailed
      })) > 0
    const controller = new AbortController()
    const onCancel = () => controller.abort()
    turn.cancellationSignal?.addEventListener("abort", onCancel, { once: true })
    const ownTools = [...Object.keys(tools), ...builtIns].map((n) => `${MCP_PREFIX}${n}`)
    const options: Options = {
      ...(resume ? { resume: sessionId } : { sessionId }),
      cwd: agent.cwd ?? agent.configDir,
      tools: [...(agent.builtInTools ?? [])],
      allowedTools: [...ownTools, ...(agent.builtInTools ?? [])],
      mcpServers: { [MCP_SERVER_NAME]: server },
      settingSources: [],
      includePartialMessages: true,
      abortController: controller,
      ...(transcript.sessionStore === undefined
        ? {}
        : { sessionStore: transcript.sessionStore, sessionStoreFlush: "eager" as const }),
      hooks: { PreToolUse: [{ hooks: [hook] }] },
      ...(agent.model === undefined ? {} : { model: agent.model }),
      ...(agent.instructions === undefined
        ? {}
        : { systemPrompt: { type: "preset", preset: "claude_code", append: agent.instructions } }),
      ...(agent.pathToClaudeCodeExecutable === undefined
        ? {}
        : { pathToClaudeCodeExecutable: agent.pathToClaudeCodeExecutable }),
      ...(agent.stderr === undefined ? {} : { stderr: agent.stderr }),
      env: { PATH: process.env.PATH ?? "", ...agent.env, CLAUDE_CONFIG_DIR: agent.configDir }
    }
    const prompt =
      state !== undefined && state.pending.length > 0
        ? resumePrompt(Replay.replay(turn, state.pending))
        : promptOf(turn)
    const messageIds = new Set<string>()
    // a failed model call: the harness makes it an assistant message with `error` and ends the query
    let apiError: string | undefined
    // the model that answered (the Messages response's `model`)
    let responseModel: string | undefined
    // the store refused a batch of the transcript (after the SDK's retries): the store misses entries
    let mirrorError: string | undefined
    const result = yield* Effect.tryPromise({
      try: async (interrupted) => {
        // the fiber's interruption (cancel_turn, a method timeout) aborts the query too
        interrupted.addEventListener("abort", onCancel, { once: true })
        let last: SDKResultMessage | undefined
        for await (const m of query({ prompt, options }) as AsyncIterable<SDKMessage>) {
          if (m.type === "stream_event") {
            const e = m.event as any
            if (m.parent_tool_use_id === null && e.type === "content_block_delta") {
              if (e.delta?.type === "text_delta") runFork(text.push(String(e.delta.text)))
              else if (e.delta?.type === "thinking_delta") runFork(reasoning.push(String(e.delta.thinking)))
            }
          } else if (m.type === "assistant" && m.parent_tool_use_id === null && m.error !== undefined) {
            const said = (m.message.content as ReadonlyArray<any>).map((b) => (b.type === "text" ? b.text : ""))
            apiError = `${String(m.error)}: ${said.join("")}`
          } else if (m.type === "assistant" && m.parent_tool_use_id === null) {
            messageIds.add(m.message.id)
            if (typeof m.message.model === "string" && m.message.model !== "") responseModel = m.message.model
            for (const block of m.message.content as ReadonlyArray<any>) {
              if (block.type === "text" && typeof block.text === "string" && block.text !== "") {
                messages.push(textMessage(block.text, { message_id: m.message.id }))
              } else if (block.type === "tool_use" && !earlier.has(block.id) && !names.has(block.id)) {
                const name = plainName(String(block.name))
                names.set(block.id, name)
                messages.push(toolUseMessage(block.id, name, block.input))
              }
            }
          } else if (m.type === "user" && m.parent_tool_use_id === null && Array.isArray(m.message.content)) {
            for (const block of m.message.content as ReadonlyArray<any>) {
              if (block.type !== "tool_result") continue
              const id = String(block.tool_use_id)
              // the deferred calls' results are their records (already in `messages`); earlier turns' are stored
              if (pendingIds.has(id) || earlier.has(id) || !names.has(id)) continue
              if (messages.some((x) => x.role === "tool" && x.toolCallId === id)) continue
              messages.push(toolResultMessage(id, names.get(id)!, resultText(block.content)))
            }
          } else if (m.type === "system" && m.subtype === "mirror_error") {
            mirrorError = String(m.error)
          } else if (m.type === "result") {
            // a resumed deferred call first reports `tool_deferred_unavailable`, then runs it and goes on
            if (m.terminal_reason !== "tool_deferred_unavailable" || last === undefined) last = m
          }
        }
        return last
      },
      catch: (cause) => new Errors.ModelCallError({ message: errorMessage(cause) })
    }).pipe(Effect.ensuring(Effect.sync(() => turn.cancellationSignal?.removeEventListener("abort", onCancel))))
    yield* text.flush
    yield* reasoning.flush
    if (controller.signal.aborted) return yield* new Errors.ModelCallError({ message: "the model call was cancelled" })
    if (result === undefined) return yield* new Errors.ModelCallError({ message: "the harness ended without a result" })
    if (mirrorError !== undefined) {
      return yield* new Errors.ModelCallError({ message: `the session store lost transcript entries: ${mirrorError}` })
    }
    // where the transcript ends: the committed state of this RunModel records it
    const point = yield* Effect.tryPromise({ try: () => transcript.point(), catch: transcriptFailed })
    // `modelUsage` is keyed by the model the harness asked for
    const requestModel = agent.model ?? Object.keys(result.modelUsage ?? {})[0]
    const modelName = responseModel ?? requestModel
    const usage: Wire.AgentUsage = {
      modelCalls: messageIds.size,
      inputTokens:
        (result.usage.input_tokens ?? 0) +
        (result.usage.cache_read_input_tokens ?? 0) +
        (result.usage.cache_creation_input_tokens ?? 0),
      outputTokens: result.usage.output_tokens ?? 0,
      cachedInputTokens: result.usage.cache_read_input_tokens ?? 0,
      reasoningTokens: 0
    }
    const costUsd = (state?.costUsd ?? 0) + (result.total_cost_usd ?? 0)
    // on the attempt's chat span, when the session traces
    const frameworkSpans = yield* SessionTracer.FrameworkSpans
    frameworkSpans.annotate({
      "claude_agent_sdk.total_cost_usd": result.total_cost_usd ?? 0,
      "claude_agent_sdk.turn_cost_usd": costUsd,
      "gen_ai.response.model": modelName ?? ""
    })
    const metadata = {
      requestModel,
      responseModel: modelName,
      providerName: "anthropic",
      finishReasons: [String(result.terminal_reason ?? result.subtype)]
    }
    const deferred = result.subtype === "success" ? result.deferred_tool_use : undefined
    if (result.terminal_reason === "tool_deferred" && deferred !== undefined) {
      const name = plainName(deferred.name)
      if (!names.has(deferred.id)) messages.push(toolUseMessage(deferred.id, name, deferred.input))
      return Runner.AgentTurnOutcome.toolCallsRequested({
        frameworkRunState: runState.encode({
          v: 1,
          messages: withPoint(messages, point),
          pending: [{ toolCallId: deferred.id, toolName: name }],
          costUsd,
          transcript: point
        }),
        toolCalls: [
          {
            toolCallId: deferred.id,
            toolName: name,
            arguments: JSON.stringify(deferred.input ?? {}),
            policy: policyOf(turn, name),
            ...sourceReferenceOf(name)
          }
        ],
        usage,
        modelCallMetadata: metadata
      })
    }
    if (apiError !== undefined) {
      return yield* new Errors.ModelCallError({ message: `the model call failed (${apiError})` })
    }
    if (result.is_error) {
      const detail = result.subtype === "success" ? result.result : (result.errors ?? []).join("; ")
      return yield* new Errors.ModelCallError({
        message: `the harness turn failed (${String(result.terminal_reason ?? result.subtype)}): ${detail}`
      })
    }
    // the turn's cost, usage and model are kept on its last message (the session's usage has no cost)
    const summary = { model: modelName ?? null, costUsd, sessionId }
    const lastText = messages.findLastIndex((m) => m.role === "assistant" && m.toolCallId === null)
    const finalText = result.subtype === "success" ? result.result : ""
    const newMessages =
      lastText >= 0
        ? messages.map((m, i) =>
            i === lastText
              ? { ...m, frameworkItem: JSON.stringify({ ...JSON.parse(m.frameworkItem), result: summary }) }
              : m
          )
        : finalText !== ""
          ? [...messages, textMessage(finalText, { result: summary })]
          : messages
    return Runner.AgentTurnOutcome.turnCompleted({
      newMessages: withPoint(newMessages, point),
      usage,
      modelCallMetadata: metadata
    })
  })

  /** A steered or cancelled turn's messages: what it produced, with the records of the calls it waited for. */
  const buildUnfinishedTurnMessages = (turn: Runner.AgentTurnContext) =>
    Effect.sync(() => turnMessagesOf(turn, runState.decode(turn.frameworkRunState)))

  const executeDeferredToolCall = Effect.fnUntraced(function* (call: Runner.DeferredToolExecution) {
    const name = call.toolCall.toolName
    const t = Object.hasOwn(tools, name) ? tools[name] : undefined
    if (t === undefined) return yield* ToolCall.unknownTool(call)
    // a JSON-Schema tool is validated by the zod form of its whole schema, an own tool by its shape
    const schema = converted.get(name)?.schema ?? z.object(t.inputSchema)
    return yield* ToolCall.run(call, {
      validate: (raw) => {
        const parsed = schema.safeParse(raw)
        return parsed.success
          ? Effect.succeed(parsed.data)
          : Effect.fail(
              new Errors.ToolExecutionError({ message: `invalid ${name} arguments: ${parsed.error.message}` })
            )
      },
      execute: t.execute
    })
  })

  return {
    name: agent.name,
    buildUserMessage: (text: string): Runner.FrameworkMessage => ({
      role: "user",
      text,
      toolCallId: null,
      toolName: null,
      toolArguments: null,
      toolOutput: null,
      frameworkItem: JSON.stringify({ role: "user", content: text })
    }),
    runModelStep,
    executeDeferredToolCall,
    buildUnfinishedTurnMessages
  }
}

/** The runner as the session's `AgentFrameworkRunner` layer. */
export const layer = (agent: ClaudeAgent): Layer.Layer<Runner.AgentFrameworkRunner> =>
  Layer.succeed(Runner.AgentFrameworkRunner, make(agent))
