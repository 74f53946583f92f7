import type { Client } from "@durable-agent/engine"
import {
  type AgentSessionClient,
  type ModelClient,
  ModelClient as ModelClientService,
  Runner,
  type Stepwise,
  ToolSource
} from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import type * as Wire from "@durable-agent/session/wire"
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from "ai"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ChatHandler } from "../src/index.ts"

/** Counts of how often each tool ran. */
export const runs = new Map<string, number>()

export const tools: ReadonlyArray<ToolSource.Tool> = [
  ToolSource.tool({
    name: "get_weather",
    description: "Read the weather.",
    effect: "read",
    handler: () => Effect.succeed("sunny")
  }),
  ToolSource.tool({
    name: "send_email",
    description: "Send an email.",
    effect: "non_idempotent_write",
    handler: (args) =>
      Effect.sync(() => {
        runs.set(`send_email:${String(args.to)}`, (runs.get(`send_email:${String(args.to)}`) ?? 0) + 1)
        return `sent to ${String(args.to)}`
      })
  }),
  ToolSource.tool({
    name: "deploy",
    description: "Deploy; asks where first.",
    effect: "read",
    handler: (_args, request) =>
      Effect.sync(() => {
        const answer = request.inputAnswers?.at(-1)
        if (answer === undefined) {
          return Runner.toolInputRequested({
            question: "Which environment?",
            choices: ["staging", "prod"],
            allowsFreeText: false
          })
        }
        return `deployed to ${answer.answer}`
      })
  })
]

/** A turn that writes (needs approval) and reads in parallel, then answers. */
export const writeAndRead = (to: string): ReadonlyArray<ModelClient.ScriptedStep> => [
  {
    text: "Let me send it.",
    textDeltas: ["Let me ", "send it."],
    toolCalls: [
      { id: `w-${to}`, name: "send_email", arguments: { to } },
      { id: `r-${to}`, name: "get_weather", arguments: {} }
    ]
  },
  { text: "Done.", textDeltas: ["Do", "ne."] }
]

/** Sessions belong to the user whose name prefixes their ID (`ann-1` is Ann's); the user is the `x-user` header. */
export const authorize: ChatHandler.Authorize = ({ request, sessionId }) => {
  const user = request.headers.get("x-user")
  return user !== null && sessionId.startsWith(`${user}-`)
}

export const layer = (options: {
  readonly model: ReadonlyArray<ModelClient.ScriptedStep> | Layer.Layer<ModelClient.ModelClient>
  readonly eventsCapacityBytes?: number
  readonly builtInTools?: ReadonlyArray<Wire.BuiltInToolName>
  readonly planModeEnabled?: boolean
  readonly agent?: Partial<Stepwise.AgentDefinition>
}): Layer.Layer<AgentSessionClient.AgentSessionClient | Client.Client, unknown> =>
  SessionTesting.layer({
    model: options.model,
    tools,
    ...(options.agent === undefined ? {} : { agent: options.agent }),
    flow: {
      ...(options.eventsCapacityBytes === undefined ? {} : { eventsCapacityBytes: options.eventsCapacityBytes }),
      ...(options.builtInTools === undefined ? {} : { builtInTools: options.builtInTools }),
      ...(options.planModeEnabled === undefined ? {} : { planModeEnabled: options.planModeEnabled })
    }
  })

export interface SseEvent {
  readonly id: string | undefined
  readonly data: string
}

/** Parses one SSE event block. */
const parseBlock = (block: string): SseEvent | undefined => {
  let id: string | undefined
  const data: Array<string> = []
  for (const line of block.split("\n")) {
    if (line.startsWith("id: ")) id = line.slice(4)
    else if (line.startsWith("data: ")) data.push(line.slice(6))
  }
  return data.length === 0 ? undefined : { id, data: data.join("\n") }
}

/** Reads SSE events from a response until `stop` says so (then cancels the body) or the body ends. */
export const readSse = async (
  response: Response,
  stop: (events: ReadonlyArray<SseEvent>) => boolean = () => false
): Promise<Array<SseEvent>> => {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  const events: Array<SseEvent> = []
  let buffer = ""
  while (true) {
    const { done, value } = await reader.read()
    if (done) break
    buffer += value
    let index = buffer.indexOf("\n\n")
    while (index >= 0) {
      const event = parseBlock(buffer.slice(0, index))
      buffer = buffer.slice(index + 2)
      if (event !== undefined) events.push(event)
      index = buffer.indexOf("\n\n")
    }
    if (stop(events)) {
      await reader.cancel()
      break
    }
  }
  return events
}

/** The UI chunks (with their tokens) of SSE events, without `[DONE]`. */
export const chunksOf = (events: ReadonlyArray<SseEvent>) =>
  events.filter((e) => e.data !== "[DONE]").map((e) => ({ token: e.id, chunk: JSON.parse(e.data) as UIMessageChunk }))

/** Folds chunks into the assistant message the AI SDK client would hold. */
export const fold = async (chunks: ReadonlyArray<UIMessageChunk>, message?: UIMessage): Promise<UIMessage> => {
  const stream = new ReadableStream<UIMessageChunk>({
    start(controller) {
      for (const c of chunks) controller.enqueue(c)
      controller.close()
    }
  })
  let last: UIMessage | undefined
  for await (const m of readUIMessageStream({ stream, ...(message === undefined ? {} : { message }) })) last = m
  if (last === undefined) throw new Error("no message")
  return last
}

export const base = "http://test.local/api/chat"

export const post = (user: string, body: unknown) =>
  new Request(base, {
    method: "POST",
    headers: { "content-type": "application/json", "x-user": user },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

export const get = (user: string, path: string, headers?: Record<string, string>) =>
  new Request(`${base}${path}`, { headers: { "x-user": user, ...headers } })

export const userMessage = (id: string, text: string): UIMessage => ({
  id,
  role: "user",
  parts: [{ type: "text", text }]
})

/**
 * A model that streams its answer a word every `every`, then answers with the words; a message that says "fast"
 * gets its answer at once.
 */
export const wordModel = (words: ReadonlyArray<string>, every: Duration.Input) =>
  Layer.succeed(ModelClientService.ModelClient, {
    generate: (request) =>
      Effect.gen(function* () {
        const last = request.messages.at(-1)
        const said = last?.role === "user" ? last.text : ""
        const fast = said.includes("fast")
        const reply = fast ? [`re: ${said}`] : words
        for (const w of reply) {
          if (!fast) yield* Effect.sleep(every)
          if (request.onTextDelta) yield* request.onTextDelta(w)
        }
        return {
          text: reply.join(""),
          reasoning: null,
          toolCalls: [],
          usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 },
          metadata: { requestModel: "words", responseModel: "words", providerName: "scripted" }
        }
      })
  })

/** A POST to a session route (`/stop`, `/answer`). */
export const postTo = (user: string, path: string, body?: unknown) =>
  new Request(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-user": user },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
