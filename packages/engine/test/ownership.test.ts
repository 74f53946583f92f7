// Who did what (issue 28): the client says which runner owns a Flow, and attempts and history name the runner
// that wrote them, on both engine layers.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Client, Engine, Flow, Inspect, Step, StepDecision, Worker } from "../src/index.ts"
import { engines } from "./support/engines.ts"

const Once = Step({
  type: "Once",
  input: Schema.String,
  execute: (ctx, input) =>
    Effect.gen(function* () {
      yield* ctx.heartbeat()
      return StepDecision.gracefulComplete(input)
    })
})
const Owned = Flow({ type: "Owned", start: Once })

for (const engine of engines) {
  describe(`${engine.name} engine: Flow ownership`, () => {
    it.live(
      "flowOwner names the runner holding the Flow; its attempts and history carry the same runner",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          const runner = yield* Engine.RunnerState
          const unknown = yield* Effect.flip(client.flowOwner("nobody"))
          assert.strictEqual(unknown._tag, "FlowNotFound")
          yield* client.startFlow(Owned, "o", "hi")
          const done = yield* client.waitForFlow("o", { timeout: "60 seconds" })
          assert.strictEqual(done.status, "completed")
          const owner = yield* client.flowOwner("o")
          assert.strictEqual(owner.runner, runner.runnerId)
          assert.include(owner.runner, `pid ${process.pid}`)
          if (engine.name === "embedded") assert.strictEqual(owner.runner, `embedded pid ${process.pid}`)
          else assert.match(owner.runner, /^127\.0\.0\.1:\d+ pid \d+$/)
          assert.strictEqual(owner.epoch, 1)
          const steps = yield* client.stepExecutions("o")
          const attempts = steps.flatMap((s) => s.attempts)
          assert.isNotEmpty(attempts)
          for (const a of attempts) {
            assert.strictEqual(a.runner, owner.runner)
            assert.strictEqual(a.epoch, owner.epoch)
          }
          const history = yield* client.history("o")
          assert.isNotEmpty(history)
          for (const e of history) assert.strictEqual(e.runner, owner.runner)
          const text = yield* Inspect.renderHistory("o")
          assert.include(text, `Owner: ${owner.runner} (epoch 1)`)
          assert.include(text, `[${owner.runner}, epoch 1]`)
        }).pipe(Effect.provide(Worker.layer(Owned).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )
  })
}
