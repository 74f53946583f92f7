/**
 * The chat as a browser meets it: a message sent while an approval waits, two tabs sending at once, regenerate,
 * the transient tool status, keep-alive comments, and a reload after a stop, a continuation or a turn with tools
 * (the conversation `fromSnapshot` rebuilds must be the one the stream showed).
 */
import { AgentSessionClient } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import * as Wire from "@durable-agent/session/wire"
import { assert, describe, it } from "@effect/vitest"
import { type DynamicToolUIPart, parseJsonEventStream, type UIMessage, uiMessageChunkSchema } from "ai"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { ChatHandler, UiMessages } from "../src/index.ts"
import {
  authorize,
  chunksOf,
  fold,
  get,
  layer,
  post,
  postTo,
  readSse,
  runs,
  userMessage,
  wordModel,
  writeAndRead
} from "./support.ts"

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

const handlerEffect = ChatHandler.make({ authorize })

const errorOf = (response: Response) =>
  promise(async () => (await response.json()) as { error: { code: string; message: string } })

/** The conversation a page loads: the snapshot route's JSON through `fromSnapshot`. */
const reload = (handler: (request: Request) => Promise<Response>, user: string, sessionId: string) =>
  promise(async () => {
    const response = await handler(get(user, `/${sessionId}/snapshot`))
    const { snapshot, history } = UiMessages.decodeSnapshotResponse(await response.json())
    return UiMessages.fromSnapshot(snapshot, history)
  })

const textOf = (message: UIMessage | undefined) =>
  (message?.parts ?? []).flatMap((p) => (p.type === "text" ? [p.text] : [])).join("")

const WORDS = ["one ", "two ", "three ", "four ", "five ", "six"]

/** Waits until the session's events hold `count` text deltas. */
const waitForDeltas = (sessionId: string, count: number) =>
  Effect.flatMap(AgentSessionClient.AgentSessionClient, (sessions) =>
    sessions.events(sessionId, { from: "oldest", follow: true }).pipe(
      Stream.filter((e) => e.event.type === "text_delta"),
      Stream.take(count),
      Stream.runDrain
    )
  )

