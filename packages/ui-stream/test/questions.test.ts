import { createServer } from "node:http"
import { AgentSessionClient } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import type { DataUIPart, UIMessage, UIMessageChunk } from "ai"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { ChatHandler, HttpChat, UiMessageStream, UiMessages } from "../src/index.ts"
import { authorize, base, chunksOf, fold, get, layer, post, readSse, userMessage } from "./support.ts"

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

const handlerEffect = ChatHandler.make({ authorize })

const ASK = {
  id: "q1",
  name: "ask_user",
  arguments: { question: "Which city?", choices: ["Paris", "Rome"], allows_free_text: false }
}

/** ask_user, then the answer after the tool result. */
const askTurn = [{ text: "One question first.", toolCalls: [ASK] }, { text: "Paris it is." }]

const answerRequest = (user: string, sessionId: string, body: unknown) =>
  new Request(`${base}/${sessionId}/answer`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-user": user },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

type Parts = UIMessage<unknown, UiMessageStream.TurnDataParts>["parts"]

const questionOf = (message: UIMessage, id: string) =>
  (message.parts as Parts).find((p) => p.type === "data-question" && p.id === id) as
    | DataUIPart<Pick<UiMessageStream.TurnDataParts, "question">>
    | undefined

const planOf = (message: UIMessage) =>
  (message.parts as Parts).filter((p) => p.type === "data-plan") as Array<
    DataUIPart<Pick<UiMessageStream.TurnDataParts, "plan">>
  >

const finishOf = (chunks: ReadonlyArray<{ readonly chunk: UIMessageChunk }>) => {
  const last = chunks.at(-1)!.chunk
  assert.strictEqual(last.type, "finish")
  return last as Extract<UIMessageChunk, { type: "finish" }> & {
    messageMetadata: UiMessageStream.TurnMessageMetadata
  }
}

const errorOf = (response: Response) =>
  promise(async () => (await response.json()) as { error: { code: string; message: string } })

describe("questions", () => {
  it.live("an ask_user turn: the question part, the answer through the handler, the turn resumes and ends", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const first = yield* promise(() => handler(post("ann", { id: "ann-1", messages: [userMessage("u1", "trip")] })))
      const chunks = chunksOf(yield* promise(() => readSse(first)))
      const finish = finishOf(chunks)
      assert.strictEqual(finish.finishReason, "tool-calls")
      assert.strictEqual(finish.messageMetadata.turnStatus, "awaiting_answer")
      // the question part follows the commit: the pending interrupt is there when the browser sees it
      const snapshot = yield* sessions.getSnapshot("ann-1")
      assert.deepStrictEqual(
        snapshot.pendingInterrupts.map((i) => [i.interruptId, i.kind]),
        [["q1", "question"]]
      )
      const message = yield* promise(() => fold(chunks.map((c) => c.chunk)))
      const question = questionOf(message, "q1")!
      assert.deepStrictEqual(question.data, {
        interruptId: "q1",
        toolCallId: "q1",
        toolName: "ask_user",
        question: "Which city?",
        choices: ["Paris", "Rome"],
        allowsFreeText: false,
        deadline: null,
        status: "pending",
        answer: null
      })
      const tools = message.parts.filter((p) => p.type === "dynamic-tool")
      assert.strictEqual(tools.length, 1)
      const tool = tools[0]
      assert.strictEqual(tool?.type === "dynamic-tool" ? tool.state : undefined, "input-available")
      // the snapshot's pending questions are the same part
      assert.deepStrictEqual(
        UiMessages.pendingQuestions(snapshot).map((p) => p.data),
        [question.data]
      )

      // the answer, continuing after the message's last token
      const answered = yield* promise(() =>
        handler(
          answerRequest("ann", "ann-1", {
            interruptId: "q1",
            answer: "Paris",
            resumeToken: finish.messageMetadata.resumeToken
          })
        )
      )
      assert.strictEqual(answered.status, 200)
      const rest = chunksOf(yield* promise(() => readSse(answered)))
      assert.notInclude(
        rest.map((c) => c.chunk.type),
        "start",
        "an exact continuation"
      )
      assert.strictEqual(finishOf(rest).finishReason, "stop")
      const done = yield* promise(() =>
        fold(
          rest.map((c) => c.chunk),
          message
        )
      )
      assert.strictEqual(questionOf(done, "q1")?.data.status, "answered")
      assert.strictEqual(questionOf(done, "q1")?.data.answer, "Paris")
      assert.strictEqual(done.parts.filter((p) => p.type === "data-question").length, 1, "updated in place")
      const settled = done.parts.find((p) => p.type === "dynamic-tool" && p.toolCallId === "q1")
      assert.strictEqual(settled?.type === "dynamic-tool" ? settled.state : undefined, "output-available")
      const text = done.parts.filter((p) => p.type === "text").at(-1)
      assert.strictEqual(text?.type === "text" ? text.text : undefined, "Paris it is.")
      const ended = yield* SessionTesting.awaitTurn("ann-1", { turn: 1 })
      assert.strictEqual(ended.messages.at(-1)?.text, "Paris it is.")
      // the snapshot's conversation shows the answered question the same way
      const seeded = UiMessages.fromSnapshot(ended).at(-1)!
      assert.deepStrictEqual(questionOf(seeded, "q1")?.data, questionOf(done, "q1")?.data)

      // a replay of the ended turn rebuilds the answered question
      const replay = yield* promise(async () =>
        fold(
          chunksOf(
            await readSse(await handler(get("ann", `/ann-1/stream?token=${encodeURIComponent(rest.at(-1)!.token!)}`)))
          ).map((c) => c.chunk)
        )
      )
      assert.deepStrictEqual(questionOf(replay, "q1")?.data, questionOf(done, "q1")?.data)
    }).pipe(Effect.provide(layer({ model: askTurn, builtInTools: ["ask_user"] })))
  )

  it.live("a reconnect mid-question rebuilds the question part (replay, exact continuation, no token)", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const first = yield* promise(() => handler(post("bob", { id: "bob-1", messages: [userMessage("u1", "trip")] })))
      const chunks = chunksOf(yield* promise(() => readSse(first)))
      const full = yield* promise(() => fold(chunks.map((c) => c.chunk)))
      const index = chunks.findIndex((c) => c.chunk.type === "data-question")
      assert.isAtLeast(index, 1)

      // the replay from the resumable point before the question part (the browser lost the connection there)
      const point = chunks.slice(0, index).findLastIndex((c) => c.token !== undefined)
      assert.isAtLeast(point, 0)
      const before = encodeURIComponent(chunks[point]!.token!)
      const replayed = chunksOf(
        yield* promise(async () => readSse(await handler(get("bob", `/bob-1/stream?token=${before}`))))
      )
      assert.strictEqual(finishOf(replayed).finishReason, "tool-calls")
      const rebuilt = yield* promise(() => fold(replayed.map((c) => c.chunk)))
      assert.deepStrictEqual(questionOf(rebuilt, "q1")?.data, questionOf(full, "q1")?.data)

      // the exact continuation from that token sends the rest: the question part and the finish
      const continued = chunksOf(
        yield* promise(async () => readSse(await handler(get("bob", `/bob-1/stream?token=${before}&mode=continue`))))
      )
      assert.deepStrictEqual(
        continued.map((c) => c.chunk),
        chunks.slice(point + 1).map((c) => c.chunk)
      )
      // after the question part: only what follows it, no second question part
      const after = encodeURIComponent(chunks[index]!.token!)
      const tail = chunksOf(
        yield* promise(async () => readSse(await handler(get("bob", `/bob-1/stream?token=${after}&mode=continue`))))
      )
      assert.deepStrictEqual(
        tail.map((c) => c.chunk),
        chunks.slice(index + 1).map((c) => c.chunk)
      )

      // useChat's resume without a token: the active turn, with its question
      const resumed = yield* promise(async () =>
        fold(chunksOf(await readSse(await handler(get("bob", "/bob-1/stream")))).map((c) => c.chunk))
      )
      assert.strictEqual(questionOf(resumed, "q1")?.data.status, "pending")

      // decline it: the part says so and the turn goes on
      const declined = yield* promise(() =>
        handler(answerRequest("bob", "bob-1", { interruptId: "q1", decline: true, reason: "not now" }))
      )
      assert.strictEqual(declined.status, 200)
      const end = yield* promise(async () => fold(chunksOf(await readSse(declined)).map((c) => c.chunk)))
      assert.strictEqual(questionOf(end, "q1")?.data.status, "declined")
      assert.strictEqual(questionOf(end, "q1")?.data.answer, null)
      yield* SessionTesting.awaitTurn("bob-1", { turn: 1 })
    }).pipe(Effect.provide(layer({ model: askTurn, builtInTools: ["ask_user"] })))
  )

  it.live("a tool's question (<tool_call_id>-input-1): answered through the handler, the tool runs with it", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const first = yield* promise(() => handler(post("cal", { id: "cal-1", messages: [userMessage("u1", "deploy")] })))
      const chunks = chunksOf(yield* promise(() => readSse(first)))
      assert.strictEqual(finishOf(chunks).messageMetadata.turnStatus, "awaiting_answer")
      const message = yield* promise(() => fold(chunks.map((c) => c.chunk)))
      const question = questionOf(message, "d1-input-1")!
      assert.strictEqual(question.data.toolCallId, "d1")
      assert.strictEqual(question.data.toolName, "deploy")
      assert.deepStrictEqual(question.data.choices, ["staging", "prod"])
      const answered = yield* promise(() =>
        handler(
          answerRequest("cal", "cal-1", {
            interruptId: "d1-input-1",
            answer: "prod",
            resumeToken: finishOf(chunks).messageMetadata.resumeToken
          })
        )
      )
      const done = yield* promise(async () =>
        fold(
          chunksOf(await readSse(answered)).map((c) => c.chunk),
          message
        )
      )
      assert.strictEqual(questionOf(done, "d1-input-1")?.data.status, "answered")
      assert.strictEqual(questionOf(done, "d1-input-1")?.data.answer, "prod")
      const tool = done.parts.find((p) => p.type === "dynamic-tool" && p.toolCallId === "d1")
      assert.strictEqual(
        tool?.type === "dynamic-tool" && tool.state === "output-available" ? tool.output : undefined,
        "deployed to prod"
      )
    }).pipe(
      Effect.provide(
        layer({
          model: [{ toolCalls: [{ id: "d1", name: "deploy", arguments: {} }] }, { text: "Deployed." }]
        })
      )
    )
  )

  it.live("with the event Stream store disabled, the committed question builds the part and ends the stream", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const first = yield* promise(() => handler(post("gus", { id: "gus-1", messages: [userMessage("u1", "trip")] })))
      const chunks = chunksOf(yield* promise(() => readSse(first)))
      assert.strictEqual(finishOf(chunks).messageMetadata.turnStatus, "awaiting_answer")
      const message = yield* promise(() => fold(chunks.map((c) => c.chunk)))
      assert.strictEqual(questionOf(message, "q1")?.data.question, "Which city?")
      assert.strictEqual(questionOf(message, "q1")?.data.status, "pending")
      const answered = yield* promise(() =>
        handler(
          answerRequest("gus", "gus-1", {
            interruptId: "q1",
            answer: "Rome",
            resumeToken: finishOf(chunks).messageMetadata.resumeToken
          })
        )
      )
      const rest = chunksOf(yield* promise(() => readSse(answered)))
      assert.strictEqual(finishOf(rest).finishReason, "stop")
      // the turn's end updates the question from the committed answer
      const done = yield* promise(() =>
        fold(
          rest.map((c) => c.chunk),
          message
        )
      )
      assert.strictEqual(questionOf(done, "q1")?.data.status, "answered")
      assert.strictEqual(questionOf(done, "q1")?.data.answer, "Rome")
      assert.deepStrictEqual(questionOf(done, "q1")?.data.choices, ["Paris", "Rome"])
      const tool = done.parts.find((p) => p.type === "dynamic-tool" && p.toolCallId === "q1")
      assert.deepStrictEqual(
        tool?.type === "dynamic-tool" && tool.state === "output-available" ? tool.output : undefined,
        { status: "answered", answer: "Rome" }
      )
    }).pipe(Effect.provide(layer({ model: askTurn, builtInTools: ["ask_user"], eventsCapacityBytes: 1 })))
  )

  it.live("bad answers: 400 with a clear message (403, 409 where they belong), nothing answered", () =>
    Effect.gen(function* () {
      const handler = yield* ChatHandler.make({ authorize, maxMessageChars: 50 })
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* promise(async () =>
        readSse(await handler(post("dee", { id: "dee-1", messages: [userMessage("u1", "trip")] })))
      )
      const cases: ReadonlyArray<[string, Request, number, string, string]> = [
        ["not JSON", answerRequest("dee", "dee-1", "{nope"), 400, "bad_request", "invalid answer request"],
        ["no interrupt ID", answerRequest("dee", "dee-1", { answer: "Paris" }), 400, "bad_request", "interruptId"],
        [
          "neither answer nor decline",
          answerRequest("dee", "dee-1", { interruptId: "q1" }),
          400,
          "bad_answer",
          "either an answer or decline"
        ],
        [
          "both answer and decline",
          answerRequest("dee", "dee-1", { interruptId: "q1", answer: "Paris", decline: true }),
          400,
          "bad_answer",
          "either an answer or decline"
        ],
        ["blank", answerRequest("dee", "dee-1", { interruptId: "q1", answer: "  " }), 400, "bad_answer", "blank"],
        [
          "not a choice",
          answerRequest("dee", "dee-1", { interruptId: "q1", answer: "Oslo" }),
          400,
          "bad_answer",
          'one of the choices: "Paris", "Rome"'
        ],
        [
          "too long",
          answerRequest("dee", "dee-1", { interruptId: "q1", answer: "x".repeat(51) }),
          413,
          "message_too_large",
          "longer than 50"
        ],
        [
          "unknown question",
          answerRequest("dee", "dee-1", { interruptId: "q9", answer: "Paris" }),
          409,
          "interrupt_not_pending",
          "not pending"
        ],
        [
          "an approval response for a question",
          post("dee", {
            id: "dee-1",
            messages: [
              {
                id: "turn-1",
                role: "assistant",
                parts: [
                  {
                    type: "dynamic-tool",
                    toolName: "ask_user",
                    toolCallId: "q1",
                    state: "approval-responded",
                    input: {},
                    approval: { id: "q1", approved: true }
                  }
                ]
              }
            ]
          }),
          400,
          "not_an_approval",
          "is a question"
        ],
        [
          "another user's session",
          answerRequest("mal", "dee-1", { interruptId: "q1", answer: "Paris" }),
          403,
          "forbidden",
          "may not write"
        ]
      ]
      for (const [what, request, status, code, message] of cases) {
        const response = yield* promise(() => handler(request))
        assert.strictEqual(response.status, status, what)
        const body = yield* errorOf(response)
        assert.strictEqual(body.error.code, code, what)
        assert.include(body.error.message, message, what)
      }
      const after = yield* sessions.getSnapshot("dee-1")
      assert.deepStrictEqual(
        after.pendingInterrupts.map((i) => i.interruptId),
        ["q1"],
        "still pending"
      )
      assert.strictEqual(after.state?.activeTurnId, "turn-1")
    }).pipe(Effect.provide(layer({ model: askTurn, builtInTools: ["ask_user"] })))
  )
})

