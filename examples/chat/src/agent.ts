/**
 * The agent: its session Flow, its tools (files of one workspace folder), and its model — a real
 * OpenAI model when `OPENAI_API_KEY` is set, else a scripted demonstration model.
 *
 * The demo model answers from the conversation it is sent (the AI SDK prompt), never from a counter,
 * so a chat killed in the middle of a turn and started again gets the same answers. Asked anything
 * (but a greeting), it reads `notes.md` and `todo.md` in parallel, then writes `summary.md` (a
 * `non_idempotent_write`: the session asks for approval first) while it lists the workspace in
 * parallel, and answers.
 *
 * Any AI SDK provider works: replace `createOpenAI(...)` in {@link realModel} with another provider's
 * model, e.g. `anthropic("claude-sonnet-4-5")` from `@ai-sdk/anthropic`.
 */
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises"
import { dirname, relative, resolve, sep } from "node:path"
import { createOpenAI } from "@ai-sdk/openai"
import { type AiSdkRunner, aiSdkTool, ScriptedModel } from "@durable-agent/runner-ai-sdk"
import { AgentSessionFlow, type ModelClient, Wire } from "@durable-agent/session"
import { type LanguageModel, type LanguageModelMiddleware, wrapLanguageModel } from "ai"
import * as Redacted from "effect/Redacted"
import { z } from "zod"
import type { ChatConfig, ModelChoice } from "./config.ts"

/** The Flow type of the chat's sessions. */
export const FLOW_TYPE = "ChatAgent"

/**
 * The session Flow. Tool effects come from the tools below: `read_file` and `list_files` are reads (run
 * in parallel, retried), `write_file` is a `non_idempotent_write` (approval by default, one attempt).
 */
export const flow = AgentSessionFlow.make({ flowType: FLOW_TYPE })

// ---------------------------------------------------------------------------------------------------------
// tools
// ---------------------------------------------------------------------------------------------------------

/** Resolves a path inside the workspace; refuses paths that leave it. */
const inside = (workspace: string, path: string): string => {
  const full = resolve(workspace, path)
  if (full !== workspace && !full.startsWith(workspace + sep)) {
    throw new Error(`${path} is outside the workspace`)
  }
  return full
}

/** The agent's tools, working in `workspace`. */
export const makeTools = (workspace: string) => ({
  read_file: aiSdkTool({
    description: "Reads a text file of the workspace.",
    inputSchema: z.object({ path: z.string().describe("The file's path, relative to the workspace.") }),
    effect: "read",
    execute: ({ path }) => readFile(inside(workspace, path), "utf8")
  }),
  list_files: aiSdkTool({
    description: "Lists the files of the workspace.",
    inputSchema: z.object({}),
    effect: "read",
    execute: async () => {
      const entries = await readdir(workspace, { recursive: true, withFileTypes: true })
      return entries
        .filter((e) => e.isFile())
        .map((e) => relative(workspace, resolve(e.parentPath, e.name)))
        .sort()
        .join("\n")
    }
  }),
  write_file: aiSdkTool({
    description: "Writes a text file of the workspace (creates or replaces it).",
    inputSchema: z.object({
      path: z.string().describe("The file's path, relative to the workspace."),
      content: z.string().describe("The whole new content of the file.")
    }),
    effect: "non_idempotent_write",
    execute: async ({ path, content }) => {
      const full = inside(workspace, path)
      await mkdir(dirname(full), { recursive: true })
      await writeFile(full, content, "utf8")
      return `wrote ${Buffer.byteLength(content)} bytes to ${path}`
    }
  })
})

export const INSTRUCTIONS = [
  "You are a helpful assistant in a terminal chat.",
  "You work on the text files of one workspace folder with the tools read_file, list_files and write_file;",
  "paths are relative to the workspace. Read files before you change them, and run independent reads in parallel.",
  "Every write asks the user for approval; when a write is rejected, say so and do not retry it.",
  "Answer briefly."
].join(" ")

// ---------------------------------------------------------------------------------------------------------
// the scripted demonstration model
// ---------------------------------------------------------------------------------------------------------

type Prompt = ScriptedModel.CallOptions["prompt"]