describe("the chat as the browser meets it", () => {
  it.live("a message sent while an approval waits: 409 awaiting_input, nothing sent; the approval still works", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const first = yield* promise(() => handler(post("ann", { id: "ann-1", messages: [userMessage("u1", "send")] })))
      const message = yield* promise(async () => fold(chunksOf(await readSse(first)).map((c) => c.chunk)))
      const write = message.parts.find((p) => p.type === "dynamic-tool" && p.toolCallId === "w-ann")
      assert.strictEqual(write?.type === "dynamic-tool" ? write.state : undefined, "approval-requested")

      // the user types a message instead of answering
      const typed = yield* promise(() =>
        handler(
          post("ann", { id: "ann-1", messages: [userMessage("u1", "send"), message, userMessage("u2", "hello?")] })
        )
      )
      assert.strictEqual(typed.status, 409)
      assert.strictEqual((yield* errorOf(typed)).error.code, "awaiting_input")
      const after = yield* sessions.getSnapshot("ann-1")
      assert.strictEqual(after.queuedMessageCount, 0, "nothing was queued")
      assert.strictEqual(after.pendingInterrupts.length, 1, "the approval still waits")

      // the approval goes through and the turn ends; no message of the refused send shows up
      const approved: UIMessage = {
        ...message,
        parts: message.parts.map((p) =>
          p.type === "dynamic-tool" && p.state === "approval-requested"
            ? ({
                ...p,
                state: "approval-responded",
                approval: { id: p.approval.id, approved: true }
              } as DynamicToolUIPart)
            : p
        )
      }
      const answer = yield* promise(() =>
        handler(post("ann", { id: "ann-1", messages: [userMessage("u1", "send"), approved] }))
      )
      assert.strictEqual(answer.status, 200)
      const rest = chunksOf(yield* promise(() => readSse(answer)))
      const finish = rest.at(-1)!.chunk
      assert.strictEqual(finish.type === "finish" ? finish.finishReason : undefined, "stop")
      const ended = yield* SessionTesting.awaitTurn("ann-1", { turn: 1 })
      assert.deepStrictEqual(
        ended.messages.filter((m) => m.role === "user").map((m) => m.text),
        ["send"]
      )
      assert.strictEqual(runs.get("send_email:ann"), 1)
    }).pipe(Effect.provide(layer({ model: writeAndRead("ann") })))
  )

  it.live("two tabs sending while a turn runs, one after the other and at once: each streams its own turn", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const send = (id: string, text: string) =>
        promise(async () => {
          const response = await handler(post("bea", { id: "bea-1", messages: [userMessage(id, text)] }))
          return chunksOf(await readSse(response)).map((c) => c.chunk)
        })
      // turn 1 streams slowly
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("bea-1", { initialMessage: "a long one" })
      yield* SessionTesting.awaitSnapshot("bea-1", (s) => s.state?.activeTurnId === "turn-1")
      // tab A, then tab B, while turn 1 runs: both messages are queued, turns 2 and 3
      const tabA = yield* Effect.forkChild(send("a1", "fast from tab A"))
      yield* SessionTesting.awaitSnapshot("bea-1", (s) => s.queuedMessageCount === 1)
      const tabB = yield* Effect.forkChild(send("b1", "fast from tab B"))
      // and two more at once
      const both = yield* Effect.forkChild(
        Effect.all([send("c1", "fast from tab C"), send("d1", "fast from tab D")], { concurrency: 2 })
      )
      const [a, b, [c, d]] = yield* Effect.all([Fiber.join(tabA), Fiber.join(tabB), Fiber.join(both)])
      const snapshot = yield* SessionTesting.awaitTurn("bea-1", { turn: 5 })
      for (const [chunks, text] of [
        [a, "fast from tab A"],
        [b, "fast from tab B"],
        [c, "fast from tab C"],
        [d, "fast from tab D"]
      ] as const) {
        const message = yield* promise(() => fold(chunks))
        const user = snapshot.messages.find((m) => m.role === "user" && m.turnId === message.id)
        assert.strictEqual(user?.text, text, `the stream of "${text}" is its own turn (${message.id})`)
        assert.strictEqual(textOf(message), `re: ${text}`)
      }
    }).pipe(Effect.provide(layer({ model: wordModel(WORDS, "150 millis") })))
  )

  it.live("regenerate: 400 regenerate_unsupported, nothing sent", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const first = yield* promise(() =>
        handler(post("cal", { id: "cal-1", messages: [userMessage("u1", "fast hello")] }))
      )
      const answer = yield* promise(async () => fold(chunksOf(await readSse(first)).map((c) => c.chunk)))
      yield* SessionTesting.awaitTurn("cal-1", { turn: 1 })
      const before = yield* sessions.getSnapshot("cal-1")
      // what AbstractChat.regenerate() posts: the messages up to the user message, trigger regenerate-message
      const regenerate = yield* promise(() =>
        handler(
          post("cal", {
            id: "cal-1",
            messages: [userMessage("u1", "fast hello")],
            trigger: "regenerate-message",
            messageId: answer.id
          })
        )
      )
      assert.strictEqual(regenerate.status, 400)
      assert.strictEqual((yield* errorOf(regenerate)).error.code, "regenerate_unsupported")
      const after = yield* sessions.getSnapshot("cal-1")
      assert.strictEqual(after.messages.length, before.messages.length)
      assert.strictEqual(after.queuedMessageCount, 0)
      assert.strictEqual(after.state?.turnCount, 1)
    }).pipe(Effect.provide(layer({ model: wordModel(WORDS, "10 millis") })))
  )

  it.live("the tool status part is transient: the folded message never keeps it", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const response = yield* promise(() =>
        handler(post("dee", { id: "dee-1", messages: [userMessage("u1", "send")] }))
      )
      const chunks = chunksOf(yield* promise(() => readSse(response))).map((c) => c.chunk)
      const statuses = chunks.filter((c) => c.type === "data-tool-status")
      assert.isAbove(statuses.length, 0)
      for (const s of statuses) assert.strictEqual("transient" in s ? s.transient : undefined, true)
      const message = yield* promise(() => fold(chunks))
      assert.isFalse(message.parts.some((p) => p.type === "data-tool-status"))
    }).pipe(Effect.provide(layer({ model: writeAndRead("dee") })))
  )

  it.live("keep-alive comments while the stream waits; the AI SDK parses every chunk around them", () =>
    Effect.gen(function* () {
      const handler = yield* ChatHandler.make({ authorize, keepAliveInterval: "20 millis" })
      const response = yield* promise(() =>
        handler(post("eve", { id: "eve-1", messages: [userMessage("u1", "slow")] }))
      )
      const [raw, parsing] = response.body!.tee()
      const text = yield* promise(() => new Response(raw).text())
      assert.include(text, "\n\n: keep-alive\n\n")
      const parsed = parseJsonEventStream({ stream: parsing, schema: uiMessageChunkSchema })
      const results: Array<{ success: boolean }> = []
      yield* promise(async () => {
        for await (const r of parsed as unknown as AsyncIterable<{ success: boolean }>) results.push(r)
      })
      assert.isAbove(results.length, 8)
      assert.isTrue(results.every((r) => r.success))
    }).pipe(Effect.provide(layer({ model: wordModel(WORDS, "100 millis") })))
  )

  it.live("a reload after a stop shows what the stream showed: the stopped text and a cancelled status", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const response = yield* promise(() => handler(post("fay", { id: "fay-1", messages: [userMessage("u1", "go")] })))
      const reading = yield* Effect.forkChild(promise(() => readSse(response)))
      yield* SessionTesting.awaitSnapshot("fay-1", (s) => s.state?.activeTurnId === "turn-1")
      // stop after some words streamed
      yield* waitForDeltas("fay-1", 2)
      const stop = yield* promise(() => handler(postTo("fay", "/fay-1/stop")))
      assert.deepStrictEqual(yield* promise(() => stop.json()), { cancelled: true })
      const streamed = yield* Fiber.join(reading)
      const live = yield* promise(() => fold(chunksOf(streamed).map((c) => c.chunk)))
      const liveText = textOf(live)
      assert.isAbove(liveText.length, 0)
      assert.notStrictEqual(liveText, WORDS.join(""))
      assert.strictEqual((live.metadata as { turnStatus?: string }).turnStatus, "cancelled")
      yield* SessionTesting.awaitTurn("fay-1", { turn: 1 })

      const loaded = yield* reload(handler, "fay", "fay-1")
      assert.deepStrictEqual(
        loaded.map((m) => m.role),
        ["user", "assistant"]
      )
      const stopped = loaded[1]!
      assert.strictEqual(stopped.id, "turn-1")
      assert.strictEqual(textOf(stopped), liveText)
      assert.deepStrictEqual(stopped.metadata, { turnId: "turn-1", turnStatus: "cancelled" })
    }).pipe(Effect.provide(layer({ model: wordModel(WORDS, "300 millis") })))
  )

  it.live("a reload after a turn with tools keeps each tool's effect class, as the stream showed it", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const first = yield* promise(() => handler(post("gus", { id: "gus-1", messages: [userMessage("u1", "send")] })))
      const message = yield* promise(async () => fold(chunksOf(await readSse(first)).map((c) => c.chunk)))
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.resolveInterrupt("gus-1", { interruptId: "w-gus", approved: true })
      yield* SessionTesting.awaitTurn("gus-1", { turn: 1 })
      const effects = (m: UIMessage) =>
        Object.fromEntries(
          m.parts.flatMap((p) =>
            p.type === "dynamic-tool"
              ? [[p.toolCallId, (p.toolMetadata as { effect?: string } | undefined)?.effect]]
              : []
          )
        )
      assert.deepStrictEqual(effects(message), { "w-gus": "non_idempotent_write", "r-gus": "read" })
      const loaded = yield* reload(handler, "gus", "gus-1")
      assert.deepStrictEqual(effects(loaded.at(-1)!), effects(message))
    }).pipe(Effect.provide(layer({ model: writeAndRead("gus") })))
  )

  it.live("a reload of a turn that continued: one user message, one assistant message with both answers", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const response = yield* promise(() =>
        handler(post("hal", { id: "hal-1", messages: [userMessage("u1", "write")] }))
      )
      const live = yield* promise(async () => fold(chunksOf(await readSse(response)).map((c) => c.chunk)))
      assert.strictEqual(textOf(live), "Draft one.Final one.")
      const snapshot = yield* SessionTesting.awaitTurn("hal-1", { turn: 1 })
      assert.deepStrictEqual(
        snapshot.messages.filter((m) => m.role === "user").map((m) => m.text),
        ["write", "Check your draft."],
        "the continuation's message is stored as a user text of the turn"
      )
      const loaded = yield* reload(handler, "hal", "hal-1")
      assert.deepStrictEqual(
        loaded.map((m) => [m.role, m.id]),
        [
          ["user", loaded[0]!.id],
          ["assistant", "turn-1"]
        ]
      )
      assert.strictEqual(textOf(loaded[1]), textOf(live))
    }).pipe(
      Effect.provide(
        layer({
          model: [{ text: "Draft one." }, { text: "Final one." }],
          agent: {
            decideTurnContinuation: ({ after, consecutiveContinuations }) =>
              after === "answer" && consecutiveContinuations === 0 ? { message: "Check your draft." } : undefined
          }
        })
      )
    )
  )

  it.live("a turn stopped after a tool ran: the reload shows its tools and says cancelled", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const response = yield* promise(() => handler(post("ivy", { id: "ivy-1", messages: [userMessage("u1", "go")] })))
      const live = yield* promise(async () => fold(chunksOf(await readSse(response)).map((c) => c.chunk)))
      assert.strictEqual((live.metadata as { turnStatus?: string }).turnStatus, "awaiting_answer")
      const stop = yield* promise(() => handler(postTo("ivy", "/ivy-1/stop")))
      assert.deepStrictEqual(yield* promise(() => stop.json()), { cancelled: true })
      yield* SessionTesting.awaitTurn("ivy-1", { turn: 1 })
      const loaded = yield* reload(handler, "ivy", "ivy-1")
      assert.deepStrictEqual(loaded.filter((m) => m.role === "user").map(textOf), ["go"])
      const stopped = loaded.at(-1)!
      assert.strictEqual(stopped.id, "turn-1")
      assert.strictEqual((stopped.metadata as { turnStatus?: string }).turnStatus, "cancelled")
      const weather = stopped.parts.find((p) => p.type === "dynamic-tool" && p.toolCallId === "r1")
      assert.strictEqual(weather?.type === "dynamic-tool" ? weather.state : undefined, "output-available")
    }).pipe(
      Effect.provide(
        layer({
          builtInTools: ["ask_user"],
          model: [
            {
              text: "Checking.",
              toolCalls: [
                { id: "r1", name: "get_weather", arguments: {} },
                { id: "q1", name: "ask_user", arguments: { question: "Where?", choices: [], allows_free_text: true } }
              ]
            }
          ]
        })
      )
    )
  )

  it("a turn note (stopped, steered, failed) is not a user message; it tells the turn's status", () => {
    const message = (sequence: number, turnId: string, role: "user" | "assistant", text: string) => ({
      sequence,
      turnId,
      role,
      text,
      toolCallId: null,
      toolName: null,
      toolArguments: null,
      toolOutput: null,
      createdAt: "2026-01-01T00:00:00Z"
    })
    const loaded = UiMessages.fromSnapshot({
      state: { activeTurnId: null, lastTurnError: null },
      messages: [
        message(1, "turn-1", "user", "first"),
        message(2, "turn-1", "user", `${Wire.TURN_CANCELLED_NOTE_HEADER}\n- get_weather {} -> succeeded: sunny`),
        message(3, "turn-2", "user", "second"),
        message(4, "turn-2", "assistant", "Partly."),
        message(5, "turn-2", "user", `${Wire.TURN_STEERED_NOTE_HEADER}\n- get_weather {} -> succeeded: sunny`),
        message(6, "turn-3", "user", "third"),
        message(7, "turn-3", "assistant", "Done.")
      ]
    })
    assert.deepStrictEqual(
      loaded.map((m) => [m.role, m.id, textOf(m), (m.metadata as { turnStatus?: string } | undefined)?.turnStatus]),
      [
        ["user", "user-1", "first", undefined],
        ["assistant", "turn-1", "", "cancelled"],
        ["user", "user-3", "second", undefined],
        ["assistant", "turn-2", "Partly.", "steered"],
        ["user", "user-6", "third", undefined],
        ["assistant", "turn-3", "Done.", "completed"]
      ]
    )
  })
})
