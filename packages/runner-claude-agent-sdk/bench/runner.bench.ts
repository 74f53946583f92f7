// Per-turn overhead of the Claude Agent SDK runner, measured in one run, the real Claude Code binary against
// a scripted Messages server on 127.0.0.1 (two model calls and one inline read per turn, the harness session
// resumed turn after turn):
//   (a) `query()` alone: the SDK's own query with the same in-process MCP read tool and the same options
//       (resume by session ID, partial messages, a PreToolUse hook that allows), no durability;
//   (b) durable: the same turns as a session on the embedded engine (RunModel -> AwaitUserMessage);
//   (d) the runner alone in memory: `runModelStep` driven the way the session drives it, history growing.
// Target: (d) <= 1.5 x (a). (a) and (d) run turn by turn in lockstep, so a loaded machine slows both alike.
// The figures are merged into bench-results.json at the repository root.
//
//   node --conditions=@durable-agent/source packages/runner-claude-agent-sdk/bench/runner.bench.ts
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createSdkMcpServer, type Options, query, type SDKMessage, tool } from "@anthropic-ai/claude-agent-sdk"
import { Engine } from "@durable-agent/engine"
import * as BenchResults from "@durable-agent/engine/testing/BenchResults"
import {
  AgentSessionClient,
  AgentSessionFlow,
  EventWriter,
  Heartbeat,
  Policy,
  type Runner,
  type Wire
} from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { z } from "zod"
import { ClaudeAgentSdkRunner, ScriptedAnthropic } from "../src/index.ts"

const TURNS = Number(process.env.BENCH_TURNS ?? "8")
const dir = mkdtempSync(join(tmpdir(), "das-claude-bench-"))

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}
const fmt = (ms: number) => `${ms.toFixed(1)} ms`

const env = (url: string, home: string): Record<string, string> => ({
  PATH: process.env.PATH ?? "",
  HOME: home,
  CLAUDE_CONFIG_DIR: home,
  ANTHROPIC_BASE_URL: url,
  ANTHROPIC_API_KEY: "sk-ant-bench-dummy",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
  DISABLE_AUTOUPDATER: "1"
})

/** The scripted model: a prompt that ends with a tool result gets the answer, any other a read call. */
let calls = 0
const reply = (request: ScriptedAnthropic.MessagesRequest): ScriptedAnthropic.ScriptedReply => {
  const last = request.messages[request.messages.length - 1]
  const content = Array.isArray(last?.content) ? (last.content as ReadonlyArray<{ type: string }>) : []
  if (content.some((p) => p.type === "tool_result"))
    return { text: "The file says hello.", usage: { inputTokens: 30, outputTokens: 5 } }
  return {
    toolUses: [{ id: `toolu_${++calls}`, name: "mcp__app__read_file", input: { path: "a.txt" } }],
    usage: { inputTokens: 20, outputTokens: 10 }
  }
}

const readFile = async ({ path }: { path: string }) => `contents of ${path}`

/** (a) `query()` alone, one query per turn, resuming its own session. */
const directTurns = (url: string) => {
  const home = mkdtempSync(join(dir, "direct-"))
  const sessionId = randomUUID()
  let i = 0
  return async () => {
    const t0 = performance.now()
    const server = createSdkMcpServer({
      name: "app",
      alwaysLoad: true,
      tools: [
        tool("read_file", "Reads a file.", { path: z.string() }, async (args) => ({
          content: [{ type: "text" as const, text: await readFile(args) }]
        }))
      ]
    })
    const options: Options = {
      ...(i === 0 ? { sessionId } : { resume: sessionId }),
      cwd: home,
      tools: [],
      allowedTools: ["mcp__app__read_file"],
      mcpServers: { app: server },
      settingSources: [],
      includePartialMessages: true,
      hooks: {
        PreToolUse: [
          {
            hooks: [async () => ({ hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } })]
          }
        ]
      },
      model: "claude-scripted-1",
      env: env(url, home)
    }
    let result: SDKMessage | undefined
    for await (const m of query({ prompt: `turn ${i++}: read a.txt`, options }) as AsyncIterable<SDKMessage>) {
      if (m.type === "result") result = m
    }
    if (result === undefined) throw new Error("no result")
    return performance.now() - t0
  }
}

const agentOf = (url: string, home: string): ClaudeAgentSdkRunner.ClaudeAgent => ({
  name: "bench",
  model: "claude-scripted-1",
  configDir: home,
  env: env(url, home),
  tools: {
    read_file: ClaudeAgentSdkRunner.claudeTool({
      description: "Reads a file.",
      inputSchema: { path: z.string() },
      effect: "read",
      execute: readFile
    })
  }
})

