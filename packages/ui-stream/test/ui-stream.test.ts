import { AgentSessionClient, Errors, ModelClient } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { assert, describe, it } from "@effect/vitest"
import type { DynamicToolUIPart, UIMessage } from "ai"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { ChatHandler, ResumeToken, UiMessageStream } from "../src/index.ts"
import { authorize, chunksOf, fold, get, layer, post, readSse, runs, userMessage, writeAndRead } from "./support.ts"

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

const handlerEffect = ChatHandler.make({ authorize })

const toolPart = (message: UIMessage, toolCallId: string) =>
  message.parts.find((p) => p.type === "dynamic-tool" && p.toolCallId === toolCallId) as DynamicToolUIPart | undefined

/** The approval answer `useChat` sends after `addToolApprovalResponse`. */
const answered = (message: UIMessage, approvalId: string, approved: boolean): UIMessage => ({
  ...message,
  parts: message.parts.map((p) =>
    p.type === "dynamic-tool" && p.state === "approval-requested" && p.approval.id === approvalId
      ? ({ ...p, state: "approval-responded", approval: { id: approvalId, approved } } as DynamicToolUIPart)
      : p
  )
})

describe("UI message stream", () => {
  it.live("a turn with a write that needs approval: tool-calls, then the approval resolves and the turn ends", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const first = yield* promise(() =>
        handler(post("ann", { id: "ann-1", messages: [userMessage("u1", "send it")] }))
      )
      assert.strictEqual(first.status, 200)
      assert.strictEqual(first.headers.get("x-vercel-ai-ui-message-stream"), "v1")
      const events = yield* promise(() => readSse(first))
      assert.strictEqual(events.at(-1)?.data, "[DONE]")
      const chunks = chunksOf(events)
      // a token at each resumable point only (start, each step's end, the approval request, finish)
      for (const c of chunks) {
        assert.strictEqual(c.token !== undefined, UiMessageStream.isResumablePoint(c.chunk), c.chunk.type)
        if (c.token !== undefined) assert.isTrue(c.token.startsWith("u1."))
      }
      assert.deepStrictEqual(
        chunks.filter((c) => c.token !== undefined).map((c) => c.chunk.type),
        ["start", "tool-approval-request", "finish-step", "finish"]
      )
      const types = chunks.map((c) => c.chunk.type)
      assert.deepStrictEqual(types.slice(0, 3), ["start", "start-step", "text-start"])
      const finish = chunks.at(-1)!.chunk
      assert.strictEqual(finish.type, "finish")
      assert.strictEqual(finish.type === "finish" ? finish.finishReason : undefined, "tool-calls")
      const message = yield* promise(() => fold(chunks.map((c) => c.chunk)))
      assert.strictEqual(message.id, "turn-1")
      const text = message.parts.find((p) => p.type === "text")
      assert.strictEqual(text?.type === "text" ? text.text : undefined, "Let me send it.")
      const write = toolPart(message, "w-ann")!
      assert.strictEqual(write.state, "approval-requested")
      assert.deepStrictEqual(write.input, { to: "ann" })
      assert.strictEqual(write.state === "approval-requested" ? write.approval.id : undefined, "w-ann")
      const read = toolPart(message, "r-ann")!
      assert.strictEqual(read.state, "output-available")
      assert.strictEqual(read.state === "output-available" ? read.output : undefined, "sunny")
      assert.strictEqual(runs.get("send_email:ann"), undefined)

      // the approval answer, as useChat posts it
      const second = yield* promise(() =>
        handler(
          post("ann", { id: "ann-1", messages: [userMessage("u1", "send it"), answered(message, "w-ann", true)] })
        )
      )
      assert.strictEqual(second.status, 200)
      const rest = chunksOf(yield* promise(() => readSse(second)))
      assert.notInclude(
        rest.map((c) => c.chunk.type),
        "start",
        "an exact continuation does not restart the message"
      )
      const done = yield* promise(() =>
        fold(
          rest.map((c) => c.chunk),
          message
        )
      )
      const sent = toolPart(done, "w-ann")!
      assert.strictEqual(sent.state, "output-available")
      assert.strictEqual(sent.state === "output-available" ? sent.output : undefined, "sent to ann")
      const last = done.parts.filter((p) => p.type === "text").at(-1)
      assert.strictEqual(last?.type === "text" ? last.text : undefined, "Done.")
      const end = rest.at(-1)!.chunk
      assert.strictEqual(end.type === "finish" ? end.finishReason : undefined, "stop")
      assert.strictEqual(runs.get("send_email:ann"), 1)

      // a replay of the ended turn with the last token rebuilds the same message
      const token = rest.at(-1)!.token!
      const replay = yield* promise(() => handler(get("ann", `/ann-1/stream?token=${encodeURIComponent(token)}`)))
      assert.strictEqual(replay.status, 200)
      const replayed = yield* promise(async () => fold(chunksOf(await readSse(replay)).map((c) => c.chunk)))
      assert.deepStrictEqual(
        replayed.parts.filter((p) => p.type !== "step-start").map((p) => p.type),
        done.parts.filter((p) => p.type !== "step-start").map((p) => p.type)
      )
      // no active turn: 204
      const idle = yield* promise(() => handler(get("ann", "/ann-1/stream")))
      assert.strictEqual(idle.status, 204)
    }).pipe(Effect.provide(layer({ model: writeAndRead("ann") })))
  )

  it.live("a rejected approval: the write never runs and its part is denied", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const first = yield* promise(() => handler(post("bob", { id: "bob-1", messages: [userMessage("u1", "send")] })))
      const message = yield* promise(async () => fold(chunksOf(await readSse(first)).map((c) => c.chunk)))
      const second = yield* promise(() =>
        handler(post("bob", { id: "bob-1", messages: [userMessage("u1", "send"), answered(message, "w-bob", false)] }))
      )
      const done = yield* promise(async () =>
        fold(
          chunksOf(await readSse(second)).map((c) => c.chunk),
          message
        )
      )
      assert.strictEqual(toolPart(done, "w-bob")?.state, "output-denied")
      assert.strictEqual(runs.get("send_email:bob"), undefined)
    }).pipe(Effect.provide(layer({ model: writeAndRead("bob") })))
  )

  it.live("exact continuation from every resumable point sends exactly the remaining parts", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("cat-1", { initialMessage: "hi" })
      yield* SessionTesting.awaitTurn("cat-1", { turn: 1 })
      const full = chunksOf(
        yield* promise(async () =>
          readSse(await handler(get("cat", `/cat-1/stream?token=${encodeURIComponent(tokenFor("cat-1"))}`)))
        )
      )
      assert.isAbove(full.length, 6)
      const points = full.flatMap((c, i) => (c.token === undefined ? [] : [i]))
      assert.deepStrictEqual(
        points.map((i) => full[i]!.chunk.type),
        ["start", "finish-step", "finish"]
      )
      for (const i of points.slice(0, -1)) {
        const token = encodeURIComponent(full[i]!.token!)
        const rest = chunksOf(
          yield* promise(async () => readSse(await handler(get("cat", `/cat-1/stream?token=${token}&mode=continue`))))
        )
        assert.deepStrictEqual(
          rest.map((c) => c.chunk),
          full.slice(i + 1).map((c) => c.chunk),
          `continuing after part ${i}`
        )
      }
    }).pipe(
      Effect.provide(
        layer({ model: [{ text: "One two three.", textDeltas: ["One ", "two ", "three."], reasoning: "think" }] })
      )
    )
  )

  it.live("a closed connection mid-turn leaves the turn running; a reconnect replays it from its start", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const response = yield* promise(() => handler(post("dan", { id: "dan-1", messages: [userMessage("u1", "go")] })))
      // read until the first text arrives, then drop the connection
      const partial = yield* promise(() =>
        readSse(response, (events) => events.some((e) => e.data.includes('"text-delta"')))
      )
      assert.isTrue(partial.length > 0)
      const replay = yield* promise(() => handler(get("dan", "/dan-1/stream")))
      assert.strictEqual(replay.status, 200)
      const chunks = chunksOf(yield* promise(() => readSse(replay)))
      assert.strictEqual(chunks[0]!.chunk.type, "start")
      const message = yield* promise(() => fold(chunks.map((c) => c.chunk)))
      const text = message.parts.find((p) => p.type === "text")
      assert.strictEqual(text?.type === "text" ? text.text : undefined, "a b c d e f")
      const snapshot = yield* SessionTesting.awaitTurn("dan-1", { turn: 1 })
      assert.strictEqual(snapshot.messages.at(-1)?.text, "a b c d e f")
    }).pipe(Effect.provide(layer({ model: slowModel(["a ", "b ", "c ", "d ", "e ", "f"], "100 millis") })))
  )

  it.live("stop: a durable cancel_turn ends the turn cancelled, and the open stream finishes", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const response = yield* promise(() => handler(post("gil", { id: "gil-1", messages: [userMessage("u1", "go")] })))
      const reading = yield* Effect.forkChild(promise(() => readSse(response)))
      yield* SessionTesting.awaitSnapshot("gil-1", (s) => s.state?.activeTurnId === "turn-1")
      const stop = yield* promise(() =>
        handler(new Request("http://test.local/api/chat/gil-1/stop", { method: "POST", headers: { "x-user": "gil" } }))
      )
      assert.strictEqual(stop.status, 200)
      assert.deepStrictEqual(yield* promise(() => stop.json()), { cancelled: true })
      const chunks = chunksOf(yield* Fiber.join(reading))
      const finish = chunks.at(-1)!.chunk
      assert.strictEqual(finish.type, "finish")
      assert.strictEqual(finish.type === "finish" ? finish.finishReason : undefined, "other")
      assert.strictEqual(
        finish.type === "finish" ? (finish.messageMetadata as { turnStatus?: string }).turnStatus : undefined,
        "cancelled"
      )
      const snapshot = yield* SessionTesting.awaitTurn("gil-1", { turn: 1 })
      assert.isNull(snapshot.state?.activeTurnId)
      assert.notStrictEqual(snapshot.messages.at(-1)?.text, "a b c d e f", "the model call did not finish")
      // a second stop has nothing to stop
      const again = yield* promise(() =>
        handler(new Request("http://test.local/api/chat/gil-1/stop", { method: "POST", headers: { "x-user": "gil" } }))
      )
      assert.deepStrictEqual(yield* promise(() => again.json()), { cancelled: false })
    }).pipe(Effect.provide(layer({ model: slowModel(["a ", "b ", "c ", "d ", "e ", "f"], "1 second") })))
  )

  it.live("a retried model call: reset-step drops the parts of the failed attempt", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const response = yield* promise(() => handler(post("eve", { id: "eve-1", messages: [userMessage("u1", "go")] })))
      const chunks = chunksOf(yield* promise(() => readSse(response)))
      const types = chunks.map((c) => c.chunk.type)
      assert.include(types, "reset-step")
      assert.strictEqual(types.filter((t) => t === "start-step").length, 1)
      const message = yield* promise(() => fold(chunks.map((c) => c.chunk)))
      const texts = message.parts.filter((p) => p.type === "text").map((p) => (p.type === "text" ? p.text : ""))
      assert.deepStrictEqual(texts, ["second try"])
    }).pipe(Effect.provide(layer({ model: failingFirstAttempt })))
  )

  it.live("with the event Stream store disabled, the committed state builds and ends the stream", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const first = yield* promise(() => handler(post("fay", { id: "fay-1", messages: [userMessage("u1", "send")] })))
      const chunks = chunksOf(yield* promise(() => readSse(first)))
      const message = yield* promise(() => fold(chunks.map((c) => c.chunk)))
      assert.strictEqual(toolPart(message, "w-fay")?.state, "approval-requested")
      assert.strictEqual(chunks.at(-1)!.chunk.type, "finish")
      const second = yield* promise(() =>
        handler(post("fay", { id: "fay-1", messages: [userMessage("u1", "send"), answered(message, "w-fay", true)] }))
      )
      const done = yield* promise(async () =>
        fold(
          chunksOf(await readSse(second)).map((c) => c.chunk),
          message
        )
      )
      const sent = toolPart(done, "w-fay")!
      assert.strictEqual(sent.state === "output-available" ? sent.output : undefined, "sent to fay")
      assert.strictEqual(runs.get("send_email:fay"), 1)
      // a replay of the ended turn rebuilds it from the stored messages
      const replay = yield* promise(async () =>
        fold(
          chunksOf(
            await readSse(await handler(get("fay", `/fay-1/stream?token=${encodeURIComponent(tokenFor("fay-1"))}`)))
          ).map((c) => c.chunk)
        )
      )
      const texts = replay.parts.filter((p) => p.type === "text").map((p) => (p.type === "text" ? p.text : ""))
      assert.deepStrictEqual(texts, ["Let me send it.", "Done."])
    }).pipe(Effect.provide(layer({ model: writeAndRead("fay"), eventsCapacityBytes: 1 })))
  )
})

