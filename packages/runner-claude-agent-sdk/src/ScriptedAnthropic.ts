/**
 * A scripted Anthropic Messages API server on 127.0.0.1, for running the real Claude Code binary with no
 * API key and no network: point `ANTHROPIC_BASE_URL` at {@link ScriptedAnthropicServer.url}. Every
 * `POST /v1/messages` is answered by the `reply` function (text and `tool_use` blocks), as server-sent
 * events when the request streams and as one JSON message otherwise; `count_tokens` answers a fixed
 * count. Every request body is kept in `requests`, so a test can read what the harness sent.
 *
 * @since 0.1.0
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** A tool call the scripted model makes. */
export interface ScriptedToolUse {
  readonly id: string
  readonly name: string
  readonly input: Record<string, unknown>
}

/** What the scripted model answers to one Messages request. */
export interface ScriptedReply {
  readonly text?: string | undefined
  readonly toolUses?: ReadonlyArray<ScriptedToolUse> | undefined
  readonly usage?: { readonly inputTokens: number; readonly outputTokens: number } | undefined
  readonly model?: string | undefined
}

/** One Messages request as the harness sent it (the JSON body). */
export interface MessagesRequest {
  readonly model: string
  readonly stream?: boolean
  readonly system?: unknown
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content: unknown }>
  readonly tools?: ReadonlyArray<{ readonly name: string }>
  readonly [key: string]: unknown
}

/** A running scripted server. */
export interface ScriptedAnthropicServer {
  readonly url: string
  readonly requests: Array<MessagesRequest>
  /** The indexes of Messages requests whose client hung up before the reply was sent (an aborted call). */
  readonly aborted: Array<number>
  /** Every other request, as `METHOD path` (count_tokens and unknown routes). */
  readonly otherRequests: Array<string>
  readonly close: () => Promise<void>
}

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

const contentBlocks = (reply: ScriptedReply) => [
  ...(reply.text !== undefined && reply.text !== "" ? [{ type: "text" as const, text: reply.text }] : []),
  ...(reply.toolUses ?? []).map((t) => ({ type: "tool_use" as const, id: t.id, name: t.name, input: t.input }))
]

/** The server-sent events of one streamed reply, text in two deltas and tool input as JSON deltas. */
export const streamEvents = (reply: ScriptedReply, id: string, requestModel: string): string => {
  const usage = reply.usage ?? { inputTokens: 10, outputTokens: 5 }
  const model = reply.model ?? requestModel
  const blocks = contentBlocks(reply)
  const stopReason = (reply.toolUses ?? []).length > 0 ? "tool_use" : "end_turn"
  let out = sse("message_start", {
    type: "message_start",
    message: {
      id,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: usage.inputTokens, output_tokens: 1 }
    }
  })
  blocks.forEach((block, index) => {
    if (block.type === "text") {
      out += sse("content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "text", text: "" }
      })
      const half = Math.ceil(block.text.length / 2)
      for (const piece of [block.text.slice(0, half), block.text.slice(half)]) {
        if (piece !== "") {
          out += sse("content_block_delta", {
            type: "content_block_delta",
            index,
            delta: { type: "text_delta", text: piece }
          })
        }
      }
    } else {
      out += sse("content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: block.id, name: block.name, input: {} }
      })
      out += sse("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) }
      })
    }
    out += sse("content_block_stop", { type: "content_block_stop", index })
  })
  out += sse("message_delta", {
    type: "message_delta",
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { output_tokens: usage.outputTokens }
  })
  out += sse("message_stop", { type: "message_stop" })
  return out
}

/**
 * Starts the server on a random port of 127.0.0.1. `reply` gets each Messages request, its index (0-based,
 * counting only `/v1/messages` requests) and a signal that aborts when the client hangs up. A `reply` that
 * rejects is answered `403 permission_error` with the rejection's message, which the harness does not retry
 * (it retries 5xx and even 400 answers itself, within the query), so a scripted failure is one model call.
 */
export const start = (
  reply: (request: MessagesRequest, index: number, signal: AbortSignal) => ScriptedReply | Promise<ScriptedReply>
): Promise<ScriptedAnthropicServer> => {
  const requests: Array<MessagesRequest> = []
  const aborted: Array<number> = []
  const otherRequests: Array<string> = []
  const server = Http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const path = (req.url ?? "").split("?")[0]
      if (req.method !== "POST" || path !== "/v1/messages") otherRequests.push(`${req.method} ${path}`)
      if (req.method === "POST" && path === "/v1/messages/count_tokens") {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ input_tokens: 100 }))
        return
      }
      if (req.method !== "POST" || path !== "/v1/messages") {
        res.writeHead(404, { "content-type": "application/json" })
        res.end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: `no route ${path}` } }))
        return
      }
      let body: MessagesRequest
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as MessagesRequest
      } catch {
        res.writeHead(400, { "content-type": "application/json" })
        res.end(JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: "bad json" } }))
        return
      }
      const index = requests.length
      requests.push(body)
      const id = `msg_scripted_${index}`
      const hangUp = new AbortController()
      res.on("close", () => {
        if (!res.writableFinished) {
          aborted.push(index)
          hangUp.abort(new Error("the client hung up"))
        }
      })
      Promise.resolve()
        .then(() => reply(body, index, hangUp.signal))
        .then(
          (r) => {
            if (res.destroyed) return
            if (body.stream === true) {
              res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
              res.end(streamEvents(r, id, body.model))
            } else {
              const usage = r.usage ?? { inputTokens: 10, outputTokens: 5 }
              res.writeHead(200, { "content-type": "application/json" })
              res.end(
                JSON.stringify({
                  id,
                  type: "message",
                  role: "assistant",
                  model: r.model ?? body.model,
                  content: contentBlocks(r),
                  stop_reason: (r.toolUses ?? []).length > 0 ? "tool_use" : "end_turn",
                  stop_sequence: null,
                  usage: { input_tokens: usage.inputTokens, output_tokens: usage.outputTokens }
                })
              )
            }
          },
          (e: unknown) => {
            if (res.destroyed) return
            res.writeHead(403, { "content-type": "application/json" })
            res.end(
              JSON.stringify({
                type: "error",
                error: { type: "permission_error", message: e instanceof Error ? e.message : String(e) }
              })
            )
          }
        )
    })
  })
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        requests,
        aborted,
        otherRequests,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}