describe("plan", () => {
  it.live("write_todos: the data-plan part carries the committed plan, reconciled by ID", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const response = yield* promise(() =>
        handler(post("eve", { id: "eve-1", messages: [userMessage("u1", "plan it")] }))
      )
      const chunks = chunksOf(yield* promise(() => readSse(response)))
      assert.strictEqual(finishOf(chunks).finishReason, "stop")
      const plans = chunks.filter((c) => c.chunk.type === "data-plan")
      // each plan part shows the plan committed when it was read (a stream that reads late shows the newer one
      // at once): the revisions only grow
      const revisions = plans.map((c) => (c.chunk as { data: UiMessages.PlanData }).data.revision)
      assert.isAtLeast(revisions.length, 1)
      assert.deepStrictEqual(
        revisions,
        [...new Set(revisions)].sort((x, y) => x - y)
      )
      assert.strictEqual(revisions.at(-1), 2)
      const message = yield* promise(() => fold(chunks.map((c) => c.chunk)))
      const parts = planOf(message)
      assert.strictEqual(parts.length, 1, "a later revision replaces the part")
      const snapshot = yield* sessions.getSnapshot("eve-1")
      assert.deepStrictEqual(parts[0]!.data, {
        revision: 2,
        status: "completed",
        tasks: [
          { content: "book", status: "completed" },
          { content: "pack", status: "completed" }
        ]
      })
      assert.strictEqual(snapshot.plan?.revision, 2)
      // the snapshot's conversation has the same part
      const seeded = UiMessages.fromSnapshot(snapshot)
      assert.deepStrictEqual(planOf(seeded.at(-1)!)[0]?.data, parts[0]!.data)
    }).pipe(
      Effect.provide(
        layer({
          model: [
            {
              toolCalls: [
                {
                  id: "p1",
                  name: "write_todos",
                  arguments: {
                    todos: [
                      { content: "book", status: "in_progress" },
                      { content: "pack", status: "pending" }
                    ]
                  }
                }
              ]
            },
            {
              toolCalls: [
                {
                  id: "p2",
                  name: "write_todos",
                  arguments: {
                    todos: [
                      { content: "book", status: "completed" },
                      { content: "pack", status: "completed" }
                    ]
                  }
                }
              ]
            },
            { text: "All done." }
          ],
          builtInTools: ["write_todos"]
        })
      )
    )
  )
})

