// One transition of a Flow: a working copy of the owner's cached state that the transition changes in
// memory, then writes as one SQL transaction (`store.writeTransition`). The cache itself is replaced only
// after COMMIT; a transition that fails or rolls back leaves it untouched.
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { ChannelMessageNotFound, DefinitionError } from "../Errors.ts"
import type { AnyStepDef, StepContext, Wait } from "../Flow.ts"
import { AttrVersions, collectGarbage } from "./attrVersions.ts"
import {
  type EncodedDecision,
  type EncodedMovement,
  errorInfo,
  type Outcome,
  type ResolvedOptions,
  resolveOptions,
  retryDelay,
  type StoredRecovery
} from "./decision.ts"
import type { RegisteredFlow } from "./registry.ts"
import {
  type AttrWrite,
  byteLength,
  channelKey,
  decodeJson,
  emptyStaged,
  evaluateWait,
  type FlowState,
  makeTxView,
  type Publish,
  type Staged,
  type StoredMessage,
  type StoredWait,
  splitChannelKey,
  storeWait,
  validateWait
} from "./state.ts"
import {
  type AttemptWrite,
  type AttrVersionRow,
  type Fence,
  type FlowRow,
  type HistoryRow,
  NOT_RUN,
  RESEND_WINDOW_MS,
  type RetentionPass,
  type StepRow,
  type StreamRow,
  type TransitionBatch
} from "./store/rows.ts"

/** The current attempt of a running Step execution, as the owner caches it. */
export interface CurrentAttempt {
  readonly attempt: number
  readonly startedAt: number
}

/** What the owner of a Flow holds in memory between transitions. */
export interface FlowCache {
  readonly flow: FlowRow
  /** Current attribute values and queued messages. */
  readonly state: FlowState
  /** Active Step executions (waiting, ready, running), by ID. */
  readonly steps: ReadonlyMap<string, StepRow>
  /** The state each running Step execution reads (as of its `view_version`). */
  readonly views: ReadonlyMap<string, FlowState>
  /** The started attempt of each running Step execution (absent during a retry's backoff). */
  readonly attempts: ReadonlyMap<string, CurrentAttempt>
  /**
   * Running Step executions an earlier attempt of which reached the Step's code (or may have): a failed
   * Step's `attemptProgress` is `not_started` only when none of its attempts did.
   */
  readonly reached: ReadonlySet<string>
  /** Stored versions of each attribute key (`name\0key`), ascending (changed in place by the next COMMIT). */
  readonly attrVersions: AttrVersions
  /** The Flow's run state in bytes: current attribute values and queued messages (the run budget). */
  readonly stateBytes: number
}

/** A Step attempt to start once the transition has committed. */
export interface AttemptStart {
  readonly stepExecutionId: string
  readonly attempt: number
  /** Milliseconds to wait first (a retry's backoff). */
  readonly delayMs: number
  /** Whether this transition already wrote the attempt's start record. */
  readonly recorded: boolean
  /** Attempt 1 of a Step just dispatched: it never ran anywhere, so it has no heartbeat checkpoint. */
  readonly fresh?: boolean | undefined
}

const COMPLETION_REQUESTED = "\u0000complete"
const DEADLINE = "\u0000deadline"
const TIMED_OUT = "\u0000timedOut"

/** The Flow's execution deadline (epoch ms) while it has not fired. */
export const executionDeadline = (flow: FlowRow): number | undefined => {
  const counters = JSON.parse(flow.counters) as Record<string, number>
  return counters[TIMED_OUT] === undefined ? counters[DEADLINE] : undefined
}
const SEQ = "\u0000seq"
const MESSAGE_ID = "\u0000msg"
/** History events written since the last pruning (the history window). */
const EVENTS = "\u0000events"
/** Step executions closed since the last retention pass. */
const CLOSED = "\u0000closed"

/** The retention of a running Flow, from the engine config (`retainedStepExecutions` and the rest). */
export interface RetentionSettings {
  readonly stepExecutions: number
  readonly streamMessages: number
  readonly replyMs: number
  readonly processedMessageMs: number
  /** effect/cluster's entity type of Flows, whose processed messages the pass deletes. */
  readonly entityType: string
}

/** A transition's change of the stored attribute versions, applied after its COMMIT. */
export interface VersionChange {
  readonly base: AttrVersions | undefined
  readonly changes: ReadonlyMap<string, ReadonlyArray<number> | null>
}

