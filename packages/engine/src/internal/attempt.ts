// Running one attempt of a Step execution: the ExecuteContext over the Step's view of the Flow's state,
// heartbeats, the method and heartbeat timeouts, and the attempt's outcome. Cancellation is an interrupt
// of the attempt's fiber by its owner.
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { EngineConfigShape } from "../EngineConfig.ts"
import { DefinitionError, HeartbeatTimeout, MethodTimeout, type RecoveryError } from "../Errors.ts"
import type { ExecuteContext, StreamDef } from "../Flow.ts"
import {
  decodeRecovery,
  encodeDecision,
  engineFailure,
  failureOf,
  type Outcome,
  oversized,
  type ResolvedOptions,
  StoredRecovery
} from "./decision.ts"
import { pausePoint } from "./faults.ts"
import type { CommitNotices } from "./feed.ts"
import type { HeartbeatBatch } from "./heartbeats.ts"
import type { RegisteredFlow } from "./registry.ts"
import { channelKey, decodeJson, emptyStaged, type FlowState, makeTxView } from "./state.ts"
import type { EngineStoreShape } from "./store/EngineStore.ts"
import type { Fence, FlowRow, StepRow } from "./store/rows.ts"
import {
  emitMessages,
  heartbeatWithMessages,
  type PreparedMessage,
  prepareMessage,
  type StreamBudget,
  type StreamCounters,
  type WriteTarget
} from "./streams.ts"
import type { StoredWaitResult } from "./transition.ts"

export interface AttemptInput {
  readonly store: EngineStoreShape
  readonly config: EngineConfigShape
  readonly registered: RegisteredFlow
  readonly flow: FlowRow
  readonly step: StepRow
  readonly attempt: number
  readonly view: FlowState
  /** Whether an earlier run of this Step execution may have saved a heartbeat checkpoint. */
  readonly mayHaveCheckpoint: boolean
  /** The runner's stream counters (metrics). */
  readonly counters?: StreamCounters | undefined
  /** The runner's stream budgets. */
  readonly budget: StreamBudget
  /** The runner's heartbeat batches (heartbeats with messages of one turn are written together). */
  readonly beats?: HeartbeatBatch | undefined
  /** This process's commit notices. */
  readonly notices: CommitNotices
  /** Runs a stream write in a transaction (the owner's group commit). */
  readonly transact: WriteTarget["transact"]
  /** The owner's fence: heartbeats and stream writes commit only while it holds the Flow. */
  readonly fence: Fence
  /**
   * A fenced write was refused: this owner lost the Flow. Stops the owner's fibers for the Flow; the attempt
   * then interrupts itself, so no user code runs after the refused write.
   */
  readonly onFenced: Effect.Effect<void>
}

