import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { createSdkMcpServer, query, tool } from "@anthropic-ai/claude-agent-sdk"
import { z } from "zod"
import * as Scripted from "../../src/ScriptedAnthropic.ts"

const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "claude-probe-"))
const server = await Scripted.start((req, i) => {
  console.log("REQ", i, req.model, JSON.stringify(req.messages).slice(0, 300), (req.tools ?? []).map((t) => t.name))
  const last = req.messages[req.messages.length - 1]
  const hasResult = JSON.stringify(last?.content).includes("tool_result")
  if (!hasResult && (req.tools ?? []).some((t) => t.name === "mcp__app__lookup"))
    return { toolUses: [{ id: "toolu_a1", name: "mcp__app__lookup", input: { q: "x" } }, { id: "toolu_a2", name: "mcp__app__send", input: { to: "bob" } }] }
  return { text: "Hello from the scripted model." }
})
const app = createSdkMcpServer({
  name: "app",
  alwaysLoad: true,
  tools: [
    tool("lookup", "Look up", { q: z.string() }, async (a) => ({ content: [{ type: "text", text: `found ${a.q}` }] }), { annotations: { readOnlyHint: true } }),
    tool("send", "Send", { to: z.string() }, async (a, extra) => { console.log("SEND RAN", a, JSON.stringify(extra)); return { content: [{ type: "text", text: `sent ${a.to}` }] } })
  ]
})
const sessionId = "6f1c3c1e-0000-4000-8000-000000000001"
const run = async (resume: boolean, decision: "defer" | "allow") => {
  let done!: () => void
  const finished = new Promise<void>((r) => { done = r })
  async function* noPrompt() { await finished }
  const q = query({
    prompt: resume ? noPrompt() : "hi",
    options: {
      ...(resume ? { resume: sessionId } : { sessionId }),
      cwd: home,
      tools: [],
      mcpServers: { app },
      allowedTools: ["mcp__app__lookup", "mcp__app__send"],
      settingSources: [],
      includePartialMessages: true,
      stderr: (d) => process.stderr.write(`STDERR ${d}`),
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        CLAUDE_CONFIG_DIR: Path.join(home, ".claude"),
        ANTHROPIC_BASE_URL: server.url,
        ANTHROPIC_API_KEY: "sk-ant-dummy",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_ERROR_REPORTING: "1",
        DISABLE_AUTOUPDATER: "1"
      },
      hooks: {
        PreToolUse: [
          {
            hooks: [
              async (input) => {
                const i = input as { tool_name: string; tool_use_id: string }
                console.log("HOOK", i.tool_name, i.tool_use_id)
                if (i.tool_name === "mcp__app__send")
                  return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: decision } }
                return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } }
              }
            ]
          }
        ]
      }
    }
  })
  for await (const m of q) {
    if (m.type === "stream_event") continue
    if (m.type === "result" && m.terminal_reason !== "tool_deferred_unavailable") done()
    console.log("MSG", m.type, (m as any).subtype ?? "", m.type === "result" ? JSON.stringify(m) : JSON.stringify(m).slice(0, 300))
  }
}
const t0 = Date.now()
try {
  await run(false, "defer")
  console.log("---- resume")
  await run(true, "allow")
} catch (e) {
  console.log("ERR", e)
}
for (const r of server.requests) console.log("FULL", JSON.stringify(r.messages.map((m) => [m.role, m.content])).slice(0, 4000))
console.log("ms", Date.now() - t0, "requests", server.requests.length)
await server.close()
