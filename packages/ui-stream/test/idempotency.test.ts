// The POST routes with an `Idempotency-Key` header: a retry after a lost response sends, answers or stops nothing
// again, and streams the turn the first request started (the active turn, else the last one).
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import type { DynamicToolUIPart, UIMessage } from "ai"
import * as Effect from "effect/Effect"
import { ChatHandler } from "../src/index.ts"
import { authorize, chunksOf, fold, layer, readSse, runs, userMessage, writeAndRead } from "./support.ts"

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)
const base = "http://test.local/api/chat"

const postKeyed = (key: string, body: unknown, path = "") =>
  new Request(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-user": "kim", "idempotency-key": key },
    body: JSON.stringify(body)
  })

/** The assistant message a UI stream response folds into. */
const messageOf = (response: Response) =>
  promise(async () => fold(chunksOf(await readSse(response)).map((c) => c.chunk)))

const approve = (message: UIMessage, approvalId: string): UIMessage => ({
  ...message,
  parts: message.parts.map((p) =>
    p.type === "dynamic-tool" && p.state === "approval-requested" && p.approval.id === approvalId
      ? ({ ...p, state: "approval-responded", approval: { id: approvalId, approved: true } } as DynamicToolUIPart)
      : p
  )
})

describe("Idempotency-Key on the POST routes", () => {
  it.live("retried sends, approvals and stops change nothing again and stream the same turn", () =>
    Effect.gen(function* () {
      const handler = yield* ChatHandler.make({ authorize })
      const sessions = yield* AgentSessionClient.AgentSessionClient
      const start = { id: "kim-1", messages: [userMessage("u1", "send it")] }

      // the first message starts the session; its retry streams turn 1 again and starts nothing
      const first = yield* messageOf(yield* promise(() => handler(postKeyed("key-1", start))))
      assert.strictEqual(first.id, "turn-1")
      const again = yield* promise(() => handler(postKeyed("key-1", start)))
      assert.strictEqual(again.status, 200)
      assert.strictEqual((yield* messageOf(again)).id, "turn-1")

      // the approval, then its retry after the turn ended: the write ran once
      const answer = { id: "kim-1", messages: [userMessage("u1", "send it"), approve(first, "w-kim")] }
      const approved = yield* promise(() => handler(postKeyed("key-2", answer)))
      assert.strictEqual(approved.status, 200)
      yield* promise(() => readSse(approved))
      yield* sessions.awaitTurn("kim-1", { turn: 1 })
      const approvedAgain = yield* promise(() => handler(postKeyed("key-2", answer)))
      assert.strictEqual(approvedAgain.status, 200, "a replay, not 409 for an interrupt no longer pending")
      assert.strictEqual((yield* messageOf(approvedAgain)).id, "turn-1")
      assert.strictEqual(runs.get("send_email:kim"), 1)

      // a second message and its retry: one more turn, not two
      const next = { id: "kim-1", messages: [userMessage("u2", "hello")] }
      assert.strictEqual((yield* messageOf(yield* promise(() => handler(postKeyed("key-3", next))))).id, "turn-2")
      yield* sessions.awaitTurn("kim-1", { turn: 2 })
      assert.strictEqual((yield* messageOf(yield* promise(() => handler(postKeyed("key-3", next))))).id, "turn-2")
      const settled = yield* sessions.awaitTurn("kim-1", { turn: 2 })
      assert.deepStrictEqual(
        settled.messages.filter((m) => m.role === "user").map((m) => m.text),
        ["send it", "hello"]
      )
      assert.strictEqual(settled.state?.turnCount, 2)
      assert.strictEqual(settled.queuedMessageCount, 0)

      // stop: the retry answers the first call's result
      const stop = () => handler(postKeyed("key-4", {}, "/kim-1/stop"))
      const stopped = yield* promise(async () => (await stop()).json())
      assert.deepStrictEqual(stopped, { cancelled: false })
      assert.deepStrictEqual(yield* promise(async () => (await stop()).json()), { cancelled: false })

      // the same key for another message is refused, and a malformed key is a 400
      const reused = yield* promise(() =>
        handler(postKeyed("key-3", { id: "kim-1", messages: [userMessage("u3", "other")] }))
      )
      assert.strictEqual(reused.status, 422)
      assert.strictEqual(((yield* promise(() => reused.json())) as any).error.code, "idempotency_key_reused")
      const stopReused = yield* promise(() => handler(postKeyed("key-3", {}, "/kim-1/stop")))
      assert.strictEqual(stopReused.status, 422, "another route under a used key")
      const bad = yield* promise(() => handler(postKeyed("k".repeat(151), next)))
      assert.strictEqual(bad.status, 400)
      assert.strictEqual(((yield* promise(() => bad.json())) as any).error.code, "bad_idempotency_key")
    }).pipe(Effect.provide(layer({ model: [...writeAndRead("kim"), { text: "Hi." }] })))
  )
})
