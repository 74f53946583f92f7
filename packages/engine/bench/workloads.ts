/**
 * The engine workloads. Each runs against the `Client` of an engine whose worker (this process) runs the
 * benchmark Flows, and returns raw samples; the caller summarizes them.
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { Client } from "../src/index.ts"
import { LoopFlow, nowMs, Ping, PingFlow, Recorder, TimerFlow } from "./flows.ts"
import { deltas } from "./stats.ts"

let runCounter = 0
/** A Flow ID unique within this benchmark run. */
const freshId = (prefix: string) => `${prefix}-${++runCounter}-${Date.now().toString(36)}`

/** Polls until `check` returns true (every 20 ms), failing after `timeoutMs`. */
const pollUntil = <E, R>(what: string, check: Effect.Effect<boolean, E, R>, timeoutMs: number) =>
  check.pipe(
    Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (ok) => ok }),
    Effect.timeoutOrElse({
      duration: timeoutMs,
      orElse: () => Effect.fail(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`))
    }),
    Effect.asVoid
  )

export interface TransitionSamples {
  /** Wall time between consecutive `execute` starts of one Flow (ms, sub-ms resolution). */
  readonly wall: ReadonlyArray<number>
  /** The same from the history: consecutive `AttemptStarted` timestamps (ms resolution). */
  readonly history: ReadonlyArray<number>
}

/** Runs one Flow whose Step loops `goTo(Self)` `transitions` times. */
export const transitionLatency = (transitions: number) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const flowId = freshId("loop")
    yield* client.startFlow(LoopFlow, flowId, { left: transitions })
    yield* Recorder.until(`${flowId} to loop`, () => Recorder.starts(flowId).length > transitions, 120_000)
    const events = yield* client.history(flowId)
    const attemptStarts = events.filter((e) => e.kind === "AttemptStarted").map((e) => e.at)
    return { wall: deltas(Recorder.starts(flowId)), history: deltas(attemptStarts) } satisfies TransitionSamples
  })

export interface ThroughputResult {
  readonly flows: number
  readonly transitionsPerFlow: number
  readonly transitions: number
  /** From the first `startFlow` call to the last Step's `execute` start (ms). */
  readonly wallMs: number
  readonly perSecond: number
}

/** Starts `flows` Flows at once, each looping `transitionsPerFlow` times. */
export const throughput = (flows: number, transitionsPerFlow: number) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const ids = Array.from({ length: flows }, () => freshId("tp"))
    const t0 = nowMs()
    yield* Effect.forEach(ids, (id) => client.startFlow(LoopFlow, id, { left: transitionsPerFlow }), {
      concurrency: "unbounded",
      discard: true
    })
    yield* Recorder.until(
      `${flows} Flows to finish`,
      () => ids.every((id) => Recorder.starts(id).length > transitionsPerFlow),
      300_000
    )
    const t1 = Math.max(...ids.map((id) => Recorder.starts(id).at(-1)!))
    const transitions = flows * transitionsPerFlow
    return {
      flows,
      transitionsPerFlow,
      transitions,
      wallMs: t1 - t0,
      perSecond: transitions / ((t1 - t0) / 1000)
    } satisfies ThroughputResult
  })

/** Starts `count` Flows that wait on `ping` and polls until every one of them is waiting. */
export const startWaitingFlows = (count: number, prefix: string, concurrency = 50) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const ids = Array.from({ length: count }, () => freshId(prefix))
    yield* Effect.forEach(ids, (id) => client.startFlow(PingFlow, id, null), { concurrency, discard: true })
    const waiting = new Set<string>()
    yield* pollUntil(
      `${count} Flows to wait on their channel`,
      Effect.gen(function* () {
        const flows = yield* client.listFlows({ flowType: PingFlow.type, status: "running", limit: count * 2 + 100 })
        for (const f of flows) if (ids.includes(f.flowId) && f.waitingSteps.length === 1) waiting.add(f.flowId)
        return waiting.size === count
      }),
      120_000
    )
    return ids
  })

/**
 * Publish → execute: `samples` Flows already waiting on `ping`; one publish at a time, each carrying its
 * send time. `isolated` (the figure with a target): the next publish only after the previous Flow has
 * committed its end, so a sample measures one publish with nothing else in flight, as the transition latency
 * does (the woken Step completes its Flow right after `execute`; without waiting, that commit runs beside the
 * next publish's and the two share the server's WAL flush). Otherwise the next publish goes as soon as the
 * previous Step's `execute` started, beside that commit.
 */
export const publishLatency = (samples: number, options: { readonly isolated: boolean }) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const ids = yield* startWaitingFlows(samples, "ping")
    const latencies: Array<number> = []
    for (const id of ids) {
      yield* client.publish(id, Ping, { sentAt: nowMs() })
      yield* Recorder.until(`${id} to receive its ping`, () => Recorder.sample(id) !== undefined, 30_000)
      latencies.push(Recorder.sample(id)!)
      if (options.isolated) yield* client.waitForFlow(id, { pollInterval: "2 millis", timeout: "30 seconds" })
    }
    return latencies
  })

export interface TimerSample {
  /** `execute` start minus the stored deadline (ms). */
  readonly lateness: number
  /** `execute` start minus the moment the wait was accepted (ms; the 1 s timer rounds up to a whole second). */
  readonly sinceScheduled: number
}

/**
 * `samples` Flows started together, each waiting on `Timer.seconds(1)`. The deadline is what the engine
 * stores: the scheduling time plus 1 s, rounded up to a whole second (`internal/state.ts` `storeWait`); the
 * scheduling time is the `StepScheduled` event of the history.
 */
export const timerLateness = (samples: number) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const ids = Array.from({ length: samples }, () => freshId("timer"))
    yield* Effect.forEach(ids, (id) => client.startFlow(TimerFlow, id, null), {
      concurrency: "unbounded",
      discard: true
    })
    yield* Recorder.until("timers to fire", () => ids.every((id) => Recorder.starts(id).length > 0), 30_000)
    return yield* Effect.forEach(ids, (id) =>
      Effect.gen(function* () {
        const events = yield* client.history(id)
        const scheduled = events.find((e) => e.kind === "StepScheduled")
        if (scheduled === undefined) return yield* Effect.fail(new Error(`${id} has no StepScheduled event`))
        const deadline = Math.ceil((scheduled.at + 1000) / 1000) * 1000
        const started = Recorder.starts(id)[0]!
        return { lateness: started - deadline, sinceScheduled: started - scheduled.at } satisfies TimerSample
      })
    )
  })