/** The turn's user text and the tool results after it (by tool call ID), read from the prompt. */
const readTurn = (prompt: Prompt) => {
  const lastUser = prompt.findLastIndex((m) => m.role === "user")
  const user = prompt[lastUser]
  const userText =
    user?.role === "user"
      ? user.content
          .flatMap((p) => (p.type === "text" ? [p.text] : []))
          .join(" ")
          .trim()
      : ""
  const results = new Map<string, string>()
  for (const message of prompt.slice(lastUser + 1)) {
    if (message.role !== "tool") continue
    for (const part of message.content) {
      if (part.type !== "tool-result") continue
      const output = part.output
      results.set(
        part.toolCallId,
        output.type === "text" || output.type === "error-text"
          ? output.value
          : output.type === "json" || output.type === "error-json"
            ? JSON.stringify(output.value)
            : output.type
      )
    }
  }
  const turn = prompt.filter((m) => m.role === "user").length
  return { userText, results, turn }
}

const failed = (result: string | undefined) => result === undefined || result.startsWith(Wire.TOOL_CALL_FAILED_PREFIX)

/** Splits text into word-sized deltas, so the answer streams. */
const words = (text: string): ReadonlyArray<string> => text.match(/\s*\S+\s*/g) ?? [text]

const say = (text: string, toolCalls?: ReadonlyArray<ModelClient.ScriptedToolCall>): ModelClient.ScriptedResponse => ({
  text,
  textDeltas: words(text),
  delay: "300 millis",
  ...(toolCalls === undefined ? {} : { toolCalls })
})

const bullets = (markdown: string, pattern: RegExp) =>
  markdown
    .split("\n")
    .filter((line) => pattern.test(line))
    .map((line) => line.replace(pattern, "").trim())

/** The summary the demo writes, from the two files it read. */
const summaryOf = (notes: string | undefined, todo: string | undefined) => {
  const facts = failed(notes) ? [] : bullets(notes!, /^\s*[-*]\s+/)
  const open = failed(todo) ? [] : bullets(todo!, /^\s*[-*]\s+\[ \]\s*/)
  return [
    "# Summary",
    "",
    "From notes.md:",
    ...(facts.length ? facts.map((f) => `- ${f}`) : ["- (nothing to read)"]),
    "",
    "Still open in todo.md:",
    ...(open.length ? open.map((o) => `- ${o}`) : ["- (nothing open)"]),
    ""
  ].join("\n")
}

/** The plan the demo writes in a planning turn (plan mode, `--runner stepwise`). */
const DEMO_PLAN = ["Read notes.md and todo.md", "Write summary.md", "Tell you what I found"]

const demoTodos = (done: number) => ({
  todos: DEMO_PLAN.map((content, i) => ({
    content,
    status: i < done ? "completed" : i === done ? "in_progress" : "pending"
  }))
})

/**
 * One answer of the demo model, chosen from the conversation. `tools` names the tools offered: a planning turn
 * offers only `write_todos`, so the demo writes its plan; an executing turn also keeps the plan current.
 */
