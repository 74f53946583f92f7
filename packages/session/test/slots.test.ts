// Task slots and the RPC reserve with sessions, on both engine layers: a runner with 2 slots (one is the RPC
// reserve) and 5 sessions whose model call is slow (it waits for a gate the test opens). Snapshots answer while
// the model call holds the only Step slot, and a single-attempt write (a charge) never runs twice.
import { Engine } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AgentSessionClient, AgentSessionFlow, ModelClient, Stepwise, ToolSource } from "../src/index.ts"
import { clusterEngine, type EngineFactory, embeddedEngine, eventually } from "./support.ts"

const usage = { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 }

const scenario = (engine: EngineFactory) => {
  let open = false
  const gate = Effect.promise(
    () =>
      new Promise<void>((resolve) => {
        const check = () => (open ? resolve() : setTimeout(check, 20))
        check()
      })
  )
  let modelCalls = 0
  const charges = new Map<string, number>()
  // a slow model: the first call of a turn waits for the gate, then asks for a charge; after the tool
  // result it answers
  const model = ModelClient.layer((request) =>
    Effect.gen(function* () {
      modelCalls++
      const last = request.messages[request.messages.length - 1]
      if (last?.role === "tool") return { text: "charged", reasoning: null, toolCalls: [], usage }
      const text = last?.role === "user" ? last.text : ""
      yield* gate
      return {
        text: null,
        reasoning: null,
        toolCalls: [{ toolCallId: `charge-${text}`, toolName: "charge", arguments: JSON.stringify({ who: text }) }],
        usage
      }
    })
  )
  const tools = ToolSource.layer([
    ToolSource.tool({
      name: "charge",
      description: "Charges a customer (a non-idempotent write).",
      effect: "non_idempotent_write",
      handler: (args) =>
        Effect.sync(() => {
          const who = String((args as { who?: unknown }).who)
          charges.set(who, (charges.get(who) ?? 0) + 1)
          return `charged ${who}`
        })
    })
  ])
  const flow = AgentSessionFlow.make({
    flowType: "SlotAgent",
    retryInitialInterval: "100 millis",
    toolPolicies: { charge: { effect: "non_idempotent_write", requiresApproval: false } }
  })
  const worker = AgentSessionFlow.layerWorker(flow).pipe(
    Layer.provide(Stepwise.layer({ name: "slot-agent", instructions: "Test agent." })),
    Layer.provide(Layer.mergeAll(model, tools))
  )
  const ids = ["a", "b", "c", "d", "e"]
  return Effect.gen(function* () {
    const sessions = yield* AgentSessionClient.AgentSessionClient
    const runner = yield* Engine.RunnerState
    for (const id of ids) yield* sessions.startSession(`s-${id}`, { initialMessage: id })
    yield* eventually(
      Effect.sync(() => modelCalls),
      (n) => n >= 1,
      "a model call holding the Step slot"
    )
    // the model call holds the only Step slot; every snapshot still answers through the reserve
    for (const id of ids) {
      // (a session whose StartAgentSession still waits for the slot answers with no state yet)
      const snapshot = yield* sessions.getSnapshot(`s-${id}`)
      assert.isArray(snapshot.messages)
    }
    assert.isFalse(open, "the snapshots answered while the model call held its slot")
    assert.strictEqual(modelCalls, 1, "only one model call runs at a time with one Step slot")
    assert.isAbove(runner.slots.reserveDeclines, 0)
    open = true
    for (const id of ids) {
      const done = yield* sessions.awaitTurn(`s-${id}`, { turn: 1, timeout: "120 seconds" })
      assert.strictEqual(done.state?.lastTurnError, null)
    }
    for (const id of ids) assert.isAtMost(charges.get(id) ?? 0, 1, `the charge of ${id} ran at most once`)
    assert.isAtLeast(
      [...charges.values()].reduce((a, b) => a + b, 0),
      1,
      "charges ran once the gate opened"
    )
    assert.strictEqual(runner.slots.inUse, 0)
  }).pipe(
    Effect.provide(
      Layer.mergeAll(worker, AgentSessionClient.layer(flow.type)).pipe(
        Layer.provideMerge(engine({ maxConcurrentTasks: 2 }))
      )
    )
  )
}

for (const [name, engine] of [
  ["embedded", embeddedEngine],
  ["cluster", clusterEngine]
] as const) {
  describe(`${name} engine: 2 task slots, 5 sessions calling a slow model`, () => {
    it.live(
      "snapshots answer while model calls fill the runner; a single-attempt write runs at most once",
      () => scenario(engine),
      240_000
    )
  })
}
