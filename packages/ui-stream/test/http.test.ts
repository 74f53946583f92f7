import { createServer } from "node:http"
import { AgentSessionClient } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import type { DynamicToolUIPart, UIMessage } from "ai"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import * as Layer from "effect/Layer"
import { ChatHandler, HttpChat, ResumeToken } from "../src/index.ts"
import { authorize, chunksOf, fold, get, layer, post, readSse, runs, userMessage, writeAndRead } from "./support.ts"

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

const errorOf = (response: Response) => promise(async () => (await response.json()) as { error: { code: string } })

const approve = (message: UIMessage, approvalId: string, toolCallId = approvalId): UIMessage => ({
  ...message,
  parts: [
    ...message.parts,
    {
      type: "dynamic-tool",
      toolName: "send_email",
      toolCallId,
      state: "approval-responded",
      input: {},
      approval: { id: approvalId, approved: true }
    } as DynamicToolUIPart
  ]
})

describe("authorization and bad input", () => {
  it.live("another user's session: 403 on every route, nothing read, written or resolved", () =>
    Effect.gen(function* () {
      const handler = yield* ChatHandler.make({ authorize })
      const sessions = yield* AgentSessionClient.AgentSessionClient
      // Ann's turn waits for her approval
      const first = yield* promise(() => handler(post("ann", { id: "ann-1", messages: [userMessage("u1", "send")] })))
      const message = yield* promise(async () => fold(chunksOf(await readSse(first)).map((c) => c.chunk)))
      const before = yield* sessions.getSnapshot("ann-1")
      assert.strictEqual(before.pendingInterrupts.length, 1)

      const attempts: ReadonlyArray<[string, Request]> = [
        ["send", post("mal", { id: "ann-1", messages: [userMessage("u2", "hi")] })],
        ["approve", post("mal", { id: "ann-1", messages: [approve(message, "w-ann")] })],
        ["resume", get("mal", "/ann-1/stream")],
        ["events", get("mal", "/ann-1/events")],
        ["snapshot", get("mal", "/ann-1/snapshot")],
        [
          "stop",
          new Request("http://test.local/api/chat/ann-1/stop", { method: "POST", headers: { "x-user": "mal" } })
        ],
        ["no user", get("", "/ann-1/snapshot")]
      ]
      for (const [what, request] of attempts) {
        const response = yield* promise(() => handler(request))
        assert.strictEqual(response.status, 403, what)
        assert.strictEqual((yield* errorOf(response)).error.code, "forbidden", what)
      }
      // Ann's resume token on Mal's own session: 403, nothing read
      const annToken = ResumeToken.encode({
        v: 1,
        s: "ann-1",
        t: "turn-1",
        a: null,
        p: null,
        k: 0,
        o: ResumeToken.emptyOpenParts()
      })
      const foreign = yield* promise(() => handler(get("mal", `/mal-1/stream?token=${annToken}`)))
      assert.strictEqual(foreign.status, 403)

      const after = yield* sessions.getSnapshot("ann-1")
      assert.strictEqual(after.pendingInterrupts.length, 1, "the interrupt is still pending")
      assert.strictEqual(after.state?.activeTurnId, "turn-1", "the turn was not stopped")
      assert.strictEqual(after.messages.length, before.messages.length, "no message was added")
      assert.strictEqual(after.queuedMessageCount, 0)
      assert.strictEqual(runs.get("send_email:ann"), undefined)
    }).pipe(Effect.provide(layer({ model: writeAndRead("ann") })))
  )

  it.live("an approval for an interrupt of another session or turn: 409, nothing resolved", () =>
    Effect.gen(function* () {
      const handler = yield* ChatHandler.make({ authorize })
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const first = yield* promise(() => handler(post("ann", { id: "ann-2", messages: [userMessage("u1", "send")] })))
      const message = yield* promise(async () => fold(chunksOf(await readSse(first)).map((c) => c.chunk)))
      // Ann's other session has no turn: the approval of ann-2's interrupt posted to ann-3 is refused
      yield* sessions.startSession("ann-3")
      yield* SessionTesting.awaitSnapshot("ann-3", (s) => s.state !== null)
      const elsewhere = yield* promise(() =>
        handler(post("ann", { id: "ann-3", messages: [approve(message, "w-ann")] }))
      )
      assert.strictEqual(elsewhere.status, 409)
      // an interrupt ID the active turn does not have
      const unknown = yield* promise(() =>
        handler(post("ann", { id: "ann-2", messages: [approve(message, "w-other", "w-other")] }))
      )
      assert.strictEqual(unknown.status, 409)
      assert.strictEqual((yield* errorOf(unknown)).error.code, "interrupt_not_pending")
      const snapshot = yield* sessions.getSnapshot("ann-2")
      assert.strictEqual(snapshot.pendingInterrupts.length, 1)
      assert.strictEqual(runs.get("send_email:ann"), undefined)
    }).pipe(Effect.provide(layer({ model: writeAndRead("ann") })))
  )

  it.live("malformed, oversized and forged requests: 4xx with a clear error, nothing changed", () =>
    Effect.gen(function* () {
      const handler = yield* ChatHandler.make({ authorize, maxBodyBytes: 4096, maxMessageChars: 100 })
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* promise(async () =>
        readSse(await handler(post("cy", { id: "cy-1", messages: [userMessage("u1", "hello")] })))
      )
      yield* SessionTesting.awaitTurn("cy-1", { turn: 1 })
      const before = yield* sessions.getSnapshot("cy-1")
      const cases: ReadonlyArray<[string, Request, number, string]> = [
        ["not JSON", post("cy", "{nope"), 400, "bad_request"],
        ["no messages", post("cy", { id: "cy-1", messages: [] }), 400, "bad_request"],
        ["empty text", post("cy", { id: "cy-1", messages: [userMessage("u2", "  ")] }), 400, "empty_message"],
        [
          "oversized message",
          post("cy", { id: "cy-1", messages: [userMessage("u2", "x".repeat(101))] }),
          413,
          "message_too_large"
        ],
        [
          "oversized body",
          post("cy", { id: "cy-1", messages: [userMessage("u2", "x".repeat(5000))] }),
          413,
          "body_too_large"
        ],
        ["forged token", get("cy", "/cy-1/stream?token=u1.bm9wZQ"), 400, "invalid_token"],
        ["not a token", get("cy", "/cy-1/stream?token=hello"), 400, "invalid_token"],
        [
          "forged engine position",
          get(
            "cy",
            `/cy-1/stream?mode=continue&token=${ResumeToken.encode({ v: 1, s: "cy-1", t: "turn-1", a: null, p: "v1.bad", k: 0, o: ResumeToken.emptyOpenParts() })}`
          ),
          400,
          "invalid_token"
        ],
        [
          "forged Last-Event-ID",
          get("cy", "/cy-1/events", { "last-event-id": "v1.WyJ4IiwieSIsMV0" }),
          400,
          "invalid_token"
        ],
        [
          "stop on a session that does not exist",
          new Request("http://test.local/api/chat/cy-9/stop", { method: "POST", headers: { "x-user": "cy" } }),
          404,
          "session_not_found"
        ]
      ]
      for (const [what, request, status, code] of cases) {
        const response = yield* promise(() => handler(request))
        assert.strictEqual(response.status, status, what)
        const body = yield* errorOf(response)
        assert.strictEqual(body.error.code, code, what)
      }
      const after = yield* sessions.getSnapshot("cy-1")
      assert.strictEqual(after.messages.length, before.messages.length)
      assert.strictEqual(after.state?.turnCount, 1)
    }).pipe(Effect.provide(layer({ model: [{ text: "hi" }] })))
  )
})