describe("trimmed events", () => {
  // spaced out, so the session's delta buffer writes them as separate events that fill the small stream
  const words = Array.from({ length: 24 }, (_, i) => `word${i} `)
  it.live("a turn whose first events were trimmed is rebuilt from the committed messages", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("hal-1", { initialMessage: "go" })
      const snapshot = yield* SessionTesting.awaitTurn("hal-1", { turn: 1 })
      // the stream is trimmed in the background once it passes 90 % of its capacity
      const oldest = yield* Stream.runHead(sessions.events("hal-1")).pipe(
        Effect.map(Option.getOrThrow),
        Effect.repeat({
          until: (e) => e.event.type !== "turn_started",
          schedule: Schedule.spaced("20 millis"),
          times: 500
        })
      )
      assert.notStrictEqual(oldest.event.type, "turn_started", "the turn's start was trimmed")
      const replay = yield* promise(async () =>
        readSse(await handler(get("hal", `/hal-1/stream?token=${encodeURIComponent(tokenFor("hal-1"))}`)))
      )
      const message = yield* promise(() => fold(chunksOf(replay).map((c) => c.chunk)))
      const text = message.parts.filter((p) => p.type === "text").map((p) => (p.type === "text" ? p.text : ""))
      assert.deepStrictEqual(text, [snapshot.messages.at(-1)!.text])
      assert.strictEqual(text[0], words.join(""))
    }).pipe(
      Effect.provide(
        SessionTesting.layer({
          model: slowModel(words, "60 millis"),
          flow: { eventsCapacityBytes: 8000 }
        })
      )
    )
  )
})

