// The Mastra runner under turn controls and built-in tools, driven through the session's RPCs on both engine
// layers: cancel_turn aborts a running model call through AgentTurnContext.cancellationSignal, and the
// session's built-ins (ask_user, durable_wait) are offered to the model as client tools and routed to their
// own Steps.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { scriptedModelProbe } from "../../runner-ai-sdk/test/support.ts"
import {
  ASK_USER_ANSWER,
  ASK_USER_CALL,
  askUserRound,
  CANCEL_SECOND_ANSWER,
  cancelRunningModelCall,
  DURABLE_WAIT_ANSWER,
  DURABLE_WAIT_CALL,
  durableWaitRound
} from "../../session/test/support/controls.ts"
import { clusterEngine, embeddedEngine, withMastraSession } from "./support.ts"

for (const [engineName, engine] of [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
] as const) {
  describe(`Mastra runner on the ${engineName} engine: cancel_turn`, () => {
    it.live("aborts the running model call; the turn ends cancelled and the next message gets an answer", () =>
      withMastraSession(
        [{ text: "never seen", delay: "10 minutes" }, { text: CANCEL_SECOND_ANSWER }],
        { engine },
        (kit) => cancelRunningModelCall("c1", scriptedModelProbe(kit.model))
      )
    )
  })

  describe(`Mastra runner on the ${engineName} engine: built-in tools`, () => {
    it.live("ask_user: offered to the model, answered through answerQuestion, and the turn resumes", () =>
      withMastraSession(
        [{ toolCalls: [ASK_USER_CALL] }, { text: ASK_USER_ANSWER }],
        { engine, builtInTools: ["ask_user", "durable_wait"] },
        (kit) =>
          askUserRound("b1", scriptedModelProbe(kit.model)).pipe(
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
          )
      )
    )

    it.live("durable_wait: waits on a durable timer that SkipTimer ends; the model sees the completed wait", () =>
      withMastraSession(
        [{ toolCalls: [DURABLE_WAIT_CALL] }, { text: DURABLE_WAIT_ANSWER }],
        { engine, builtInTools: ["durable_wait"] },
        (kit) => durableWaitRound("b2", scriptedModelProbe(kit.model))
      )
    )
  })
}
