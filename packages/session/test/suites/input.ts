import { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, ModelClient, Persistence, ToolSource, Wire } from "../../src/index.ts"
import {
  allEvents,
  awaitSnapshot,
  awaitTurns,
  bump,
  type EngineFactory,
  holdModel,
  type Kit,
  makeGate,
  sessionOn,
  stepShape,
  toolResults
} from "../support.ts"

const reader = (kit: Kit) =>
  ToolSource.tool({
    name: "reader",
    description: "Reads.",
    effect: "read",
    handler: () =>
      Effect.sync(() => {
        bump(kit, "reader")
        return "read ok"
      })
  })

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const inputSuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine)

  describe("bad tool calls from the model", () => {
    for (const [what, ids] of [
      ["an empty tool call ID", ["ok", ""]],
      ["a tool call ID with a slash", ["ok", "a/b"]],
      ["a tool call ID used twice in one response", ["dup", "dup"]]
    ] as const) {
      it.live(`${what} fails the turn without running anything; the session keeps working`, () =>
        withSession(
          {
            script: [
              { toolCalls: ids.map((id) => ({ id, name: "reader", arguments: {} })), usage: { inputTokens: 5 } },
              { text: "Fine." }
            ],
            tools: (kit) => [reader(kit)]
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("s-id", { initialMessage: "go" })
              const failed = yield* awaitTurns("s-id", 1)
              assert.strictEqual(kit.count("reader"), 0)
              assert.include(failed.state?.lastTurnError ?? "", "invalid tool call: ")
              assert.include(failed.state?.lastTurnError ?? "", "tool call ID")
              assert.strictEqual(failed.usage.inputTokens, 5, "the model call's usage is recorded")
              assert.deepStrictEqual(
                failed.messages.map((m) => m.text),
                ["go"],
                "the user message is kept"
              )
              assert.deepStrictEqual(yield* stepShape("s-id"), ["StartAgentSession", "RunModel", "AwaitUserMessage"])
              const types = (yield* allEvents("s-id")).map((e) => e.event.type)
              assert.deepStrictEqual(types, ["turn_started", "usage_recorded", "turn_failed"])
              assert.isTrue(yield* client.sendUserMessage("s-id", "again"))
              const next = yield* awaitTurns("s-id", 2)
              assert.strictEqual(next.state?.lastTurnError, null)
            })
        )
      )
    }

    it.live("a tool call ID reused by a later model call of the same turn fails the turn with the note", () =>
      withSession(
        {
          script: [
            { toolCalls: [{ id: "c1", name: "reader", arguments: {} }] },
            { toolCalls: [{ id: "c1", name: "reader", arguments: {} }] }
          ],
          tools: (kit) => [reader(kit)]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-reuse", { initialMessage: "go" })
            const failed = yield* awaitTurns("s-reuse", 1)
            assert.strictEqual(kit.count("reader"), 1)
            assert.include(failed.state?.lastTurnError ?? "", "used more than once in this turn")
            const note = failed.messages[failed.messages.length - 1]!
            assert.isTrue(note.text?.startsWith(Wire.TURN_FAILURE_NOTE_HEADER))
            assert.include(note.text ?? "", "- reader {} -> succeeded: read ok")
          })
      )
    )

    it.live("tool arguments that are not a strict JSON object are recorded failed without running the tool", () =>
      withSession(
        {
          script: [
            {
              toolCalls: [
                { id: "a1", name: "reader", arguments: "[1,2]" },
                { id: "a2", name: "reader", arguments: '{"x": NaN}' },
                { id: "a3", name: "reader", arguments: "not json" },
                { id: "a4", name: "reader", arguments: '"text"' },
                { id: "a5", name: "reader", arguments: '{"x": 1}' }
              ]
            },
            { text: "Done." }
          ],
          tools: (kit) => [reader(kit)]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-args", { initialMessage: "go" })
            yield* awaitTurns("s-args", 1)
            assert.strictEqual(kit.count("reader"), 1, "only the valid call ran")
            const expected = `${Wire.TOOL_CALL_FAILED_PREFIX}invalid reader arguments: ${Wire.ARGUMENTS_NOT_JSON_OBJECT_REASON}`
            assert.deepStrictEqual(toolResults(kit.requests[1]!), {
              a1: expected,
              a2: expected,
              a3: expected,
              a4: expected,
              a5: "read ok"
            })
            assert.deepStrictEqual(yield* stepShape("s-args"), [
              "StartAgentSession",
              "RunModel",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "AwaitUserMessage"
            ])
            const finished = (yield* allEvents("s-args")).filter((e) => e.event.type === "tool_call_finished")
            assert.strictEqual(finished.length, 5, "every call publishes exactly one result")
          })
      )
    )
  })

  describe("session settings", () => {
    it.live("invalid session settings at start force-fail the session with the spec's reason", () =>
      withSession({ script: [] }, () =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          const engine = yield* Client.Client
          yield* client.startSession("s-array", { sessionSettings: [1, 2] as never })
          const array = yield* engine.waitForFlow("s-array")
          assert.strictEqual(array.status, "failed")
          assert.isTrue(array.reason?.startsWith(Wire.INVALID_START_SESSION_SETTINGS_REASON))
          // the client refuses settings over the limit itself; the session's own check is reached past it
          const blob = { blob: "z".repeat(Wire.MAX_SESSION_SETTINGS_BYTES + 2048) }
          const refused = yield* Effect.flip(client.startSession("s-huge", { sessionSettings: blob }))
          assert.strictEqual(refused._tag, "SessionSettingsTooLarge")
          yield* engine.startFlow(AgentSessionClient.clientFlow(client.flowType), "s-huge", {
            initialMessage: null,
            sessionSettings: blob
          })
          const huge = yield* engine.waitForFlow("s-huge")
          assert.strictEqual(huge.status, "failed")
          assert.isTrue(huge.reason?.startsWith(Wire.INVALID_START_SESSION_SETTINGS_REASON))
          assert.include(huge.reason ?? "", "over the limit")
          // an empty object means none
          yield* client.startSession("s-empty", { sessionSettings: {} })
          const empty = yield* awaitSnapshot("s-empty", (s) => s.state !== null, "the start")
          assert.strictEqual(empty.sessionSettings, null)
        })
      )
    )

    it.live("settings pick the model at turn start; update_session_settings applies to the next turn only", () => {
      // model b's first call answers only after the update during the turn
      const firstCallB = makeGate()
      const modelB = holdModel(ModelClient.scripted([{ text: "from b" }, { text: "from b again" }]), { 0: firstCallB })
      const seen: Array<unknown> = []
      return withSession(
        {
          script: [{ text: "from default" }],
          agent: {
            resolveModel: (settings) => {
              seen.push(settings)
              return settings.model === "b" ? modelB : undefined
            },
            instructions: (c) => `model ${String(c.sessionSettings.model ?? "default")}`
          }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-set", { initialMessage: "hi", sessionSettings: { model: "b" } })
            yield* awaitSnapshot("s-set", (s) => s.state?.status === "running_model", "the first model call")
            // an update during the turn: the running turn keeps its settings
            assert.isTrue(yield* client.updateSessionSettings("s-set", {}))
            yield* firstCallB.open
            const first = yield* awaitTurns("s-set", 1)
            assert.strictEqual(first.messages[1]!.text, "from b")
            assert.strictEqual(first.sessionSettings, null, "{} cleared the settings")
            assert.isTrue(yield* client.sendUserMessage("s-set", "again"))
            const second = yield* awaitTurns("s-set", 2)
            assert.strictEqual(second.messages[3]!.text, "from default")
            assert.deepStrictEqual(seen, [{ model: "b" }, {}])
            assert.deepStrictEqual(
              kit.requests.map((r: ModelClient.ModelRequest) => r.instructions),
              ["model default"]
            )
            // refused updates
            assert.isFalse(yield* client.updateSessionSettings("s-set", null))
            const blob = { blob: "z".repeat(Wire.MAX_SESSION_SETTINGS_BYTES + 2048) }
            const tooLarge = yield* Effect.flip(client.updateSessionSettings("s-set", blob))
            assert.strictEqual(tooLarge._tag, "SessionSettingsTooLarge")
            // past the client's check, the session refuses them too
            const flow = AgentSessionClient.clientFlow(client.flowType)
            assert.isFalse(
              yield* (yield* Client.Client).invokeRpc<{ readonly sessionSettings: unknown }, boolean>(
                flow,
                flow.rpcs_.update_session_settings as never,
                "s-set",
                { sessionSettings: blob }
              )
            )
            assert.isTrue(yield* client.updateSessionSettings("s-set", { model: "b", temperature: 0.2 }))
            const updated = yield* client.getSnapshot("s-set")
            assert.deepStrictEqual(updated.sessionSettings, { model: "b", temperature: 0.2 })
            const engine = yield* Client.Client
            const turnSettings = yield* engine.getAttribute("s-set", Persistence.TurnSessionSettings)
            assert.deepStrictEqual(
              turnSettings._tag === "Some" ? turnSettings.value : null,
              { turnId: "turn-2", sessionSettings: {} },
              "the last turn kept the settings it started with"
            )
          })
      )
    })
  })
}
