import type { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, type Stepwise, Wire } from "../../src/index.ts"
import {
  awaitTurns,
  type EngineFactory,
  type Kit,
  type Setup,
  weatherTool,
  withSession as withSessionOn
} from "../support.ts"

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const continuationSuite = (engine: EngineFactory) => {
  const withSession = <A, E>(
    setup: Omit<Setup, "engine">,
    body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>
  ) => withSessionOn({ ...setup, engine }, body)

  const roles = (request: Kit["requests"][number]) =>
    request.messages.map((m) => (m.role === "tool" ? `tool:${m.output}` : `${m.role}:${m.text ?? ""}`))

  describe("decideTurnContinuation", () => {
    it.live("after an answer, a continuation stores the answer and its message and calls the model again", () => {
      const seen: Array<Stepwise.TurnContinuationContext> = []
      return withSession(
        {
          script: [{ text: "Draft." }, { text: "Final." }],
          agent: {
            decideTurnContinuation: (context) => {
              seen.push(context)
              return context.answer === "Draft." ? { message: "Check your draft." } : undefined
            }
          }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-cont", { initialMessage: "write" })
            const done = yield* awaitTurns("s-cont", 1)
            assert.deepStrictEqual(
              done.messages.map((m) => [m.turnId, m.role, m.text]),
              [
                ["turn-1", "user", "write"],
                ["turn-1", "assistant", "Draft."],
                ["turn-1", "user", "Check your draft."],
                ["turn-1", "assistant", "Final."]
              ]
            )
            // the second request ends with the continuation's user message
            assert.deepStrictEqual(roles(kit.requests[1]!).slice(-3), [
              "user:write",
              "assistant:Draft.",
              "user:Check your draft."
            ])
            assert.deepStrictEqual(
              seen.map((c) => [c.after, c.answer, c.consecutiveContinuations]),
              [
                ["answer", "Draft.", 0],
                ["answer", "Final.", 1]
              ]
            )
            assert.strictEqual(done.usage?.modelCalls, 2)
            assert.strictEqual(done.state?.lastTurnError, null)
            assert.strictEqual(done.state?.status, "waiting_for_user_message")
          })
      )
    })

    it.live("after tool calls, a continuation's message follows the tool results in the same model call", () =>
      withSession(
        {
          script: [{ toolCalls: [{ id: "r1", name: "get_weather", arguments: {} }] }, { text: "Sunny today." }],
          tools: (kit) => [weatherTool(kit)],
          agent: {
            decideTurnContinuation: (context) =>
              context.after === "tool_calls"
                ? Effect.succeed({ message: `Summarize ${context.toolCalls.length} result.` })
                : undefined
          }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-tools", { initialMessage: "weather?" })
            const done = yield* awaitTurns("s-tools", 1)
            assert.strictEqual(kit.requests.length, 2)
            assert.deepStrictEqual(roles(kit.requests[1]!).slice(-3), [
              "assistant:",
              "tool:sunny",
              "user:Summarize 1 result."
            ])
            assert.deepStrictEqual(
              done.messages.map((m) => [m.role, m.text ?? m.toolOutput]),
              [
                ["user", "weather?"],
                ["assistant", null],
                ["tool", "sunny"],
                ["user", "Summarize 1 result."],
                ["assistant", "Sunny today."]
              ]
            )
          })
      )
    )

    it.live('"end" after tool calls ends the turn with the tool results, no model call and zero usage', () =>
      withSession(
        {
          script: [{ toolCalls: [{ id: "r1", name: "get_weather", arguments: {} }] }, { text: "unused" }],
          tools: (kit) => [weatherTool(kit)],
          agent: { decideTurnContinuation: (context) => (context.after === "tool_calls" ? "end" : undefined) }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-end", { initialMessage: "weather?" })
            const done = yield* awaitTurns("s-end", 1)
            assert.strictEqual(kit.requests.length, 1, "no second model call")
            assert.strictEqual(done.usage?.modelCalls, 1)
            assert.strictEqual(done.state?.lastTurnError, null)
            assert.deepStrictEqual(
              done.messages.map((m) => [m.role, m.text ?? m.toolOutput]),
              [
                ["user", "weather?"],
                ["assistant", null],
                ["tool", "sunny"]
              ]
            )
          })
      )
    )

    it.live(`more than ${Wire.MAX_CONSECUTIVE_CONTINUATIONS} continuations in a row fail the turn`, () =>
      withSession(
        {
          script: Array.from({ length: Wire.MAX_CONSECUTIVE_CONTINUATIONS + 2 }, (_, i) => ({
            text: `answer ${i + 1}`
          })),
          agent: { decideTurnContinuation: () => ({ message: "again" }) }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-loop", { initialMessage: "go" })
            const done = yield* awaitTurns("s-loop", 1)
            assert.strictEqual(kit.requests.length, Wire.MAX_CONSECUTIVE_CONTINUATIONS + 1)
            assert.strictEqual(done.state?.lastTurnError, Wire.TOO_MANY_CONTINUATIONS_ERROR)
            const answers = done.messages.filter((m) => m.role === "assistant").map((m) => m.text)
            assert.strictEqual(answers.length, Wire.MAX_CONSECUTIVE_CONTINUATIONS + 1, "the last answer is kept")
            assert.strictEqual(
              done.messages.filter((m) => m.role === "user" && m.text === "again").length,
              Wire.MAX_CONSECUTIVE_CONTINUATIONS
            )
          })
      )
    )
  })
}
