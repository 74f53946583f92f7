// Task slots and the RPC reserve, on both engine layers: a runner with 2 slots (one of them the RPC
// reserve) and 5 Flows whose first Step is a slow "model call" that holds its slot until the test lets it go.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { Client, Engine, Flow, FlowRpc, Step, StepDecision, Worker } from "../src/index.ts"
import { engines } from "./support/engines.ts"

const Id = Schema.Struct({ id: Schema.String })

const makeFlows = () => {
  let released = false
  const gate = Effect.promise(
    () =>
      new Promise<void>((resolve) => {
        const check = () => (released ? resolve() : setTimeout(check, 20))
        check()
      })
  )
  const runs = new Map<string, number>()
  const count = (key: string) => runs.set(key, (runs.get(key) ?? 0) + 1)
  const recovered: Array<{ id: string; errorType: string; progress: string }> = []

  const Snapshot = FlowRpc({
    name: "snapshot",
    input: Schema.Null,
    output: Schema.String,
    handler: (ctx) => Effect.succeed({ output: `snapshot of ${ctx.flowId}` })
  })
  // a model call: heartbeats, then holds its slot until the test releases the gate
  const Model = Step({
    type: "Model",
    input: Id,
    options: { execute: { retry: { maxAttempts: 3, initialInterval: "1 second" } } },
    execute: (ctx, input) =>
      Effect.gen(function* () {
        count(`model ${input.id}`)
        yield* ctx.heartbeat()
        yield* gate
        return StepDecision.gracefulComplete(input.id)
      })
  })
  const Lost = Step({
    type: "Lost",
    input: Id,
    execute: (ctx, input) =>
      Effect.sync(() => {
        const e = Option.getOrThrow(ctx.recoveryError)
        recovered.push({ id: input.id, errorType: e.errorType, progress: e.attemptProgress })
        return StepDecision.gracefulComplete(`lost ${input.id}`)
      })
  })
  // a single-attempt write: must never run twice, whatever happens to its slot
  const Write = Step({
    type: "Write",
    input: Id,
    options: { onExecuteFailure: Lost, execute: { retry: { maxAttempts: 1 } } },
    execute: (ctx, input) =>
      Effect.gen(function* () {
        count(`write ${input.id}`)
        yield* ctx.heartbeat()
        yield* gate
        return StepDecision.gracefulComplete(input.id)
      })
  })
  const Agent = Flow({ type: "SlotAgent", start: Model, rpcs: [Snapshot] })
  const Writer = Flow({ type: "SlotWriter", start: Write, steps: [Lost], rpcs: [Snapshot] })
  return { Agent, Writer, Snapshot, runs, recovered, release: () => (released = true), isReleased: () => released }
}

for (const engine of engines) {
  describe(`${engine.name} engine: task slots and the RPC reserve`, () => {
    it.live(
      "2 slots, 5 Flows calling a slow model: RPCs answer while the Step slot is busy; waiting Steps consume no attempt and each write runs once",
      () => {
        const t = makeFlows()
        return Effect.gen(function* () {
          const client = yield* Client.Client
          const runner = yield* Engine.RunnerState
          assert.strictEqual(runner.slots.total, 2)
          assert.strictEqual(runner.slots.reserve, 1)
          const ids = ["a", "b", "c", "d", "e"]
          for (const id of ids) yield* client.startFlow(t.Agent, `agent-${id}`, { id })
          for (const id of ids) yield* client.startFlow(t.Writer, `writer-${id}`, { id })
          // one Step holds the only Step slot; wait until it runs
          yield* Effect.suspend(() => Effect.succeed([...t.runs.keys()].length)).pipe(
            Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (n) => n > 0 }),
            Effect.timeout("60 seconds")
          )
          assert.isTrue(runner.slots.inUse <= 1)
          // the snapshots answer while the model call still holds the Step slot (the gate is closed)
          for (const id of ids) {
            assert.strictEqual(
              yield* client.invokeRpc(t.Agent, t.Snapshot, `agent-${id}`, null),
              `snapshot of agent-${id}`
            )
            assert.strictEqual(
              yield* client.invokeRpc(t.Writer, t.Snapshot, `writer-${id}`, null),
              `snapshot of writer-${id}`
            )
          }
          assert.isFalse(t.isReleased())
          assert.isTrue(runner.slots.reserveDeclines > 0, "Steps that found only the reserve free were counted")
          // Steps wait in the queue for a slot, longer than the dispatch wait, without consuming an attempt
          // (the adapters spec, "Known limits"): none fails with NoTaskSlot, no write runs while it waits
          yield* Effect.sleep("3 seconds")
          assert.strictEqual(runner.counters.stepsFailed.get("Write\u0000NoTaskSlot") ?? 0, 0)
          assert.strictEqual(runner.counters.stepsFailed.get("Model\u0000NoTaskSlot") ?? 0, 0)
          assert.isFalse(t.isReleased())
          t.release()
          for (const id of ids) {
            const a = yield* client.waitForFlow(`agent-${id}`, { timeout: "120 seconds" })
            const w = yield* client.waitForFlow(`writer-${id}`, { timeout: "120 seconds" })
            assert.strictEqual(a.status, "completed")
            assert.strictEqual(w.status, "completed")
          }
          for (const id of ids) {
            assert.strictEqual(t.runs.get(`write ${id}`) ?? 0, 1, `write ${id} ran exactly once, after its wait`)
          }
          assert.deepStrictEqual(t.recovered, [], "no Step went to its failure route for lack of a slot")
          for (const id of ids) {
            for (const flowId of [`agent-${id}`, `writer-${id}`]) {
              const steps = yield* client.stepExecutions(flowId)
              assert.deepStrictEqual(
                steps[0]!.attempts.map((a) => a.errorType),
                [null],
                `${flowId}: one attempt, which waited for its slot`
              )
            }
          }
          assert.strictEqual(runner.slots.inUse, 0)
        }).pipe(
          Effect.provide(
            Worker.layer(t.Agent, t.Writer).pipe(
              Layer.provideMerge(engine.layer({ maxConcurrentTasks: 2, dispatchWait: "2 seconds" }))
            )
          )
        )
      },
      240_000
    )
  })
}
