/**
 * The Flows the benchmark runs, and an in-process recorder their Steps write to. The benchmark process is
 * also the worker (embedded engine, or the only runner of the cluster), so `execute` and the measuring code
 * share memory and a clock.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Channel, Flow, Step, StepDecision, type StepDef, Timer, Wait } from "../src/index.ts"

/** Wall-clock time in epoch milliseconds with sub-millisecond resolution. */
export const nowMs = (): number => performance.timeOrigin + performance.now()

/** Every `execute` start, per Flow, in order. */
const executeStarts = new Map<string, Array<number>>()
/** Samples computed inside `execute` (publish latency, timer lateness), per Flow. */
const samples = new Map<string, number>()
const listeners = new Set<() => void>()

const notify = () => {
  for (const listener of listeners) listener()
}

const recordStart = (flowId: string, at: number) => {
  let list = executeStarts.get(flowId)
  if (list === undefined) {
    list = []
    executeStarts.set(flowId, list)
  }
  list.push(at)
  notify()
}

export const Recorder = {
  starts: (flowId: string): ReadonlyArray<number> => executeStarts.get(flowId) ?? [],
  sample: (flowId: string): number | undefined => samples.get(flowId),
  /** Resolves once `predicate` holds (checked on every record), or fails after `timeoutMs`. */
  until: (what: string, predicate: () => boolean, timeoutMs: number): Effect.Effect<void, Error> =>
    Effect.callback<void, Error>((resume) => {
      const check = () => {
        if (!predicate()) return
        listeners.delete(check)
        clearTimeout(timer)
        resume(Effect.void)
      }
      const timer = setTimeout(() => {
        listeners.delete(check)
        resume(Effect.fail(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)))
      }, timeoutMs)
      listeners.add(check)
      check()
      return Effect.sync(() => {
        listeners.delete(check)
        clearTimeout(timer)
      })
    }),
  clear: () => {
    executeStarts.clear()
    samples.clear()
  }
}

// ---------------------------------------------------------------------------------------------------------
// 1 + 2: a Step that loops `goTo(Self, left - 1)`; `left` transitions, then the Flow completes.
// ---------------------------------------------------------------------------------------------------------

const LoopInput = Schema.Struct({ left: Schema.Number })

export const LoopStep: StepDef<{ readonly left: number }> = Step({
  type: "Loop",
  input: LoopInput,
  execute: (ctx, input) =>
    Effect.sync(() => {
      recordStart(ctx.flowId, nowMs())
      return input.left <= 0 ? StepDecision.gracefulComplete() : StepDecision.goTo(LoopStep, { left: input.left - 1 })
    })
})

export const LoopFlow = Flow({ type: "BenchLoop", start: LoopStep })

// ---------------------------------------------------------------------------------------------------------
// 3 + 6: a Step waiting on a channel; the message carries the publisher's timestamp.
// ---------------------------------------------------------------------------------------------------------

export const Ping = Channel("ping", Schema.Struct({ sentAt: Schema.Number }))

export const AwaitPing = Step({
  type: "AwaitPing",
  input: Schema.Null,
  waitFor: () => Wait.anyOf(Ping.forOne()),
  execute: (ctx) =>
    Effect.sync(() => {
      const at = nowMs()
      const message = ctx.channelResults(Ping)[0]
      if (message !== undefined) samples.set(ctx.flowId, at - message.sentAt)
      recordStart(ctx.flowId, at)
      return StepDecision.gracefulComplete()
    })
})

export const PingFlow = Flow({ type: "BenchPing", start: AwaitPing, channels: [Ping] })

// ---------------------------------------------------------------------------------------------------------
// 4: a Step waiting on `Timer.seconds(1)`; execute records when it started.
// ---------------------------------------------------------------------------------------------------------

export const AwaitTimer = Step({
  type: "AwaitTimer",
  input: Schema.Null,
  waitFor: () => Wait.anyOf(Timer.seconds(1)),
  execute: (ctx) =>
    Effect.sync(() => {
      recordStart(ctx.flowId, nowMs())
      return StepDecision.gracefulComplete()
    })
})

export const TimerFlow = Flow({ type: "BenchTimer", start: AwaitTimer })

export const allFlows = [LoopFlow, PingFlow, TimerFlow] as const
