/**
 * A terminal chat over a durable agent session on the embedded engine (one SQLite file, no server).
 *
 *   npm start                               (from the repository root)
 *   OPENAI_API_KEY=sk-... npm start         (a real model; CHAT_MODEL picks it, default gpt-4.1-mini)
 *   CHAT_DB=/tmp/chat.db CHAT_WORKSPACE=/tmp/ws npm start
 *   npm start -- --db /tmp/other.db         (another database; over CHAT_DB)
 *   npm start -- --mcp servers.json         (more tools from MCP servers; see src/mcp.ts)
 *   npm start -- --runner mastra            (the same agent on the Mastra runner; see src/mastra.ts)
 *   npm start -- --runner openai-agents     (the same tools on the OpenAI Agents SDK; see src/openai-agents.ts)
 *   npm start -- --runner pi                (the same tools on Pi: pi-ai models, Pi AgentTools; see src/pi.ts)
 *   npm start -- --runner claude-agent-sdk  (the same tools on the Claude Code harness; see src/claude-agent-sdk.ts)
 *   npm start -- --runner stepwise          (the built-in Stepwise runner, with plan mode; see src/stepwise.ts)
 *
 * The worker (the session Flow with the AI SDK runner) and the client run in this process: the
 * embedded engine locks its file, so `/history` reads it through this process too. Kill the process
 * at any time and start it again: the session, and a turn that was running, continue from the file.
 */
import { existsSync } from "node:fs"
import { cp, mkdir } from "node:fs/promises"
import { dirname } from "node:path"
import { Engine } from "@durable-agent/engine"
import { AiSdkRunner, type AiSdkTool } from "@durable-agent/runner-ai-sdk"
import { AgentSessionClient, AgentSessionFlow, type Runner } from "@durable-agent/session"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import type { LanguageModel } from "ai"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { FLOW_TYPE, flow, makeAgent, selectModel } from "./agent.ts"
import { claudeAgentSdkRunner } from "./claude-agent-sdk.ts"
import { type ChatConfig, checkArguments, loadConfig, withArguments } from "./config.ts"
import { mastraRunner } from "./mastra.ts"
import { loadMcpTools, mcpFileArgument } from "./mcp.ts"
import { openAiAgentsRunner, runnerArgument } from "./openai-agents.ts"
import { piRunner } from "./pi.ts"
import { Chat } from "./session.ts"
import { planFlow, stepwiseRunner } from "./stepwise.ts"
import { chatLine, errorLine, Screen } from "./ui.ts"

const HELP = [
  "commands:",
  "  /sessions        list the sessions with their status",
  "  /resume <id>     switch to a session",
  "  /new             start a new session",
  "  /history [full]  the current session's Steps (full: the engine's whole history of it)",
  "  /steer <text>    redirect the running turn: it stops at its next step and <text> starts the next turn",
  "  /cancel          stop the running turn (Ctrl-C too); the session stays open",
  "  /plan <text>     ask for a plan first: the agent only writes the plan (plan mode; --runner stepwise)",
  "  /execute         approve the current plan: the agent carries it out and keeps its tasks current",
  "  /skip            decline the question the agent asks",
  "  /help            this list",
  "  /quit            leave (Ctrl-D, or Ctrl-C while no turn runs); the sessions stay in the database",
  "any other line is a message to the agent."
].join("\n")

/** The engine on the file, the session worker with the AI SDK runner, the clients, the screen and the chat. */
const appLayer = (
  config: ChatConfig,
  model: LanguageModel,
  mcpTools: Readonly<Record<string, AiSdkTool>>,
  runner?: Layer.Layer<Runner.AgentFrameworkRunner>,
  sessionFlow: AgentSessionFlow.AgentSessionFlowDef = flow
) => {
  // Agent Steps mostly wait on the network: more task slots than CPUs (the engine's default) lets parallel tool
  // calls run at once.
  const engine = Engine.layerEmbedded({ filename: config.database, pollInterval: "100 millis", maxConcurrentTasks: 32 })
  const agent = makeAgent(config, model)
  const worker = AgentSessionFlow.layerWorker(sessionFlow).pipe(
    Layer.provide(runner ?? AiSdkRunner.layer({ ...agent, tools: { ...agent.tools, ...mcpTools } }))
  )
  const services = Layer.mergeAll(worker, AgentSessionClient.layer(FLOW_TYPE)).pipe(Layer.provideMerge(engine))
  const chat = Chat.layer({ currentFile: `${config.database}.session` })
  return chat.pipe(Layer.provideMerge(services), Layer.provideMerge(Screen.layer))
}

