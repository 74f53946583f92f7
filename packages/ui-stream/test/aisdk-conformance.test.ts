/**
 * Conformance with the AI SDK's own client: `AbstractChat` (what `useChat` wraps) over `DefaultChatTransport`,
 * against `HttpChat` served by Node on 127.0.0.1, with the package's Standard Schemas as `dataPartSchemas` and
 * `messageMetadataSchema`. Every response body is also read with `parseJsonEventStream` + `uiMessageChunkSchema`,
 * and the last test checks that every chunk of every scenario validated. Keep-alive comments run every 50 ms, so
 * they sit between the chunks.
 */
import { createServer } from "node:http"
import { AgentSessionClient, ModelClient } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import {
  AbstractChat,
  type ChatState,
  type ChatStatus,
  DefaultChatTransport,
  type DynamicToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  parseJsonEventStream,
  safeValidateUIMessages,
  uiMessageChunkSchema
} from "ai"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import * as Layer from "effect/Layer"
import { HttpChat, UiMessages } from "../src/index.ts"
import { authorize, runs, tools } from "./support.ts"

type Message = UiMessages.TurnUIMessage

/** A plain ChatState, as the framework bindings keep it. */
class State implements ChatState<Message> {
  status: ChatStatus = "ready"
  error: Error | undefined = undefined
  messages: Array<Message>
  constructor(messages: Array<Message>) {
    this.messages = messages
  }
  pushMessage = (message: Message) => {
    this.messages = this.messages.concat(message)
  }
  popMessage = () => {
    this.messages = this.messages.slice(0, -1)
  }
  replaceMessage = (index: number, message: Message) => {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)]
  }
  snapshot = <T>(thing: T): T => structuredClone(thing)
}

/** Every chunk of every response, as parseJsonEventStream + uiMessageChunkSchema read it. */
const checked = {
  chunks: 0,
  types: new Set<string>(),
  failures: [] as Array<string>,
  reading: [] as Array<Promise<void>>
}

/** fetch for the transport: the body goes to the transport and, teed, to the validation. */
const validatingFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init)
  if (response.body === null || !(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
    return response
  }
  const [forChat, forCheck] = response.body.tee()
  checked.reading.push(
    (async () => {
      const reader = parseJsonEventStream({ stream: forCheck, schema: uiMessageChunkSchema }).getReader()
      while (true) {
        const read = await reader.read().catch((e: unknown) => {
          // the chat closed the connection (stop(), a reload): what arrived was checked
          if (e instanceof Error && e.name === "AbortError") return { done: true as const, value: undefined }
          throw e
        })
        if (read.done) return
        if (read.value.success) {
          checked.chunks++
          checked.types.add(read.value.value.type)
        } else checked.failures.push(String(read.value.error))
      }
    })()
  )
  return new Response(forChat, { status: response.status, statusText: response.statusText, headers: response.headers })
}

let baseUrl = ""

/** Every chat of every scenario, for the schema check at the end. */
const chats: Array<Chat> = []

class Chat extends AbstractChat<Message> {
  readonly data: Array<{ type: string; id?: string | undefined }> = []
  constructor(id: string, user: string, messages: Array<Message> = []) {
    const data: Array<{ type: string; id?: string | undefined }> = []
    super({
      id,
      state: new State(messages),
      transport: new DefaultChatTransport<Message>({
        api: `${baseUrl}/api/chat`,
        headers: { "x-user": user },
        fetch: validatingFetch
      }),
      dataPartSchemas: UiMessages.dataPartSchemas,
      messageMetadataSchema: UiMessages.messageMetadataSchema,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      onData: (part) => {
        data.push({ type: part.type, id: part.id })
      }
    })
    this.data = data
    chats.push(this)
  }
}

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