/** Runs the attempt to its outcome. Interrupted when its owner cancels it. */
export const runAttempt = Effect.fnUntraced(function* (i: AttemptInput) {
  const { store, config, registered, flow, step, attempt } = i
  const def = registered.steps.get(step.step_type)
  if (def === undefined) {
    const missing = new DefinitionError({
      flowType: flow.flow_type,
      reason: `this worker does not know Step ${step.step_type} of Flow ${flow.flow_type}`
    })
    return engineFailure(missing, true, false) as Outcome
  }
  const now = yield* Clock.currentTimeMillis
  const options = JSON.parse(step.options) as ResolvedOptions
  const checkpoint = i.mayHaveCheckpoint
    ? yield* Effect.orDie(store.loadCheckpoint(flow.flow_id, step.step_execution_id))
    : undefined
  const waitResult: StoredWaitResult =
    step.wait_result === null ? { timers: [], values: {} } : JSON.parse(step.wait_result)
  const staged = emptyStaged()
  let lastBeat = now
  const where = `${step.step_execution_id}#${attempt} of Flow ${flow.flow_id}`
  // a refused write: the owner stops this Flow's fibers and the attempt ends here, before user code goes on
  const lost = Effect.andThen(i.onFenced, Effect.interrupt)
  const target: WriteTarget = {
    store,
    transact: i.transact,
    notices: i.notices,
    fence: i.fence,
    budget: i.budget,
    beats: i.beats,
    flowType: registered.def.type,
    flowId: flow.flow_id,
    stepExecutionId: step.step_execution_id,
    attempt,
    counters: i.counters
  }
  /** Messages staged for the commit of this attempt's success. */
  const stagedStreams: Array<PreparedMessage> = []
  const heartbeat = (value?: unknown) =>
    Effect.gen(function* () {
      yield* pausePoint("heartbeat", where)
      const at = yield* Clock.currentTimeMillis
      lastBeat = at
      const written = yield* store
        .recordHeartbeat(
          i.fence,
          flow.flow_id,
          step.step_execution_id,
          attempt,
          at,
          value === undefined ? null : JSON.stringify(value)
        )
        .pipe(Effect.orDie)
      if (!written) return yield* lost
    })
  const emitNow = <A>(stream: StreamDef<A>, values: ReadonlyArray<A>) =>
    Effect.gen(function* () {
      if (values.length === 0) return
      yield* pausePoint("emit", where)
      const result = yield* emitMessages(target, config, stream, values)
      if (result === "fenced") return yield* lost
    })
  // the route's recovered errors (`RE`) cover the failing Step's declared errors: `Step` checks it
  const ctx: ExecuteContext<never> = {
    ...makeTxView(registered.def, i.view, staged),
    flowId: flow.flow_id,
    runId: flow.run_id,
    flowType: flow.flow_type,
    stepExecutionId: step.step_execution_id,
    fromStepExecutionId: step.from_step_execution_id ?? undefined,
    attempt,
    firstAttemptAt: step.first_attempt_at ?? now,
    timerFired: (index) => (index === undefined ? waitResult.timers.some((t) => t) : waitResult.timers[index] === true),
    channelResults: (channel, key = "") =>
      (waitResult.values[channelKey(channel.name, key)] ?? []).map((v) => decodeJson(channel.schema, v)),
    waitForFailed: step.wait_failed === 1,
    recoveryError:
      step.recovery === null
        ? Option.none()
        : Option.some(
            decodeRecovery(
              registered,
              Schema.decodeUnknownSync(StoredRecovery)(JSON.parse(step.recovery))
            ) as RecoveryError<never>
          ),
    heartbeatCheckpoint: Option.fromNullishOr(checkpoint).pipe(Option.map((c) => JSON.parse(c))),
    heartbeat,
    emit: (stream, value) => emitNow(stream, [value]),
    emitAll: emitNow,
    stage: (stream, value) =>
      Effect.sync(() => {
        const m = prepareMessage(config, stream, flow.flow_id, step.step_execution_id, value, i.counters)
        if (m !== undefined) stagedStreams.push(m)
      }),
    heartbeatWith: (stream, values, checkpoint) =>
      Effect.gen(function* () {
        yield* pausePoint("heartbeat", where)
        lastBeat = yield* Clock.currentTimeMillis
        const result = yield* heartbeatWithMessages(
          target,
          config,
          stream,
          values,
          checkpoint === undefined ? null : JSON.stringify(checkpoint)
        ).pipe(Effect.orDie)
        if (result === "fenced") return yield* lost
      })
  }
  const body = Effect.suspend(() => def.execute(ctx, decodeJson(def.input, step.input))).pipe(
    Effect.provideContext(registered.context)
  )
  // One watchdog for the method timeout and the heartbeat timeout, raced against the body: the first limit
  // passed fails the attempt with its error and interrupts the body (one race of two fibers per attempt, not a
  // race per limit).
  const methodMs = options.timeoutMs
  const heartbeatMs = options.heartbeatTimeoutMs
  const watched =
    methodMs === null && heartbeatMs === null
      ? body
      : Effect.raceFirst(
          body,
          Effect.gen(function* () {
            const started = yield* Clock.currentTimeMillis
            const deadline = methodMs === null ? Number.POSITIVE_INFINITY : started + methodMs
            while (true) {
              const at = yield* Clock.currentTimeMillis
              if (at >= deadline) return yield* new MethodTimeout({ ms: methodMs! })
              const beatDue = heartbeatMs === null ? Number.POSITIVE_INFINITY : lastBeat + heartbeatMs
              if (at > beatDue) return yield* new HeartbeatTimeout({ ms: heartbeatMs! })
              yield* Effect.sleep(Duration.millis(Math.min(deadline - at, beatDue - at + 1)))
            }
          })
        )
  const exit = yield* Effect.exit(watched)
  if (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) return yield* Effect.interrupt
  if (Exit.isFailure(exit)) return failureOf(exit.cause, def.error) as Outcome
  const decision = yield* Effect.exit(
    Effect.try({ try: () => encodeDecision(exit.value, config.maxValueBytes), catch: (e) => e })
  )
  // an oversized or malformed decision is an engine failure, not retried
  if (Exit.isFailure(decision)) return failureOf(decision.cause, undefined) as Outcome
  const outcome: Outcome = {
    _tag: "Success",
    writes: [...staged.attrWrites.values()],
    publishes: staged.publishes,
    decision: decision.value,
    ...(stagedStreams.length === 0 ? {} : { streams: stagedStreams })
  }
  const tooLarge = oversized(outcome, config.maxValueBytes)
  return tooLarge ? (engineFailure(tooLarge, false) as Outcome) : outcome
})