export const demoAnswer = (prompt: Prompt, tools?: ReadonlyArray<string>): ModelClient.ScriptedResponse => {
  const { userText, results, turn } = readTurn(prompt)
  const id = (name: string) => `t${turn}-${name}`
  if (tools !== undefined && tools.length === 1 && tools[0] === "write_todos") {
    if (!results.has(id("plan"))) {
      return say("Here is how I would do it.", [{ id: id("plan"), name: "write_todos", arguments: demoTodos(-1) }])
    }
    return say("That is the plan. /execute runs it, or /plan <text> revises it.")
  }
  const executing = userText.startsWith("[Dex] The user approved plan revision")
  const progress = (done: number): ReadonlyArray<ModelClient.ScriptedToolCall> =>
    executing ? [{ id: id(`plan-${done}`), name: "write_todos", arguments: demoTodos(done) }] : []
  const notes = results.get(id("notes"))
  const todo = results.get(id("todo"))
  const write = results.get(id("write"))
  const listing = results.get(id("list"))

  if (results.size === 0) {
    if (/^(hi|hello|hey)\b/i.test(userText)) {
      return say(
        "Hello! I'm the scripted demo model. Ask me anything and I'll read notes.md and todo.md in parallel, " +
          "ask you before I write summary.md, and tell you what I found."
      )
    }
    return say("Let me read the notes and the to-do list first.", [
      { id: id("notes"), name: "read_file", arguments: { path: "notes.md" } },
      { id: id("todo"), name: "read_file", arguments: { path: "todo.md" } },
      ...progress(0)
    ])
  }
  if (write === undefined) {
    if (failed(notes) && failed(todo)) {
      return say(
        `I could not read notes.md or todo.md in the workspace (${notes ?? "no result"}). ` +
          "Put them back, or point CHAT_WORKSPACE at a folder that has them."
      )
    }
    return say(
      "I've read both files. I'll save a summary to summary.md — that write needs your approval — " +
        "and list the workspace in the meantime.",
      [
        { id: id("write"), name: "write_file", arguments: { path: "summary.md", content: summaryOf(notes, todo) } },
        { id: id("list"), name: "list_files", arguments: {} },
        ...progress(1)
      ]
    )
  }
  if (executing && !results.has(id("plan-3"))) {
    return say("Every task of the plan is done.", [{ id: id("plan-3"), name: "write_todos", arguments: demoTodos(3) }])
  }
  const wrote = write.startsWith("wrote ")
  // the listing ran in parallel with the write: add the file the write created
  const names = failed(listing) ? [] : listing!.split("\n").filter((name) => name.length > 0)
  const all = [...new Set([...names, ...(wrote ? ["summary.md"] : [])])].sort()
  const files = all.length === 0 ? "" : ` The workspace now holds ${all.join(", ")}.`
  const facts = failed(notes) ? [] : bullets(notes!, /^\s*[-*]\s+/)
  const open = failed(todo) ? [] : bullets(todo!, /^\s*[-*]\s+\[ \]\s*/)
  const point = facts[0]?.replace(/\.$/, "")
  const first = point === undefined ? "" : ` (the first: ${point.charAt(0).toLowerCase()}${point.slice(1)})`
  const gist =
    `In short: notes.md makes ${facts.length} point${facts.length === 1 ? "" : "s"}${first}, ` +
    `and ${open.length} item${open.length === 1 ? " is" : "s are"} still open in todo.md.`
  if (wrote) {
    return say(`Done: I ${write}.${files}\n${gist}`)
  }
  return say(`I did not write summary.md. ${write}${files}\n${gist}`)
}

/** Delays every text delta of a stream, so a scripted answer streams like a real one. */
const pacing = (millis: number): LanguageModelMiddleware => ({
  specificationVersion: "v4",
  wrapStream: async ({ doStream }) => {
    const result = await doStream()
    const paced = result.stream.pipeThrough(
      new TransformStream({
        async transform(part, controller) {
          if (part.type === "text-delta") await new Promise((resolve) => setTimeout(resolve, millis))
          controller.enqueue(part)
        }
      })
    )
    return { ...result, stream: paced }
  }
})

/** Model calls one demo process answers (the script repeats one step that reads the prompt). */
const DEMO_CALLS = 10_000

/** The scripted demonstration model. */
export const demoModel = (): LanguageModel =>
  wrapLanguageModel({
    model: ScriptedModel.make(
      Array.from(
        { length: DEMO_CALLS },
        (): ScriptedModel.Step => (options) =>
          demoAnswer(
            options.prompt,
            options.tools?.map((t) => t.name)
          )
      ),
      { modelId: "demo" }
    ),
    middleware: pacing(40)
  })

// ---------------------------------------------------------------------------------------------------------
// model selection
// ---------------------------------------------------------------------------------------------------------

/** A real model. Swap the provider here to use another one (see the README). */
const realModel = (choice: Extract<ModelChoice, { _tag: "OpenAI" }>): LanguageModel =>
  createOpenAI({ apiKey: Redacted.value(choice.apiKey) })(choice.modelId)

/** The model and how the greeting names it. */
export const selectModel = (choice: ModelChoice): { readonly model: LanguageModel; readonly label: string } =>
  choice._tag === "OpenAI"
    ? { model: realModel(choice), label: `OpenAI ${choice.modelId}` }
    : { model: demoModel(), label: "demo (scripted; set OPENAI_API_KEY for a real model)" }

/** The agent of the AI SDK runner. */
export const makeAgent = (config: ChatConfig, model: LanguageModel): AiSdkRunner.AiSdkAgent => ({
  name: "chat",
  model,
  instructions: INSTRUCTIONS,
  tools: makeTools(config.workspace)
})