const todos = (status: "pending" | "completed") => ({
  toolCalls: [
    {
      id: `todos-${status}`,
      name: "write_todos",
      arguments: { todos: [{ content: "book", status }] }
    }
  ]
})

describe("plan mode", () => {
  it.live("an executing turn: plan_execution_started and write_todos show the committed plan", () =>
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("hal-1")
      yield* SessionTesting.awaitSnapshot("hal-1", (s) => s.state !== null)
      assert.isTrue(yield* sessions.sendUserMessage("hal-1", { text: "plan a trip", planMode: true }))
      const planned = yield* SessionTesting.awaitTurn("hal-1", { turn: 1 })
      assert.strictEqual(planned.plan?.status, "draft")
      // the planning turn's message shows the draft
      const planning = yield* UiMessageStream.turnStream({
        sessionId: "hal-1",
        turnId: "turn-1",
        from: { _tag: "TurnStart", after: null }
      }).pipe(Stream.runCollect)
      const draft = yield* promise(() => fold(planning.map((p) => p.chunk)))
      assert.deepStrictEqual(planOf(draft)[0]?.data, {
        revision: 1,
        status: "draft",
        tasks: [{ content: "book", status: "pending" }]
      })
      assert.isTrue(yield* sessions.executePlan("hal-1", 1))
      const executed = yield* SessionTesting.awaitTurn("hal-1", { turn: 2 })
      assert.strictEqual(executed.plan?.status, "completed")
      const events = yield* sessions.events("hal-1", { from: "oldest", follow: false }).pipe(Stream.runCollect)
      assert.isTrue(events.some((e) => e.event.type === "plan_execution_started" && e.event.turnId === "turn-2"))
      const executing = yield* UiMessageStream.turnStream({
        sessionId: "hal-1",
        turnId: "turn-2",
        from: { _tag: "TurnStart", after: null }
      }).pipe(Stream.runCollect)
      const revisions = executing.flatMap((p) =>
        p.chunk.type === "data-plan" ? [(p.chunk.data as UiMessages.PlanData).revision] : []
      )
      assert.isAtLeast(revisions.length, 1)
      assert.deepStrictEqual(
        revisions,
        [...new Set(revisions)].sort((x, y) => x - y)
      )
      const message = yield* promise(() => fold(executing.map((p) => p.chunk)))
      assert.deepStrictEqual(
        planOf(message).map((p) => p.data),
        [{ revision: executed.plan!.revision, status: "completed", tasks: [{ content: "book", status: "completed" }] }]
      )
    }).pipe(
      Effect.provide(
        layer({
          model: [todos("pending"), { text: "Here is the plan." }, todos("completed"), { text: "Booked." }],
          builtInTools: ["write_todos"],
          planModeEnabled: true
        })
      )
    )
  )
})

