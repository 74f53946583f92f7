// The OpenAI Agents runner under turn controls and built-in tools, driven through the session's RPCs on the
// embedded and cluster engines: the turn's cancellationSignal reaches the SDK run as its `signal` and the scripted model
// call sees it abort; the session's built-ins (ask_user, durable_wait) are offered as gated function tools
// and routed to their own Steps.
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { type Agent, RunContext } from "@openai/agents"
import { assistantMessage, functionCall, modelStreamResponder, type ScriptedModelInput } from "@openai/agents/testing"
import * as Effect from "effect/Effect"
import {
  ASK_USER_ANSWER,
  ASK_USER_CALL,
  askUserRound,
  CANCEL_SECOND_ANSWER,
  cancelRunningModelCall,
  DURABLE_WAIT_ANSWER,
  DURABLE_WAIT_CALL,
  durableWaitRound,
  type ModelProbe
} from "../../session/test/support/controls.ts"
import {
  awaitTurns,
  clusterEngine,
  embeddedEngine,
  type Kit,
  prompt,
  testAgent,
  toolResultsIn,
  withOpenAiSession
} from "./support.ts"

/** The tool names the model call at `index` was offered. */
const offeredTools = (kit: Kit, index: number) => (kit.model.calls[index]?.request.tools ?? []).map((t) => t.name)

/** The SDK's scripted model as the shared control checks read it; `aborted` is filled by {@link waitForAbort}. */
const probe = (kit: Kit, aborted: ReadonlyArray<number> = []): ModelProbe => ({
  calls: () => kit.model.calls.length,
  aborted: () => aborted,
  offeredTools: (index) => offeredTools(kit, index),
  toolResults: (index) => toolResultsIn(prompt(kit, index))
})

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

for (const [engineName, engine] of [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
] as const) {
  describe(`OpenAI Agents runner on the ${engineName} engine: cancel_turn`, () => {
    it.live("aborts the running model call; the turn ends cancelled and the next message gets an answer", () => {
      const aborted: Array<number> = []
      return withOpenAiSession(engine, [waitForAbort(aborted), [assistantMessage(CANCEL_SECOND_ANSWER)]], (kit) =>
        Effect.gen(function* () {
          yield* cancelRunningModelCall("c1", probe(kit, aborted))
          assert.isTrue(kit.model.calls[0]!.request.signal?.aborted)
        })
      )
    })
  })

  describe(`OpenAI Agents runner on the ${engineName} engine: built-in tools`, () => {
    it.live("ask_user: offered to the model, answered through answerQuestion, and the turn resumes", () =>
      withOpenAiSession(
        engine,
        [
          [functionCall(ASK_USER_CALL.name, ASK_USER_CALL.arguments, { callId: ASK_USER_CALL.id })],
          [assistantMessage(ASK_USER_ANSWER)]
        ],
        (kit) =>
          askUserRound("b1", probe(kit)).pipe(
            Effect.map((offered) =>
              assert.deepStrictEqual(offered.toSorted(), [
                "ask_user",
                "durable_wait",
                "flaky_write",
                "get_weather",
                "save_note",
                "send_email"
              ])
            )
          ),
        { builtInTools: ["ask_user", "durable_wait"] }
      )
    )

    it.live("durable_wait: waits on a durable timer that SkipTimer ends; the model sees the completed wait", () =>
      withOpenAiSession(
        engine,
        [
          [functionCall(DURABLE_WAIT_CALL.name, DURABLE_WAIT_CALL.arguments, { callId: DURABLE_WAIT_CALL.id })],
          [assistantMessage(DURABLE_WAIT_ANSWER)]
        ],
        (kit) => durableWaitRound("b2", probe(kit)),
        { builtInTools: ["durable_wait"] }
      )
    )

    it.live("a session without built-ins offers none; outside the runner's runs the built-ins stay disabled", () => {
      let agent: Agent<any, any> | undefined
      return withOpenAiSession(
        engine,
        [[assistantMessage("Hi.")]],
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("b3", { initialMessage: "hello" })
            yield* awaitTurns("b3", 1)
            const own = ["flaky_write", "get_weather", "save_note", "send_email"]
            assert.deepStrictEqual(offeredTools(kit, 0).toSorted(), own)
            // the runner added the built-ins to the agent, enabled only in its own runs
            assert.includeMembers(
              agent!.tools.map((t) => t.name),
              ["ask_user", "durable_wait", "write_todos"]
            )
            const outside = yield* Effect.promise(() => agent!.getAllTools(new RunContext({})))
            assert.deepStrictEqual(outside.map((t) => t.name).toSorted(), own)
          }),
        {
          agent: (kit) => {
            agent = testAgent(kit)
            return agent
          }
        }
      )
    })
  })
}
