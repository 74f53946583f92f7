// A Flow whose owner here was superseded is recovered (issue 28, "no session stuck for good"). A claim by
// another runner (here: an epoch bumped in dex_owners, as a runner that claims the Flow and then loses its
// shard, pauses or dies before it commits anything) refuses this owner's next write; this runner drops its
// state and interrupts its Step fibers, but its entity stays alive. Nobody else holds the shard, no request
// comes: the recovery sweep of this runner must wake the Flow, so it is claimed again and its running Step
// runs again. (It used to skip every Flow with an entity here, superseded or not, and the Step stayed
// `running` with nobody running it.)
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { SqlClient } from "effect/sql"
import { Client, Engine, Flow, Step, StepDecision, Worker } from "../src/index.ts"
import { engines } from "./support/engines.ts"

/** What the test controls: the Step's runs, the signal of the first one, and the gate every run waits at. */
const control = {
  runs: 0,
  entered: Deferred.makeUnsafe<void>(),
  gate: Deferred.makeUnsafe<void>()
}

const Hold = Step({
  type: "Hold",
  input: Schema.String,
  execute: (_ctx, input) =>
    Effect.gen(function* () {
      control.runs++
      yield* Deferred.succeed(control.entered, undefined)
      yield* Deferred.await(control.gate)
      return StepDecision.gracefulComplete(input)
    })
})
const Held = Flow({ type: "Held", start: Hold })

for (const engine of engines) {
  describe(`${engine.name} engine: recovery of a superseded owner's Flow`, () => {
    it.live(
      "after a refused write, with no other owner and no request, the sweep wakes the Flow and its running Step runs again",
      () =>
        Effect.gen(function* () {
          control.runs = 0
          control.entered = Deferred.makeUnsafe<void>()
          control.gate = Deferred.makeUnsafe<void>()
          const sql = yield* SqlClient.SqlClient
          const client = yield* Client.Client
          yield* client.startFlow(Held, "held", "done")
          yield* Deferred.await(control.entered).pipe(Effect.timeout("60 seconds"))
          const first = yield* client.flowOwner("held")
          // another runner's claim, which then commits nothing
          yield* sql`UPDATE dex_owners SET epoch = epoch + 1, runner = 'a runner that went away' WHERE flow_id = 'held'`
          // the attempt ends; its commit is refused by the fence and this owner is superseded
          yield* Deferred.succeed(control.gate, undefined)
          const done = yield* client.waitForFlow("held", { timeout: "60 seconds" })
          assert.strictEqual(done.status, "completed")
          assert.strictEqual(control.runs, 2)
          const owner = yield* client.flowOwner("held")
          const runner = yield* Engine.RunnerState
          assert.strictEqual(owner.runner, runner.runnerId)
          assert.strictEqual(owner.epoch, first.epoch + 2)
          const steps = yield* client.stepExecutions("held")
          const attempts = steps.flatMap((s) => s.attempts)
          // the same attempt, run again by the new claim (it had no output)
          assert.deepStrictEqual(
            attempts.map((a) => [a.attempt, a.epoch]),
            [[1, first.epoch + 2]]
          )
        }).pipe(Effect.provide(Worker.layer(Held).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )
  })
}