/** The state of a Flow as a transition changes it. */
export class Transition {
  readonly flow: { -readonly [K in keyof FlowRow]: FlowRow[K] }
  readonly expectedVersion: number | null
  readonly version: number
  private attrs: FlowState["attrs"]
  private channels: FlowState["channels"]
  private ownedAttrs = new Set<string>()
  private ownsAttrMap = false
  private ownsChannelMap = false
  readonly steps: Map<string, StepRow>
  readonly views: Map<string, FlowState>
  readonly attempts: Map<string, CurrentAttempt>
  readonly reached: Set<string>
  private readonly counters: Record<string, number>
  private readonly touched = new Map<string, StepRow>()
  private readonly attemptWrites = new Map<string, AttemptWrite>()
  private readonly attrWrites = new Map<string, AttrVersionRow>()
  private readonly messages: Array<TransitionBatch["messages"][number]> = []
  private readonly messageDeletes: Array<number> = []
  private readonly history: Array<HistoryRow> = []
  private dirtyFlow = false
  /** How much this transition grows the run state (negative when it shrinks it), in bytes. */
  stateBytesDelta = 0
  private readonly stateBytesBefore: number
  reply: TransitionBatch["reply"] = undefined
  /** Set by the commit when the request's reply was stored already: nothing of this transition was written. */
  alreadyAnswered = false
  /** Stream messages the committing attempt staged, written with this transition. */
  streamRows: ReadonlyArray<StreamRow> = []
  /** A new run that reuses a closed Flow's ID: the old run's rows are deleted in the same transaction. */
  replacesRun = false
  /** Attempts to start after COMMIT. */
  readonly starts: Array<AttemptStart> = []
  /** Running attempts to interrupt after COMMIT (cancelled, or their Flow closed). */
  readonly interrupts: Array<string> = []
  /** Timer deadlines of waits this transition registered (each gets one persisted wake-up). */
  readonly wakes: Array<{ readonly stepExecutionId: string; readonly at: number }> = []

  readonly registered: RegisteredFlow
  readonly now: number
  /** History events kept per run (`historyWindowEvents`). */
  historyWindow = 10_000
  /** The running Flow's retention (set by the owner); none when undefined. */
  retention: RetentionSettings | undefined = undefined

  constructor(
    registered: RegisteredFlow,
    now: number,
    cache: FlowCache | { readonly flow: FlowRow; readonly isNew: true }
  ) {
    this.registered = registered
    this.now = now
    if ("isNew" in cache) {
      this.flow = { ...cache.flow }
      this.expectedVersion = null
      this.version = cache.flow.version
      this.attrs = new Map()
      this.channels = new Map()
      this.ownsAttrMap = true
      this.ownsChannelMap = true
      this.steps = new Map()
      this.views = new Map()
      this.attempts = new Map()
      this.reached = new Set()
      this.counters = {}
      this.dirtyFlow = true
      this.stateBytesBefore = 0
    } else {
      this.flow = { ...cache.flow }
      this.expectedVersion = cache.flow.version
      this.version = cache.flow.version + 1
      this.flow.version = this.version
      this.attrs = cache.state.attrs
      this.channels = cache.state.channels
      this.steps = new Map(cache.steps)
      this.views = new Map(cache.views)
      this.attempts = new Map(cache.attempts)
      this.reached = new Set(cache.reached)
      this.counters = JSON.parse(cache.flow.counters)
      this.stateBytesBefore = cache.stateBytes
    }
  }

  /** The run state after this transition, in bytes. */
  get stateBytes() {
    return this.stateBytesBefore + this.stateBytesDelta
  }

  get flowId() {
    return this.flow.flow_id
  }
  get def() {
    return this.registered.def
  }
  get running() {
    return this.flow.status === "running"
  }
  /** Whether the transition changed anything that must be written. */
  get dirty() {
    return (
      this.dirtyFlow ||
      this.touched.size > 0 ||
      this.attemptWrites.size > 0 ||
      this.attrWrites.size > 0 ||
      this.messages.length > 0 ||
      this.messageDeletes.length > 0 ||
      this.history.length > 0 ||
      this.streamRows.length > 0
    )
  }

  /** The current state (a snapshot: later writes of this transition copy what they change). */
  get state(): FlowState {
    this.ownsAttrMap = false
    this.ownsChannelMap = false
    this.ownedAttrs.clear()
    return { attrs: this.attrs, channels: this.channels }
  }

  /** The state for reads that happen before any snapshot is handed out (no copy needed). */
  private get live(): FlowState {
    return { attrs: this.attrs, channels: this.channels }
  }

  record(kind: string, stepExecutionId: string | null, attempt: number | null, data: unknown) {
    this.history.push({
      flow_id: this.flowId,
      at: this.now,
      kind,
      step_execution_id: stepExecutionId,
      attempt,
      data: JSON.stringify(data ?? {})
    })
  }

  setStep(row: StepRow) {
    this.touched.set(row.step_execution_id, row)
    if (row.status === "waiting" || row.status === "ready" || row.status === "running")
      this.steps.set(row.step_execution_id, row)
    else {
      this.steps.delete(row.step_execution_id)
      this.views.delete(row.step_execution_id)
      this.attempts.delete(row.step_execution_id)
    }
  }