/** Runs one command; `true` means quit. */
const command = (line: string) =>
  Effect.gen(function* () {
    const chat = yield* Chat
    const screen = yield* Screen
    const [name, ...args] = line.split(/\s+/)
    switch (name) {
      case "/quit":
      case "/exit":
        return true
      case "/help":
        yield* screen.print(chatLine(HELP))
        return false
      case "/new":
        yield* chat.create
        return false
      case "/resume": {
        const id = args[0]
        if (id === undefined) yield* screen.print(errorLine("usage: /resume <id> (see /sessions)"))
        else yield* chat.resume(id)
        return false
      }
      case "/sessions": {
        const sessions = yield* chat.list
        const width = Math.max(8, ...sessions.map((s) => s.sessionId.length))
        const lines = sessions.map((s) => {
          const turns = s.turns === null ? "" : `${s.turns} turn${s.turns === 1 ? "" : "s"}`
          const started = new Date(s.startedAt).toLocaleString("sv-SE")
          return `${s.current ? "*" : " "} ${s.sessionId.padEnd(width)}  ${s.status.padEnd(24)}  ${turns.padEnd(9)}  started ${started}`
        })
        yield* screen.print(chatLine(`sessions (* current):\n${lines.join("\n")}`))
        return false
      }
      case "/cancel":
        yield* chat.cancel
        return false
      case "/steer": {
        const text = line.slice("/steer".length).trim()
        if (text.length === 0) yield* screen.print(errorLine("usage: /steer <message>"))
        else yield* chat.steer(text)
        return false
      }
      case "/plan": {
        const text = line.slice("/plan".length).trim()
        if (text.length === 0) yield* screen.print(errorLine("usage: /plan <what to plan>"))
        else yield* chat.plan(text)
        return false
      }
      case "/execute":
        yield* chat.executePlan
        return false
      case "/skip": {
        const asking = yield* chat.asking
        if (Option.isSome(asking) && asking.value.kind === "question") yield* chat.answer(false)
        else yield* screen.print(errorLine("no question to skip"))
        return false
      }
      case "/history": {
        yield* screen.print(yield* chat.history(args[0] === "full"))
        return false
      }
      default:
        yield* screen.print(errorLine(`unknown command ${name}; /help lists them`))
        return false
    }
  })

const describeCause = (cause: Cause.Cause<unknown>) => {
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : String(error)
}

/** Reads lines until /quit: commands, answers to an approval, or messages. */
const loop = Effect.gen(function* () {
  const chat = yield* Chat
  const screen = yield* Screen
  while (true) {
    const input = yield* screen.input
    if (input._tag === "Quit") return
    if (input._tag === "Interrupt") {
      // Ctrl-C cancels the running turn; with none running it leaves, as it always did
      if (!(yield* chat.busy)) return
      yield* chat.cancel.pipe(Effect.catchCause((cause) => screen.print(errorLine(describeCause(cause)))))
      yield* chat.refreshPrompt
      continue
    }
    const text = input.text.trim()
    const quit = yield* Effect.gen(function* () {
      if (text.startsWith("/")) return yield* command(text)
      const asking = yield* chat.asking
      if (Option.isSome(asking) && asking.value.kind === "question") {
        if (text.length > 0) yield* chat.answerText(text)
      } else if (Option.isSome(asking)) {
        if (/^(y|yes)$/i.test(text)) yield* chat.answer(true)
        else if (/^(n|no)$/i.test(text)) yield* chat.answer(false)
        else yield* screen.print(errorLine(`please answer y or n: run ${asking.value.toolName}?`))
      } else if (text.length > 0) {
        yield* chat.send(text)
      }
      return false
    }).pipe(Effect.catchCause((cause) => Effect.as(screen.print(errorLine(describeCause(cause))), false)))
    if (quit) return
    yield* chat.refreshPrompt
  }
})

