// The Pi runner through pi-ai's real OpenAI provider (`openai-completions`, the openai SDK underneath) against a
// scripted OpenAI-compatible HTTP server on 127.0.0.1: the turn's Steps, the wire requests the provider built
// (tools, the tool call, its recorded result), the streamed text and usage; then cancel_turn during a request
// the server never finishes, which aborts the HTTP request through the turn's cancellation signal.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { READ_TOOL_TURN_STEPS } from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import type { Model } from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"
import { allEvents, eventually } from "../../session/test/support.ts"
import { awaitSnapshot, awaitTurns, embeddedEngine, stepShape, withPiSession } from "./support.ts"

interface WireRequest {
  readonly body: {
    readonly model: string
    readonly stream: boolean
    readonly messages: ReadonlyArray<Record<string, any>>
    readonly tools?: ReadonlyArray<{ readonly function: { readonly name: string } }>
  }
  readonly aborted: () => boolean
}

type Reply = (res: ServerResponse) => void

const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 0,
  model: "gpt-test",
  choices: [{ index: 0, delta, finish_reason: finish }]
})

/** An SSE reply of chunks, then a usage chunk and `[DONE]`. */
const sse =
  (chunks: ReadonlyArray<Record<string, unknown>>, usage: { prompt: number; completion: number }): Reply =>
  (res) => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    for (const c of chunks) res.write(`data: ${JSON.stringify(c)}\n\n`)
    res.write(
      `data: ${JSON.stringify({
        id: "chatcmpl-1",
        object: "chat.completion.chunk",
        created: 0,
        model: "gpt-test",
        choices: [],
        usage: {
          prompt_tokens: usage.prompt,
          completion_tokens: usage.completion,
          total_tokens: usage.prompt + usage.completion
        }
      })}\n\n`
    )
    res.end("data: [DONE]\n\n")
  }

interface ScriptedServer {
  readonly url: string
  readonly requests: Array<WireRequest>
  readonly server: Server
}

