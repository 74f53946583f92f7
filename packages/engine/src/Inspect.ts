/**
 * Read-only views of the engine's tables: Flows, Step executions, attempts and history. They need
 * only a `SqlClient`, so the inspection command can read a database that no worker holds, and tests
 * use them to assert the Step shape of a Flow.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type { SqlClient } from "effect/sql"
import { EngineError, FlowNotFound } from "./Errors.ts"
import { type EngineStoreShape, make as makeStore } from "./internal/store/EngineStore.ts"
import { type FlowRow, NOT_RUN, orEngineError } from "./internal/store/rows.ts"

/** Status of a Flow. */
export type FlowStatus = "running" | "completed" | "failed" | "cancelled" | "terminated"

/** One Flow as `describeFlow` and `listFlows` report it. */
export interface FlowDescription {
  readonly flowId: string
  readonly flowType: string
  readonly runId: string
  readonly status: FlowStatus
  readonly startedAt: number
  readonly closedAt: number | null
  /** The failure or stop reason of a closed Flow. */
  readonly reason: string | null
  /** The JSON output of a completed Flow (its first graceful completion's, or the forced one). */
  readonly output: unknown
  /** Every graceful completion's output, in commit order (parallel branches may each complete). */
  readonly outputs: ReadonlyArray<unknown>
  /**
   * What failed a failed Flow: the failing Step's error type (`ValueTooLarge`, `WorkerLost`, a tag...),
   * `ForceFail`, `WaitForFailed`, `ExecutionTimeout`, or `Stopped` for `stopFlow` with mode `fail`; null otherwise.
   */
  readonly errorType: string | null
  /** Step executions waiting for a condition. */
  readonly waitingSteps: ReadonlyArray<string>
  /** Step executions dispatched to a worker (or waiting for their locks). */
  readonly runningSteps: ReadonlyArray<string>
}

/** One attempt of a Step execution. */
export interface AttemptInfo {
  readonly attempt: number
  readonly startedAt: number
  /** When the attempt first produced output (a heartbeat). */
  readonly outputAt: number | null
  readonly finishedAt: number | null
  readonly outcome: "success" | "failure" | "cancelled" | null
  readonly errorType: string | null
  readonly detail: string | null
  /** The runner that started this attempt (`<host>:<port> pid <pid>`, or `embedded pid <pid>`); null before schema 3. */
  readonly runner: string | null
  /** The ownership epoch under which it started (each new owner of the Flow has a higher one). */
  readonly epoch: number | null
}

/** One Step execution with its attempts. */
export interface StepExecution {
  readonly stepExecutionId: string
  readonly stepType: string
  readonly status: "waiting" | "ready" | "running" | "completed" | "failed" | "cancelled"
  readonly fromStepExecutionId: string | null
  readonly createdAt: number
  readonly attempts: ReadonlyArray<AttemptInfo>
}

/**
 * One history event. Kinds: FlowStarted, StepScheduled, WaitSatisfied, AttemptStarted,
 * AttemptFailed, RetryScheduled, StepCompleted, StepFailed, StepCancelled, WaitForFailed,
 * WaitForRetryScheduled, WaitForEvaluated, ExecutionTimedOut, AttributeSet, TimerSkipped, Published,
 * RpcCompleted, FlowCompleted, FlowFailed, FlowStopped.
 */
export interface HistoryEvent {
  readonly id: number
  readonly at: number
  readonly kind: string
  readonly stepExecutionId: string | null
  readonly attempt: number | null
  readonly data: Record<string, unknown>
  /** The runner whose transition wrote the event; null before schema 3. */
  readonly runner: string | null
}

/** The current owner of a Flow, as the ownership table records it. */
export interface FlowOwner {
  /** The runner that holds the Flow now: the last one to claim it (`<host>:<port> pid <pid>`, or `embedded pid <pid>`). */
  readonly runner: string
  /** Its ownership epoch: every claim increments it, and writes under an older epoch are refused. */
  readonly epoch: number
  /** When it claimed the Flow (epoch ms). */
  readonly claimedAt: number
}

