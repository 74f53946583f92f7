// Type-level tests of the Step failure channel: what `execute` may fail with, what a failure route reads, and
// how its typed error is matched. `tsc` checks them (the repository's typecheck includes test files); the runtime
// assertions check the matchers.
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  type Defect,
  type DefinitionError,
  type HeartbeatTimeout,
  type MethodTimeout,
  type NoTaskSlot,
  RecoveryError,
  Step,
  StepDecision,
  type StepDef,
  type StepFailure,
  type StepFailureType,
  ValueTooLarge,
  type WorkerLost,
  type WorkerShutdown
} from "../src/index.ts"

class Declined extends Schema.TaggedError<Declined>()("Declined", { reason: Schema.String }) {}
class Flaky extends Schema.TaggedError<Flaky>()("Flaky", { message: Schema.String }) {}

const Route = Step({
  type: "Route",
  input: Schema.String,
  recovers: Schema.Union([Declined, Flaky]),
  execute: (ctx) => {
    expectTypeOf(ctx.recoveryError).toEqualTypeOf<Option.Option<RecoveryError<Declined | Flaky>>>()
    return Effect.succeed(StepDecision.deadEnd())
  }
})

const Failing = Step({
  type: "Failing",
  input: Schema.String,
  error: Schema.Union([Declined, Flaky]),
  options: { onExecuteFailure: Route },
  execute: (_ctx, input) =>
    input === "no" ? Effect.fail(new Declined({ reason: "no" })) : Effect.succeed(StepDecision.deadEnd())
})

describe("the Step failure channel (types)", () => {
  it("a Step's execute fails with what its error Schema declares", () => {
    expectTypeOf<StepDef.Error<typeof Failing>>().toEqualTypeOf<Declined | Flaky>()
    expectTypeOf<StepDef.Recovers<typeof Route>>().toEqualTypeOf<Declined | Flaky>()
    expectTypeOf<ReturnType<typeof Failing.execute>>().toEqualTypeOf<Effect.Effect<StepDecision, Declined | Flaky>>()
  })

  it("a Step without an error Schema cannot fail with a typed error", () => {
    Step({
      type: "Undeclared",
      input: Schema.String,
      // @ts-expect-error: no error Schema, so `execute` may not fail with a typed error
      execute: () => Effect.fail(new Declined({ reason: "undeclared" }))
    })
    Step({
      type: "Wrong",
      input: Schema.String,
      error: Flaky,
      // @ts-expect-error: Declined is not what this Step declares
      execute: () => Effect.fail(new Declined({ reason: "other" }))
    })
    const probe = (step: StepDef<string, Flaky>) => {
      // @ts-expect-error: a number is not the Step's error type
      const fortyTwo: Effect.Effect<StepDecision, number> = step.execute(undefined as never, "x")
      return fortyTwo
    }
    assert.isFunction(probe)
  })

  it("a failure route must recover every error the failing Step declares", () => {
    const OnlyFlaky = Step({
      type: "OnlyFlaky",
      input: Schema.String,
      recovers: Flaky,
      execute: () => Effect.succeed(StepDecision.deadEnd())
    })
    Step({
      type: "Partly",
      input: Schema.String,
      error: Schema.Union([Declined, Flaky]),
      // @ts-expect-error: OnlyFlaky does not recover Declined
      options: { onExecuteFailure: OnlyFlaky },
      execute: () => Effect.succeed(StepDecision.deadEnd())
    })
  })

  it("RecoveryError's errorType is the declared tags and the engine's, and its error the union", () => {
    type R = RecoveryError<Declined | Flaky>
    expectTypeOf<R["errorType"]>().toEqualTypeOf<
      | "Declined"
      | "Flaky"
      | "ValueTooLarge"
      | "MethodTimeout"
      | "HeartbeatTimeout"
      | "WorkerLost"
      | "WorkerShutdown"
      | "NoTaskSlot"
      | "DefinitionError"
      | "Defect"
    >()
    expectTypeOf<StepFailureType>().toEqualTypeOf<
      | "ValueTooLarge"
      | "MethodTimeout"
      | "HeartbeatTimeout"
      | "WorkerLost"
      | "WorkerShutdown"
      | "NoTaskSlot"
      | "DefinitionError"
      | "Defect"
    >()
    expectTypeOf<StepFailure>().toEqualTypeOf<
      | ValueTooLarge
      | MethodTimeout
      | HeartbeatTimeout
      | WorkerLost
      | WorkerShutdown
      | NoTaskSlot
      | DefinitionError
      | Defect
    >()
    expectTypeOf<R["error"]>().toEqualTypeOf<Declined | Flaky | StepFailure>()
    expectTypeOf<RecoveryError["errorType"]>().toEqualTypeOf<StepFailureType>()
    const check = (r: R) =>
      // @ts-expect-error: "Nope" is neither declared nor the engine's
      RecoveryError.is(r, "Nope")
    assert.isFunction(check)
  })

  it.effect("a recovery error is matched by tag: catchTag on its failure, or `is` narrowing its error", () =>
    Effect.gen(function* () {
      const recovery = RecoveryError.make(new ValueTooLarge({ name: "big", bytes: 20, limit: 10 }), "not_completed")
      const typed = recovery as RecoveryError<Declined | Flaky>
      const caught = yield* RecoveryError.failure(typed).pipe(
        Effect.catchTag("ValueTooLarge", (e) => {
          expectTypeOf(e).toEqualTypeOf<ValueTooLarge>()
          return Effect.succeed(`${e.name} ${e.bytes}`)
        }),
        Effect.catchTag("Declined", (e) => Effect.succeed(e.reason)),
        Effect.catch((e) => {
          expectTypeOf(e).toEqualTypeOf<
            | Flaky
            | MethodTimeout
            | HeartbeatTimeout
            | WorkerLost
            | WorkerShutdown
            | NoTaskSlot
            | DefinitionError
            | Defect
          >()
          return Effect.succeed(e._tag)
        })
      )
      assert.strictEqual(caught, "big 20")
      assert.strictEqual(typed.errorType, "ValueTooLarge")
      assert.isFalse(RecoveryError.is(typed, "Declined"))
      if (RecoveryError.is(typed, "ValueTooLarge")) {
        expectTypeOf(typed.error).toEqualTypeOf<ValueTooLarge>()
        assert.strictEqual(typed.error.limit, 10)
      } else {
        assert.fail("expected ValueTooLarge")
      }
    })
  )
})
