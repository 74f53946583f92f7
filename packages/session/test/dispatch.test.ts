// Slots and sessions: the agent worker's default task limit (more than the CPU count, unless the application
// sets one), and the session's bookkeeping Steps in the control slots, so cancel_turn's FinishTurnCancellation
// records a waiting call while a tool call holds the only task slot.
import { mkdtempSync, rmSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { AgentSessionClient, AgentSessionFlow, ModelClient, Stepwise, ToolSource } from "../src/index.ts"
import { clusterEngine, type EngineFactory, embeddedEngine, makeGate } from "./support.ts"

/** Waits (polling) until `predicate` holds, for up to 90 s (the machine may be busy). */
const eventually = <A, E, R>(effect: Effect.Effect<A, E, R>, predicate: (a: A) => boolean, what: string) =>
  effect.pipe(
    Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: predicate }),
    Effect.timeoutOrElse({
      duration: "90 seconds",
      orElse: () => Effect.die(new Error(`timed out waiting for ${what}`))
    })
  )

const usage = { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 }

/** An embedded engine on a fresh file with the engine's own task default (no `maxConcurrentTasks`). */
const engineWithDefaults = (options: Partial<Engine.CommonOptions>) =>
  Layer.unwrap(
    Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "das-dispatch-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    ).pipe(Effect.map((dir) => Engine.layerEmbedded({ filename: join(dir, "engine.db"), ...options })))
  )

const agentWorker = (flow: AgentSessionFlow.AgentSessionFlowDef) =>
  AgentSessionFlow.layerWorker(flow).pipe(
    Layer.provide(Stepwise.layer({ name: "dispatch-agent", instructions: "Test agent." })),
    Layer.provide(Layer.mergeAll(ModelClient.layerScripted([{ text: "hi" }]), ToolSource.layer([])))
  )

describe("the agent worker's task slots", () => {
  it.live(
    "the agent worker raises the engine's default task limit (the CPU count) for Steps that wait on the network",
    () =>
      Effect.gen(function* () {
        const runner = yield* Engine.RunnerState
        assert.isAbove(AgentSessionFlow.DEFAULT_MAX_CONCURRENT_TASKS, availableParallelism())
        assert.strictEqual(runner.slots.total, AgentSessionFlow.DEFAULT_MAX_CONCURRENT_TASKS)
        assert.strictEqual(runner.slots.reserve, 1)
        // the bookkeeping Steps of many sessions at once: control slots beyond the engine's default
        assert.isAbove(AgentSessionFlow.DEFAULT_MAX_CONTROL_TASKS, Math.max(2, availableParallelism()))
        assert.strictEqual(runner.slots.controlTotal, AgentSessionFlow.DEFAULT_MAX_CONTROL_TASKS)
      }).pipe(
        Effect.provide(
          agentWorker(AgentSessionFlow.make({ flowType: "DefaultSlots" })).pipe(
            Layer.provideMerge(engineWithDefaults({}))
          )
        )
      )
  )

  it.live("a task and a control limit the application sets win over the agent worker's defaults", () =>
    Effect.gen(function* () {
      const runner = yield* Engine.RunnerState
      assert.strictEqual(runner.slots.total, 3)
      assert.strictEqual(runner.slots.controlTotal, 5)
    }).pipe(
      Effect.provide(
        agentWorker(AgentSessionFlow.make({ flowType: "SetSlots" })).pipe(
          Layer.provideMerge(engineWithDefaults({ maxConcurrentTasks: 3, maxControlTasks: 5 }))
        )
      )
    )
  )
})

const cancelWhileToolHoldsTheSlot = (engine: EngineFactory) => {
  const gate = makeGate()
  let slowStarted = false
  let slowRuns = 0
  const model = ModelClient.layer(() =>
    Effect.succeed({
      text: null,
      reasoning: null,
      toolCalls: [
        { toolCallId: "slow-1", toolName: "slow", arguments: "{}" },
        { toolCallId: "deploy-1", toolName: "deploy", arguments: "{}" }
      ],
      usage
    })
  )
  const tools = ToolSource.layer([
    ToolSource.tool({
      name: "slow",
      description: "A slow read that holds its task slot until the test opens the gate.",
      effect: "read",
      handler: () =>
        Effect.gen(function* () {
          slowRuns++
          slowStarted = true
          yield* gate.wait
          return "slow done"
        })
    }),
    ToolSource.tool({
      name: "deploy",
      description: "Deploys; needs approval.",
      effect: "non_idempotent_write",
      handler: () => Effect.succeed("deployed")
    })
  ])
  const flow = AgentSessionFlow.make({
    flowType: "ControlAgent",
    toolPolicies: {
      slow: { effect: "read", requiresApproval: false },
      deploy: { effect: "non_idempotent_write", requiresApproval: true }
    }
  })
  const worker = AgentSessionFlow.layerWorker(flow).pipe(
    Layer.provide(Stepwise.layer({ name: "control-agent", instructions: "Test agent." })),
    Layer.provide(Layer.mergeAll(model, tools))
  )
  return Effect.gen(function* () {
    const sessions = yield* AgentSessionClient.AgentSessionClient
    const runner = yield* Engine.RunnerState
    yield* sessions.startSession("control", { initialMessage: "go" })
    const waiting = yield* eventually(
      sessions.getSnapshot("control"),
      (s) => slowStarted && s.pendingInterrupts.length === 1,
      "the slow tool to hold the task slot and the deploy to wait for approval"
    )
    assert.strictEqual(waiting.toolCalls.find((c) => c.toolCallId === "deploy-1")?.status, "awaiting_approval")
    assert.strictEqual(runner.slots.inUse, 1, "the slow tool holds the only task slot")
    assert.isTrue(yield* sessions.cancelTurn("control"))
    // FinishTurnCancellation records the waiting call while the slow tool still holds the task slot
    const recorded = yield* eventually(
      sessions.getSnapshot("control"),
      (s) => s.toolCalls.find((c) => c.toolCallId === "deploy-1")?.status === "rejected",
      "FinishTurnCancellation to record the approval call"
    )
    assert.strictEqual(recorded.pendingInterrupts.length, 0)
    assert.strictEqual(slowRuns, 1)
    yield* gate.open
    const done = yield* sessions.awaitTurn("control", { turn: 1, timeout: "120 seconds" })
    assert.strictEqual(done.state?.activeTurnId, null)
    assert.strictEqual(slowRuns, 1)
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
  describe(`${name} engine: one task slot, a cancellation`, () => {
    it.live(
      "cancel_turn's FinishTurnCancellation runs while a tool call holds the only task slot (the control slots)",
      () => cancelWhileToolHoldsTheSlot(engine),
      240_000
    )
  })
}