  private patchStep(stepExecutionId: string, patch: Partial<StepRow>) {
    const row = this.steps.get(stepExecutionId)!
    this.setStep({ ...row, ...patch })
  }

  writeAttempt(
    stepExecutionId: string,
    attempt: number,
    startedAt: number,
    end?: Omit<AttemptWrite, "flow_id" | "step_execution_id" | "attempt" | "started_at">
  ) {
    this.attemptWrites.set(`${stepExecutionId}#${attempt}`, {
      flow_id: this.flowId,
      step_execution_id: stepExecutionId,
      attempt,
      started_at: startedAt,
      finished_at: end?.finished_at ?? null,
      outcome: end?.outcome ?? null,
      error_type: end?.error_type ?? null,
      detail: end?.detail ?? null
    })
  }

  private nextCounter(name: string) {
    const n = (this.counters[name] ?? 0) + 1
    this.counters[name] = n
    this.dirtyFlow = true
    return n
  }

  // --- state writes (copy on write) ---------------------------------------------------------------

  private attrMap(name: string): Map<string, string> {
    if (!this.ownsAttrMap) {
      this.attrs = new Map(this.attrs)
      this.ownsAttrMap = true
    }
    if (!this.ownedAttrs.has(name)) {
      this.attrs.set(name, new Map(this.attrs.get(name)))
      this.ownedAttrs.add(name)
    }
    return this.attrs.get(name)!
  }

  private setChannel(k: string, list: ReadonlyArray<StoredMessage>) {
    if (!this.ownsChannelMap) {
      this.channels = new Map(this.channels)
      this.ownsChannelMap = true
    }
    this.channels.set(k, list)
  }

  private queued(k: string): ReadonlyArray<StoredMessage> {
    const v = this.channels.get(k)
    return Array.isArray(v) ? (v as ReadonlyArray<StoredMessage>) : []
  }

  /** Applies attribute writes, publishes and message deletes. */
  applyWrites(
    writes: ReadonlyArray<AttrWrite>,
    publishes: ReadonlyArray<Publish>,
    deletes: Staged["deletes"]
  ): Effect.Effect<void, ChannelMessageNotFound> {
    for (const d of deletes) {
      const k = channelKey(d.channel, d.key)
      const list = this.queued(k)
      if (!list.some((m) => m.id === d.id)) {
        return Effect.fail(new ChannelMessageNotFound({ flowId: this.flowId, channel: d.channel, messageId: d.id }))
      }
      this.stateBytesDelta -= byteLength(list.find((m) => m.id === d.id)!.value)
      this.setChannel(
        k,
        list.filter((m) => m.id !== d.id)
      )
      this.messageDeletes.push(Number(d.id))
    }
    for (const w of writes) {
      // a value written as it already is (or a delete of a key that has none) changes nothing a reader can see:
      // no version is stored and the attribute's map is not copied
      const previous = this.attrs.get(w.name)?.get(w.key)
      if (w.value === previous || (w.value === null && previous === undefined)) continue
      const m = this.attrMap(w.name)
      this.stateBytesDelta +=
        (w.value === null ? 0 : byteLength(w.value)) - (previous === undefined ? 0 : byteLength(previous))
      if (w.value === null) {
        m.delete(w.key)
      } else {
        m.set(w.key, w.value)
      }
      this.attrWrites.set(channelKey(w.name, w.key), {
        name: w.name,
        key: w.key,
        version: this.version,
        value: w.value
      })
    }
    for (const p of publishes) {
      const id = this.nextCounter(MESSAGE_ID)
      const k = channelKey(p.channel, p.key)
      this.stateBytesDelta += byteLength(p.value)
      this.setChannel(k, [...this.queued(k), { id: String(id), value: p.value }])
      this.messages.push({ id, channel: p.channel, key: p.key, value: p.value, published_at: this.now })
    }
    return Effect.void
  }

  // --- Steps ----------------------------------------------------------------------------------------