/** A scripted server: the n-th request gets the n-th reply; every request is recorded. */
const scriptedServer = (replies: ReadonlyArray<Reply>) =>
  Effect.acquireRelease(
    Effect.callback<ScriptedServer>((resume) => {
      const requests: Array<WireRequest> = []
      const server = createServer((req: IncomingMessage, res: ServerResponse) => {
        let text = ""
        req.on("data", (d) => (text += d))
        req.on("end", () => {
          let closed = false
          res.on("close", () => (closed = !res.writableFinished))
          requests.push({ body: JSON.parse(text), aborted: () => closed })
          const reply = replies[requests.length - 1]
          if (reply === undefined) res.writeHead(500).end(JSON.stringify({ error: { message: "script exhausted" } }))
          else reply(res)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
        resume(Effect.succeed({ url, requests, server }))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

/** pi-ai's model object for an OpenAI-compatible server (the Chat Completions API). */
const modelAt = (baseUrl: string): Model<"openai-completions"> => ({
  id: "gpt-test",
  name: "GPT test",
  api: "openai-completions",
  provider: "openai",
  baseUrl,
  reasoning: false,
  input: ["text"],
  cost: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 128_000,
  maxTokens: 4096
})

describe("Pi runner through pi-ai's OpenAI provider and a scripted HTTP server", () => {
  it.live("a tool round: the provider's requests carry the tools, the call and its recorded result", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer([
        sse(
          [
            chunk({ role: "assistant", content: "Checking. " }),
            chunk({
              tool_calls: [
                {
                  index: 0,
                  id: "call_abc",
                  type: "function",
                  function: { name: "get_weather", arguments: '{"city":' }
                }
              ]
            }),
            chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
            chunk({}, "tool_calls")
          ],
          { prompt: 120, completion: 15 }
        ),
        sse([chunk({ role: "assistant", content: "It is 21 " }), chunk({ content: "degrees." }), chunk({}, "stop")], {
          prompt: 160,
          completion: 6
        })
      ])
      yield* withPiSession(
        [],
        { engine: embeddedEngine, agent: { model: modelAt(server.url), streamOptions: { apiKey: "test-key" } } },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("h1", { initialMessage: "Weather in Paris?" })
            const done = yield* awaitTurns("h1", 1)
            assert.deepStrictEqual(yield* stepShape("h1"), READ_TOOL_TURN_STEPS)
            assert.strictEqual(kit.count("get_weather"), 1)
            assert.strictEqual(server.requests.length, 2, "one HTTP request per RunModel")
            const [first, second] = server.requests.map((r) => r.body)
            assert.strictEqual(first!.model, "gpt-test")
            assert.isTrue(first!.stream)
            assert.includeMembers(
              (first!.tools ?? []).map((t) => t.function.name),
              ["get_weather", "save_note", "send_email"]
            )
            assert.deepStrictEqual(
              first!.messages.map((m) => m.role),
              ["system", "user"]
            )
            // the second request continues the context: the assistant's call, then the recorded result
            const assistant = second!.messages.find((m) => m.role === "assistant")!
            assert.strictEqual(assistant.tool_calls[0].id, "call_abc")
            assert.deepStrictEqual(JSON.parse(assistant.tool_calls[0].function.arguments), { city: "Paris" })
            const tool = second!.messages.find((m) => m.role === "tool")!
            assert.strictEqual(tool.tool_call_id, "call_abc")
            assert.include(JSON.stringify(tool.content), '{\\"city\\":\\"Paris\\",\\"temperature\\":21}')
            assert.strictEqual(done.messages[done.messages.length - 1]!.text, "It is 21 degrees.")
            assert.strictEqual(done.usage.inputTokens, 280)
            assert.strictEqual(done.usage.outputTokens, 21)
            const events = yield* allEvents("h1")
            const cost = events
              .filter((e) => e.event.type === "pi.usage")
              .map((e) => (e.event.payload as { cost: { total: number } }).cost.total)
            // $1 and $2 per million input and output tokens
            assert.closeTo(cost[0]!, (120 * 1 + 15 * 2) / 1e6, 1e-12)
            assert.strictEqual(cost.length, 2)
          })
      )
    }).pipe(Effect.scoped)
  )

  it.live("cancel_turn aborts the HTTP request the server never finishes; the next turn gets an answer", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer([
        (res) => {
          // headers and a first delta, then nothing: only an abort ends this request
          res.writeHead(200, { "content-type": "text/event-stream" })
          res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content: "Thinking" }))}\n\n`)
        },
        sse([chunk({ role: "assistant", content: "Here." }), chunk({}, "stop")], { prompt: 10, completion: 1 })
      ])
      yield* withPiSession(
        [],
        { engine: embeddedEngine, agent: { model: modelAt(server.url), streamOptions: { apiKey: "test-key" } } },
        () =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("h2", { initialMessage: "think" })
            yield* eventually(
              Effect.sync(() => server.requests.length),
              (n) => n === 1,
              "the first request"
            )
            yield* awaitSnapshot("h2", (s) => s.state?.status === "running_model", "the model call")
            assert.isTrue(yield* client.cancelTurn("h2"))
            const cancelled = yield* awaitTurns("h2", 1)
            yield* eventually(
              Effect.sync(() => server.requests[0]!.aborted()),
              (aborted) => aborted,
              "the server to see the request aborted"
            )
            assert.deepStrictEqual(
              cancelled.messages.map((m) => [m.role, m.text]),
              [["user", "think"]],
              "the aborted call's partial text is not an answer"
            )
            assert.isTrue(yield* client.sendUserMessage("h2", "again"))
            const done = yield* awaitTurns("h2", 2)
            assert.strictEqual(done.messages[done.messages.length - 1]!.text, "Here.")
          })
      )
    }).pipe(Effect.scoped)
  )
})