/** A replay token of turn 1 of a session, read from its oldest event. */
const tokenFor = (sessionId: string) =>
  ResumeToken.encode({ v: 1, s: sessionId, t: "turn-1", a: null, p: null, k: 0, o: ResumeToken.emptyOpenParts() })

/** A model that streams its deltas slowly. */
const slowModel = (deltas: ReadonlyArray<string>, every: Duration.Input) =>
  Layer.succeed(ModelClient.ModelClient, {
    generate: (request) =>
      Effect.gen(function* () {
        for (const d of deltas) {
          yield* Effect.sleep(every)
          if (request.onTextDelta) yield* request.onTextDelta(d)
        }
        return {
          text: deltas.join(""),
          reasoning: null,
          toolCalls: [],
          usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 },
          metadata: { requestModel: "slow", responseModel: "slow", providerName: "scripted" }
        }
      })
  })

/** A model whose first call streams text and then fails; the retry answers. */
const failingFirstAttempt = Layer.sync(ModelClient.ModelClient, () => {
  let calls = 0
  return {
    generate: (request) =>
      Effect.gen(function* () {
        calls++
        if (calls === 1) {
          if (request.onTextDelta) yield* request.onTextDelta("first try")
          return yield* new Errors.ModelCallError({ message: "the provider hung up" })
        }
        if (request.onTextDelta) yield* request.onTextDelta("second try")
        return {
          text: "second try",
          reasoning: null,
          toolCalls: [],
          usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 },
          metadata: { requestModel: "flaky", responseModel: "flaky", providerName: "scripted" }
        }
      })
  }
})