  /** Schedules one Step execution; its waitFor is evaluated against the state as it is now. */
  scheduleStep = Effect.fnUntraced(function* (
    this: Transition,
    movement: EncodedMovement,
    fromStepExecutionId: string | null,
    recovery: StoredRecovery | null
  ) {
    const step = this.registered.steps.get(movement.step)
    if (step === undefined) {
      return yield* new DefinitionError({ flowType: this.def.type, reason: `unknown Step type ${movement.step}` })
    }
    const stepExecutionId = `${step.type}-${this.nextCounter(step.type)}`
    const seq = this.nextCounter(SEQ)
    const options = JSON.parse(movement.options) as ResolvedOptions
    let wait: StoredWait | null = null
    let waitFailed = 0
    const row = (status: StepRow["status"]): StepRow => ({
      flow_id: this.flowId,
      step_execution_id: stepExecutionId,
      step_type: step.type,
      status,
      input: movement.input,
      options: movement.options,
      from_step_execution_id: fromStepExecutionId,
      wait: wait === null ? null : JSON.stringify(wait),
      wait_result: null,
      wait_failed: waitFailed,
      waiting_since: wait === null ? null : this.now,
      attempt: 0,
      first_attempt_at: null,
      retry_at: null,
      view_version: null,
      view_channels: null,
      recovery: recovery === null ? null : JSON.stringify(recovery),
      locks: JSON.stringify(options.locks),
      created_at: this.now,
      seq
    })
    if (step.waitFor !== undefined) {
      const result = this.evaluateWaitFor(step, movement.input, stepExecutionId, fromStepExecutionId)
      const retry = result._tag === "Failed" ? this.retryWaitFor(options, 1, this.now, result, stepExecutionId) : null
      if (result._tag === "Wait") {
        wait = result.wait
      } else if (retry !== null) {
        wait = retry
      } else if (options.waitForFailure === "proceed") {
        waitFailed = 1
      } else {
        const info = { errorType: result.errorType, detail: result.detail }
        this.record("WaitForFailed", stepExecutionId, null, info)
        this.setStep(row("failed"))
        this.closeFlow(
          "failed",
          null,
          `${stepExecutionId}.waitFor failed: ${info.errorType}: ${info.detail}`,
          "WaitForFailed"
        )
        return stepExecutionId
      }
    }
    this.setStep(row(wait ? "waiting" : "ready"))
    this.record("StepScheduled", stepExecutionId, null, {
      stepType: step.type,
      from: fromStepExecutionId,
      wait: wait === null ? null : wait.kind,
      recovery: recovery === null ? null : { errorType: recovery.errorType, attemptProgress: recovery.attemptProgress }
    })
    if (wait !== null) {
      for (const c of wait.conditions) {
        if (c._tag === "Timer" && c.deadline > this.now) this.wakes.push({ stepExecutionId, at: c.deadline })
      }
    }
    return stepExecutionId
  })

  /**
   * Evaluates a Step's `waitFor` against the state as it is now (its writes apply when it succeeds): the wait
   * (`null` to skip), or why it failed.
   */
  private evaluateWaitFor(
    step: AnyStepDef,
    inputJson: string,
    stepExecutionId: string,
    fromStepExecutionId: string | null
  ):
    | { readonly _tag: "Wait"; readonly wait: StoredWait | null }
    | { readonly _tag: "Failed"; readonly errorType: string; readonly detail: string; readonly retryable: boolean } {
    const staged = emptyStaged()
    const ctx: StepContext = {
      ...makeTxView(this.def, this.live, staged),
      flowId: this.flowId,
      runId: this.flow.run_id,
      flowType: this.def.type,
      stepExecutionId: stepExecutionId,
      fromStepExecutionId: fromStepExecutionId ?? undefined
    }
    let w: Wait
    try {
      w = step.waitFor!(ctx, decodeJson(step.input, inputJson))
    } catch (e) {
      return { _tag: "Failed", ...errorInfo(Cause.die(e)), retryable: true }
    }
    const problem = validateWait(this.def, w)
    if (problem !== undefined) {
      const error = new DefinitionError({ flowType: this.def.type, reason: `${step.type}.waitFor: ${problem}` })
      return { _tag: "Failed", errorType: error._tag, detail: error.message, retryable: false }
    }
    // a waitFor view has no message deletes, so this cannot fail
    Effect.runSync(this.applyWrites([...staged.attrWrites.values()], staged.publishes, []))
    return { _tag: "Wait", wait: w._tag === "Skip" ? null : storeWait(w, this.now) }
  }

  /** The backoff timer of a failed `waitFor` that its retry policy evaluates again, or `null`. */
  private retryWaitFor(
    options: ResolvedOptions,
    attempt: number,
    firstAt: number,
    failure: { readonly errorType: string; readonly detail: string; readonly retryable: boolean },
    stepExecutionId: string
  ): StoredWait | null {
    if (!failure.retryable || options.waitForRetry == null) return null
    const delay = retryDelay(options.waitForRetry, attempt, this.now - firstAt)
    if (delay === null) return null
    this.record("WaitForRetryScheduled", stepExecutionId, null, {
      attempt: attempt + 1,
      delayMs: delay,
      errorType: failure.errorType,
      detail: failure.detail
    })
    return {
      kind: "AnyOf",
      conditions: [{ _tag: "Timer", seconds: delay / 1000, deadline: this.now + delay, skipped: false }],
      waitForRetry: { attempt: attempt + 1, firstAt }
    }
  }

