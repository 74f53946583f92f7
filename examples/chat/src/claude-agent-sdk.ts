/**
 * The chat on the Claude Agent SDK runner (`npm start -- --runner claude-agent-sdk`): the same tools and
 * instructions as the AI SDK agent, given to the Claude Code binary as in-process MCP tools (their zod object
 * schemas' shapes). It is a whole-turn harness: the reads run inline inside the turn's RunModel, and the write
 * (`write_file`) is deferred to its own Step with its approval.
 *
 * With `ANTHROPIC_API_KEY` set, the harness calls Anthropic (`CHAT_CLAUDE_MODEL`, default
 * `claude-sonnet-4-5`); without it, the harness runs offline against a scripted Anthropic Messages server on
 * 127.0.0.1 that answers with the demo model's script. The harness keeps its transcripts under
 * `<database>.claude/` (its `CLAUDE_CONFIG_DIR`, and its working directory).
 *
 * MCP tools (`--mcp`) are AI SDK tools of the other runner and are not offered here.
 */
import { mkdirSync } from "node:fs"
import type { AiSdkTool } from "@durable-agent/runner-ai-sdk"
import { ClaudeAgentSdkRunner, ScriptedAnthropic } from "@durable-agent/runner-claude-agent-sdk"
import { Runner } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { z } from "zod"
import { demoAnswer, INSTRUCTIONS, makeTools } from "./agent.ts"
import type { ChatConfig } from "./config.ts"

/** The Anthropic model when `ANTHROPIC_API_KEY` is set. */
export const DEFAULT_CLAUDE_MODEL = "claude-sonnet-4-5"

const PREFIX = `mcp__${ClaudeAgentSdkRunner.MCP_SERVER_NAME}__`

/** An AI SDK tool of the chat as a runner tool with the same schema (its zod object's shape), effect and function. */
const fromAiSdkTool = (t: AiSdkTool): ClaudeAgentSdkRunner.ClaudeTool => {
  const schema = t.inputSchema as unknown
  return {
    description: t.description ?? "",
    inputSchema: schema instanceof z.ZodObject ? (schema.shape as z.ZodRawShape) : {},
    effect: t.effect,
    execute: (input, options) => t.execute(input, options)
  }
}

/** Texts the harness adds to user messages (its reminders and notes, the runner's resume prompt). */
const isHarnessText = (text: string) =>
  text.startsWith(ClaudeAgentSdkRunner.RESUME_PROMPT) ||
  text.trimStart().startsWith("<system-reminder>") ||
  text.startsWith("# Environment")

const partsOf = (content: unknown): ReadonlyArray<any> =>
  typeof content === "string" ? [{ type: "text", text: content }] : Array.isArray(content) ? content : []

/** The demo model's prompt (the AI SDK form it reads) from a Messages request of the harness. */
const toDemoPrompt = (request: ScriptedAnthropic.MessagesRequest): Parameters<typeof demoAnswer>[0] =>
  request.messages.flatMap((m): ReadonlyArray<unknown> => {
    const parts = partsOf(m.content)
    if (m.role === "assistant") return [{ role: "assistant" as const, content: [] }]
    const texts = parts.filter((p) => p.type === "text" && !isHarnessText(String(p.text)))
    // the resume prompt repeats each resumed call's recorded result (`- <tool> <id>: <result>`), which a
    // model reads when the harness lost the call's own result; the demo reads them as results too
    const resumed = parts.flatMap((p) =>
      p.type === "text" && String(p.text).startsWith(ClaudeAgentSdkRunner.RESUME_PROMPT)
        ? String(p.text)
            .split("\n")
            .slice(1)
            .flatMap((line) => {
              const match = /^- \S+ (\S+): ([\s\S]*)$/.exec(line)
              return match === null ? [] : [{ type: "tool_result", tool_use_id: match[1], content: match[2] }]
            })
        : []
    )
    const results = [...parts.filter((p) => p.type === "tool_result"), ...resumed]
    return [
      ...(results.length === 0
        ? []
        : [
            {
              role: "tool" as const,
              content: results.map((p) => ({
                type: "tool-result" as const,
                toolCallId: String(p.tool_use_id),
                toolName: "",
                output: {
                  type: "text" as const,
                  value: Array.isArray(p.content)
                    ? p.content.map((c: any) => (c.type === "text" ? c.text : "")).join("")
                    : String(p.content ?? "")
                }
              }))
            }
          ]),
      ...(texts.length === 0
        ? []
        : [{ role: "user" as const, content: texts.map((p) => ({ type: "text" as const, text: String(p.text) })) }])
    ]
  }) as unknown as Parameters<typeof demoAnswer>[0]

/** The scripted server's answer: the demo model's, with the tools under the harness's MCP names. */
const demoReply = (request: ScriptedAnthropic.MessagesRequest): ScriptedAnthropic.ScriptedReply => {
  const answer = demoAnswer(toDemoPrompt(request))
  return {
    text: answer.text,
    toolUses: (answer.toolCalls ?? []).map((c) => ({
      id: c.id,
      name: `${PREFIX}${c.name}`,
      input: typeof c.arguments === "string" ? JSON.parse(c.arguments) : { ...(c.arguments ?? {}) }
    }))
  }
}

/** The runner layer and how the greeting names the model. */
export const claudeAgentSdkRunner = (
  config: ChatConfig,
  env: Readonly<Record<string, string | undefined>> = process.env
): { readonly layer: Layer.Layer<Runner.AgentFrameworkRunner>; readonly label: string } => {
  const apiKey = env.ANTHROPIC_API_KEY?.trim()
  const model = env.CHAT_CLAUDE_MODEL?.trim() || DEFAULT_CLAUDE_MODEL
  const configDir = `${config.database}.claude`
  const tools = Object.fromEntries(
    Object.entries(makeTools(config.workspace)).map(([name, t]) => [name, fromAiSdkTool(t)])
  )
  const agent = (environment: Record<string, string>): ClaudeAgentSdkRunner.ClaudeAgent => ({
    name: "chat",
    model,
    instructions: INSTRUCTIONS,
    configDir,
    tools,
    env: environment
  })
  const quiet = {
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    DISABLE_AUTOUPDATER: "1"
  }
  const layer = Layer.effect(
    Runner.AgentFrameworkRunner,
    Effect.gen(function* () {
      mkdirSync(configDir, { recursive: true })
      if (apiKey !== undefined && apiKey !== "") {
        return ClaudeAgentSdkRunner.make(agent({ ...quiet, ANTHROPIC_API_KEY: apiKey }))
      }
      const server = yield* Effect.acquireRelease(
        Effect.promise(() => ScriptedAnthropic.start(demoReply)),
        (s) => Effect.promise(() => s.close())
      )
      return ClaudeAgentSdkRunner.make(
        agent({ ...quiet, HOME: configDir, ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: "sk-ant-demo-offline" })
      )
    })
  )
  return {
    layer,
    label:
      apiKey === undefined || apiKey === ""
        ? "demo (scripted Messages API; set ANTHROPIC_API_KEY for Claude), Claude Agent SDK runner"
        : `Anthropic ${model}, Claude Agent SDK runner`
  }
}