const greeting = (config: ChatConfig, modelLabel: string, mcp: string | null) =>
  [
    "Durable chat: an agent session on the embedded engine (one SQLite file, no server).",
    `  model:     ${modelLabel}`,
    `  database:  ${config.database}`,
    `  workspace: ${config.workspace}`,
    ...(mcp === null ? [] : [`  mcp:       ${mcp}`]),
    "  /help lists the commands. Kill this process at any time, even mid-turn, and start it again:",
    "  the session continues where it was."
  ].join("\n")

const main = Effect.gen(function* () {
  const argv = process.argv.slice(2)
  yield* Effect.try({ try: () => checkArguments(argv), catch: (e) => e })
  const config = withArguments(yield* loadConfig, argv)
  const { model, label } = selectModel(config.model)
  yield* Effect.promise(() => mkdir(dirname(config.database), { recursive: true }))
  // the default workspace starts as a copy of the tracked seed files; a copy that exists is left as it is
  const seed = config.seedWorkspace ?? null
  if (seed !== null && !existsSync(config.workspace)) {
    yield* Effect.promise(() => cp(seed, config.workspace, { recursive: true }))
  }
  const mcp = yield* Option.match(mcpFileArgument(process.argv.slice(2)), {
    onNone: () => Effect.succeed(null),
    onSome: loadMcpTools
  })
  const mcpTools = mcp?.tools ?? {}
  const mcpLabel =
    mcp === null ? null : `${Object.keys(mcpTools).length} tools from ${mcp.servers.join(", ") || "no server"}`
  // `--runner mastra`: the same agent on the Mastra runner (the AI SDK runner otherwise)
  const mastra =
    runnerArgument(process.argv.slice(2)) === "mastra" ? mastraRunner(config, model, label, mcpTools) : null
  // `--runner openai-agents`: the same tools on the OpenAI Agents SDK runner
  // `--runner pi`: the same tools as Pi AgentTools on the Pi runner
  // `--runner claude-agent-sdk`: the same tools on the Claude Code harness (a scripted server without a key)
  const runnerName = runnerArgument(process.argv.slice(2))
  const other =
    mastra ??
    (runnerName === "openai-agents"
      ? openAiAgentsRunner(config)
      : runnerName === "pi"
        ? piRunner(config)
        : runnerName === "claude-agent-sdk"
          ? claudeAgentSdkRunner(config)
          : null)
  // `--runner stepwise`: the built-in Stepwise runner over the same model, with plan mode
  const stepwise = runnerArgument(process.argv.slice(2)) === "stepwise"
  yield* Effect.gen(function* () {
    const screen = yield* Screen
    const chat = yield* Chat
    yield* screen.print(
      greeting(config, stepwise ? `${label} (Stepwise, plan mode)` : (other?.label ?? label), mcpLabel)
    )
    yield* chat.openInitial
    yield* loop
    yield* screen.setPrompt(null)
    yield* screen.print(chatLine(`bye; the session ${yield* chat.current} stays in ${config.database}`))
  }).pipe(
    Effect.provide(
      stepwise
        ? appLayer(config, model, {}, stepwiseRunner(config, model), planFlow)
        : appLayer(config, model, mcpTools, other?.layer)
    )
  )
})

main.pipe(
  Effect.catchCause((cause) =>
    Effect.sync(() => {
      if (Cause.hasInterruptsOnly(cause)) return
      process.stderr.write(`chat: ${describeCause(cause)}\n`)
      process.exitCode = 1
    })
  ),
  NodeRuntime.runMain
)