  /** Evaluates again the `waitFor` of Steps whose retry backoff ended. */
  private retryDueWaitFors() {
    for (const step of [...this.steps.values()]) {
      // only a failed waitFor's backoff timer carries `waitForRetry`: other waits are not parsed twice
      if (step.status !== "waiting" || !this.running || !step.wait!.includes('"waitForRetry"')) continue
      const stored = JSON.parse(step.wait!) as StoredWait
      const retry = stored.waitForRetry
      if (retry === undefined || evaluateWait(stored, this.now, () => []) === undefined) continue
      const def = this.registered.steps.get(step.step_type)
      if (def?.waitFor === undefined) continue
      const options = JSON.parse(step.options) as ResolvedOptions
      const result = this.evaluateWaitFor(def, step.input, step.step_execution_id, step.from_step_execution_id)
      if (result._tag === "Wait") {
        this.record("WaitForEvaluated", step.step_execution_id, null, { attempt: retry.attempt })
        if (result.wait === null) {
          this.patchStep(step.step_execution_id, { status: "ready", wait: null, waiting_since: null })
          continue
        }
        this.patchStep(step.step_execution_id, { wait: JSON.stringify(result.wait), waiting_since: this.now })
        for (const c of result.wait.conditions) {
          if (c._tag === "Timer" && c.deadline > this.now) {
            this.wakes.push({ stepExecutionId: step.step_execution_id, at: c.deadline })
          }
        }
        continue
      }
      const next = this.retryWaitFor(options, retry.attempt, retry.firstAt, result, step.step_execution_id)
      if (next !== null) {
        this.patchStep(step.step_execution_id, { wait: JSON.stringify(next) })
        const timer = next.conditions[0]
        if (timer?._tag === "Timer") this.wakes.push({ stepExecutionId: step.step_execution_id, at: timer.deadline })
      } else if (options.waitForFailure === "proceed") {
        this.patchStep(step.step_execution_id, { status: "ready", wait: null, waiting_since: null, wait_failed: 1 })
      } else {
        const info = { errorType: result.errorType, detail: result.detail }
        this.record("WaitForFailed", step.step_execution_id, null, info)
        this.setStep({ ...step, status: "failed" })
        this.closeFlow(
          "failed",
          null,
          `${step.step_execution_id}.waitFor failed: ${info.errorType}: ${info.detail}`,
          "WaitForFailed"
        )
      }
    }
  }

  /** Gives a new Flow its execution deadline. */
  setDeadline(at: number) {
    this.counters[DEADLINE] = at
    this.dirtyFlow = true
    this.wakes.push({ stepExecutionId: "execution-timeout", at })
  }

  /** At the execution deadline: fail the Flow, or cancel its Steps and schedule the timeout handler. */
  private timeOutIfDue() {
    const at = this.counters[DEADLINE]
    if (at === undefined || this.counters[TIMED_OUT] !== undefined || this.now < at) return
    this.counters[TIMED_OUT] = 1
    this.dirtyFlow = true
    this.record("ExecutionTimedOut", null, null, { deadline: at })
    const handler = this.def.executionTimeout?.handler
    const reason = `execution timeout: the Flow was still running ${at - this.flow.started_at} ms after its start`
    if (handler === undefined) return this.closeFlow("failed", null, reason, "ExecutionTimeout")
    for (const s of [...this.steps.values()]) this.cancelStep(s, "execution timeout")
    const scheduled = Effect.runSyncExit(
      this.scheduleStep(
        {
          step: handler.type,
          input: this.flow.input,
          options: JSON.stringify(resolveOptions(handler.options, undefined))
        },
        null,
        null
      )
    )
    if (Exit.isFailure(scheduled)) {
      const info = errorInfo(scheduled.cause)
      this.closeFlow("failed", null, `${reason}; its handler: ${info.errorType}: ${info.detail}`, "ExecutionTimeout")
    }
  }