describe("plan mode through POST {base}", () => {
  it.live(
    "planMode in the chat body starts a planning turn (a new session starts empty first); refused without plan mode",
    () =>
      Effect.gen(function* () {
        const handler = yield* handlerEffect
        const sessions = yield* AgentSessionClient.AgentSessionClient
        const first = chunksOf(
          yield* promise(async () =>
            readSse(
              await handler(post("ivy", { id: "ivy-1", messages: [userMessage("u1", "plan a trip")], planMode: true }))
            )
          )
        )
        assert.strictEqual(finishOf(first).finishReason, "stop")
        const message = yield* promise(() => fold(first.map((c) => c.chunk)))
        assert.deepStrictEqual(
          planOf(message).map((p) => p.data),
          [{ revision: 1, status: "draft", tasks: [{ content: "book", status: "pending" }] }]
        )
        const planned = yield* sessions.getSnapshot("ivy-1")
        assert.deepStrictEqual(
          planned.messages.filter((m) => m.role === "user").map((m) => [m.turnId, m.text]),
          [["turn-1", "plan a trip"]]
        )
        assert.strictEqual(planned.plan?.status, "draft")
        // a second planning message on the running session revises the plan in turn 2
        const second = chunksOf(
          yield* promise(async () =>
            readSse(
              await handler(
                post("ivy", { id: "ivy-1", messages: [userMessage("u2", "one more task")], planMode: true })
              )
            )
          )
        )
        assert.strictEqual(finishOf(second).finishReason, "stop")
        assert.strictEqual((yield* sessions.getSnapshot("ivy-1")).state?.turnCount, 2)
      }).pipe(
        Effect.provide(
          layer({
            model: [todos("pending"), { text: "Here is the plan." }, todos("pending"), { text: "Revised." }],
            builtInTools: ["write_todos"],
            planModeEnabled: true
          })
        )
      )
  )

  it.live("a plan-mode message to a session without plan mode: 400 plan_mode_refused, nothing sent", () =>
    Effect.gen(function* () {
      const handler = yield* handlerEffect
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* promise(async () =>
        readSse(await handler(post("jo", { id: "jo-1", messages: [userMessage("u1", "hi")] })))
      )
      const response = yield* promise(() =>
        handler(post("jo", { id: "jo-1", messages: [userMessage("u2", "plan it")], planMode: true }))
      )
      assert.strictEqual(response.status, 400)
      const body = (yield* promise(() => response.json())) as { error: { code: string } }
      assert.strictEqual(body.error.code, "plan_mode_refused")
      const after = yield* sessions.getSnapshot("jo-1")
      assert.deepStrictEqual(
        after.messages.filter((m) => m.role === "user").map((m) => m.text),
        ["hi"]
      )
      assert.strictEqual(after.queuedMessageCount, 0)
    }).pipe(Effect.provide(layer({ model: [{ text: "Hello." }], builtInTools: ["write_todos"] })))
  )
})