const parseOutput = (text: string | null): unknown => {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const describeRows = Effect.fnUntraced(function* (store: EngineStoreShape, flows: ReadonlyArray<FlowRow>) {
  if (flows.length === 0) return []
  const steps = yield* store.activeStepsOf(flows.map((f) => f.flow_id))
  return flows.map(
    (f): FlowDescription => ({
      flowId: f.flow_id,
      flowType: f.flow_type,
      runId: f.run_id,
      status: f.status as FlowStatus,
      startedAt: f.started_at,
      closedAt: f.closed_at,
      reason: f.reason,
      output: parseOutput(f.output),
      outputs: f.outputs === null ? [] : (JSON.parse(f.outputs) as Array<string | null>).map(parseOutput),
      errorType: f.error_type,
      waitingSteps: steps
        .filter((s) => s.flow_id === f.flow_id && s.status === "waiting")
        .map((s) => s.step_execution_id),
      runningSteps: steps
        .filter((s) => s.flow_id === f.flow_id && s.status !== "waiting")
        .map((s) => s.step_execution_id)
    })
  )
})

/** Describes one Flow. */
export const describeFlow = (
  flowId: string
): Effect.Effect<FlowDescription, FlowNotFound | EngineError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const store = yield* makeStore
    const rows = yield* orEngineError(
      Effect.flatMap(store.loadFlow(flowId), (flow) => describeRows(store, flow === undefined ? [] : [flow])),
      "cannot read the Flow"
    )
    if (rows.length === 0) return yield* new FlowNotFound({ flowId })
    return rows[0]!
  })

/** Lists Flows, newest first, optionally by status or type. */
export const listFlows = (options?: {
  readonly status?: FlowStatus | undefined
  readonly flowType?: string | undefined
  readonly limit?: number | undefined
}): Effect.Effect<ReadonlyArray<FlowDescription>, EngineError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const store = yield* makeStore
    return yield* orEngineError(
      Effect.flatMap(
        store.listFlows({ status: options?.status, flowType: options?.flowType, limit: options?.limit ?? 1000 }),
        (flows) => describeRows(store, flows)
      ),
      "cannot list Flows"
    )
  })

/** The Step executions of a Flow, in scheduling order, with their attempts. */
export const stepExecutions = (
  flowId: string
): Effect.Effect<ReadonlyArray<StepExecution>, EngineError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const store = yield* makeStore
    const steps = yield* store.allSteps(flowId)
    const attempts = yield* store.allAttempts(flowId)
    return steps.map(
      (s): StepExecution => ({
        stepExecutionId: s.step_execution_id,
        stepType: s.step_type,
        status: s.status,
        fromStepExecutionId: s.from_step_execution_id,
        createdAt: s.created_at,
        attempts: attempts
          .filter((a) => a.step_execution_id === s.step_execution_id)
          .map((a) => ({
            attempt: a.attempt,
            startedAt: a.started_at,
            outputAt: a.output_at,
            finishedAt: a.finished_at,
            // an attempt that never reached the Step's code is stored as `not_run`, reported as a failure
            outcome: (a.outcome === NOT_RUN ? "failure" : a.outcome) as AttemptInfo["outcome"],
            errorType: a.error_type,
            detail: a.detail,
            runner: a.runner,
            epoch: a.epoch
          }))
      })
    )
  }).pipe((e) => orEngineError(e, "cannot read Step executions"))

/** The history of a Flow, oldest first. */
export const history = (flowId: string): Effect.Effect<ReadonlyArray<HistoryEvent>, EngineError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const store = yield* makeStore
    const rows = yield* store.history(flowId)
    return rows.map(
      (r): HistoryEvent => ({
        id: r.id,
        at: r.at,
        kind: r.kind,
        stepExecutionId: r.step_execution_id,
        attempt: r.attempt,
        data: JSON.parse(r.data),
        runner: r.runner
      })
    )
  }).pipe((e) => orEngineError(e, "cannot read history"))

/**
 * Which runner owns a Flow now: the last runner that claimed it and its epoch. A runner claims a Flow when it
 * loads it (at the first request or wake-up after it got the Flow's shard), so a Flow not touched since its
 * owner died still names that owner until another runner loads it. `FlowNotFound` when no runner ever owned it.
 */
export const flowOwner = (flowId: string): Effect.Effect<FlowOwner, FlowNotFound | EngineError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const store = yield* makeStore
    const owner = yield* orEngineError(store.loadOwner(flowId), "cannot read the Flow's owner")
    if (owner === undefined) return yield* new FlowNotFound({ flowId })
    return owner
  })

/**
 * Where the retained part of a running Flow's records starts, once its retention deleted older ones (see the
 * engine config's `retainedStepExecutions`, `historyWindowEvents` and `retainedStreamMessages`). Each field is
 * `null` while nothing of its kind was deleted.
 */
export interface FlowRetention {
  /**
   * Closed Step executions scheduled before this scheduling sequence were deleted with their attempts:
   * `stepExecutions` lists every active execution and the closed ones from here on.
   */
  readonly stepExecutionsFromSeq: number | null
  /** History events before this event ID were pruned: `history` starts here. */
  readonly historyFromId: number | null
  /**
   * By stream name: the stream position through which the Flow's older messages were deleted. A resume token at
   * or after it reads on; an earlier one is refused with `InvalidResumeToken`; a read from the oldest starts
   * after it.
   */
  readonly streamsTrimmedThrough: Readonly<Record<string, number>>
}

