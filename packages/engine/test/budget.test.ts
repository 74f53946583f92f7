// The run budget (`maxFlowStateBytes`) on both engine layers.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  Attribute,
  AttributeMap,
  Client,
  Engine,
  Flow,
  FlowRpc,
  Step,
  StepDecision,
  type StepDef,
  Worker
} from "../src/index.ts"
import { engines } from "./support/engines.ts"

const Chunks = AttributeMap("chunks", Schema.String)
const Seen = Attribute(
  "seen",
  Schema.Struct({ errorType: Schema.String, detail: Schema.String, progress: Schema.String })
)

const OverBudget = Step({
  type: "OverBudget",
  input: Schema.Number,
  execute: (ctx) =>
    Effect.sync(() => {
      const e = Option.getOrThrow(ctx.recoveryError)
      // shrinking the run state is allowed past the budget
      for (let i = 0; i < 10; i++) ctx.deleteAt(Chunks, `${i}`)
      ctx.set(Seen, { errorType: e.errorType, detail: e.detail, progress: e.attemptProgress })
      return StepDecision.gracefulComplete(null)
    })
})
// writes one 3 KB chunk per execution until the budget stops it
const Grow: StepDef<number> = Step({
  type: "Grow",
  input: Schema.Number,
  options: { onExecuteFailure: OverBudget, execute: { retry: { maxAttempts: 5, initialInterval: "100 millis" } } },
  execute: (ctx, n) =>
    Effect.sync(() => {
      ctx.setAt(Chunks, `${n}`, "x".repeat(3000))
      return n < 9 ? StepDecision.goTo(Grow, n + 1) : StepDecision.gracefulComplete(null)
    })
})
const Stuff = FlowRpc({
  name: "stuff",
  input: Schema.Number,
  output: Schema.Null,
  handler: (ctx, n) =>
    Effect.sync(() => {
      ctx.setAt(Chunks, `rpc-${n}`, "y".repeat(3000))
      return { output: null }
    })
})
const Wait = Step({ type: "Idle", input: Schema.Number, execute: () => Effect.succeed(StepDecision.deadEnd()) })
const Budget = Flow({ type: "Budget", start: Grow, steps: [OverBudget], attributes: [Chunks, Seen] })
const RpcBudget = Flow({ type: "RpcBudget", start: Wait, attributes: [Chunks], rpcs: [Stuff] })

for (const engine of engines) {
  describe(`${engine.name} engine: run budget`, () => {
    it.live(
      "a Step completion that grows the run state past maxFlowStateBytes fails without retry with ValueTooLarge 'run state of'; a shrinking one commits",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Budget, "b", 0)
          const done = yield* client.waitForFlow("b", { timeout: "60 seconds" })
          assert.strictEqual(done.status, "completed")
          const seen = Option.getOrThrow(yield* client.getAttribute("b", Seen))
          assert.strictEqual(seen.errorType, "ValueTooLarge")
          assert.include(seen.detail, "run state of")
          assert.include(seen.detail, "10000")
          const steps = yield* client.stepExecutions("b")
          const failed = steps.find((s) => s.stepType === "Grow" && s.attempts.some((a) => a.outcome === "failure"))!
          assert.strictEqual(failed.attempts.length, 1, "not retried")
          // the writes before the budget ran out are kept: 3 chunks fit in 10,000 bytes, the 4th does not
          assert.strictEqual(steps.filter((s) => s.stepType === "Grow").length, 4)
          const runner = yield* Engine.RunnerState
          assert.strictEqual(runner.counters.budgetRejections, 1)
        }).pipe(
          Effect.provide(Worker.layer(Budget).pipe(Layer.provideMerge(engine.layer({ maxFlowStateBytes: 10_000 }))))
        ),
      120_000
    )

    it.live(
      "transactional RPC writes are not checked against the run budget",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(RpcBudget, "r", 0)
          for (let i = 0; i < 5; i++) yield* client.invokeRpc(RpcBudget, Stuff, "r", i)
          assert.isTrue(Option.isSome(yield* client.getAttribute("r", Chunks, "rpc-4")))
        }).pipe(
          Effect.provide(Worker.layer(RpcBudget).pipe(Layer.provideMerge(engine.layer({ maxFlowStateBytes: 10_000 }))))
        ),
      120_000
    )
  })
}
