/**
 * The engine conformance suite: a function that takes an engine factory and registers
 * `@effect/vitest` tests pinning every rule the session depends on. Run it for every engine
 * binding (`Engine.layerEmbedded`, `Engine.layerCluster`, or a binding to another engine).
 *
 * @since 0.1.0
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { Client } from "../Client.ts"
import type { EngineServices } from "../Engine.ts"
import { type EngineError, RecoveryError } from "../Errors.ts"
import {
  Attribute,
  AttributeMap,
  Channel,
  ChannelMap,
  Flow,
  type FlowDef,
  FlowRpc,
  Step,
  StepDecision,
  type StepDef,
  StepMovement,
  FlowStream as StreamDef,
  Timer,
  Wait,
  withConditionId
} from "../Flow.ts"
import type { HistoryEvent } from "../Inspect.ts"
import * as Worker from "../Worker.ts"

/** Builds a fresh engine (its own database) for one test. */
export type EngineFactory = () => Layer.Layer<EngineServices, EngineError | unknown>

/** Options of the suite. */
export interface ConformanceOptions {
  /** The engine's largest value; the suite's size tests write just over it. Default 16 MiB. */
  readonly maxValueBytes?: number
}

const Str = Schema.String
const Num = Schema.Number

/** The error the suite's failing Steps declare. */
class Failed extends Schema.TaggedError<Failed>()("Failed", { message: Schema.String, attempt: Schema.Number }) {}

/** Runs `body` with a worker for `flows` on a fresh engine. */
const withEngine = <A, E>(
  engine: EngineFactory,
  flows: ReadonlyArray<FlowDef<any, never>>,
  body: Effect.Effect<A, E, Client>
): Effect.Effect<A, unknown> =>
  body.pipe(Effect.provide(Worker.layer(...flows).pipe(Layer.provideMerge(engine()))), Effect.scoped)

/** Polls a Flow's history until `predicate` holds (default timeout 20 s). */
export const awaitHistory = (
  flowId: string,
  predicate: (events: ReadonlyArray<HistoryEvent>) => boolean,
  timeout: Duration.Input = "20 seconds"
) =>
  Effect.gen(function* () {
    const client = yield* Client
    return yield* client.history(flowId).pipe(
      Effect.repeat({ schedule: Schedule.spaced("25 millis"), until: predicate }),
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () =>
          Effect.flatMap(client.history(flowId), (h) =>
            Effect.die(
              new Error(
                `history of ${flowId} never matched; it is:\n${h.map((e) => `${e.kind} ${e.stepExecutionId ?? ""}#${e.attempt ?? ""} ${JSON.stringify(e.data)}`).join("\n")}`
              )
            )
          )
      })
    )
  })

const has = (kind: string, step_execution_id?: string) => (events: ReadonlyArray<HistoryEvent>) =>
  events.some((e) => e.kind === kind && (step_execution_id === undefined || e.stepExecutionId === step_execution_id))

const waitClosed = (flowId: string) =>
  Effect.gen(function* () {
    const client = yield* Client
    return yield* client.waitForFlow(flowId)
  }).pipe(
    Effect.timeoutOrElse({ duration: "30 seconds", orElse: () => Effect.die(new Error(`${flowId} did not close`)) })
  )

/** Starts `flowId` and waits until it closed. */
const startAndClose = <I>(flow: FlowDef<I, any>, flowId: string, input: I) =>
  Effect.gen(function* () {
    const client = yield* Client
    yield* client.startFlow(flow, flowId, input)
    return yield* waitClosed(flowId)
  })

/** The tag of the error `effect` fails with (it must fail). */
const tag = <X, E extends { readonly _tag: string }>(effect: Effect.Effect<X, E>) =>
  Effect.map(Effect.flip(effect), (e) => e._tag)

/** The `execute` of a Step that ends its branch. */
const deadEnd = () => Effect.succeed(StepDecision.deadEnd())