/**
 * Fails with `EngineError` when the Step execution `stepExecutionId` (`<StepType>-<n>`) was scheduled (the Flow's
 * counter for its type reached `n`) and its row is gone: it closed and the Flow's retention deleted it. Succeeds
 * otherwise (not scheduled yet, or still stored).
 */
export const deletedStepExecution = (
  flowId: string,
  stepExecutionId: string
): Effect.Effect<void, EngineError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const store = yield* makeStore
    const dash = stepExecutionId.lastIndexOf("-")
    const n = Number(stepExecutionId.slice(dash + 1))
    if (dash <= 0 || !Number.isInteger(n)) return
    const counters = yield* orEngineError(store.loadCounters(flowId), "cannot read Step executions")
    const scheduled = counters === undefined ? 0 : Number(JSON.parse(counters)[stepExecutionId.slice(0, dash)] ?? 0)
    if (n > scheduled) return
    const stored = yield* orEngineError(store.stepStored(flowId, stepExecutionId), "cannot read Step executions")
    if (stored) return
    return yield* new EngineError({
      reason: `Step execution ${stepExecutionId} of Flow ${flowId} closed and was deleted by the Flow's retention (retainedStepExecutions)`
    })
  })

/** Where the retained part of a Flow's Step executions, history and streams starts (`FlowNotFound` if unknown). */
export const retention = (
  flowId: string
): Effect.Effect<FlowRetention, FlowNotFound | EngineError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const store = yield* makeStore
    yield* describeFlow(flowId)
    const marks = yield* orEngineError(store.loadRetentionMarks(flowId), "cannot read the Flow's retention")
    const streams: Record<string, number> = {}
    for (const m of marks) if (m.kind.startsWith("stream:")) streams[m.kind.slice("stream:".length)] = m.keptFrom
    return {
      stepExecutionsFromSeq: marks.find((m) => m.kind === "steps")?.keptFrom ?? null,
      historyFromId: marks.find((m) => m.kind === "history")?.keptFrom ?? null,
      streamsTrimmedThrough: streams
    }
  })

/** The Step types of a Flow's executions in scheduling order, e.g. `["RunModel", "CallTool", "ResumeTurn"]`. */
export const stepShape = (flowId: string) => Effect.map(stepExecutions(flowId), (steps) => steps.map((s) => s.stepType))

/** Renders a Flow's Step executions and history as text (what the inspection command prints). */
export const renderHistory = (flowId: string): Effect.Effect<string, EngineError | FlowNotFound, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const flow = yield* describeFlow(flowId)
    const steps = yield* stepExecutions(flowId)
    const events = yield* history(flowId)
    const t0 = flow.startedAt
    const owner = yield* Effect.option(flowOwner(flowId))
    const kept = yield* retention(flowId)
    const trimmed = [
      ...(kept.stepExecutionsFromSeq === null
        ? []
        : [`closed Step executions scheduled before seq ${kept.stepExecutionsFromSeq} deleted`]),
      ...(kept.historyFromId === null ? [] : [`history from event ${kept.historyFromId}`]),
      ...Object.entries(kept.streamsTrimmedThrough).map(
        ([name, through]) => `stream ${name} trimmed through ${through}`
      )
    ]
    const lines = [
      `Flow ${flow.flowId} (${flow.flowType}) run ${flow.runId}: ${flow.status}${flow.reason ? ` (${flow.reason})` : ""}`,
      ...(owner._tag === "Some" ? [`Owner: ${owner.value.runner} (epoch ${owner.value.epoch})`] : []),
      ...(trimmed.length === 0 ? [] : [`Retention: ${trimmed.join("; ")}`]),
      "",
      "Step executions:"
    ]
    for (const s of steps) {
      lines.push(`  ${s.stepExecutionId.padEnd(28)} ${s.status.padEnd(10)} from ${s.fromStepExecutionId ?? "-"}`)
      for (const a of s.attempts) {
        lines.push(
          `    attempt ${a.attempt}: ${a.outcome ?? (a.finishedAt === null ? "running" : "?")}` +
            (a.errorType ? ` ${a.errorType}: ${a.detail}` : "") +
            (a.outputAt !== null ? " (produced output)" : "") +
            (a.runner !== null ? ` [${a.runner}, epoch ${a.epoch}]` : "")
        )
      }
    }
    lines.push("", "History:")
    for (const e of events) {
      const data = Object.keys(e.data).length ? ` ${JSON.stringify(e.data)}` : ""
      lines.push(
        `  +${String(e.at - t0).padStart(7)} ms ${e.kind}${e.stepExecutionId ? ` ${e.stepExecutionId}` : ""}${e.attempt !== null ? `#${e.attempt}` : ""}${data}${e.runner !== null ? ` [${e.runner}]` : ""}`
      )
    }
    return lines.join("\n")
  })
