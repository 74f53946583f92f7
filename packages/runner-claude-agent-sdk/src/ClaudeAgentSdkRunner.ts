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
import { DeltaBuffer, EffectClass, Replay, RunState, ToolCall, ToolRetryableError } from "@durable-agent/runner-kit"
import { Errors, EventWriter, Runner, type Wire } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { z } from "zod"
import type * as SqlSessionStore from "./SqlSessionStore.ts"

/** The MCP server name the agent's tools are served under: the model sees `mcp__app__<tool>`. */
export const MCP_SERVER_NAME = "app"

const MCP_PREFIX = `mcp__${MCP_SERVER_NAME}__`

/** The prompt a RunModel sends when it resumes a deferred tool call (the harness needs a prompt to go on). */
export const RESUME_PROMPT = "[Dex] The deferred tool call has its recorded result. Continue."

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

/** The run state between RunModel Steps of one turn: the deferred call the turn waits for. */
const runState = RunState.pending<never>()

/** The harness session ID of a session Flow: a UUID (v5 layout) from the Flow ID's SHA-256. */
export const sessionIdOf = (flowId: string): string => {
  const h = Crypto.createHash("sha256").update(`durable-agent/claude-agent-sdk/${flowId}`).digest()
  h[6] = (h[6]! & 0x0f) | 0x50
  h[8] = (h[8]! & 0x3f) | 0x80
  const x = h.subarray(0, 16).toString("hex")
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`
}

/** Whether the harness already keeps a transcript of this session under `configDir`. */
const transcriptExists = (configDir: string, sessionId: string): boolean => {
  const projects = Path.join(configDir, "projects")
  if (!Fs.existsSync(projects)) return false
  return Fs.readdirSync(projects).some((d) => Fs.existsSync(Path.join(projects, d, `${sessionId}.jsonl`)))
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

const assistantMessage = (turnId: string, text: string): Runner.FrameworkMessage => ({
  role: "assistant",
  text,
  toolCallId: null,
  toolName: null,
  toolArguments: null,
  toolOutput: null,
  frameworkItem: JSON.stringify({ role: "assistant", content: text, turn: turnId })
})

/** Builds the runner. */
export const make = (agent: ClaudeAgent): Runner.AgentFrameworkRunnerShape => {
  const tools: Readonly<Record<string, ClaudeTool<any>>> = agent.tools ?? {}
  const policyOf = (turn: Runner.AgentTurnContext, name: string) =>
    EffectClass.resolve(turn, name, Object.hasOwn(tools, name) ? tools[name] : undefined)

  const runModelStep = Effect.fn("ClaudeAgentSdkRunner.runModelStep")(function* (turn: Runner.AgentTurnContext) {
    const events = yield* EventWriter.EventWriter
    const services = yield* Effect.context<never>()
    const runFork = Effect.runForkWith(services)
    const text = DeltaBuffer.make(events.textDelta)
    const reasoning = DeltaBuffer.make(events.reasoningDelta)
    const sessionId = sessionIdOf(turn.flowId)
    const state = runState.decode(turn.frameworkRunState)
    // the recorded results of the calls this turn deferred, by tool_use_id
    const recorded = new Map<string, { readonly text: string; readonly rejected: boolean }>()
    for (const p of Replay.replay(turn, state?.pending ?? [])) {
      const record = turn.toolCalls.find((c) => c.toolCallId === p.toolCallId)
      recorded.set(p.toolCallId, { text: p.text, rejected: record?.status === "rejected" })
    }
    let deferredId: string | undefined
    const hook: HookCallback = async (input) => {
      if (input.hook_event_name !== "PreToolUse") return {}
      const name = input.tool_name.startsWith(MCP_PREFIX) ? input.tool_name.slice(MCP_PREFIX.length) : input.tool_name
      if (!Object.hasOwn(tools, name)) return {}
      const replay = recorded.get(input.tool_use_id)
      if (replay !== undefined) {
        return {
          hookSpecificOutput: replay.rejected
            ? { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: replay.text }
            : { hookEventName: "PreToolUse", permissionDecision: "allow" }
        }
      }
      const policy = policyOf(turn, name)
      if (policy.effect === "read" && !policy.requiresApproval) {
        return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } }
      }
      // the harness keeps one deferred call per query (`deferred_tool_use` is singular): a second one would
      // silently drop the first from its transcript, so every later write of this query is denied instead
      if (deferredId !== undefined && deferredId !== input.tool_use_id) {
        return {
          hookSpecificOutput: {
            hookEventName: "PreToolUse",
            permissionDecision: "deny",
            permissionDecisionReason: ONE_WRITE_AT_A_TIME
          }
        }
      }
      deferredId = input.tool_use_id
      return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "defer" } }
    }
    const server = createSdkMcpServer({
      name: MCP_SERVER_NAME,
      alwaysLoad: true,
      tools: Object.entries(tools).map(([name, t]) =>
        tool(name, t.description, t.inputSchema, async (args: any, extra: any) => {
          const toolUseId = String(extra?._meta?.["claudecode/toolUseId"] ?? "")
          const replay = recorded.get(toolUseId)
          if (replay !== undefined) return { content: [{ type: "text" as const, text: replay.text }] }
          // an inline read: run it here, in the RunModel
          try {
            const out = await t.execute(args, {
              toolCallId: toolUseId,
              idempotencyKey: `${turn.flowId}/${turn.turnId}/${toolUseId}`,
              attempt: turn.attempt,
              abortSignal: turn.cancellationSignal ?? new AbortController().signal
            } satisfies ClaudeToolCallOptions)
            return { content: [{ type: "text" as const, text: typeof out === "string" ? out : JSON.stringify(out) }] }
          } catch (e) {
            return { content: [{ type: "text" as const, text: errorMessage(e) }], isError: true }
          }
        })
      )
    })
    const resume =
      agent.sessionStore === undefined
        ? transcriptExists(agent.configDir, sessionId)
        : yield* Effect.tryPromise({
            try: () => agent.sessionStore!.exists(sessionId),
            catch: (cause) => new Errors.ModelCallError({ message: `the session store failed: ${errorMessage(cause)}` })
          })
    const controller = new AbortController()
    const onCancel = () => controller.abort()
    turn.cancellationSignal?.addEventListener("abort", onCancel, { once: true })
    const options: Options = {
      ...(resume ? { resume: sessionId } : { sessionId }),
      cwd: agent.cwd ?? agent.configDir,
      tools: [...(agent.builtInTools ?? [])],
      allowedTools: [...Object.keys(tools).map((n) => `${MCP_PREFIX}${n}`), ...(agent.builtInTools ?? [])],
      mcpServers: { [MCP_SERVER_NAME]: server },
      settingSources: [],
      includePartialMessages: true,
      abortController: controller,
      ...(agent.sessionStore === undefined
        ? {}
        : { sessionStore: agent.sessionStore, sessionStoreFlush: "eager" as const }),
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
    const prompt = state !== undefined && state.pending.length > 0 ? RESUME_PROMPT : lastUserText(turn)
    const messageIds = new Set<string>()
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
          } else if (m.type === "assistant") {
            messageIds.add(m.message.id)
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
    const modelName = Object.keys(result.modelUsage ?? {})[0]
    const usage: Wire.AgentUsage = {
      modelCalls: messageIds.size,
      inputTokens: result.usage.input_tokens ?? 0,
      outputTokens: result.usage.output_tokens ?? 0,
      cachedInputTokens: result.usage.cache_read_input_tokens ?? 0,
      reasoningTokens: 0
    }
    const metadata = {
      requestModel: agent.model ?? modelName,
      responseModel: modelName,
      providerName: "anthropic",
      finishReasons: [String(result.terminal_reason ?? result.subtype)]
    }
    const deferred = result.subtype === "success" ? result.deferred_tool_use : undefined
    if (result.terminal_reason === "tool_deferred" && deferred !== undefined) {
      const name = deferred.name.startsWith(MCP_PREFIX) ? deferred.name.slice(MCP_PREFIX.length) : deferred.name
      return Runner.AgentTurnOutcome.toolCallsRequested({
        frameworkRunState: runState.encode({
          v: 1,
          messages: [],
          pending: [{ toolCallId: deferred.id, toolName: name }]
        }),
        toolCalls: [
          {
            toolCallId: deferred.id,
            toolName: name,
            arguments: JSON.stringify(deferred.input ?? {}),
            policy: policyOf(turn, name)
          }
        ],
        usage,
        modelCallMetadata: metadata
      })
    }
    if (result.is_error) {
      const detail = result.subtype === "success" ? result.result : (result.errors ?? []).join("; ")
      return yield* new Errors.ModelCallError({
        message: `the harness turn failed (${String(result.terminal_reason ?? result.subtype)}): ${detail}`
      })
    }
    return Runner.AgentTurnOutcome.turnCompleted({
      newMessages: [assistantMessage(turn.turnId, result.subtype === "success" ? result.result : "")],
      usage,
      modelCallMetadata: metadata
    })
  })

  const executeDeferredToolCall = Effect.fn("ClaudeAgentSdkRunner.executeDeferredToolCall")(function* (
    call: Runner.DeferredToolExecution
  ) {
    const name = call.toolCall.toolName
    const t = Object.hasOwn(tools, name) ? tools[name] : undefined
    if (t === undefined) return yield* ToolCall.unknownTool(call)
    const schema = z.object(t.inputSchema)
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
    executeDeferredToolCall
  }
}

/** The runner as the session's `AgentFrameworkRunner` layer. */
export const layer = (agent: ClaudeAgent): Layer.Layer<Runner.AgentFrameworkRunner> =>
  Layer.succeed(Runner.AgentFrameworkRunner, make(agent))