/** Registers the conformance tests for an engine. */
export const conformance = (name: string, engine: EngineFactory, options: ConformanceOptions = {}) => {
  const maxValueBytes = options.maxValueBytes ?? 16 * 1024 * 1024
  const buildWorker = (flow: FlowDef<any, never>): Effect.Effect<unknown, unknown> =>
    Effect.scoped(Layer.build(Worker.layer(flow).pipe(Layer.provideMerge(engine()))))
  const run = <A, E>(flows: ReadonlyArray<FlowDef<any, never>>, body: Effect.Effect<A, E, Client>) =>
    withEngine(engine, flows, body)

  describe(`engine conformance: ${name}`, () => {
    // ------------------------------------------------------------------------------------------
    describe("commit", () => {
      it.live("commits attribute writes, publishes and next Steps together", () => {
        const A = Attribute("a", Num)
        const Ch = Channel("ch", Str)
        const Second = Step({
          type: "Second",
          input: Str,
          waitFor: () => Wait.anyOf(Ch.forOne()),
          execute: (ctx, i) =>
            Effect.succeed(
              StepDecision.gracefulComplete({ a: Option.getOrNull(ctx.get(A)), got: ctx.channelResults(Ch), i })
            )
        })
        const First = Step({
          type: "First",
          input: Str,
          execute: (ctx, i) =>
            Effect.sync(() => {
              ctx.set(A, 7)
              ctx.publish(Ch, "hello")
              return StepDecision.goTo(Second, `${i}-next`)
            })
        })
        const F = Flow({ type: "Commit", start: First, steps: [Second], attributes: [A], channels: [Ch] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            const done = yield* startAndClose(F, "commit-1", "in")
            assert.strictEqual(done.status, "completed")
            assert.deepStrictEqual(done.output, { a: 7, got: ["hello"], i: "in-next" })
            assert.deepStrictEqual(yield* client.getAttribute("commit-1", A), Option.some(7))
          })
        )
      })

      it.live(
        "rolls back a result with an oversized value: nothing is written, the failure route gets ValueTooLarge",
        () => {
          const A = Attribute("a", Str)
          const Ch = Channel("ch", Str)
          const Recover = Step({
            type: "Recover",
            input: Str,
            execute: (ctx) =>
              Effect.succeed(
                StepDecision.gracefulComplete({
                  error: Option.getOrNull(Option.map(ctx.recoveryError, (e) => e.errorType)),
                  a: Option.getOrNull(ctx.get(A)),
                  queued: ctx.channelSize(Ch)
                })
              )
          })
          const Never = Step({ type: "Never", input: Str, execute: deadEnd })
          const Big = Step({
            type: "Big",
            input: Str,
            options: { onExecuteFailure: Recover, execute: { retry: { maxAttempts: 3 } } },
            execute: (ctx) =>
              Effect.sync(() => {
                ctx.set(A, "small")
                ctx.publish(Ch, "message")
                ctx.set(A, "x".repeat(maxValueBytes + 1))
                return StepDecision.goTo(Never, "no")
              })
          })
          const F = Flow({ type: "Rollback", start: Big, steps: [Recover, Never], attributes: [A], channels: [Ch] })
          return run(
            [F],
            Effect.gen(function* () {
              const client = yield* Client
              const done = yield* startAndClose(F, "rollback-1", "in")
              assert.deepStrictEqual(done.output, { error: "ValueTooLarge", a: null, queued: 0 })
              const steps = yield* client.stepExecutions("rollback-1")
              assert.deepStrictEqual(
                steps.map((s) => s.stepType),
                ["Big", "Recover"]
              )
              assert.strictEqual(steps[0]!.attempts.length, 1, "ValueTooLarge is not retried")
            })
          )
        }
      )

      it.live("an RPC that fails commits nothing", () => {
        const A = Attribute("a", Num)
        const Idle = Step({ type: "Idle", input: Str, execute: deadEnd })
        const Bad = FlowRpc({
          name: "bad",
          input: Num,
          output: Num,
          handler: (ctx, n) =>
            Effect.gen(function* () {
              ctx.set(A, n)
              return yield* Effect.fail(new Error("handler refused"))
            })
        })
        const Good = FlowRpc({
          name: "good",
          input: Num,
          output: Num,
          handler: (ctx, n) =>
            Effect.sync(() => {
              ctx.set(A, n)
              return { output: n * 2 }
            })
        })
        const F = Flow({ type: "RpcRollback", start: Idle, attributes: [A], rpcs: [Bad, Good] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "rpc-rb", "x")
            const error = yield* Effect.flip(client.invokeRpc(F, Bad, "rpc-rb", 5))
            assert.strictEqual(error._tag, "RpcFailed")
            assert.deepStrictEqual(yield* client.getAttribute("rpc-rb", A), Option.none())
            assert.strictEqual(yield* client.invokeRpc(F, Good, "rpc-rb", 4), 8)
            assert.deepStrictEqual(yield* client.getAttribute("rpc-rb", A), Option.some(4))
          })
        )
      })
    })

    // ------------------------------------------------------------------------------------------
    describe("wait selection", () => {
      it.live("anyOf selects Timers first, then Channels in argument order; only the winner consumes", () => {
        const A = Channel("a", Str)
        const B = Channel("b", Str)
        const Report = FlowRpc({
          name: "sizes",
          input: Schema.Void,
          output: Schema.Array(Num),
          handler: (ctx) => Effect.succeed({ output: [ctx.channelSize(A), ctx.channelSize(B)] })
        })
        const Picked = Step({
          type: "Picked",
          input: Str,
          waitFor: (_ctx, which) =>
            which === "timer"
              ? Wait.anyOf(B.forOne(), A.forOne(), Timer.seconds(0))
              : Wait.anyOf(B.forOne(), A.forOne()),
          execute: (ctx, which) =>
            Effect.succeed(
              StepDecision.gracefulComplete({
                which,
                timer: ctx.timerFired(),
                a: ctx.channelResults(A),
                b: ctx.channelResults(B)
              })
            )
        })
        const Gate = Channel("gate", Str)
        const Start = Step({
          type: "Start",
          input: Str,
          waitFor: () => Wait.anyOf(Gate.forOne()),
          execute: (_ctx, which) => Effect.succeed(StepDecision.goTo(Picked, which))
        })
        const F = Flow({ type: "Select", start: Start, steps: [Picked], channels: [A, B, Gate], rpcs: [Report] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            for (const which of ["timer", "channels"]) {
              const id = `select-${which}`
              yield* client.startFlow(F, id, which)
              yield* client.publish(id, A, "a1")
              yield* client.publish(id, B, "b1")
              yield* client.publish(id, Gate, "go")
              const done = yield* waitClosed(id)
              const sizes = yield* Effect.flip(client.invokeRpc(F, Report, id, undefined))
              if (which === "timer") {
                assert.deepStrictEqual(done.output, { which, timer: true, a: [], b: [] })
              } else {
                assert.deepStrictEqual(done.output, { which, timer: false, a: [], b: ["b1"] })
              }
              // the flow is closed now, so read what is left from the history instead
              assert.strictEqual(sizes._tag, "FlowNotActive")
            }
          })
        )
      })

      it.live(
        "channel bounds: forN waits for n, forRange consumes up to b, atMost never blocks, atLeast takes all",
        () => {
          const Ch = Channel("ch", Num)
          const Out = Channel("out", Schema.Array(Num))
          const Drain = FlowRpc({
            name: "drain",
            input: Schema.Void,
            output: Schema.Array(Schema.Array(Num)),
            handler: (ctx) => Effect.succeed({ output: ctx.messages(Out).map((m) => m.value) })
          })
          const TakeInput = Schema.Struct({ mode: Str, left: Num })
          const Take: StepDef<typeof TakeInput.Type> = Step({
            type: "Take",
            input: TakeInput,
            waitFor: (_ctx, i) =>
              Wait.anyOf(
                i.mode === "forN"
                  ? Ch.forN(2)
                  : i.mode === "range"
                    ? Ch.forRange(1, 3)
                    : i.mode === "atMost"
                      ? Ch.atMost(2)
                      : Ch.atLeast(1)
              ),
            execute: (ctx, i) =>
              Effect.sync(() => {
                ctx.publish(Out, ctx.channelResults(Ch))
                return i.left > 1 ? StepDecision.goTo(Take, { mode: i.mode, left: i.left - 1 }) : StepDecision.deadEnd()
              })
          })
          const F = Flow({ type: "Bounds", start: Take, channels: [Ch, Out], rpcs: [Drain] })
          const drained = (id: string, n: number) =>
            Effect.gen(function* () {
              const client = yield* Client
              return yield* client
                .invokeRpc(F, Drain, id, undefined)
                .pipe(
                  Effect.repeat({ schedule: Schedule.spaced("25 millis"), until: (o) => o.length >= n }),
                  Effect.timeout("20 seconds")
                )
            })
          return run(
            [F],
            Effect.gen(function* () {
              const client = yield* Client
              // forN(2): one message is not enough
              yield* client.startFlow(F, "forN", { mode: "forN", left: 1 })
              yield* client.publish("forN", Ch, 1)
              yield* Effect.sleep("400 millis")
              assert.deepStrictEqual(yield* client.invokeRpc(F, Drain, "forN", undefined), [])
              yield* client.publish("forN", Ch, 2)
              yield* client.publish("forN", Ch, 3)
              assert.deepStrictEqual(yield* drained("forN", 1), [[1, 2]])
              // forRange(1,3): takes up to 3 of the 4 queued
              yield* client.startFlow(F, "range", { mode: "gate", left: 0 }).pipe(Effect.ignore)
              // atMost(2) never blocks: an empty queue matches
              yield* client.startFlow(F, "atMost", { mode: "atMost", left: 1 })
              assert.deepStrictEqual(yield* drained("atMost", 1), [[]])
              // atLeast(1) consumes everything available
              yield* client.startFlow(F, "atLeast", { mode: "wait", left: 2 })
              for (const n of [1, 2, 3]) yield* client.publish("atLeast", Ch, n)
              yield* client.publish("atLeast", Ch, 4)
              const got = yield* drained("atLeast", 1)
              assert.isTrue(got[0]!.length >= 1)
            })
          )
        }
      )

      it.live("forRange consumes at most its maximum and leaves the rest queued", () => {
        const Ch = Channel("ch", Num)
        const Gate = Channel("gate", Str)
        const Take = Step({
          type: "Take",
          input: Str,
          waitFor: () => Wait.allOf(Gate.forOne(), Ch.forRange(1, 3)),
          execute: (ctx) =>
            Effect.succeed(StepDecision.gracefulComplete({ took: ctx.channelResults(Ch), left: ctx.channelSize(Ch) }))
        })
        const F = Flow({ type: "Range", start: Take, channels: [Ch, Gate] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "range-1", "x")
            for (const n of [1, 2, 3, 4]) yield* client.publish("range-1", Ch, n)
            yield* client.publish("range-1", Gate, "go")
            const done = yield* waitClosed("range-1")
            assert.deepStrictEqual(done.output, { took: [1, 2, 3], left: 1 })
          })
        )
      })

      it.live("allOf reserves every minimum on a shared channel before giving out extras in order", () => {
        const Ch = Channel("ch", Num)
        const Gate = Channel("gate", Str)
        const Both = Step({
          type: "Both",
          input: Str,
          waitFor: () => Wait.allOf(Gate.forOne(), Ch.atMost(2), Ch.forN(2)),
          execute: (ctx) =>
            Effect.succeed(StepDecision.gracefulComplete({ all: ctx.channelResults(Ch), left: ctx.channelSize(Ch) }))
        })
        const F = Flow({ type: "AllOf", start: Both, channels: [Ch, Gate] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "allof-1", "x")
            for (const n of [1, 2, 3]) yield* client.publish("allof-1", Ch, n)
            yield* client.publish("allof-1", Gate, "go")
            const done = yield* waitClosed("allof-1")
            // minima first: forN(2) reserves 2 of 3; the remaining 1 goes to atMost(2)
            assert.deepStrictEqual(done.output, { all: [1, 2, 3], left: 0 })
          })
        )
      })

      it.live(
        "a waiting Step is not satisfied by too few messages, and competing waiters: the oldest wait wins",
        () => {
          const Ch = Channel("ch", Num)
          const Waiter = Step({
            type: "Waiter",
            input: Str,
            waitFor: () => Wait.anyOf(Ch.forOne()),
            execute: (ctx, name) => Effect.succeed(StepDecision.gracefulComplete({ name, got: ctx.channelResults(Ch) }))
          })
          const Fork = Step({
            type: "Fork",
            input: Str,
            execute: () =>
              Effect.succeed(StepDecision.goToMany(StepMovement.of(Waiter, "first"), StepMovement.of(Waiter, "second")))
          })
          const F = Flow({ type: "Compete", start: Fork, steps: [Waiter], channels: [Ch] })
          return run(
            [F],
            Effect.gen(function* () {
              const client = yield* Client
              yield* client.startFlow(F, "compete", "x")
              yield* awaitHistory("compete", (h) => h.filter((e) => e.kind === "StepScheduled").length === 3)
              yield* client.publish("compete", Ch, 1)
              const h = yield* awaitHistory("compete", has("StepCompleted", "Waiter-1"))
              assert.isFalse(has("WaitSatisfied", "Waiter-2")(h))
              yield* client.publish("compete", Ch, 2)
              yield* waitClosed("compete")
              const steps = yield* client.stepExecutions("compete")
              assert.deepStrictEqual(
                steps.map((s) => `${s.stepExecutionId}:${s.status}`),
                ["Fork-1:completed", "Waiter-1:completed", "Waiter-2:completed"]
              )
            })
          )
        }
      )
    })

    // ------------------------------------------------------------------------------------------
    describe("attempts", () => {
      it.live("retries reuse the state loaded for the first attempt", () => {
        const A = Attribute("a", Num)
        const Seen = AttributeMap("seen", Num)
        const Bump = FlowRpc({
          name: "bump",
          input: Num,
          output: Num,
          handler: (ctx, n) =>
            Effect.sync(() => {
              ctx.set(A, n)
              return { output: n }
            })
        })
        const seen: Array<number> = []
        const Flaky = Step({
          type: "Flaky",
          input: Str,
          error: Failed,
          options: { execute: { retry: { maxAttempts: 3, initialInterval: "1 second" } } },
          execute: (ctx) =>
            Effect.gen(function* () {
              const a = Option.getOrElse(ctx.get(A), () => -1)
              seen.push(a)
              if (ctx.attempt === 1) {
                yield* Effect.sleep("300 millis")
                return yield* new Failed({ message: "first attempt fails", attempt: ctx.attempt })
              }
              ctx.setAt(Seen, String(ctx.attempt), a)
              return StepDecision.gracefulComplete({ a, attempt: ctx.attempt })
            })
        })
        const F = Flow({ type: "Reuse", start: Flaky, attributes: [A, Seen], rpcs: [Bump] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "reuse", "x")
            yield* awaitHistory("reuse", has("AttemptStarted", "Flaky-1"))
            yield* client.invokeRpc(F, Bump, "reuse", 99)
            const done = yield* waitClosed("reuse")
            assert.deepStrictEqual(done.output, { a: -1, attempt: 2 })
            assert.deepStrictEqual(seen, [-1, -1])
          })
        )
      })

      it.live("retries with exponential backoff up to maxAttempts, then the Flow fails without a route", () => {
        let calls = 0
        const Fails = Step({
          type: "Fails",
          input: Str,
          error: Failed,
          options: { execute: { retry: { maxAttempts: 3, initialInterval: "1 second", backoffCoefficient: 2 } } },
          execute: (ctx) =>
            Effect.suspend(() => {
              calls++
              return Effect.fail(new Failed({ message: `boom ${calls}`, attempt: ctx.attempt }))
            })
        })
        const F = Flow({ type: "Backoff", start: Fails })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            const done = yield* startAndClose(F, "backoff", "x")
            assert.strictEqual(done.status, "failed")
            assert.include(done.reason ?? "", "boom 3")
            assert.strictEqual(calls, 3)
            const h = yield* client.history("backoff")
            assert.deepStrictEqual(
              h.filter((e) => e.kind === "RetryScheduled").map((e) => e.data.delayMs),
              [1000, 2000]
            )
            const starts = h.filter((e) => e.kind === "AttemptStarted").map((e) => e.at)
            assert.isAtLeast(starts[1]! - starts[0]!, 1000)
            assert.isAtLeast(starts[2]! - starts[1]!, 2000)
          })
        )
      })

      it.live("method timeout and heartbeat timeout fail the attempt and interrupt the handler", () => {
        const interrupted: Array<string> = []
        const Slow = Step({
          type: "Slow",
          input: Str,
          options: { execute: { timeout: "1 second", retry: { maxAttempts: 1 } } },
          execute: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted.push("Slow"))))
        })
        const Silent = Step({
          type: "Silent",
          input: Str,
          options: { heartbeatTimeout: "1 second", execute: { retry: { maxAttempts: 1 } } },
          execute: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted.push("Silent"))))
        })
        const Beating = Step({
          type: "Beating",
          input: Str,
          options: { heartbeatTimeout: "1 second", execute: { retry: { maxAttempts: 1 } } },
          execute: (ctx) =>
            Effect.gen(function* () {
              for (let i = 0; i < 6; i++) {
                yield* ctx.heartbeat()
                yield* Effect.sleep("300 millis")
              }
              return StepDecision.gracefulComplete("beat")
            })
        })
        // both limits on one Step: the first one passed fails the attempt
        const BothBeating = Step({
          type: "BothBeating",
          input: Str,
          options: { heartbeatTimeout: "1 second", execute: { timeout: "2 seconds", retry: { maxAttempts: 1 } } },
          execute: (ctx) =>
            Effect.gen(function* () {
              while (true) {
                yield* ctx.heartbeat()
                yield* Effect.sleep("300 millis")
              }
            }).pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted.push("BothBeating"))))
        })
        const BothSilent = Step({
          type: "BothSilent",
          input: Str,
          options: { heartbeatTimeout: "1 second", execute: { timeout: "20 seconds", retry: { maxAttempts: 1 } } },
          execute: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted.push("BothSilent"))))
        })
        const BothQuick = Step({
          type: "BothQuick",
          input: Str,
          options: { heartbeatTimeout: "1 second", execute: { timeout: "20 seconds", retry: { maxAttempts: 1 } } },
          execute: (ctx) => Effect.as(ctx.heartbeat(), StepDecision.gracefulComplete("quick"))
        })
        const byName = {
          slow: Slow,
          silent: Silent,
          beating: Beating,
          bothBeating: BothBeating,
          bothSilent: BothSilent,
          bothQuick: BothQuick
        } as const
        const Pick = Step({
          type: "Pick",
          input: Str,
          execute: (_ctx, which) => Effect.succeed(StepDecision.goTo(byName[which as keyof typeof byName], which))
        })
        const F = Flow({ type: "Timeouts", start: Pick, steps: Object.values(byName) })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            for (const which of Object.keys(byName)) yield* client.startFlow(F, `to-${which}`, which)
            const slow = yield* waitClosed("to-slow")
            const silent = yield* waitClosed("to-silent")
            const beating = yield* waitClosed("to-beating")
            assert.include(slow.reason ?? "", "MethodTimeout")
            assert.include(silent.reason ?? "", "HeartbeatTimeout")
            assert.strictEqual(beating.status, "completed")
            const bothBeating = yield* waitClosed("to-bothBeating")
            const bothSilent = yield* waitClosed("to-bothSilent")
            const bothQuick = yield* waitClosed("to-bothQuick")
            assert.include(bothBeating.reason ?? "", "MethodTimeout")
            assert.include(bothSilent.reason ?? "", "HeartbeatTimeout")
            assert.strictEqual(bothQuick.status, "completed")
            assert.sameMembers(interrupted, ["Slow", "Silent", "BothBeating", "BothSilent"])
          })
        )
      })

      it.live("the failure route receives the failing input and the recovery error with attempt progress", () => {
        const Route = Step({
          type: "Route",
          input: Schema.Struct({ n: Num }),
          recovers: Failed,
          execute: (ctx, input) =>
            Effect.succeed(
              StepDecision.gracefulComplete({
                input,
                recovery: Option.getOrNull(
                  Option.map(ctx.recoveryError, (e) => ({
                    errorType: e.errorType,
                    detail: e.detail,
                    attemptProgress: e.attemptProgress,
                    // the typed error, stored with its Schema and decoded again by the worker that runs the route
                    failed: RecoveryError.is(e, "Failed") && e.error instanceof Failed ? e.error.attempt : null
                  }))
                )
              })
            )
        })
        const Failing = Step({
          type: "Failing",
          input: Schema.Struct({ n: Num }),
          error: Failed,
          options: { onExecuteFailure: Route, execute: { retry: { maxAttempts: 2, initialInterval: "1 second" } } },
          execute: (ctx) => Effect.fail(new Failed({ message: `attempt ${ctx.attempt} failed`, attempt: ctx.attempt }))
        })
        const F = Flow({ type: "Route", start: Failing, steps: [Route] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            const done = yield* startAndClose(F, "route-1", { n: 41 })
            assert.deepStrictEqual(done.output, {
              input: { n: 41 },
              recovery: {
                errorType: "Failed",
                detail: "attempt 2 failed",
                attemptProgress: "not_completed",
                failed: 2
              }
            })
            const steps = yield* client.stepExecutions("route-1")
            assert.deepStrictEqual(
              steps.map((s) => [s.stepType, s.status, s.fromStepExecutionId]),
              [
                ["Failing", "failed", null],
                ["Route", "completed", "Failing-1"]
              ]
            )
          })
        )
      })

      it.live(
        "a failure route matches the typed error: a declared tag, ValueTooLarge of an oversized commit, a Defect",
        () => {
          const Big = Attribute("big", Str)
          const Route = Step({
            type: "Route",
            input: Str,
            recovers: Failed,
            execute: (ctx) =>
              Option.match(ctx.recoveryError, {
                onNone: () => Effect.succeed(StepDecision.forceFail("no recovery error")),
                onSome: (r) =>
                  RecoveryError.failure(r).pipe(
                    Effect.catchTags({
                      Failed: (e) => Effect.succeed(`${r.errorType} ${e.attempt}`),
                      ValueTooLarge: (e) => Effect.succeed(`${r.errorType} ${e.name} ${e.bytes > e.limit}`),
                      Defect: (e) => Effect.succeed(`${r.errorType} ${e.errorType}: ${e.detail}`),
                      MethodTimeout: (e) => Effect.succeed(`${r.errorType} ${e.ms}`),
                      HeartbeatTimeout: (e) => Effect.succeed(`${r.errorType} ${e.ms}`),
                      WorkerLost: (e) => Effect.succeed(`${r.errorType} ${e.detail}`),
                      WorkerShutdown: (e) => Effect.succeed(`${r.errorType} ${e.detail}`),
                      NoTaskSlot: (e) => Effect.succeed(`${r.errorType} ${e.detail}`),
                      DefinitionError: (e) => Effect.succeed(`${r.errorType} ${e.reason}`)
                    }),
                    Effect.map((text) => StepDecision.gracefulComplete(text))
                  )
              })
          })
          const Failing = Step({
            type: "Failing",
            input: Str,
            error: Failed,
            options: { onExecuteFailure: Route, execute: { retry: { maxAttempts: 1 } } },
            execute: (ctx, how) => {
              switch (how) {
                case "declared":
                  return Effect.fail(new Failed({ message: "declared", attempt: ctx.attempt }))
                case "large":
                  return Effect.sync(() => {
                    ctx.set(Big, "x".repeat(maxValueBytes + 1))
                    return StepDecision.gracefulComplete("too large to commit")
                  })
                default:
                  return Effect.die(new TypeError("not a declared error"))
              }
            }
          })
          const F = Flow({ type: "TypedRoute", start: Failing, steps: [Route], attributes: [Big] })
          return run(
            [F],
            Effect.gen(function* () {
              const client = yield* Client
              for (const how of ["declared", "large", "defect"]) yield* client.startFlow(F, `typed-${how}`, how)
              assert.strictEqual((yield* waitClosed("typed-declared")).output, "Failed 1")
              assert.strictEqual((yield* waitClosed("typed-large")).output, "ValueTooLarge big true")
              assert.strictEqual((yield* waitClosed("typed-defect")).output, "Defect TypeError: not a declared error")
              const steps = yield* client.stepExecutions("typed-large")
              assert.deepStrictEqual(
                steps.map((s) => [s.stepType, s.status, s.attempts.map((a) => a.errorType)]),
                [
                  ["Failing", "failed", ["ValueTooLarge"]],
                  ["Route", "completed", [null]]
                ]
              )
            })
          )
        }
      )

      it.live(
        "waitFor.retry evaluates a failing waitFor again with backoff; when attempts run out the Flow fails",
        () => {
          const Gate = Channel("gate", Str)
          const evaluations: Record<string, number> = {}
          const Waits = Step({
            type: "Waits",
            input: Str,
            options: { waitFor: { retry: { maxAttempts: 3, initialInterval: "1 second", backoffCoefficient: 1 } } },
            waitFor: (ctx, mode) => {
              const n = (evaluations[ctx.flowId] ?? 0) + 1
              evaluations[ctx.flowId] = n
              if (mode === "always" || n < 3) throw new Error(`waitFor ${n} failed`)
              return Wait.anyOf(Gate.forOne())
            },
            execute: (ctx) => Effect.succeed(StepDecision.gracefulComplete(ctx.channelResults(Gate)))
          })
          const F = Flow({ type: "WaitForRetry", start: Waits, channels: [Gate] })
          return run(
            [F],
            Effect.gen(function* () {
              const client = yield* Client
              yield* client.startFlow(F, "wfr-1", "third")
              yield* client.startFlow(F, "wfr-2", "always")
              yield* awaitHistory("wfr-1", has("WaitForEvaluated"))
              yield* client.publish("wfr-1", Gate, "go")
              const done = yield* waitClosed("wfr-1")
              assert.strictEqual(done.status, "completed")
              assert.deepStrictEqual(done.output, ["go"])
              assert.strictEqual(evaluations["wfr-1"], 3)
              const h = yield* client.history("wfr-1")
              const retries = h.filter((e) => e.kind === "WaitForRetryScheduled")
              assert.deepStrictEqual(
                retries.map((e) => [e.data.attempt, e.data.delayMs, e.data.detail]),
                [
                  [2, 1000, "waitFor 1 failed"],
                  [3, 1000, "waitFor 2 failed"]
                ]
              )
              assert.isAtLeast(retries[1]!.at - retries[0]!.at, 1000)
              const failed = yield* waitClosed("wfr-2")
              assert.strictEqual(failed.status, "failed")
              assert.strictEqual(failed.errorType, "WaitForFailed")
              assert.include(failed.reason ?? "", "waitFor 3 failed")
              assert.strictEqual(evaluations["wfr-2"], 3)
            })
          )
        }
      )

      it.live("heartbeat checkpoints are read by the next attempt", () => {
        const Resumable = Step({
          type: "Resumable",
          input: Str,
          error: Failed,
          options: { execute: { retry: { maxAttempts: 2, initialInterval: "1 second" } } },
          execute: (ctx) =>
            Effect.gen(function* () {
              if (ctx.attempt === 1) {
                yield* ctx.heartbeat({ page: 3 })
                return yield* new Failed({ message: "lost", attempt: 1 })
              }
              return StepDecision.gracefulComplete(Option.getOrNull(ctx.heartbeatCheckpoint))
            })
        })
        const F = Flow({ type: "Checkpoint", start: Resumable })
        return run(
          [F],
          Effect.gen(function* () {
            const done = yield* startAndClose(F, "cp-1", "x")
            assert.deepStrictEqual(done.output, { page: 3 })
          })
        )
      })
    })

    // ------------------------------------------------------------------------------------------
    describe("locks", () => {
      it.live("a locking RPC fails at once while a Step holds its lock; Steps wait for their locks", () => {
        const A = Attribute("a", Num)
        const release = Channel("release", Str)
        const order: Array<string> = []
        const Locked = Step({
          type: "Locked",
          input: Str,
          options: { execute: { locks: [A] } },
          execute: (ctx, name) =>
            Effect.gen(function* () {
              order.push(`start ${name}`)
              yield* Effect.sleep(name === "one" ? "1500 millis" : "10 millis")
              order.push(`end ${name}`)
              ctx.set(A, Option.getOrElse(ctx.get(A), () => 0) + 1)
              return StepDecision.deadEnd()
            })
        })
        const Fork = Step({
          type: "Fork",
          input: Str,
          execute: () =>
            Effect.succeed(StepDecision.goToMany(StepMovement.of(Locked, "one"), StepMovement.of(Locked, "two")))
        })
        const SetA = FlowRpc({
          name: "set",
          input: Num,
          output: Num,
          locks: [A],
          handler: (ctx, n) =>
            Effect.sync(() => {
              ctx.set(A, n)
              return { output: n }
            })
        })
        const F = Flow({
          type: "Locks",
          start: Fork,
          steps: [Locked],
          attributes: [A],
          channels: [release],
          rpcs: [SetA]
        })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "locks-1", "x")
            yield* awaitHistory("locks-1", has("AttemptStarted", "Locked-1"))
            const conflict = yield* Effect.flip(client.invokeRpc(F, SetA, "locks-1", 100))
            assert.strictEqual(conflict._tag, "RpcLockConflict")
            yield* awaitHistory("locks-1", has("StepCompleted", "Locked-2"))
            assert.deepStrictEqual(order, ["start one", "end one", "start two", "end two"])
            // the second Step loaded its state after the first committed
            assert.deepStrictEqual(yield* client.getAttribute("locks-1", A), Option.some(2))
            assert.strictEqual(yield* client.invokeRpc(F, SetA, "locks-1", 100), 100)
          })
        )
      })
    })

    // ------------------------------------------------------------------------------------------
    describe("RPC channel access", () => {
      it.live(
        "RPCs read queued messages with IDs and delete one by ID; a vanished ID is ChannelMessageNotFound",
        () => {
          const Q = ChannelMap("q", Str)
          const Idle = Step({ type: "Idle", input: Str, execute: deadEnd })
          const List = FlowRpc({
            name: "list",
            input: Str,
            output: Schema.Array(Schema.Struct({ id: Str, value: Str })),
            handler: (ctx, key) => Effect.succeed({ output: ctx.messages(Q, key) })
          })
          const Keys = FlowRpc({
            name: "keys",
            input: Schema.Void,
            output: Schema.Array(Str),
            handler: (ctx) => Effect.succeed({ output: ctx.channelKeys(Q) })
          })
          const Delete = FlowRpc({
            name: "delete",
            input: Schema.Struct({ key: Str, id: Str }),
            output: Num,
            handler: (ctx, i) =>
              Effect.sync(() => {
                ctx.publishAt(Q, "side", "written-before-delete")
                ctx.deleteMessage(Q, i.id, i.key)
                return { output: ctx.channelSize(Q, i.key) }
              })
          })
          const F = Flow({ type: "RpcChannels", start: Idle, channels: [Q], rpcs: [List, Delete, Keys] })
          return run(
            [F],
            Effect.gen(function* () {
              const client = yield* Client
              yield* client.startFlow(F, "rpcch", "x")
              yield* client.publish("rpcch", Q, "one", "k")
              yield* client.publish("rpcch", Q, "two", "k")
              const listed = yield* client.invokeRpc(F, List, "rpcch", "k")
              assert.deepStrictEqual(
                listed.map((m) => m.value),
                ["one", "two"]
              )
              assert.deepStrictEqual(yield* client.invokeRpc(F, Keys, "rpcch", undefined), ["k"])
              assert.strictEqual(yield* client.invokeRpc(F, Delete, "rpcch", { key: "k", id: listed[0]!.id }), 1)
              const again = yield* Effect.flip(client.invokeRpc(F, Delete, "rpcch", { key: "k", id: listed[0]!.id }))
              assert.strictEqual(again._tag, "ChannelMessageNotFound")
              // the failed RPC committed nothing: its publish to "side" is not there (the first one is)
              assert.deepStrictEqual(
                (yield* client.invokeRpc(F, List, "rpcch", "side")).map((m) => m.value),
                ["written-before-delete"]
              )
              assert.deepStrictEqual(
                (yield* client.invokeRpc(F, List, "rpcch", "k")).map((m) => m.value),
                ["two"]
              )
            })
          )
        }
      )
    })

    // ------------------------------------------------------------------------------------------
    describe("cancellation", () => {
      it.live(
        "a decision cancels Steps by type: the running attempt is interrupted, its late result dropped, no failure route",
        () => {
          const Go = Channel("go", Str)
          const events: Array<string> = []
          const Route = Step({ type: "Route", input: Str, execute: deadEnd })
          const Long = Step({
            type: "Long",
            input: Str,
            options: { onExecuteFailure: Route },
            execute: (ctx) =>
              Effect.gen(function* () {
                yield* ctx.heartbeat()
                events.push("long started")
                yield* Effect.sleep("20 seconds")
                return StepDecision.gracefulComplete("late")
              }).pipe(Effect.onInterrupt(() => Effect.sync(() => events.push("long interrupted"))))
          })
          const Waiting = Step({
            type: "Waiting",
            input: Str,
            waitFor: () => Wait.anyOf(Timer.seconds(3600)),
            execute: deadEnd
          })
          const Canceller = Step({
            type: "Canceller",
            input: Str,
            waitFor: () => Wait.anyOf(Go.forOne()),
            execute: () => Effect.succeed(StepDecision.withCancelingSteps(StepDecision.deadEnd(), Long, Waiting))
          })
          const Fork = Step({
            type: "Fork",
            input: Str,
            execute: () =>
              Effect.succeed(
                StepDecision.goToMany(
                  StepMovement.of(Long, "x"),
                  StepMovement.of(Waiting, "x"),
                  StepMovement.of(Canceller, "x")
                )
              )
          })
          const F = Flow({ type: "Cancel", start: Fork, steps: [Long, Waiting, Canceller, Route], channels: [Go] })
          return run(
            [F],
            Effect.gen(function* () {
              const client = yield* Client
              yield* client.startFlow(F, "cancel-1", "x")
              yield* awaitHistory("cancel-1", has("AttemptStarted", "Long-1"))
              yield* Effect.sleep("200 millis")
              yield* client.publish("cancel-1", Go, "now")
              yield* awaitHistory("cancel-1", (h) => h.filter((e) => e.kind === "StepCancelled").length === 2)
              yield* Effect.sleep("500 millis")
              assert.deepStrictEqual(events, ["long started", "long interrupted"])
              const steps = yield* client.stepExecutions("cancel-1")
              assert.deepStrictEqual(
                steps.map((s) => `${s.stepExecutionId}:${s.status}`),
                ["Fork-1:completed", "Long-1:cancelled", "Waiting-1:cancelled", "Canceller-1:completed"]
              )
              const flow = yield* client.describeFlow("cancel-1")
              assert.strictEqual(flow.status, "running", "cancelled Steps leave the Flow open")
            })
          )
        }
      )

      it.live("an RPC cancels Steps by type", () => {
        const events: Array<string> = []
        const Long = Step({
          type: "Long",
          input: Str,
          execute: () =>
            Effect.never.pipe(
              Effect.onInterrupt(() => Effect.sync(() => events.push("interrupted"))),
              Effect.as(StepDecision.deadEnd())
            )
        })
        const Stop = FlowRpc({
          name: "stop",
          input: Schema.Void,
          output: Schema.Boolean,
          handler: () => Effect.succeed({ output: true, cancelSteps: [Long] })
        })
        const F = Flow({ type: "RpcCancel", start: Long, rpcs: [Stop] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "rpccancel", "x")
            yield* awaitHistory("rpccancel", has("AttemptStarted", "Long-1"))
            assert.isTrue(yield* client.invokeRpc(F, Stop, "rpccancel", undefined))
            yield* awaitHistory("rpccancel", has("StepCancelled", "Long-1"))
            yield* Effect.sleep("300 millis").pipe(Effect.repeat({ until: () => events.length > 0, times: 20 }))
            assert.deepStrictEqual(events, ["interrupted"])
          })
        )
      })
    })

    // ------------------------------------------------------------------------------------------
    describe("timers", () => {
      it.live("timers are whole seconds rounded up; SkipTimer makes a waiting timer fire now", () => {
        const Timed = Step({
          type: "Timed",
          input: Num,
          waitFor: (_ctx, seconds) => Wait.anyOf(withConditionId(Timer.seconds(seconds), "t")),
          execute: (ctx) => Effect.succeed(StepDecision.gracefulComplete(ctx.timerFired(0)))
        })
        const Fractional = Step({
          type: "Fractional",
          input: Num,
          waitFor: () => Wait.anyOf(Timer.byDuration("1500 millis")),
          execute: deadEnd
        })
        const Pick = Step({
          type: "Pick",
          input: Num,
          execute: (_ctx, n) => Effect.succeed(n < 0 ? StepDecision.goTo(Fractional, n) : StepDecision.goTo(Timed, n))
        })
        const F = Flow({ type: "Timers", start: Pick, steps: [Timed, Fractional] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            const one = yield* startAndClose(F, "timer-1", 1)
            assert.strictEqual(one.output, true)
            const h = yield* client.history("timer-1")
            const scheduled = h.find((e) => e.kind === "StepScheduled" && e.stepExecutionId === "Timed-1")!
            const satisfied = h.find((e) => e.kind === "WaitSatisfied" && e.stepExecutionId === "Timed-1")!
            assert.isAtLeast(satisfied.at - scheduled.at, 1000)
            assert.strictEqual(satisfied.at % 1000 < 1000, true)
            // a one-hour timer, skipped
            yield* client.startFlow(F, "timer-2", 3600)
            yield* awaitHistory("timer-2", has("StepScheduled", "Timed-1"))
            assert.isFalse(yield* client.skipTimer("timer-2", "Timed-1", "no-such-timer"))
            assert.isTrue(yield* client.skipTimer("timer-2", "Timed-1", "t"))
            const two = yield* waitClosed("timer-2")
            assert.strictEqual(two.output, true)
            // a timer that is not whole seconds fails the Flow with a clear reason
            const three = yield* startAndClose(F, "timer-3", -1)
            assert.strictEqual(three.status, "failed")
            assert.include(three.reason ?? "", "whole")
          })
        )
      })
    })

    // ------------------------------------------------------------------------------------------
    describe("streams", () => {
      it.live(
        "streams: writes never fail a Step, capacity trims the oldest, resume tokens continue and reject trimmed positions",
        () => {
          const Events = StreamDef("events", Str, { capacityBytes: 16 * 1024 })
          const Writer = Step({
            type: "Writer",
            input: Num,
            execute: (ctx, n) =>
              Effect.gen(function* () {
                for (let i = 0; i < n; i++) yield* ctx.emit(Events, `event-${i}-${"x".repeat(900)}`)
                yield* ctx.emit(Events, "y".repeat(200 * 1024)) // over the message size: dropped
                return StepDecision.gracefulComplete(n)
              })
          })
          const F = Flow({ type: "Streams", start: Writer, streams: [Events] })
          return run(
            [F],
            Effect.gen(function* () {
              const client = yield* Client
              assert.strictEqual((yield* startAndClose(F, "stream-small", 3)).status, "completed")
              const all = Array.from(yield* Stream.runCollect(client.readStream("stream-small", Events)))
              assert.deepStrictEqual(
                all.map((m) => m.value.slice(0, 7)),
                ["event-0", "event-1", "event-2"]
              )
              const rest = Array.from(
                yield* Stream.runCollect(client.readStream("stream-small", Events, { from: { after: all[0]!.token } }))
              )
              assert.deepStrictEqual(
                rest.map((m) => m.token),
                all.slice(1).map((m) => m.token)
              )
              const bad = yield* Effect.flip(
                Stream.runCollect(client.readStream("stream-small", Events, { from: { after: "garbage" } }))
              )
              assert.strictEqual(bad._tag, "InvalidResumeToken")
              // 40 messages of ~1.5 KiB against 16 KiB: the oldest are trimmed, the Step still completes
              assert.strictEqual((yield* startAndClose(F, "stream-big", 40)).status, "completed")
              const kept = Array.from(yield* Stream.runCollect(client.readStream("stream-big", Events)))
              assert.isBelow(kept.length, 40)
              assert.isAbove(kept.length, 0)
              assert.strictEqual(kept[kept.length - 1]!.value.slice(0, 8), "event-39")
              const trimmed = yield* Effect.flip(
                Stream.runCollect(client.readStream("stream-small", Events, { from: { after: all[0]!.token } }))
              )
              assert.strictEqual(trimmed._tag, "InvalidResumeToken")
            })
          )
        }
      )

      it.live("a following reader sees messages as they are written and ends when the Flow closes", () => {
        const Events = StreamDef("events", Num)
        const Go = Channel("go", Str)
        const Writer = Step({
          type: "Writer",
          input: Num,
          waitFor: () => Wait.anyOf(Go.forOne()),
          execute: (ctx, n) =>
            Effect.gen(function* () {
              for (let i = 0; i < n; i++) {
                yield* ctx.emit(Events, i)
                yield* Effect.sleep("50 millis")
              }
              return StepDecision.gracefulComplete(n)
            })
        })
        const F = Flow({ type: "Follow", start: Writer, streams: [Events], channels: [Go] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "follow", 5)
            const reader = yield* Effect.forkChild(
              Stream.runCollect(client.readStream("follow", Events, { follow: true, pollInterval: "20 millis" }))
            )
            yield* client.publish("follow", Go, "go")
            const got = yield* Fiber.join(reader).pipe(Effect.timeout("20 seconds"))
            assert.deepStrictEqual(
              Array.from(got).map((m) => m.value),
              [0, 1, 2, 3, 4]
            )
          })
        )
      })
    })

    // ------------------------------------------------------------------------------------------
    describe("flows, history and bad input", () => {
      it.live("start errors: FlowAlreadyStarted, idempotent repeats, FlowNotFound, FlowNotActive", () => {
        const Once = Step({
          type: "Once",
          input: Str,
          execute: () => Effect.succeed(StepDecision.gracefulComplete("ok"))
        })
        const Ping = FlowRpc({
          name: "ping",
          input: Schema.Void,
          output: Str,
          handler: () => Effect.succeed({ output: "pong" })
        })
        const F = Flow({ type: "Starts", start: Once, rpcs: [Ping] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            const run1 = yield* client.startFlow(F, "s-1", "a", { requestId: "req-1", ignoreAlreadyStarted: true })
            const again = yield* client.startFlow(F, "s-1", "a", { requestId: "req-1", ignoreAlreadyStarted: true })
            assert.strictEqual(again, run1)
            const dup = yield* Effect.flip(client.startFlow(F, "s-1", "a"))
            assert.strictEqual(dup._tag, "FlowAlreadyStarted")
            const missing = yield* Effect.flip(client.invokeRpc(F, Ping, "nope", undefined))
            assert.strictEqual(missing._tag, "FlowNotFound")
            const describeMissing = yield* Effect.flip(client.describeFlow("nope"))
            assert.strictEqual(describeMissing._tag, "FlowNotFound")
            yield* waitClosed("s-1")
            const closed = yield* Effect.flip(client.invokeRpc(F, Ping, "s-1", undefined))
            assert.strictEqual(closed._tag, "FlowNotActive")
            const bad = yield* Effect.flip(client.startFlow(F, "s-2", 42 as unknown as string))
            assert.strictEqual(bad._tag, "InvalidInput")
            const big = yield* Effect.flip(client.startFlow(F, "s-3", "x".repeat(maxValueBytes + 1)))
            assert.strictEqual(big._tag, "ValueTooLarge")
          })
        )
      })

      it.live("stopFlow cancels every Step and closes the Flow; history records the Step shape", () => {
        const Go = Channel("go", Str)
        const Wait1 = Step({
          type: "Wait1",
          input: Str,
          waitFor: () => Wait.anyOf(Go.forOne()),
          execute: deadEnd
        })
        const F = Flow({ type: "Stop", start: Wait1, channels: [Go] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "stop-1", "x")
            yield* awaitHistory("stop-1", has("StepScheduled"))
            const described = yield* client.describeFlow("stop-1")
            assert.deepStrictEqual(described.waitingSteps, ["Wait1-1"])
            const listed = yield* client.listFlows({ status: "running" })
            assert.isTrue(listed.some((f) => f.flowId === "stop-1"))
            yield* client.stopFlow("stop-1", { mode: "cancel", reason: "user asked" })
            const d = yield* client.describeFlow("stop-1")
            assert.strictEqual(d.status, "cancelled")
            assert.strictEqual(d.reason, "user asked")
            const h = yield* client.history("stop-1")
            assert.deepStrictEqual(
              h.map((e) => e.kind),
              ["FlowStarted", "StepScheduled", "StepCancelled", "FlowStopped"]
            )
            const again = yield* Effect.flip(client.stopFlow("stop-1", { mode: "cancel" }))
            assert.strictEqual(again._tag, "FlowNotActive")
          })
        )
      })

      it.live("registration rejects invalid definitions with DefinitionError", () => {
        const A = Attribute("a", Num)
        const Other = Attribute("a-undeclared", Num)
        const S = Step({ type: "S", input: Str, execute: deadEnd })
        const NumStep = Step({ type: "N", input: Num, execute: deadEnd })
        const cases: ReadonlyArray<[string, FlowDef<any, never>]> = [
          ["duplicate attribute", Flow({ type: "D1", start: S, attributes: [A, Attribute("a", Str)] })],
          [
            "undeclared lock",
            Flow({
              type: "D2",
              start: Step({ ...S, type: "L", options: { execute: { locks: [Other] } } }),
              attributes: [A]
            })
          ],
          ["duplicate Step type", Flow({ type: "D3", start: S, steps: [Step({ ...S })] })],
          [
            "failure route input type",
            Flow({
              type: "D4",
              start: Step({ ...S, type: "R", options: { onExecuteFailure: NumStep } }),
              steps: [NumStep]
            })
          ],
          [
            "undeclared lock in RPC",
            Flow({
              type: "D5",
              start: S,
              rpcs: [
                FlowRpc({
                  name: "r",
                  input: Str,
                  output: Str,
                  locks: [Other],
                  handler: (_c, i) => Effect.succeed({ output: i })
                })
              ]
            })
          ],
          [
            "non-whole-second timeout",
            Flow({ type: "D6", start: Step({ ...S, type: "T", options: { execute: { timeout: "1500 millis" } } }) })
          ]
        ]
        return Effect.gen(function* () {
          for (const [what, flow] of cases) {
            const exit = yield* Effect.exit(buildWorker(flow))
            assert.isTrue(exit._tag === "Failure", what)
            const text = exit._tag === "Failure" ? String(exit.cause) : ""
            assert.include(text, "DefinitionError", what)
          }
          // and the same Flow types register fine when valid
          const ok = yield* Effect.exit(buildWorker(Flow({ type: "Ok", start: S })))
          assert.strictEqual(ok._tag, "Success")
        })
      })

      it.live("an invalid channel bound in a wait fails the Flow with a clear reason", () => {
        const Ch = Channel("ch", Str)
        const Bad = Step({
          type: "Bad",
          input: Str,
          waitFor: () => Wait.anyOf(Ch.forRange(3, 1)),
          execute: deadEnd
        })
        const F = Flow({ type: "BadBound", start: Bad, channels: [Ch] })
        return run(
          [F],
          Effect.gen(function* () {
            const done = yield* startAndClose(F, "badbound", "x")
            assert.strictEqual(done.status, "failed")
            assert.include(done.reason ?? "", "invalid channel bound")
          })
        )
      })

      it.live("a graceful completion decided while a sibling runs closes the Flow when the sibling ends", () => {
        const Gate = Channel("gate", Str)
        const Done = Step({
          type: "Done",
          input: Num,
          execute: () => Effect.succeed(StepDecision.gracefulComplete("first"))
        })
        const Sibling = Step({
          type: "Sibling",
          input: Num,
          waitFor: () => Wait.anyOf(Gate.forOne()),
          execute: deadEnd
        })
        const Fork = Step({
          type: "Fork",
          input: Str,
          execute: () => Effect.succeed(StepDecision.goToMany(StepMovement.of(Done, 1), StepMovement.of(Sibling, 2)))
        })
        const F = Flow({ type: "GracefulSibling", start: Fork, steps: [Done, Sibling], channels: [Gate] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "graceful-1", "x")
            yield* awaitHistory("graceful-1", has("StepCompleted", "Done-1"))
            assert.strictEqual((yield* client.describeFlow("graceful-1")).status, "running")
            yield* client.publish("graceful-1", Gate, "go")
            const done = yield* waitClosed("graceful-1")
            assert.strictEqual(done.status, "completed")
            assert.strictEqual(done.output, "first")
          })
        )
      })

      it.live("goToMany with no movement fails the Step's decision", () => {
        const Empty = Step({ type: "Empty", input: Str, execute: () => Effect.succeed(StepDecision.goToMany()) })
        const F = Flow({ type: "NoMovement", start: Empty })
        return run(
          [F],
          Effect.gen(function* () {
            const done = yield* startAndClose(F, "nomove-1", "x")
            assert.strictEqual(done.status, "failed")
            assert.include(done.reason ?? "", "requires a movement")
          })
        )
      })

      it.live("setting an attribute to null deletes it", () => {
        const Maybe = Attribute("maybe", Schema.NullOr(Str))
        const S = Step({
          type: "S",
          input: Str,
          execute: (ctx) =>
            Effect.sync(() => {
              ctx.set(Maybe, "there")
              return StepDecision.goTo(Clear, "x")
            })
        })
        const Clear = Step({
          type: "Clear",
          input: Str,
          execute: (ctx) =>
            Effect.sync(() => {
              ctx.set(Maybe, null)
              return StepDecision.gracefulComplete(Option.isNone(ctx.get(Maybe)))
            })
        })
        const F = Flow({ type: "SetNull", start: S, steps: [Clear], attributes: [Maybe] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            const done = yield* startAndClose(F, "null-1", "x")
            assert.strictEqual(done.output, true)
            assert.isTrue(Option.isNone(yield* client.getAttribute("null-1", Maybe)))
          })
        )
      })

      it.live(
        "every client call on an unknown Flow fails FlowNotFound; writes to a closed Flow fail FlowNotActive",
        () => {
          const A = Attribute("a", Num)
          const Ch = Channel("ch", Str)
          const Ping = FlowRpc({
            name: "ping",
            input: Str,
            output: Str,
            handler: () => Effect.succeed({ output: "pong" })
          })
          const S = Step({ type: "S", input: Str, execute: () => Effect.succeed(StepDecision.forceComplete("x")) })
          const F = Flow({ type: "Unknown", start: S, attributes: [A], channels: [Ch], rpcs: [Ping] })
          return run(
            [F],
            Effect.gen(function* () {
              const client = yield* Client
              assert.strictEqual(yield* tag(client.getAttribute("nobody", A)), "FlowNotFound")
              assert.strictEqual(yield* tag(client.publish("nobody", Ch, "m")), "FlowNotFound")
              assert.strictEqual(yield* tag(client.invokeRpc(F, Ping, "nobody", "x")), "FlowNotFound")
              assert.strictEqual(yield* tag(client.skipTimer("nobody", "S-1", 0)), "FlowNotFound")
              assert.strictEqual(yield* tag(client.stopFlow("nobody", { mode: "cancel" })), "FlowNotFound")
              assert.strictEqual(yield* tag(client.describeFlow("nobody")), "FlowNotFound")
              yield* startAndClose(F, "closed-1", "x")
              assert.strictEqual(yield* tag(client.publish("closed-1", Ch, "m")), "FlowNotActive")
              assert.strictEqual(yield* tag(client.invokeRpc(F, Ping, "closed-1", "x")), "FlowNotActive")
              assert.isTrue(Option.isNone(yield* client.getAttribute("closed-1", A)))
            })
          )
        }
      )

      it.live("a failed RPC reports the error's class name when the error sets no name of its own", () => {
        class QuotaExceeded extends Error {}
        const Fail = FlowRpc({
          name: "fail",
          input: Str,
          output: Str,
          handler: () => Effect.fail(new QuotaExceeded("over quota"))
        })
        const Gate = Channel("gate", Str)
        const S = Step({
          type: "S",
          input: Str,
          waitFor: () => Wait.anyOf(Gate.forOne()),
          execute: deadEnd
        })
        const F = Flow({ type: "RpcClass", start: S, channels: [Gate], rpcs: [Fail] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "rpcclass-1", "x")
            const error = yield* Effect.flip(client.invokeRpc(F, Fail, "rpcclass-1", "x"))
            assert.strictEqual(error._tag, "RpcFailed")
            assert.strictEqual((error as { errorType?: string }).errorType, "QuotaExceeded")
          })
        )
      })

      it.live("a Flow keeps every graceful completion's output; a failed Flow has an error type", () => {
        const Branch = Step({
          type: "Branch",
          input: Num,
          execute: (_ctx, n) => Effect.succeed(StepDecision.gracefulComplete(n * 10))
        })
        const Fork = Step({
          type: "Fork",
          input: Str,
          execute: () => Effect.succeed(StepDecision.goToMany(...[1, 2, 3].map((n) => StepMovement.of(Branch, n))))
        })
        class Boom extends Schema.TaggedError<Boom>()("Boom", {}) {}
        const Fails = Step({
          type: "Fails",
          input: Str,
          error: Boom,
          options: { execute: { retry: { maxAttempts: 1 } } },
          execute: () => Effect.fail(new Boom())
        })
        const Forced = Step({
          type: "Forced",
          input: Str,
          execute: () => Effect.succeed(StepDecision.forceFail("given up"))
        })
        const F = Flow({ type: "Outputs", start: Fork, steps: [Branch] })
        const G = Flow({ type: "ErrorType", start: Fails })
        const H = Flow({ type: "Forced", start: Forced })
        return run(
          [F, G, H],
          Effect.gen(function* () {
            const done = yield* startAndClose(F, "outputs-1", "x")
            assert.strictEqual(done.status, "completed")
            assert.deepStrictEqual([...done.outputs].sort(), [10, 20, 30])
            assert.strictEqual(done.output, done.outputs[0])
            assert.strictEqual(done.errorType, null)
            const failed = yield* startAndClose(G, "errtype-1", "x")
            assert.strictEqual(failed.status, "failed")
            assert.strictEqual(failed.errorType, "Boom")
            const forced = yield* startAndClose(H, "forced-1", "x")
            assert.strictEqual(forced.errorType, "ForceFail")
            assert.strictEqual(forced.reason, "given up")
          })
        )
      })

      it.live("a Flow starts with initial attributes; waitForFlow gives up with LongPollTimeout", () => {
        const A = Attribute("a", Num)
        const M = AttributeMap("m", Str)
        const Undeclared = Attribute("undeclared", Num)
        const Gate = Channel("gate", Str)
        const S = Step({
          type: "S",
          input: Str,
          waitFor: () => Wait.anyOf(Gate.forOne()),
          execute: (ctx) =>
            Effect.succeed(StepDecision.gracefulComplete({ a: Option.getOrNull(ctx.get(A)), k: ctx.keys(M) }))
        })
        const F = Flow({ type: "Initial", start: S, attributes: [A, M], channels: [Gate] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "initial-1", "x", {
              initialAttributes: [
                { attribute: A, value: 7 },
                { attribute: M, key: "k1", value: "v" }
              ]
            })
            assert.deepStrictEqual(yield* client.getAttribute("initial-1", A), Option.some(7))
            const timedOut = yield* Effect.flip(client.waitForFlow("initial-1", { timeout: "200 millis" }))
            assert.strictEqual(timedOut._tag, "LongPollTimeout")
            yield* client.publish("initial-1", Gate, "go")
            const done = yield* client.waitForFlow("initial-1", { timeout: "30 seconds" })
            assert.deepStrictEqual(done.output, { a: 7, k: ["k1"] })
            const bad = yield* Effect.flip(
              client.startFlow(F, "initial-2", "x", { initialAttributes: [{ attribute: Undeclared, value: 1 }] })
            )
            assert.strictEqual(bad._tag, "InvalidInput")
          })
        )
      })

      it.live("an execution timeout fails the Flow, or cancels its Steps and runs the timeout handler Step", () => {
        const Gate = Channel("gate", Str)
        // the Flows whose Busy body started, and those whose Busy body was interrupted
        const started: Array<string> = []
        const interrupted: Array<string> = []
        const Forever = Step({
          type: "Forever",
          input: Str,
          waitFor: () => Wait.anyOf(Gate.forOne()),
          execute: deadEnd
        })
        const Busy = Step({
          type: "Busy",
          input: Str,
          execute: (ctx) =>
            Effect.sync(() => started.push(ctx.flowId)).pipe(
              Effect.andThen(Effect.never),
              Effect.onInterrupt(() => Effect.sync(() => interrupted.push(ctx.flowId)))
            )
        })
        const Begin = Step({
          type: "Begin",
          input: Str,
          execute: (_ctx, i) =>
            Effect.succeed(StepDecision.goToMany(StepMovement.of(Forever, i), StepMovement.of(Busy, i)))
        })
        const OnTimeout = Step({
          type: "OnTimeout",
          input: Str,
          execute: (_ctx, i) => Effect.succeed(StepDecision.gracefulComplete(`timed out: ${i}`))
        })
        const Failing = Flow({
          type: "TimeoutFails",
          start: Begin,
          steps: [Forever, Busy],
          channels: [Gate],
          executionTimeout: { after: "1 second" }
        })
        const Handled = Flow({
          type: "TimeoutHandled",
          start: Begin,
          steps: [Forever, Busy],
          channels: [Gate],
          executionTimeout: { after: "1 second", handler: OnTimeout }
        })
        const Plain = Flow({ type: "TimeoutAtStart", start: Begin, steps: [Forever, Busy], channels: [Gate] })
        return run(
          [Failing, Handled, Plain],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(Failing, "timeout-fail", "a")
            yield* client.startFlow(Handled, "timeout-handled", "b")
            yield* client.startFlow(Plain, "timeout-start", "c", { executionTimeout: "1 second" })
            yield* client.startFlow(Plain, "timeout-none", "d")
            const failed = yield* waitClosed("timeout-fail")
            assert.strictEqual(failed.status, "failed")
            assert.strictEqual(failed.errorType, "ExecutionTimeout")
            const handled = yield* waitClosed("timeout-handled")
            assert.strictEqual(handled.status, "completed")
            assert.strictEqual(handled.output, "timed out: b")
            const steps = yield* client.stepExecutions("timeout-handled")
            assert.deepStrictEqual(
              steps.map((s) => [s.stepType, s.status]),
              // a Begin that had not completed by the deadline (a loaded machine) is cancelled itself
              steps[0]?.status === "cancelled"
                ? [
                    ["Begin", "cancelled"],
                    ["OnTimeout", "completed"]
                  ]
                : [
                    ["Begin", "completed"],
                    ["Forever", "cancelled"],
                    ["Busy", "cancelled"],
                    ["OnTimeout", "completed"]
                  ]
            )
            assert.strictEqual((yield* waitClosed("timeout-start")).errorType, "ExecutionTimeout")
            // The commit that closes a Flow cancels its Steps in the same transaction; the owner interrupts
            // their bodies after it, so a body's finalizer may run after a reader saw the Flow closed: wait for
            // every started body of a timed-out Flow to be interrupted (one that had not started by the
            // deadline never runs), and for the untimed Flow's body to run on.
            const timedOut = ["timeout-fail", "timeout-handled", "timeout-start"]
            yield* Effect.sync(() => ({ started: [...started], interrupted: [...interrupted] })).pipe(
              Effect.repeat({
                schedule: Schedule.spaced("25 millis"),
                until: (seen) =>
                  seen.started.includes("timeout-none") &&
                  seen.started.every((id) => id === "timeout-none" || seen.interrupted.includes(id))
              }),
              Effect.timeoutOrElse({
                duration: "30 seconds",
                orElse: () =>
                  Effect.die(
                    new Error(`Busy bodies started ${started.join(",")}, interrupted ${interrupted.join(",")}`)
                  )
              })
            )
            for (const id of interrupted) assert.include(timedOut, id)
            assert.strictEqual((yield* client.describeFlow("timeout-none")).status, "running")
            yield* client.stopFlow("timeout-none", { mode: "cancel" })
          })
        )
      })

      it.live("a client sets attributes of a running Flow, ordered with Steps and refused under a Step's lock", () => {
        const Count = Attribute("count", Num)
        const Tags = AttributeMap("tags", Str)
        const Undeclared = Attribute("undeclared", Num)
        const Gate = Channel("gate", Str)
        const release = Deferred.makeUnsafe<void>()
        const Read = Step({
          type: "Read",
          input: Str,
          waitFor: () => Wait.anyOf(Gate.forOne()),
          execute: (ctx) =>
            Effect.succeed(
              StepDecision.goTo(
                Locked,
                String(Option.getOrNull(ctx.get(Count))) + Option.getOrElse(ctx.getAt(Tags, "k"), () => "-")
              )
            )
        })
        const Locked = Step({
          type: "Locked",
          input: Str,
          options: { execute: { locks: [Count] } },
          execute: (ctx, seen) =>
            Effect.gen(function* () {
              yield* Deferred.await(release)
              return StepDecision.gracefulComplete({ seen, now: Option.getOrNull(ctx.get(Count)) })
            })
        })
        const F = Flow({
          type: "ClientWrites",
          start: Read,
          steps: [Locked],
          attributes: [Count, Tags],
          channels: [Gate]
        })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "writes-1", "x", { initialAttributes: [{ attribute: Count, value: 1 }] })
            yield* client.setAttribute("writes-1", Count, 5)
            yield* client.setAttribute("writes-1", Tags, "tagged", "k")
            assert.deepStrictEqual(yield* client.getAttribute("writes-1", Count), Option.some(5))
            yield* client.publish("writes-1", Gate, "go")
            yield* awaitHistory("writes-1", has("AttemptStarted", "Locked-1"))
            const conflict = yield* Effect.flip(client.setAttribute("writes-1", Count, 6))
            assert.strictEqual(conflict._tag, "RpcLockConflict")
            // a key the Step does not lock is written at once; the running Step keeps the view it started with
            yield* client.setAttribute("writes-1", Tags, null, "k")
            assert.isTrue(Option.isNone(yield* client.getAttribute("writes-1", Tags, "k")))
            const bad = yield* Effect.flip(client.setAttribute("writes-1", Undeclared, 1))
            assert.strictEqual(bad._tag, "InvalidInput")
            Deferred.doneUnsafe(release, Effect.void)
            const done = yield* waitClosed("writes-1")
            assert.deepStrictEqual(done.output, { seen: "5tagged", now: 5 })
            assert.strictEqual(
              yield* Effect.map(Effect.flip(client.setAttribute("writes-1", Count, 7)), (e) => e._tag),
              "FlowNotActive"
            )
            assert.strictEqual(
              yield* Effect.map(Effect.flip(client.setAttribute("nobody", Count, 7)), (e) => e._tag),
              "FlowNotFound"
            )
          })
        )
      })

      it.live("a client waits for a Step execution to end, or gives up with LongPollTimeout", () => {
        const Gate = Channel("gate", Str)
        const Waits = Step({
          type: "Waits",
          input: Str,
          waitFor: () => Wait.anyOf(Gate.forOne()),
          execute: () => Effect.succeed(StepDecision.goTo(Last, "x"))
        })
        const Last = Step({ type: "Last", input: Str, execute: () => Effect.succeed(StepDecision.gracefulComplete(1)) })
        const F = Flow({ type: "StepWait", start: Waits, steps: [Last], channels: [Gate] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            yield* client.startFlow(F, "stepwait-1", "x")
            const timedOut = yield* Effect.flip(
              client.waitForStepExecution("stepwait-1", "Waits-1", { timeout: "300 millis" })
            )
            assert.strictEqual(timedOut._tag, "LongPollTimeout")
            assert.strictEqual((timedOut as { stepExecutionId?: string }).stepExecutionId, "Waits-1")
            const waiting = yield* Effect.forkChild(
              client.waitForStepExecution("stepwait-1", "Last-1", { timeout: "30 seconds" })
            )
            yield* client.publish("stepwait-1", Gate, "go")
            const waits = yield* client.waitForStepExecution("stepwait-1", "Waits-1", { timeout: "30 seconds" })
            assert.strictEqual(waits.status, "completed")
            const last = yield* Fiber.join(waiting)
            assert.strictEqual(last.status, "completed")
            const missing = yield* Effect.flip(
              client.waitForStepExecution("nobody", "Waits-1", { timeout: "1 second" })
            )
            assert.strictEqual(missing._tag, "FlowNotFound")
          })
        )
      })

      it.live("a closed Flow's ID is reused only as the ID-reuse policy allows; the new run starts clean", () => {
        const A = Attribute("a", Str)
        const Gate = Channel("gate", Str)
        const S = Step({
          type: "S",
          input: Str,
          waitFor: () => Wait.anyOf(Gate.forOne()),
          execute: (ctx, i) =>
            Effect.sync(() => {
              const before = Option.getOrNull(ctx.get(A))
              ctx.set(A, i)
              return i === "fail" ? StepDecision.forceFail("failed run") : StepDecision.gracefulComplete({ i, before })
            })
        })
        const F = Flow({ type: "Reuse", start: S, attributes: [A], channels: [Gate] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            const first = yield* client.startFlow(F, "reuse-1", "one")
            // a running Flow's ID is never reused
            assert.strictEqual(
              yield* tag(client.startFlow(F, "reuse-1", "x", { idReusePolicy: "allowIfClosed" })),
              "FlowAlreadyStarted"
            )
            yield* client.publish("reuse-1", Gate, "go")
            yield* waitClosed("reuse-1")
            assert.strictEqual(yield* tag(client.startFlow(F, "reuse-1", "x")), "FlowAlreadyStarted")
            assert.strictEqual(
              yield* tag(client.startFlow(F, "reuse-1", "x", { idReusePolicy: "allowIfFailed" })),
              "FlowAlreadyStarted"
            )
            const second = yield* client.startFlow(F, "reuse-1", "fail", { idReusePolicy: "allowIfClosed" })
            assert.notStrictEqual(second, first)
            const fresh = yield* client.describeFlow("reuse-1")
            assert.strictEqual(fresh.status, "running")
            assert.strictEqual(fresh.runId, second)
            assert.isTrue(Option.isNone(yield* client.getAttribute("reuse-1", A)))
            const history = yield* client.history("reuse-1")
            assert.strictEqual(history.filter((e) => e.kind === "FlowStarted").length, 1)
            assert.deepStrictEqual(
              (yield* client.stepExecutions("reuse-1")).map((s) => [s.stepExecutionId, s.status]),
              [["S-1", "waiting"]]
            )
            yield* client.publish("reuse-1", Gate, "go")
            assert.strictEqual((yield* waitClosed("reuse-1")).status, "failed")
            const third = yield* client.startFlow(F, "reuse-1", "three", { idReusePolicy: "allowIfFailed" })
            assert.notStrictEqual(third, second)
            yield* client.publish("reuse-1", Gate, "go")
            const done = yield* waitClosed("reuse-1")
            assert.deepStrictEqual(done.output, { i: "three", before: null })
          })
        )
      })

      it.live("parallel Steps run concurrently and the Flow completes when the last branch completes", () => {
        const started = Deferred.makeUnsafe<void>()
        let running = 0
        let maxRunning = 0
        const Branch = Step({
          type: "Branch",
          input: Num,
          execute: (_ctx, n) =>
            Effect.gen(function* () {
              running++
              maxRunning = Math.max(maxRunning, running)
              if (running === 3) Deferred.doneUnsafe(started, Effect.void)
              yield* Deferred.await(started).pipe(Effect.timeout("5 seconds"), Effect.ignore)
              running--
              return StepDecision.gracefulComplete(n)
            })
        })
        const Fork = Step({
          type: "Fork",
          input: Str,
          execute: () => Effect.succeed(StepDecision.goToMany(...[1, 2, 3].map((n) => StepMovement.of(Branch, n))))
        })
        const F = Flow({ type: "Parallel", start: Fork, steps: [Branch] })
        return run(
          [F],
          Effect.gen(function* () {
            const client = yield* Client
            const done = yield* startAndClose(F, "par-1", "x")
            assert.strictEqual(done.status, "completed")
            assert.strictEqual(maxRunning, 3)
            const steps = yield* client.stepExecutions("par-1")
            assert.deepStrictEqual(
              steps.map((s) => s.stepExecutionId),
              ["Fork-1", "Branch-1", "Branch-2", "Branch-3"]
            )
          })
        )
      })
    })
  })
}