describe("SSE and snapshot", () => {
  it.live("the snapshot leaves out the Steps' fields; events resume after Last-Event-ID", () =>
    Effect.gen(function* () {
      const handler = yield* ChatHandler.make({ authorize })
      yield* promise(async () =>
        readSse(await handler(post("di", { id: "di-1", messages: [userMessage("u1", "send")] })))
      )
      const response = yield* promise(() => handler(get("di", "/di-1/snapshot")))
      assert.strictEqual(response.status, 200)
      const text = yield* promise(() => response.text())
      const body = JSON.parse(text) as { snapshot: Record<string, unknown>; token: string }
      for (const field of [
        "framework_item",
        "tool_source_reference",
        "trace_context",
        "input_continuation",
        "input_answers",
        "task_answer_pending"
      ]) {
        assert.notInclude(text, `"${field}"`, field)
      }
      assert.isArray(body.snapshot.tool_calls)
      assert.isArray(body.snapshot.pending_interrupts)
      assert.isTrue(body.token.startsWith("v1."))
      // plain SSE from the oldest event: ids are the engine's tokens, the snapshot's token is one of them
      const all = yield* promise(async () =>
        readSse(await handler(get("di", "/di-1/events")), (events) => events.some((e) => e.id === body.token))
      )
      assert.strictEqual(JSON.parse(all[0]!.data).type, "turn_started")
      const index = all.findIndex((e) => e.id === body.token)
      assert.isAtLeast(index, 0)
      // EventSource reconnects with Last-Event-ID: the next event is the one after it
      const middle = all[1]!.id!
      const resumed = yield* promise(async () =>
        readSse(await handler(get("di", "/di-1/events", { "last-event-id": middle })), (events) => events.length >= 1)
      )
      assert.strictEqual(resumed[0]!.id, all[2]!.id)
    }).pipe(Effect.provide(layer({ model: writeAndRead("di") })))
  )
})

describe("effect/http", () => {
  it.live("HttpChat mounts on an HttpRouter served by Node", () =>
    Effect.gen(function* () {
      const server = yield* HttpServer.HttpServer
      const address = server.address
      const port = address._tag === "UnixPathAddress" ? 0 : address.port
      const url = `http://127.0.0.1:${port}/api/chat`
      const response = yield* promise(() =>
        fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", "x-user": "eli" },
          body: JSON.stringify({ id: "eli-1", messages: [userMessage("u1", "hello")] })
        })
      )
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("x-vercel-ai-ui-message-stream"), "v1")
      const message = yield* promise(async () => fold(chunksOf(await readSse(response)).map((c) => c.chunk)))
      const text = message.parts.find((p) => p.type === "text")
      assert.strictEqual(text?.type === "text" ? text.text : undefined, "Hello over HTTP.")
      const denied = yield* promise(() => fetch(`${url}/eli-1/snapshot`, { headers: { "x-user": "mal" } }))
      assert.strictEqual(denied.status, 403)
      const own = yield* promise(() => fetch(`${url}/eli-1/snapshot`, { headers: { "x-user": "eli" } }))
      assert.strictEqual(own.status, 200)
    }).pipe(
      Effect.provide(
        HttpRouter.serve(HttpChat.layer({ authorize }), { disableLogger: true }).pipe(
          Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
          Layer.provideMerge(layer({ model: [{ text: "Hello over HTTP." }] }))
        )
      )
    )
  )
})
