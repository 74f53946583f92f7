/**
 * The web chat's agent: a demonstration model that needs no key (it streams its words slowly so that a reload or
 * a stop lands mid-turn) and two tools on a notes file, one of which writes and so waits for approval.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs"
import { dirname } from "node:path"
import { ModelClient, ToolSource } from "@durable-agent/session"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The session Flow type of the web chat. */
export const FLOW_TYPE = "WebChat"

/** The tools: `read_notes` (read) and `save_note` (a write: it waits for the user's approval). */
export const tools = (notesFile: string): ReadonlyArray<ToolSource.Tool> => [
  ToolSource.tool({
    name: "read_notes",
    description: "Read the notes file.",
    effect: "read",
    handler: () => Effect.sync(() => (existsSync(notesFile) ? readFileSync(notesFile, "utf8") : "(no notes yet)"))
  }),
  ToolSource.tool({
    name: "save_note",
    description: "Append a line to the notes file.",
    effect: "non_idempotent_write",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    handler: (args) =>
      Effect.sync(() => {
        mkdirSync(dirname(notesFile), { recursive: true })
        appendFileSync(notesFile, `${String(args.text)}\n`)
        return `saved: ${String(args.text)}`
      })
  })
]

const words = (text: string) => text.match(/\S+\s*/g) ?? [text]

/** A tool output on one line, at most 60 characters. */
const oneLine = (text: string) => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > 60 ? `${line.slice(0, 59)}…` : line
}

const usage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }

/**
 * The demonstration model. A message with "save" asks to save a note (needs approval) while reading the notes; a
 * message with "ask" asks the user a question (`ask_user`); "plan" writes a plan (`write_todos`); a message with
 * "code" answers with a code block (markdown); "notes" reads them; anything else gets a long answer, streamed a word every `wordDelay`.
 */
export const demoModel = (wordDelay: Duration.Input = "60 millis") =>
  Layer.succeed(ModelClient.ModelClient, {
    generate: (request: ModelClient.ModelRequest) =>
      Effect.gen(function* () {
        const stream = (text: string) =>
          Effect.forEach(
            words(text),
            (w) =>
              Effect.andThen(
                Effect.sleep(Duration.fromInputUnsafe(wordDelay)),
                request.onTextDelta ? request.onTextDelta(w) : Effect.void
              ),
            { discard: true }
          )
        const last = request.messages.at(-1)
        const reply = (
          text: string,
          toolCalls: ModelClient.ModelResponse["toolCalls"] = []
        ): ModelClient.ModelResponse => ({
          text,
          reasoning: null,
          toolCalls,
          usage,
          metadata: { requestModel: "demo", responseModel: "demo", providerName: "demo" }
        })
        if (last?.role === "tool") {
          const results = request.messages.filter((m) => m.role === "tool")
          // one line per tool, its output on one line: a multi-line output must not leave a stray "." line
          const text = `Done. The tools answered:\n\n${results
            .slice(-2)
            .map((m) => (m.role === "tool" ? `- ${m.toolName} → ${oneLine(m.output)}` : ""))
            .join("\n")}`
          yield* stream(text)
          return reply(text)
        }
        const said = last?.role === "user" ? last.text : ""
        const id = `call-${Date.now().toString(36)}`
        if (/save/i.test(said)) {
          const text = "I'll save that note (it needs your approval) and read the notes meanwhile."
          yield* stream(text)
          return reply(text, [
            { toolCallId: `${id}-w`, toolName: "save_note", arguments: JSON.stringify({ text: said }) },
            { toolCallId: `${id}-r`, toolName: "read_notes", arguments: "{}" }
          ])
        }
        if (/\bask\b/i.test(said)) {
          const text = "One question first."
          yield* stream(text)
          return reply(text, [
            {
              toolCallId: `${id}-q`,
              toolName: "ask_user",
              arguments: JSON.stringify({
                question: "Which colour should the note be?",
                choices: ["red", "blue"],
                allows_free_text: false
              })
            }
          ])
        }
        if (/\bplan\b/i.test(said)) {
          const text = "Here is the plan."
          yield* stream(text)
          return reply(text, [
            {
              toolCallId: `${id}-p`,
              toolName: "write_todos",
              arguments: JSON.stringify({
                todos: [
                  { content: "Read the notes", status: "completed" },
                  { content: "Write a summary", status: "in_progress" },
                  { content: "Save it", status: "pending" }
                ]
              })
            }
          ])
        }
        if (/\bcode\b/i.test(said)) {
          const text =
            'Here is a **TypeScript** example:\n\n```ts\nconst greet = (name: string) => "Hello, " + name\nconsole.log(greet("web"))\n```\n\nRun it with `node greet.ts`.'
          yield* stream(text)
          return reply(text)
        }
        if (/notes/i.test(said)) {
          const text = "Let me read the notes."
          yield* stream(text)
          return reply(text, [{ toolCallId: `${id}-r`, toolName: "read_notes", arguments: "{}" }])
        }
        const text = `You said "${said}". This is the demonstration model: it streams a long answer one word at a time, so you can reload the page, stop the turn, or kill the server in the middle and watch the durable session carry on. ${"The turn is a durable Flow, and every word you see was written to the session's event stream as it streamed. ".repeat(3)}That is all.`
        yield* stream(text)
        return reply(text)
      })
  })
