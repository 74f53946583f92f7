// A scripted model with a small context window for the compaction tests (test/compaction.test.ts, the kill test's
// worker fixture and the long-session bench). Its token counts are part of the script: a request costs a token
// per two characters of its instructions and messages and eight per message, so a message of about 60
// characters costs about 38 tokens of the 1,000-token window. It answers by the request, not by a counter, so a
// restarted worker answers the same way:
//   - a summary call (Stepwise's summary instructions) answers `summary <n> through question <q>`, n counting the
//     summaries this client wrote and q the newest question the request shows;
//   - a user message `question <n> call` asks for the read tool `lookup` (ID `lookup-<n>`);
//   - anything else gets `answer <n>: ...`, n the newest question the request shows.
import * as Effect from "effect/Effect"
import { type ModelClient, Stepwise, ToolSource } from "../../src/index.ts"

/** The model's window in tokens. */
export const WINDOW = 1_000

/** What each question and answer carries, so each costs about 38 tokens. */
export const PAD = "with some words so that it costs tokens."

/** The user text of question `n`; `call` makes the model call `lookup` in that turn. */
export const question = (n: number, call = false) => `question ${n}${call ? " call" : ""} ${PAD}`

const messageChars = (m: ModelClient.ModelMessage): number =>
  m.role === "user"
    ? m.text.length
    : m.role === "tool"
      ? m.output.length + m.toolName.length
      : (m.text?.length ?? 0) + m.toolCalls.reduce((n, c) => n + c.arguments.length + c.toolName.length, 0)

/** The script's token count of a request. */
export const tokensOf = (request: Pick<ModelClient.ModelRequest, "instructions" | "messages">): number =>
  Math.ceil(request.instructions.length / 2) +
  request.messages.reduce((sum, m) => sum + Math.ceil(messageChars(m) / 2) + 8, 0)

/** Whether a request is Stepwise's summary call. */
export const isSummaryCall = (request: ModelClient.ModelRequest) =>
  request.instructions === Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS

/** The newest question number a request shows, in a user message or a summary; 0 for none. */
export const newestQuestion = (request: ModelClient.ModelRequest): number => {
  let newest = 0
  for (const m of request.messages) {
    if (m.role !== "user") continue
    for (const match of m.text.matchAll(/question (\d+)/g)) newest = Math.max(newest, Number(match[1]))
  }
  return newest
}

export interface CompactionModelOptions {
  /** Called with every request before it is answered. */
  readonly onRequest?: ((request: ModelClient.ModelRequest) => void) | undefined
  /** Runs before a summary call answers (a test holds it, a kill test prints its marker and hangs). */
  readonly beforeSummary?: ((request: ModelClient.ModelRequest) => Effect.Effect<void>) | undefined
  /** The summary text, instead of the default one (a blank one fails the attempt). */
  readonly summaryText?: ((request: ModelClient.ModelRequest) => string) | undefined
  /**
   * Other tool calls for a user message (`question <n> <word>` gives `n` and the text): the model asks for them
   * (IDs `<toolName>-<n>`), with `text` beside them, instead of the script's answer. Undefined keeps the script.
   */
  readonly callFor?:
    | ((
        n: number,
        text: string
      ) =>
        | {
            readonly toolCalls: ReadonlyArray<{ readonly toolName: string; readonly arguments: string }>
            readonly text: string
          }
        | undefined)
    | undefined
}

/** The scripted model: counts tokens with {@link tokensOf} and answers as the module comment says. */
export const compactionModel = (options: CompactionModelOptions = {}): ModelClient.ModelClientShape => {
  let summaries = 0
  return {
    countInputTokens: (request) => Effect.sync(() => tokensOf(request)),
    generate: (request) =>
      Effect.gen(function* () {
        options.onRequest?.(request)
        const usage = { inputTokens: tokensOf(request), outputTokens: 10, cachedInputTokens: 0, reasoningTokens: 0 }
        const n = newestQuestion(request)
        if (isSummaryCall(request)) {
          if (options.beforeSummary !== undefined) yield* options.beforeSummary(request)
          summaries++
          const text = options.summaryText?.(request) ?? `summary ${summaries} through question ${n}`
          return { text, reasoning: null, toolCalls: [], usage }
        }
        const last = request.messages.at(-1)
        const other = last?.role === "user" ? options.callFor?.(n, last.text) : undefined
        if (other !== undefined) {
          return {
            text: other.text,
            reasoning: null,
            toolCalls: other.toolCalls.map((c) => ({ toolCallId: `${c.toolName}-${n}`, ...c })),
            usage
          }
        }
        if (last?.role === "user" && /^question \d+ call/.test(last.text)) {
          return {
            text: null,
            reasoning: null,
            toolCalls: [{ toolCallId: `lookup-${n}`, toolName: "lookup", arguments: JSON.stringify({ n }) }],
            usage
          }
        }
        return { text: `answer ${n}: ${PAD}`, reasoning: null, toolCalls: [], usage }
      })
  }
}

/** The read tool the model calls. */
export const lookupTool = ToolSource.tool({
  name: "lookup",
  description: "Looks a thing up.",
  effect: "read",
  handler: (args) => Effect.succeed(`found ${String(args.n)}`)
})

/** The Stepwise agent of the compaction tests: a summary call leaves room for 100 output tokens. */
export const compactionAgent: Stepwise.AgentDefinition = {
  name: "compacting-agent",
  instructions: "You are a test agent.",
  maxOutputTokens: 100
}