/** Polls until `check` holds (60 s at most: the machine is shared). */
const until = (what: string, check: () => boolean) =>
  promise(async () => {
    const began = Date.now()
    while (!check()) {
      if (Date.now() - began > 60_000) throw new Error(`timed out waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })

const lastOf = (chat: Chat) => chat.messages.at(-1)!
const textOf = (message: Message | undefined) =>
  (message?.parts ?? []).flatMap((p) => (p.type === "text" ? [p.text] : [])).join("")
const toolsOf = (message: Message) => message.parts.filter((p): p is DynamicToolUIPart => p.type === "dynamic-tool")
const statusOf = (message: Message | undefined) => message?.metadata?.turnStatus

const loadMessages = (sessionId: string, user: string) =>
  promise(async () => {
    const response = await fetch(`${baseUrl}/api/chat/${sessionId}/snapshot`, { headers: { "x-user": user } })
    const { snapshot, history } = UiMessages.decodeSnapshotResponse(await response.json())
    return UiMessages.fromSnapshot(snapshot, history)
  })

const postJson = (path: string, user: string, body?: unknown) =>
  promise(async () => {
    const response = await fetch(`${baseUrl}/api/chat${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-user": user },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return { status: response.status, body: (await response.json().catch(() => null)) as unknown }
  })

const words = (text: string) => text.match(/\S+\s*/g) ?? [text]
const usage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }
const LONG = "This answer streams slowly so that a stop or a reload lands in its middle, one word at a time. The end."

/** The model: what it does depends on the last user text (or, after tools, it sums up). */
const model = Layer.succeed(ModelClient.ModelClient, {
  generate: (request) =>
    Effect.gen(function* () {
      const reply = (text: string, toolCalls: ModelClient.ModelResponse["toolCalls"] = []) => ({
        text,
        reasoning: null,
        toolCalls,
        usage,
        metadata: { requestModel: "c", responseModel: "c", providerName: "scripted" }
      })
      const stream = (text: string, every: number) =>
        Effect.forEach(
          words(text),
          (w) => Effect.andThen(Effect.sleep(`${every} millis`), request.onTextDelta?.(w) ?? Effect.void),
          { discard: true }
        )
      const last = request.messages.at(-1)
      if (last?.role === "tool") {
        const results = request.messages.filter((m) => m.role === "tool").length
        yield* stream(`Done after ${results} tool results.`, 5)
        return reply(`Done after ${results} tool results.`)
      }
      const said = last?.role === "user" ? last.text : ""
      const call = (id: string, name: string, args: unknown) => ({
        toolCallId: id,
        toolName: name,
        arguments: JSON.stringify(args)
      })
      if (said.startsWith("think")) {
        for (const r of ["Let me ", "think."]) yield* request.onReasoningDelta?.(r) ?? Effect.void
        yield* stream("Thought it through.", 5)
        return { ...reply("Thought it through."), reasoning: "Let me think." }
      }
      if (said.startsWith("weather")) {
        yield* stream("Checking both.", 5)
        return reply("Checking both.", [
          call("p1", "get_weather", { city: "Paris" }),
          call("p2", "get_weather", { city: "Rome" })
        ])
      }
      if (said.startsWith("send")) {
        const to = said.split(" ")[1] ?? "x"
        yield* stream("Sending.", 5)
        return reply("Sending.", [call(`w-${to}`, "send_email", { to }), call(`r-${to}`, "get_weather", {})])
      }
      if (said.startsWith("ask")) {
        yield* stream("A question.", 5)
        return reply("A question.", [
          call("q-1", "ask_user", { question: "Which city?", choices: ["Paris", "Rome"], allows_free_text: false })
        ])
      }
      if (said.startsWith("plan")) {
        yield* stream("The plan.", 5)
        return reply("The plan.", [
          call("t-1", "write_todos", {
            todos: [
              { content: "Read", status: "completed" },
              { content: "Write", status: "in_progress" },
              { content: "Ship", status: "pending" }
            ]
          })
        ])
      }
      if (said.startsWith("slow")) {
        yield* stream(LONG, 120)
        return reply(LONG)
      }
      yield* stream(`You said: ${said}`, 5)
      return reply(`You said: ${said}`)
    })
})

const server = HttpRouter.serve(HttpChat.layer({ authorize, keepAliveInterval: "50 millis" }), {
  disableLogger: true
}).pipe(
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
  Layer.provideMerge(SessionTesting.layer({ model, tools, flow: { builtInTools: ["ask_user", "write_todos"] } }))
)

layer(server, { timeout: "180 seconds", excludeTestServices: true })(
  "AI SDK AbstractChat + DefaultChatTransport against HttpChat",
  (it) => {
    it.effect("the server's address", () =>
      Effect.gen(function* () {
        const address = (yield* HttpServer.HttpServer).address
        assert.notStrictEqual(address._tag, "UnixPathAddress")
        baseUrl = `http://127.0.0.1:${address._tag === "UnixPathAddress" ? 0 : address.port}`
      })
    )

    it.effect("text and reasoning", () =>
      Effect.gen(function* () {
        const chat = new Chat("ann-1", "ann")
        yield* promise(() => chat.sendMessage({ text: "think about it" }))
        assert.strictEqual(chat.status, "ready")
        const answer = lastOf(chat)
        assert.strictEqual(answer.id, "turn-1")
        const reasoning = answer.parts.find((p) => p.type === "reasoning")
        assert.strictEqual(reasoning?.type === "reasoning" ? reasoning.text : undefined, "Let me think.")
        assert.strictEqual(textOf(answer), "Thought it through.")
        assert.strictEqual(statusOf(answer), "completed")
      })
    )

    it.effect("parallel tools: both outputs, the transient status reaches onData only, then the answer", () =>
      Effect.gen(function* () {
        const chat = new Chat("ann-2", "ann")
        yield* promise(() => chat.sendMessage({ text: "weather in Paris and Rome" }))
        const answer = lastOf(chat)
        assert.deepStrictEqual(
          toolsOf(answer).map((p) => [p.toolCallId, p.state, p.output, (p.toolMetadata as { effect?: string }).effect]),
          [
            ["p1", "output-available", "sunny", "read"],
            ["p2", "output-available", "sunny", "read"]
          ]
        )
        assert.strictEqual(textOf(answer), "Checking both.Done after 2 tool results.")
        assert.isFalse(answer.parts.some((p) => p.type === "data-tool-status"))
        assert.deepStrictEqual(
          chat.data.filter((d) => d.type === "data-tool-status").map((d) => d.id),
          ["status-p1", "status-p2"]
        )
      })
    )

    it.effect("approval: a message sent while it waits is refused (409), then Approve sends and the turn ends", () =>
      Effect.gen(function* () {
        const chat = new Chat("bob-1", "bob")
        yield* promise(() => chat.sendMessage({ text: "send bob" }))
        assert.strictEqual(chat.status, "ready")
        assert.strictEqual(statusOf(lastOf(chat)), "awaiting_approval")
        const write = toolsOf(lastOf(chat)).find((p) => p.toolCallId === "w-bob")!
        assert.strictEqual(write.state, "approval-requested")

        // a message while the approval waits: the server refuses it and sends nothing
        yield* promise(() => chat.sendMessage({ text: "hello?" }))
        assert.strictEqual(chat.status, "error")
        assert.include(chat.error?.message ?? "", "awaiting_input")
        const sessions = yield* AgentSessionClient.AgentSessionClient
        assert.strictEqual((yield* sessions.getSnapshot("bob-1")).queuedMessageCount, 0)
        // the app drops the refused message (as examples/web does) and the user approves
        chat.messages = chat.messages.slice(0, -1)
        chat.clearError()
        yield* promise(async () => chat.addToolApprovalResponse({ id: "w-bob", approved: true }))
        yield* until(
          "the approved turn to end",
          () => chat.status === "ready" && statusOf(lastOf(chat)) === "completed"
        )
        const done = lastOf(chat)
        assert.strictEqual(done.id, "turn-1")
        const sent = toolsOf(done).find((p) => p.toolCallId === "w-bob")!
        assert.strictEqual(sent.state, "output-available")
        assert.strictEqual(sent.output, "sent to bob")
        assert.include(textOf(done), "Done after 2 tool results.")
        assert.strictEqual(runs.get("send_email:bob"), 1)
        assert.deepStrictEqual(
          chat.messages.map((m) => m.role),
          ["user", "assistant"]
        )
      })
    )

    it.effect("approval: Reject denies the write and the turn ends", () =>
      Effect.gen(function* () {
        const chat = new Chat("bob-2", "bob")
        yield* promise(() => chat.sendMessage({ text: "send rex" }))
        yield* promise(async () => chat.addToolApprovalResponse({ id: "w-rex", approved: false, reason: "no" }))
        yield* until(
          "the rejected turn to end",
          () => chat.status === "ready" && statusOf(lastOf(chat)) === "completed"
        )
        const denied = toolsOf(lastOf(chat)).find((p) => p.toolCallId === "w-rex")!
        assert.strictEqual(denied.state, "output-denied")
        assert.strictEqual(runs.get("send_email:rex"), undefined)
      })
    )

    it.effect("ask_user: the question part validates, the answer route answers, resumeStream shows the rest", () =>
      Effect.gen(function* () {
        const chat = new Chat("cat-1", "cat")
        yield* promise(() => chat.sendMessage({ text: "ask me" }))
        assert.strictEqual(statusOf(lastOf(chat)), "awaiting_answer")
        const question = lastOf(chat).parts.find((p) => p.type === "data-question")
        assert.strictEqual(question?.type === "data-question" ? question.data.status : undefined, "pending")
        const answered = yield* postJson("/cat-1/answer", "cat", { interruptId: "q-1", answer: "Rome" })
        assert.strictEqual(answered.status, 200)
        chat.messages = yield* loadMessages("cat-1", "cat")
        yield* promise(() => chat.resumeStream())
        yield* SessionTesting.awaitTurn("cat-1", { turn: 1 })
        chat.messages = yield* loadMessages("cat-1", "cat")
        const end = lastOf(chat)
        const settled = end.parts.find((p) => p.type === "data-question")
        assert.deepStrictEqual(
          settled?.type === "data-question" ? [settled.data.status, settled.data.answer] : undefined,
          ["answered", "Rome"]
        )
        assert.include(textOf(end), "Done after 1 tool results.")
      })
    )

    it.effect("plan: the data-plan part validates and carries the tasks", () =>
      Effect.gen(function* () {
        const chat = new Chat("cat-2", "cat")
        yield* promise(() => chat.sendMessage({ text: "plan it" }))
        yield* until("the plan turn to end", () => chat.status === "ready")
        const plan = chat.messages.flatMap((m) => m.parts).find((p) => p.type === "data-plan")
        assert.deepStrictEqual(plan?.type === "data-plan" ? plan.data.tasks.map((t) => t.status) : undefined, [
          "completed",
          "in_progress",
          "pending"
        ])
      })
    )

    it.effect("stop: the stream finishes cancelled, and a reload shows the same stopped text", () =>
      Effect.gen(function* () {
        const chat = new Chat("dan-1", "dan")
        const sending = chat.sendMessage({ text: "slow please" })
        yield* until("some words", () => textOf(chat.messages[1]).length > 10)
        const stopped = yield* postJson("/dan-1/stop", "dan")
        assert.deepStrictEqual(stopped, { status: 200, body: { cancelled: true } })
        yield* promise(() => sending)
        const live = lastOf(chat)
        assert.strictEqual(statusOf(live), "cancelled")
        assert.notStrictEqual(textOf(live), LONG)
        yield* SessionTesting.awaitTurn("dan-1", { turn: 1 })
        const reloaded = yield* loadMessages("dan-1", "dan")
        assert.strictEqual(textOf(reloaded.at(-1)), textOf(live))
        assert.strictEqual(statusOf(reloaded.at(-1)), "cancelled")
      })
    )

    it.effect("resume after a reload: a new chat from the snapshot resumes the running turn to its end", () =>
      Effect.gen(function* () {
        const first = new Chat("eve-1", "eve")
        const sending = first.sendMessage({ text: "slow again" })
        yield* until("some words", () => textOf(first.messages[1]).length > 10)
        // the page goes away: the connection closes, the turn runs on
        yield* promise(() => first.stop())
        yield* promise(() => sending)
        const loaded = yield* loadMessages("eve-1", "eve")
        assert.deepStrictEqual(
          loaded.map((m) => m.role),
          ["user"],
          "the running turn comes from the resume"
        )
        const second = new Chat("eve-1", "eve", loaded)
        yield* promise(() => second.resumeStream())
        assert.strictEqual(second.status, "ready")
        assert.deepStrictEqual(
          second.messages.map((m) => [m.role, m.id]),
          [
            ["user", loaded[0]!.id],
            ["assistant", "turn-1"]
          ]
        )
        assert.strictEqual(textOf(lastOf(second)), LONG)
        assert.strictEqual(statusOf(lastOf(second)), "completed")
        // an idle session: the resume gets 204 and changes nothing
        yield* promise(() => second.resumeStream())
        assert.strictEqual(second.messages.length, 2)
      })
    )

    it.effect("regenerate: a clear 400, and the server keeps one user message and one answer", () =>
      Effect.gen(function* () {
        const chat = new Chat("fay-1", "fay")
        yield* promise(() => chat.sendMessage({ text: "hi" }))
        yield* promise(() => chat.regenerate())
        assert.strictEqual(chat.status, "error")
        assert.include(chat.error?.message ?? "", "regenerate_unsupported")
        const snapshot = yield* SessionTesting.awaitTurn("fay-1", { turn: 1 })
        assert.deepStrictEqual(
          snapshot.messages.map((m) => m.role),
          ["user", "assistant"]
        )
        assert.strictEqual(snapshot.state?.turnCount, 1)
        // the app reloads the conversation: the answer is back
        const reloaded = yield* loadMessages("fay-1", "fay")
        assert.strictEqual(textOf(reloaded.at(-1)), "You said: hi")
      })
    )

    it.effect("two tabs sending at once while a turn runs: each streams its own turn", () =>
      Effect.gen(function* () {
        const tab0 = new Chat("gil-1", "gil")
        const running = tab0.sendMessage({ text: "slow one" })
        yield* until("turn 1 to stream", () => textOf(tab0.messages[1]).length > 0)
        const tabA = new Chat("gil-1", "gil")
        const tabB = new Chat("gil-1", "gil")
        yield* promise(() =>
          Promise.all([tabA.sendMessage({ text: "from tab A" }), tabB.sendMessage({ text: "from tab B" })])
        )
        yield* promise(() => running)
        const snapshot = yield* SessionTesting.awaitTurn("gil-1", { turn: 3 })
        for (const [tab, text] of [
          [tabA, "from tab A"],
          [tabB, "from tab B"]
        ] as const) {
          const answer = lastOf(tab)
          const user = snapshot.messages.find((m) => m.role === "user" && m.turnId === answer.id)
          assert.strictEqual(user?.text, text)
          assert.strictEqual(textOf(answer), `You said: ${text}`)
        }
      })
    )

    it.effect(
      "the Standard Schemas: every message the chats hold validates; a wrong data part or metadata does not",
      () =>
        Effect.gen(function* () {
          const schemas = { dataSchemas: UiMessages.dataPartSchemas, metadataSchema: UiMessages.messageMetadataSchema }
          const messages = chats.flatMap((c) => c.messages)
          const parts = messages.flatMap((m) => m.parts)
          assert.isTrue(parts.some((p) => p.type === "data-question"))
          assert.isTrue(parts.some((p) => p.type === "data-plan"))
          // the metadata schema is the assistant messages' (a user message has none, and validateUIMessages checks
          // the metadata of every message it is given)
          const all = yield* promise(() =>
            safeValidateUIMessages<Message>({ messages, dataSchemas: UiMessages.dataPartSchemas })
          )
          assert.isTrue(all.success, all.success ? "" : all.error.message)
          const answers = messages.filter((m) => m.role === "assistant")
          assert.isAbove(answers.length, 10)
          const withMetadata = yield* promise(() => safeValidateUIMessages<Message>({ messages: answers, ...schemas }))
          assert.isTrue(withMetadata.success, withMetadata.success ? "" : withMetadata.error.message)
          const question = messages.find((m) => m.parts.some((p) => p.type === "data-question"))!
          const plan = messages.find((m) => m.parts.some((p) => p.type === "data-plan"))!
          const refused = async (message: unknown) =>
            !(await safeValidateUIMessages<Message>({ messages: [message], ...schemas })).success
          const withData = (message: Message, type: string, change: (data: Record<string, unknown>) => unknown) => ({
            ...message,
            parts: message.parts.map((p) =>
              p.type === type ? { ...p, data: change((p as { data: Record<string, unknown> }).data) } : p
            )
          })
          for (const bad of [
            withData(question, "data-question", (d) => ({ ...d, status: "maybe" })),
            withData(question, "data-question", ({ question: _, ...d }) => d),
            withData(plan, "data-plan", (d) => ({ ...d, revision: "one" })),
            {
              ...question,
              parts: [{ type: "data-tool-status", id: "status-x", data: { toolCallId: "x", status: "done" } }]
            },
            { ...question, metadata: { turnId: "turn-1", turnStatus: "sleeping" } },
            { ...question, metadata: { turnStatus: "completed" } }
          ]) {
            assert.isTrue(yield* promise(() => refused(bad)), JSON.stringify(bad).slice(0, 300))
          }
        })
    )

    it.effect("every chunk of every scenario validated against uiMessageChunkSchema", () =>
      Effect.gen(function* () {
        yield* promise(() => Promise.all(checked.reading))
        assert.deepStrictEqual(checked.failures, [])
        assert.isAbove(checked.chunks, 100)
        for (const type of [
          "start",
          "start-step",
          "reasoning-start",
          "reasoning-delta",
          "reasoning-end",
          "text-start",
          "text-delta",
          "text-end",
          "tool-input-start",
          "tool-input-available",
          "tool-approval-request",
          "tool-approval-response",
          "tool-output-available",
          "tool-output-denied",
          "data-tool-status",
          "data-question",
          "data-plan",
          "finish-step",
          "finish"
        ]) {
          assert.isTrue(checked.types.has(type), type)
        }
      })
    )
  }
)
