// What the AI SDK runner adds to the conformance suite's controls, on both engine layers: the turn's
// cancellationSignal alone aborts the SDK call, and ask_user reaches the SDK with the built-in's own JSON
// Schema.
import { BuiltInTools, Errors, EventWriter, Heartbeat, Policy, type Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { ASK_USER_ANSWER, ASK_USER_CALL, askUserRound } from "../../session/test/support/controls.ts"
import { eventually } from "../../session/test/support.ts"
import { AiSdkRunner, ScriptedModel } from "../src/index.ts"
import { clusterEngine, embeddedEngine, scriptedModelProbe, withAiSdkSession } from "./support.ts"

for (const [engineName, engine] of [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
] as const) {
  describe(`AI SDK runner on the ${engineName} engine: cancel_turn`, () => {
    it.live("the turn's cancellationSignal alone aborts the SDK call, with no fiber interruption", () =>
      Effect.gen(function* () {
        const model = ScriptedModel.make([{ text: "never seen", delay: "10 minutes" }])
        const runner = AiSdkRunner.make({ name: "signal", model })
        const controller = new AbortController()
        const user = {
          ...runner.buildUserMessage("hi"),
          sequence: 1,
          turnId: "t1",
          createdAt: new Date(0).toISOString()
        }
        const step = runner
          .runModelStep({
            flowId: "s1",
            turnId: "t1",
            stepExecutionId: "RunModel-1",
            attempt: 1,
            messages: [user as Wire.AgentMessage],
            frameworkRunState: null,
            toolCalls: [],
            sessionSettings: {},
            interactionMode: "chat",
            toolPolicies: {},
            defaultToolEffect: "unclassified",
            resolveToolPolicy: (toolName, frameworkEffect) => Policy.resolveToolPolicy(toolName, { frameworkEffect }),
            cancellationSignal: controller.signal
          })
          .pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))
        const fiber = yield* Effect.forkChild(Effect.flip(step))
        yield* eventually(
          Effect.sync(() => model.doStreamCalls.length),
          (n) => n === 1,
          "the model call"
        )
        controller.abort(new Error("the turn was cancelled"))
        const error = yield* Fiber.join(fiber)
        assert.instanceOf(error, Errors.ModelCallError)
        assert.deepStrictEqual(model.abortedCalls, [0])
      })
    )
  })

  describe(`AI SDK runner on the ${engineName} engine: built-in tools`, () => {
    it.live("ask_user: offered to the model, answered through answerQuestion, and the turn resumes", () =>
      withAiSdkSession(
        [{ toolCalls: [ASK_USER_CALL] }, { text: ASK_USER_ANSWER }],
        (kit) =>
          Effect.gen(function* () {
            const offered = yield* askUserRound("b1", scriptedModelProbe(kit.model))
            assert.deepStrictEqual(offered.toSorted(), [
              "ask_user",
              "durable_wait",
              "flaky_write",
              "get_weather",
              "save_note",
              "send_email"
            ])
            const askUser = kit.model.doStreamCalls[0]!.tools!.find((t) => t.name === "ask_user") as {
              readonly inputSchema?: unknown
            }
            // the SDK tool carries the built-in's own JSON Schema
            const definition = BuiltInTools.definitions.find((d) => d.name === "ask_user")!
            assert.deepStrictEqual(askUser.inputSchema, definition.parameters)
            assert.deepStrictEqual(definition.parameters.required, ["question"])
          }),
        { builtInTools: ["ask_user", "durable_wait"], engine }
      )
    )
  })
}
