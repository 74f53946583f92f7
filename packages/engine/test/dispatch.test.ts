// Dispatch and slots, on both engine layers, with one Step slot (2 task slots, one of them the RPC reserve):
// an attempt's start is recorded only once it has a slot; a control Step (a sibling's decision that cancels)
// runs in the control slots while a Step body holds the only task slot; a Step waiting for a child Flow
// gives its slot to the child; and a failed Step's attempt progress is the furthest across its attempts.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { Channel, Client, Engine, Flow, Step, StepDecision, Wait, Worker } from "../src/index.ts"
import { engines } from "./support/engines.ts"

/** A gate a test opens; Steps wait on it. */
const makeGate = () => {
  let open = false
  return {
    open: () => {
      open = true
    },
    wait: Effect.promise(
      () =>
        new Promise<void>((resolve) => {
          const check = () => (open ? resolve() : setTimeout(check, 20))
          check()
        })
    )
  }
}

/** Waits (polling) until `f` gives a value that `until` accepts. */
const eventually = <A, E, R>(f: Effect.Effect<A, E, R>, until: (a: A) => boolean, what: string) =>
  f.pipe(
    Effect.repeat({ schedule: Schedule.spaced("50 millis"), until }),
    Effect.timeoutOrElse({
      duration: "90 seconds",
      orElse: () => Effect.die(new Error(`timed out waiting for ${what}`))
    })
  )

const Id = Schema.String

const oneStepSlot = { maxConcurrentTasks: 2 } as const