  /** Re-evaluates every waiting Step (oldest wait first), then dispatches ready Steps whose locks are free. */
  settle() {
    if (!this.running) return
    this.timeOutIfDue()
    if (!this.running) return
    this.retryDueWaitFors()
    if (!this.running) return
    const waiting = [...this.steps.values()]
      .filter((s) => s.status === "waiting")
      .sort((a, b) => (a.waiting_since ?? 0) - (b.waiting_since ?? 0) || a.seq - b.seq)
    for (const step of waiting) {
      const wait = JSON.parse(step.wait!) as StoredWait
      if (wait.waitForRetry !== undefined) continue
      const result = evaluateWait(wait, this.now, (channel, key) =>
        this.queued(channelKey(channel, key)).map((m) => m.id)
      )
      if (result === undefined) continue
      const values: Record<string, Array<string>> = {}
      for (const [k, ids] of Object.entries(result.consumed)) {
        if (ids.length === 0) continue
        const list = this.queued(k)
        const set = new Set(ids)
        values[k] = list.filter((m) => set.has(m.id)).map((m) => m.value)
        for (const v of values[k]) this.stateBytesDelta -= byteLength(v)
        this.setChannel(
          k,
          list.filter((m) => !set.has(m.id))
        )
        for (const id of ids) this.messageDeletes.push(Number(id))
      }
      this.patchStep(step.step_execution_id, {
        status: "ready",
        wait_result: JSON.stringify({ timers: result.timers, values } satisfies StoredWaitResult)
      })
      this.record("WaitSatisfied", step.step_execution_id, null, {
        timers: result.timers,
        consumed: Object.fromEntries(Object.entries(values).map(([k, v]) => [splitChannelKey(k).join("/"), v.length]))
      })
    }
    this.dispatchReady()
    this.completeIfRequested()
  }

  private dispatchReady() {
    const steps = [...this.steps.values()]
    const held = new Set(
      steps.filter((s) => s.status === "running").flatMap((s) => JSON.parse(s.locks) as Array<string>)
    )
    for (const step of steps) {
      if (step.status !== "ready") continue
      const locks = JSON.parse(step.locks) as Array<string>
      if (locks.some((l) => held.has(l))) continue
      for (const l of locks) held.add(l)
      const view = this.state
      const counts: Array<[string, number]> = []
      for (const [k, v] of view.channels) {
        const n = typeof v === "number" ? v : v.length
        if (n > 0) counts.push([k, n])
      }
      this.patchStep(step.step_execution_id, {
        status: "running",
        attempt: 1,
        first_attempt_at: this.now,
        view_version: this.version,
        view_channels: counts.length === 0 ? null : JSON.stringify(counts)
      })
      this.views.set(step.step_execution_id, view)
      // attempt 1 starts once it has a slot: its start record is written then (`startRetry`), or in this
      // transition's commit when a slot is free at once (the owner's `claimSlots`)
      this.starts.push({
        stepExecutionId: step.step_execution_id,
        attempt: 1,
        delayMs: 0,
        recorded: false,
        fresh: true
      })
    }
  }

  /** Records that an attempt starts now; the owner runs it after COMMIT. */
  startAttempt(stepExecutionId: string, attempt: number, data: Record<string, unknown>) {
    this.attempts.set(stepExecutionId, { attempt, startedAt: this.now })
    this.writeAttempt(stepExecutionId, attempt, this.now)
    this.record("AttemptStarted", stepExecutionId, attempt, data)
    this.starts.push({ stepExecutionId, attempt, delayMs: 0, recorded: true })
  }

  /**
   * An attempt that got its slot (attempt 1 after its dispatch, a retry after its backoff): its start
   * record, written before it runs. Attempt 1's start is also the Step's `first_attempt_at`.
   */
  startRetry(stepExecutionId: string, attempt: number) {
    this.patchStep(stepExecutionId, attempt === 1 ? { retry_at: null, first_attempt_at: this.now } : { retry_at: null })
    this.attempts.set(stepExecutionId, { attempt, startedAt: this.now })
    this.writeAttempt(stepExecutionId, attempt, this.now)
    this.record("AttemptStarted", stepExecutionId, attempt, {})
  }

  /** Cancels every current execution of the given Step types, except `exclude`. */
  cancelTypes(types: ReadonlyArray<string>, exclude: ReadonlySet<string>, reason: string) {
    if (types.length === 0) return
    for (const s of [...this.steps.values()]) {
      if (!types.includes(s.step_type) || exclude.has(s.step_execution_id)) continue
      this.cancelStep(s, reason)
    }
  }

  private cancelStep(s: StepRow, reason: string) {
    const current = this.attempts.get(s.step_execution_id)
    this.setStep({ ...s, status: "cancelled" })
    this.reached.delete(s.step_execution_id)
    if (s.status === "running") {
      if (current !== undefined) {
        this.writeAttempt(s.step_execution_id, current.attempt, current.startedAt, {
          finished_at: this.now,
          outcome: "cancelled",
          error_type: null,
          detail: null
        })
      }
      this.interrupts.push(s.step_execution_id)
    }
    this.record("StepCancelled", s.step_execution_id, s.status === "running" ? s.attempt : null, {
      previousStatus: s.status,
      reason
    })
  }

