// The OpenAI Agents runner under cancel_turn, driven through the session's RPCs on the embedded engine: the
// turn's cancellationSignal reaches the SDK run as its `signal` and the scripted model call sees it abort.
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { assistantMessage, modelStreamResponder, type ScriptedModelInput } from "@openai/agents/testing"
import * as Effect from "effect/Effect"
import { allEvents, eventually } from "../../session/test/support.ts"
import { awaitTurns, embeddedEngine, stepShape, withOpenAiSession } from "./support.ts"

/**
 * A scripted model call that streams nothing until its request's abort signal fires (ten minutes at most),
 * and records the index of each call it saw abort in `aborted`.
 */
const waitForAbort = (aborted: Array<number>): ScriptedModelInput =>
  modelStreamResponder(
    (call) =>
      new Promise<Array<never>>((resolve) => {
        const signal = call.request.signal
        const done = () => {
          clearTimeout(timer)
          aborted.push(call.index)
          resolve([])
        }
        const timer = setTimeout(() => {
          signal?.removeEventListener("abort", done)
          resolve([])
        }, 600_000)
        if (signal?.aborted === true) done()
        else signal?.addEventListener("abort", done, { once: true })
      })
  )

describe("OpenAI Agents runner: cancel_turn", () => {
  it.live("aborts the running model call; the turn ends cancelled and the next message gets an answer", () => {
    const aborted: Array<number> = []
    return withOpenAiSession(embeddedEngine, [waitForAbort(aborted), [assistantMessage("Second answer.")]], (kit) =>
      Effect.gen(function* () {
        const client = yield* AgentSessionClient
        yield* client.startSession("c1", { initialMessage: "think hard" })
        yield* eventually(
          Effect.sync(() => kit.model.calls.length),
          (n) => n === 1,
          "the model call"
        )
        assert.deepStrictEqual(aborted, [])
        // the scripted call waits ten minutes: a turn that ends at all shows the call was given up
        assert.isTrue(yield* client.cancelTurn("c1"))
        const done = yield* awaitTurns("c1", 1)
        yield* eventually(
          Effect.sync(() => aborted.length),
          (n) => n === 1,
          "the scripted model to see the abort"
        )
        assert.deepStrictEqual(aborted, [0])
        assert.isTrue(kit.model.calls[0]!.request.signal?.aborted)
        assert.strictEqual(done.state?.lastTurnError, null)
        assert.deepStrictEqual(
          done.messages.map((m) => [m.role, m.text]),
          [["user", "think hard"]]
        )
        const cancelled = (yield* allEvents("c1")).filter((e) => e.event.type === "turn_cancelled")
        assert.strictEqual(cancelled.length, 1)
        assert.strictEqual(cancelled[0]!.event.turnId, "turn-1")
        assert.deepStrictEqual(yield* stepShape("c1"), [
          "StartAgentSession",
          "RunModel",
          "FinishTurnCancellation",
          "ApplyTurnControl",
          "AwaitUserMessage"
        ])
        // the session stays open
        assert.isTrue(yield* client.sendUserMessage("c1", "again"))
        const next = yield* awaitTurns("c1", 2)
        assert.strictEqual(next.messages.at(-1)?.text, "Second answer.")
        assert.strictEqual(kit.model.calls.length, 2)
        assert.deepStrictEqual(aborted, [0], "the second call ran to its end")
      })
    )
  })
})