/** (d) The runner alone, in memory: one runModelStep per turn, the history growing as the session stores it. */
const inMemoryTurns = (url: string) => {
  const runner = ClaudeAgentSdkRunner.make(agentOf(url, mkdtempSync(join(dir, "memory-"))))
  const history: Array<Wire.AgentMessage> = []
  const store = (messages: ReadonlyArray<Runner.FrameworkMessage>, turnId: string) => {
    for (const m of messages) history.push({ ...m, sequence: history.length + 1, turnId, createdAt: "" })
  }
  let i = 0
  const turn = Effect.gen(function* () {
    const t0 = performance.now()
    const turnId = `t${i}`
    store([runner.buildUserMessage(`turn ${i++}: read a.txt`)], turnId)
    const outcome = yield* runner.runModelStep({
      flowId: "bench",
      turnId,
      stepExecutionId: "RunModel",
      attempt: 1,
      messages: [...history],
      frameworkRunState: null,
      toolCalls: [],
      sessionSettings: {},
      interactionMode: "chat",
      toolPolicies: {},
      defaultToolEffect: "unclassified",
      resolveToolPolicy: (name, frameworkEffect) => Policy.resolveToolPolicy(name, { frameworkEffect })
    })
    if (outcome._tag !== "TurnCompleted") throw new Error(`expected the answer, got ${outcome._tag}`)
    const ms = performance.now() - t0
    store(outcome.newMessages, turnId)
    return ms
  }).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))
  return () => Effect.runPromise(turn as Effect.Effect<number, unknown>)
}

/** (b) The same turns as a durable session on the embedded engine. */
const durable = (url: string) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const times: Array<number> = []
    yield* client.startSession("bench")
    for (let i = 0; i < TURNS; i++) {
      const t0 = performance.now()
      yield* client.sendUserMessage("bench", `turn ${i}: read a.txt`)
      yield* client.getSnapshot("bench").pipe(
        Effect.repeat({
          schedule: Schedule.spaced("5 millis"),
          until: (s) => s.state !== null && s.state.turnCount >= i + 1 && s.state.activeTurnId === null
        })
      )
      times.push(performance.now() - t0)
    }
    return times
  }).pipe(
    Effect.provide(
      Layer.mergeAll(
        AgentSessionFlow.layerWorker(AgentSessionFlow.make({ flowType: "BenchClaude" })).pipe(
          Layer.provide(ClaudeAgentSdkRunner.layer(agentOf(url, mkdtempSync(join(dir, "durable-")))))
        ),
        AgentSessionClient.layer("BenchClaude")
      ).pipe(
        Layer.provideMerge(
          Engine.layerEmbedded({ filename: join(dir, "bench.db"), pollInterval: "50 millis", maxConcurrentTasks: 64 })
        )
      )
    ),
    Effect.scoped
  )

const main = async () => {
  const started = performance.now()
  const server = await ScriptedAnthropic.start(reply)
  try {
    const direct = directTurns(server.url)
    const memory = inMemoryTurns(server.url)
    const a: Array<number> = []
    const d: Array<number> = []
    for (let i = 0; i < TURNS; i++) {
      a.push(await direct())
      d.push(await memory())
    }
    const b = await Effect.runPromise(durable(server.url) as Effect.Effect<Array<number>, unknown>)
    const [pa, pb, pd] = [percentile(a, 50), percentile(b, 50), percentile(d, 50)]
    const ratio = pd / pa
    const rows = [
      ["(a) query() alone, one inline MCP read (2 model calls)", `p50 ${fmt(pa)}  p99 ${fmt(percentile(a, 99))}`, "-"],
      [
        "(b) durable session, Claude Agent SDK runner, embedded engine",
        `p50 ${fmt(pb)}  p99 ${fmt(percentile(b, 99))}`,
        "-"
      ],
      ["(d) the runner alone, in memory (1 x runModelStep)", `p50 ${fmt(pd)}  p99 ${fmt(percentile(d, 99))}`, "-"],
      ["runner overhead over query(): (d) / (a)", `${ratio.toFixed(2)}x`, `<= 1.5x: ${ratio <= 1.5 ? "PASS" : "MISS"}`],
      ["the engine's Step cost per turn: (b) - (d)", fmt(pb - pd), "-"]
    ]
    process.stdout.write(`\nClaude Agent SDK runner benchmark (${TURNS} turns each; node ${process.version})\n\n`)
    process.stdout.write("| Measurement | Result | Target |\n|---|---|---|\n")
    for (const r of rows) process.stdout.write(`| ${r.join(" | ")} |\n`)
    const baseline = { name: "query() alone, one inline MCP read, p50", value: pa, unit: "ms" }
    BenchResults.record({
      "runner-claude-agent-sdk.turn_in_memory_p50_ms": {
        value: pd,
        unit: "ms",
        baseline,
        target: "value <= 1.5 x baseline",
        met: ratio <= 1.5
      },
      "runner-claude-agent-sdk.turn_durable_embedded_p50_ms": { value: pb, unit: "ms", baseline }
    })
    process.stdout.write(
      `\nFigures merged into ${BenchResults.file()}\nTotal: ${((performance.now() - started) / 1000).toFixed(1)} s\n`
    )
  } finally {
    await server.close()
  }
}

main()
  .catch((e) => {
    process.stderr.write(`${String(e)}\n`)
    process.exitCode = 1
  })
  .finally(() => rmSync(dir, { recursive: true, force: true }))