  closeFlow(
    status: "completed" | "failed" | "cancelled" | "terminated",
    output: string | null,
    reason: string | null,
    errorType: string | null = null
  ) {
    for (const s of [...this.steps.values()]) this.cancelStep(s, `flow ${status}`)
    this.flow.status = status
    this.flow.output = output
    this.flow.reason = reason
    this.flow.error_type = status === "failed" ? (errorType ?? "Stopped") : null
    this.flow.closed_at = this.now
    this.dirtyFlow = true
    this.record(
      status === "completed" ? "FlowCompleted" : status === "failed" ? "FlowFailed" : "FlowStopped",
      null,
      null,
      { status, reason }
    )
  }

  /** A graceful completion closes the Flow once nothing is active any more. */
  private completeIfRequested() {
    if (!this.running || this.counters[COMPLETION_REQUESTED] === undefined || this.steps.size > 0) return
    this.closeFlow("completed", this.flow.output, null)
  }

  /** Applies a decision committed by a Step or an RPC. */
  applyDecision = Effect.fnUntraced(function* (this: Transition, from: string | null, decision: EncodedDecision) {
    const scheduled = new Set<string>()
    if (decision._tag === "Next") {
      for (const m of decision.movements) {
        scheduled.add(yield* this.scheduleStep(m, from, null))
        if (!this.running) return
      }
    }
    this.cancelTypes(decision.cancel, scheduled, from === null ? "rpc" : `cancelled by ${from}`)
    switch (decision._tag) {
      case "ForceComplete":
        return this.closeFlow("completed", decision.output, null)
      case "ForceFail":
        return this.closeFlow("failed", null, decision.reason, "ForceFail")
      case "GracefulComplete": {
        // the first graceful completion's output is the Flow's output; every one is kept in `outputs`
        if (this.counters[COMPLETION_REQUESTED] === undefined) this.flow.output = decision.output
        this.counters[COMPLETION_REQUESTED] = 1
        const outputs: Array<string | null> = this.flow.outputs === null ? [] : JSON.parse(this.flow.outputs)
        this.flow.outputs = JSON.stringify([...outputs, decision.output])
        this.dirtyFlow = true
        return this.completeIfRequested()
      }
      default:
        return
    }
  })

  /** The result of a running attempt: completes the Step, schedules a retry, or fails it. */
  finishAttempt = Effect.fnUntraced(function* (
    this: Transition,
    stepExecutionId: string,
    attempt: number,
    outcome: Outcome
  ) {
    const step = this.steps.get(stepExecutionId)!
    const started = this.attempts.get(stepExecutionId)?.startedAt ?? this.now
    const options = JSON.parse(step.options) as ResolvedOptions
    if (outcome._tag === "Success") {
      this.writeAttempt(stepExecutionId, attempt, started, {
        finished_at: this.now,
        outcome: "success",
        error_type: null,
        detail: null
      })
      this.setStep({ ...step, status: "completed" })
      this.reached.delete(stepExecutionId)
      yield* this.applyWrites(outcome.writes, outcome.publishes, [])
      this.record("StepCompleted", stepExecutionId, attempt, {
        decision: outcome.decision._tag,
        next: outcome.decision._tag === "Next" ? outcome.decision.movements.map((m) => m.step) : [],
        cancel: outcome.decision.cancel
      })
      yield* this.applyDecision(stepExecutionId, outcome.decision)
      return
    }
    this.writeAttempt(stepExecutionId, attempt, started, {
      finished_at: this.now,
      // an attempt that never reached the Step's code is marked, so a new owner knows the Step's progress
      outcome: outcome.reached === false ? NOT_RUN : "failure",
      error_type: outcome.errorType,
      detail: outcome.detail
    })
    this.record("AttemptFailed", stepExecutionId, attempt, { errorType: outcome.errorType, detail: outcome.detail })
    // the furthest progress across the Step's attempts: one that reached the Step's code counts for all
    const reachedBefore = this.reached.has(stepExecutionId)
    if (outcome.reached !== false) this.reached.add(stepExecutionId)
    const elapsed = this.now - (step.first_attempt_at ?? this.now)
    const delay = Math.min(
      options.initialIntervalMs * options.backoffCoefficient ** (attempt - 1),
      options.maximumIntervalMs
    )
    const attemptsLeft = options.maxAttempts === null || attempt < options.maxAttempts
    const withinTotal = options.totalDurationMs === null || elapsed + delay <= options.totalDurationMs
    if (outcome.retryable && attemptsLeft && withinTotal) {
      this.attempts.delete(stepExecutionId)
      this.patchStep(stepExecutionId, { attempt: attempt + 1, retry_at: this.now + delay })
      this.record("RetryScheduled", stepExecutionId, attempt + 1, { delayMs: delay })
      this.starts.push({ stepExecutionId, attempt: attempt + 1, delayMs: delay, recorded: false })
      return
    }
    this.setStep({ ...step, status: "failed" })
    this.reached.delete(stepExecutionId)
    const recovery: StoredRecovery = {
      errorType: outcome.errorType,
      detail: outcome.detail,
      attemptProgress: outcome.reached === false && !reachedBefore ? "not_started" : "not_completed",
      stepType: step.step_type,
      ...(outcome.error === undefined ? {} : { error: outcome.error })
    }
    this.record("StepFailed", stepExecutionId, attempt, {
      errorType: recovery.errorType,
      attemptProgress: recovery.attemptProgress,
      failureRoute: options.failureRoute
    })
    if (options.failureRoute === null) {
      return this.closeFlow(
        "failed",
        null,
        `${stepExecutionId} failed: ${outcome.errorType}: ${outcome.detail}`,
        outcome.errorType
      )
    }
    const route = this.registered.steps.get(options.failureRoute)!
    yield* this.scheduleStep(
      { step: route.type, input: step.input, options: JSON.stringify(resolveOptions(route.options, undefined)) },
      stepExecutionId,
      recovery
    )
  })