describe("effect/http", () => {
  it.live("HttpChat serves the answer route", () =>
    Effect.gen(function* () {
      const server = yield* HttpServer.HttpServer
      const address = server.address
      const port = address._tag === "UnixPathAddress" ? 0 : address.port
      const url = `http://127.0.0.1:${port}/api/chat`
      const first = yield* promise(() =>
        fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", "x-user": "fox" },
          body: JSON.stringify({ id: "fox-1", messages: [userMessage("u1", "trip")] })
        })
      )
      const chunks = chunksOf(yield* promise(() => readSse(first)))
      assert.strictEqual(finishOf(chunks).messageMetadata.turnStatus, "awaiting_answer")
      const answer = (body: unknown) =>
        promise(() =>
          fetch(`${url}/fox-1/answer`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-user": "fox" },
            body: JSON.stringify(body)
          })
        )
      const bad = yield* answer({ interruptId: "q1", answer: "Oslo" })
      assert.strictEqual(bad.status, 400)
      assert.strictEqual((yield* errorOf(bad)).error.code, "bad_answer")
      const good = yield* answer({ interruptId: "q1", answer: "Rome" })
      assert.strictEqual(good.status, 200)
      const done = yield* promise(async () => fold(chunksOf(await readSse(good)).map((c) => c.chunk)))
      assert.strictEqual(questionOf(done, "q1")?.data.answer, "Rome")
    }).pipe(
      Effect.provide(
        HttpRouter.serve(HttpChat.layer({ authorize }), { disableLogger: true }).pipe(
          Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
          Layer.provideMerge(layer({ model: askTurn, builtInTools: ["ask_user"] }))
        )
      )
    )
  )
})
