// The Claude Agent SDK runner as the runner kit's conformance suite builds it: the real Claude Code binary
// against a ScriptedAnthropic server on 127.0.0.1 that plays the suite's script (each Messages request is
// one model call of the player), the suite's tools the runner's JSON-Schema tools (each an in-process MCP
// tool with the zod form of its JSON Schema), and the transcript mirrored to a SqlSessionStore on the
// engine's database (so a second worker process resumes it with a config directory of its own).
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type * as Conformance from "@durable-agent/runner-kit/Conformance"
import { Runner } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ClaudeAgentSdkRunner, ScriptedAnthropic, SqlSessionStore } from "../src/index.ts"
import { offlineEnv } from "./support.ts"

const dir = mkdtempSync(join(tmpdir(), "das-claude-kit-"))
process.on("exit", () => rmSync(dir, { recursive: true, force: true }))

const PREFIX = `mcp__${ClaudeAgentSdkRunner.MCP_SERVER_NAME}__`
const plain = (name: string) => (name.startsWith(PREFIX) ? name.slice(PREFIX.length) : name)

/**
 * Texts the harness adds to user messages that are not the conversation's: its reminders, the environment
 * note a resumed session gets, the runner's resume prompt.
 */
const isHarnessText = (text: string) =>
  text.startsWith(ClaudeAgentSdkRunner.RESUME_PROMPT) ||
  text.trimStart().startsWith("<system-reminder>") ||
  text.startsWith("# Environment")

const partsOf = (content: unknown): ReadonlyArray<any> =>
  typeof content === "string" ? [{ type: "text", text: content }] : Array.isArray(content) ? content : []

const resultText = (content: unknown): string =>
  Array.isArray(content)
    ? content.map((c: any) => (c?.type === "text" ? String(c.text) : "")).join("")
    : String(content ?? "")

/** The suite's view of one Messages request. */
export const viewOf = (request: ScriptedAnthropic.MessagesRequest): Conformance.ModelCallView => {
  const names = new Map<string, string>()
  const userTexts: Array<string> = []
  const toolResults: Array<Conformance.PromptToolResult> = []
  let last: Array<Conformance.PromptToolResult> = []
  for (const m of request.messages) {
    const parts = partsOf(m.content)
    if (m.role === "assistant") {
      for (const p of parts) if (p.type === "tool_use") names.set(String(p.id), plain(String(p.name)))
      last = []
      continue
    }
    for (const p of parts) {
      if (p.type === "text" && typeof p.text === "string" && !isHarnessText(p.text)) {
        userTexts.push(p.text)
        last = []
      } else if (p.type === "tool_result") {
        const r = {
          toolCallId: String(p.tool_use_id),
          toolName: names.get(String(p.tool_use_id)) ?? "",
          text: resultText(p.content)
        }
        toolResults.push(r)
        last.push(r)
      }
    }
  }
  return {
    userTexts,
    toolResults,
    lastToolResults: last,
    // the harness's own tools (such as its `DeferredToolPlaceholder`) are not the session's
    offeredTools: (request.tools ?? []).filter((t) => t.name.startsWith(PREFIX)).map((t) => plain(t.name))
  }
}

/** The runner over a scripted server that plays `player`, on a config directory of its own. */
export const runnerLayer = (
  player: Conformance.ScriptPlayer,
  tools: ReadonlyArray<Conformance.SuiteTool>
): Layer.Layer<Runner.AgentFrameworkRunner> =>
  Layer.effect(
    Runner.AgentFrameworkRunner,
    Effect.gen(function* () {
      const server = yield* Effect.acquireRelease(
        Effect.promise(() =>
          ScriptedAnthropic.start(async (request, _index, signal) => {
            const played = await player.play(viewOf(request), signal)
            return {
              text: played.text ?? played.textDeltas?.join(""),
              toolUses: played.toolCalls.map((c) => ({
                id: c.id,
                name: `${PREFIX}${c.name}`,
                input:
                  typeof c.arguments === "string"
                    ? (JSON.parse(c.arguments) as Record<string, unknown>)
                    : { ...(c.arguments ?? {}) }
              })),
              usage: played.usage
            }
          })
        ),
        (s) => Effect.promise(() => s.close())
      )
      const configDir = mkdtempSync(join(dir, "config-"))
      const store = yield* SqlSessionStore.make
      return ClaudeAgentSdkRunner.make({
        name: "claude-conformance",
        model: "claude-scripted-1",
        configDir,
        sessionStore: store,
        // the suite's tools as they are: JSON-Schema tools
        jsonSchemaTools: tools,
        env: offlineEnv(server.url, configDir)
      })
    })
    // the engine the suite provides beside the runner gives the store its SqlClient
  ) as unknown as Layer.Layer<Runner.AgentFrameworkRunner>

export const harness: Conformance.RunnerHarness = {
  name: "Claude Agent SDK runner",
  make: ({ player, tools }) => runnerLayer(player, tools)
}