for (const engine of engines) {
  describe(`${engine.name} engine: dispatch and slots`, () => {
    it.live(
      "attempt 1's start is recorded only once the attempt has a slot (not when the Step is dispatched)",
      () => {
        const gate = makeGate()
        let holding = false
        const Hold = Step({
          type: "Hold",
          input: Id,
          execute: () =>
            Effect.gen(function* () {
              holding = true
              yield* gate.wait
              return StepDecision.gracefulComplete("held")
            })
        })
        const Quick = Step({
          type: "Quick",
          input: Id,
          execute: () => Effect.succeed(StepDecision.gracefulComplete("quick"))
        })
        const Holder = Flow({ type: "DispatchHolder", start: Hold })
        const Waiter = Flow({ type: "DispatchWaiter", start: Quick })
        return Effect.gen(function* () {
          const client = yield* Client.Client
          const runner = yield* Engine.RunnerState
          yield* client.startFlow(Holder, "holder", "h")
          yield* eventually(
            Effect.sync(() => holding),
            (h) => h,
            "Hold to run"
          )
          yield* client.startFlow(Waiter, "waiter", "w")
          // dispatched: running, waiting for the only Step slot
          yield* eventually(
            Effect.sync(() => runner.slots.waiting),
            (n) => n >= 1,
            "Quick to wait for a slot"
          )
          const waiting = yield* client.stepExecutions("waiter")
          assert.strictEqual(waiting[0]!.status, "running")
          assert.deepStrictEqual(waiting[0]!.attempts, [], "no attempt start is recorded while it waits for a slot")
          const history = yield* client.history("waiter")
          assert.isFalse(
            history.some((e) => e.kind === "AttemptStarted"),
            "no AttemptStarted before the attempt has a slot"
          )
          const openedAt = Date.now()
          gate.open()
          assert.strictEqual((yield* client.waitForFlow("holder", { timeout: "90 seconds" })).status, "completed")
          assert.strictEqual((yield* client.waitForFlow("waiter", { timeout: "90 seconds" })).status, "completed")
          const quick = (yield* client.stepExecutions("waiter"))[0]!.attempts
          assert.strictEqual(quick.length, 1)
          assert.isAtLeast(quick[0]!.startedAt, openedAt, "Quick's attempt started once Hold gave the slot back")
        }).pipe(Effect.provide(Worker.layer(Holder, Waiter).pipe(Layer.provideMerge(engine.layer(oneStepSlot)))))
      },
      240_000
    )

    it.live(
      "a sibling's decision (a control Step) cancels a Step that holds the only task slot",
      () => {
        let interrupted = false
        let started = false
        const Go = Channel("go", Schema.String)
        const Long = Step({
          type: "Long",
          input: Id,
          execute: () =>
            Effect.gen(function* () {
              started = true
              yield* Effect.never
              return StepDecision.deadEnd()
            }).pipe(Effect.onInterrupt(() => Effect.sync(() => (interrupted = true))))
        })
        const Canceller = Step({
          type: "Canceller",
          input: Id,
          options: { execute: { slot: "control" } },
          waitFor: () => Wait.anyOf(Go.forOne()),
          execute: () => Effect.succeed(StepDecision.withCancelingSteps(StepDecision.gracefulComplete("ended"), Long))
        })
        const Fork = Step({
          type: "Fork",
          input: Id,
          execute: (_, id) =>
            Effect.succeed(StepDecision.goToMany({ step: Long, input: id }, { step: Canceller, input: id }))
        })
        const Siblings = Flow({ type: "Siblings", start: Fork, steps: [Long, Canceller], channels: [Go] })
        return Effect.gen(function* () {
          const client = yield* Client.Client
          const runner = yield* Engine.RunnerState
          yield* client.startFlow(Siblings, "siblings", "s")
          yield* eventually(
            Effect.sync(() => started),
            (s) => s,
            "Long to hold the task slot"
          )
          assert.strictEqual(runner.slots.inUse, 1)
          yield* client.publish("siblings", Go, "now")
          const closed = yield* client.waitForFlow("siblings", { timeout: "90 seconds" })
          assert.strictEqual(closed.status, "completed")
          const steps = yield* client.stepExecutions("siblings")
          assert.strictEqual(steps.find((s) => s.stepType === "Long")!.status, "cancelled")
          assert.strictEqual(steps.find((s) => s.stepType === "Canceller")!.status, "completed")
          yield* eventually(
            Effect.sync(() => interrupted),
            (i) => i,
            "Long's body to be interrupted"
          )
          assert.strictEqual(runner.slots.inUse, 0)
          assert.strictEqual(runner.slots.controlInUse, 0)
        }).pipe(Effect.provide(Worker.layer(Siblings).pipe(Layer.provideMerge(engine.layer(oneStepSlot)))))
      },
      240_000
    )

    it.live(
      "a Step waiting for a child Flow gives the child its slot; an RPC answers with every task slot busy",
      () => {
        const ChildStep = Step({
          type: "ChildWork",
          input: Id,
          execute: (_, id) => Effect.succeed(StepDecision.gracefulComplete(`child ${id}`))
        })
        const Child = Flow({ type: "ChildFlow", start: ChildStep })
        const Parent = Step({
          type: "ParentWork",
          input: Id,
          options: { execute: { retry: { maxAttempts: 1 } } },
          execute: (_, id) =>
            Effect.gen(function* () {
              const client = yield* Client.Client
              yield* client.startFlow(Child, `child-${id}`, id).pipe(Effect.orDie)
              const child = yield* client.waitForFlow(`child-${id}`, { timeout: "60 seconds" }).pipe(Effect.orDie)
              return StepDecision.gracefulComplete(child.status)
            })
        })
        const ParentFlow = Flow({ type: "ParentFlow", start: Parent })
        return Effect.gen(function* () {
          const client = yield* Client.Client
          const runner = yield* Engine.RunnerState
          yield* client.startFlow(ParentFlow, "parent", "p")
          const closed = yield* client.waitForFlow("parent", { timeout: "120 seconds" })
          assert.strictEqual(closed.status, "completed", `the parent closed ${closed.status}`)
          const child = yield* client.waitForFlow("child-p", { timeout: "10 seconds" })
          assert.strictEqual(child.status, "completed")
          const parentSteps = yield* client.stepExecutions("parent")
          assert.deepStrictEqual(
            parentSteps[0]!.attempts.map((a) => a.errorType),
            [null],
            "the parent's one attempt succeeded"
          )
          assert.strictEqual(runner.slots.inUse, 0)
        }).pipe(Effect.provide(Worker.layer(ParentFlow, Child).pipe(Layer.provideMerge(engine.layer(oneStepSlot)))))
      },
      240_000
    )

    it.live(
      "attempt progress is the furthest across the attempts: 3 attempts that never reached the Step's code are not_started",
      () => {
        const recovered: Array<{ errorType: string; progress: string }> = []
        const Lost = Step({
          type: "LostWrite",
          input: Id,
          execute: (ctx) =>
            Effect.sync(() => {
              const e = Option.getOrThrow(ctx.recoveryError)
              recovered.push({ errorType: e.errorType, progress: e.attemptProgress })
              return StepDecision.gracefulComplete("recovered")
            })
        })
        // an idempotent write with 3 attempts, which this worker does not know (a rolling deploy)
        const Write = Step({
          type: "UnknownWrite",
          input: Id,
          options: { onExecuteFailure: Lost, execute: { retry: { maxAttempts: 3, initialInterval: "100 millis" } } },
          waitFor: () => Wait.anyOf(Go.forOne()),
          execute: () => Effect.succeed(StepDecision.gracefulComplete("wrote"))
        })
        const Go = Channel("go", Schema.String)
        const Begin = Step({
          type: "BeginWrite",
          input: Id,
          execute: (_, id) => Effect.succeed(StepDecision.goTo(Write, id))
        })
        const Writer = Flow({ type: "ProgressWriter", start: Begin, steps: [Write, Lost], channels: [Go] })
        return Effect.gen(function* () {
          const client = yield* Client.Client
          const registry = yield* Engine.FlowRegistry
          yield* client.startFlow(Writer, "writer", "w")
          yield* eventually(
            client.stepExecutions("writer"),
            (steps) => steps.some((s) => s.stepType === "UnknownWrite" && s.status === "waiting"),
            "the write to wait"
          )
          // this worker no longer knows the write's Step
          ;(registry.flows.get("ProgressWriter")!.steps as Map<string, unknown>).delete("UnknownWrite")
          yield* client.publish("writer", Go, "now")
          const closed = yield* client.waitForFlow("writer", { timeout: "90 seconds" })
          assert.strictEqual(closed.status, "completed")
          assert.deepStrictEqual(recovered, [{ errorType: "DefinitionError", progress: "not_started" }])
          const write = (yield* client.stepExecutions("writer")).find((s) => s.stepType === "UnknownWrite")!
          assert.deepStrictEqual(
            write.attempts.map((a) => [a.outcome, a.errorType]),
            [
              ["failure", "DefinitionError"],
              ["failure", "DefinitionError"],
              ["failure", "DefinitionError"]
            ]
          )
        }).pipe(Effect.provide(Worker.layer(Writer).pipe(Layer.provideMerge(engine.layer(oneStepSlot)))))
      },
      240_000
    )
  })
}
