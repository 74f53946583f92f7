// A Flow whose parallel Steps each announce themselves with `heartbeatWith` before they go on: the batched
// heartbeats' engine-level tests (heartbeat-batch.test.ts, heartbeat-batch-pg.test.ts).
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Flow, FlowStream, Step, StepDecision, type StepDef, StepMovement } from "../../src/index.ts"

export const Events = FlowStream("events", Schema.Struct({ kind: Schema.String, name: Schema.String }))

export const Announcer: StepDef<string> = Step({
  type: "Announcer",
  input: Schema.String,
  execute: (ctx, name) =>
    Effect.gen(function* () {
      yield* ctx.heartbeatWith(Events, [{ kind: "started", name }])
      yield* ctx.stage(Events, { kind: "finished", name })
      return StepDecision.gracefulComplete(name)
    })
})

const FanOut: StepDef<null> = Step({
  type: "FanOut",
  input: Schema.Null,
  execute: () =>
    Effect.succeed(
      StepDecision.goToMany(
        StepMovement.of(Announcer, "x"),
        StepMovement.of(Announcer, "y"),
        StepMovement.of(Announcer, "z")
      )
    )
})

export const Announcing = Flow({ type: "Announcing", start: FanOut, steps: [Announcer], streams: [Events] })