  /** The transition's writes, for one SQL transaction. */
  batch(
    visible: (views: ReadonlyMap<string, StepRow>) => ReadonlySet<number>,
    cache: FlowCache | undefined,
    fence: Fence
  ) {
    const { deletes, changes, dropped } = collectGarbage(
      cache?.attrVersions,
      this.attrWrites,
      visible(new Map([...this.steps].filter(([stepExecutionId]) => this.views.has(stepExecutionId)))),
      this.registered.hardDelete
    )
    const versions: VersionChange = { base: cache?.attrVersions, changes }
    // the history window: about the newest `historyWindow` events per run are kept
    const events = (this.counters[EVENTS] ?? 0) + this.history.length
    const prune = events > this.historyWindow + Math.max(10, Math.floor(this.historyWindow / 10))
    this.counters[EVENTS] = prune ? this.historyWindow : events
    const retention = this.retentionPass()
    this.flow.counters = JSON.stringify(this.counters)
    // a message published and consumed by the same transition is never stored
    const inserted = new Set(this.messages.map((m) => m.id))
    const consumed = new Set(this.messageDeletes)
    const batch: TransitionBatch = {
      fence,
      flow: this.flow,
      expectedVersion: this.expectedVersion,
      steps: [...this.touched.values()],
      attempts: [...this.attemptWrites.values()],
      attrs: [...this.attrWrites.entries()].filter(([k]) => !dropped.has(k)).map(([, a]) => a),
      attrDeletes: deletes,
      messages: this.messages.filter((m) => !consumed.has(m.id)),
      messageDeletes: this.messageDeletes.filter((id) => !inserted.has(id)),
      history: this.history,
      pruneHistory: prune ? this.historyWindow : undefined,
      reply: this.reply,
      streams: this.streamRows,
      retention
    }
    return { batch, versions }
  }

  /**
   * The running Flow's retention pass, due once a tenth of `retainedStepExecutions` (at least 10) executions
   * closed since the last one; it runs in this transition's fenced transaction (`store.applyRetention`).
   */
  private retentionPass(): RetentionPass | undefined {
    const settings = this.retention
    if (settings === undefined || !this.running) return undefined
    let closed = this.counters[CLOSED] ?? 0
    for (const s of this.touched.values()) {
      if (s.status === "completed" || s.status === "failed" || s.status === "cancelled") closed++
    }
    if (closed < Math.max(10, Math.floor(settings.stepExecutions / 10))) {
      if (closed !== (this.counters[CLOSED] ?? 0)) this.counters[CLOSED] = closed
      return undefined
    }
    this.counters[CLOSED] = 0
    const scheduled = this.counters[SEQ] ?? 0
    return {
      stepsBeforeSeq: scheduled - settings.stepExecutions + 1 > 1 ? scheduled - settings.stepExecutions + 1 : undefined,
      streams: this.def.streams.map((s) => s.name),
      streamMessages: settings.streamMessages,
      repliesBefore: this.now - settings.replyMs,
      // a reply no resend can ask for any more goes sooner than the reply retention
      resentRepliesBefore: this.now - Math.min(settings.replyMs, RESEND_WINDOW_MS),
      clusterMessages: { entityType: settings.entityType, sentBefore: this.now - settings.processedMessageMs }
    }
  }

  /** The cache after COMMIT (the attribute versions of the cache it started from change in place). */
  result(versions: VersionChange): FlowCache {
    return {
      flow: { ...this.flow },
      state: this.state,
      steps: this.steps,
      views: this.views,
      attempts: this.attempts,
      reached: this.reached,
      attrVersions: (versions.base ?? new AttrVersions()).apply(versions.changes),
      stateBytes: this.stateBytes
    }
  }
}

interface StoredWaitResult {
  readonly timers: ReadonlyArray<boolean>
  readonly values: Record<string, ReadonlyArray<string>>
}

export type { StoredWaitResult }
