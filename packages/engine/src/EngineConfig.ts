/**
 * The engine's limits and a runner's operating options, as a service every engine layer provides.
 * Applications read it to learn the configured values; engine layers take the same fields as options.
 * Operations guidance (sizing slots, the drain timeout, budgets) is in the engine README.
 *
 * @since 0.1.0
 */
import { availableParallelism } from "node:os"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"

/** The engine's configurable limits and runner options. */
export interface EngineConfigShape {
  /** Largest stored value (attribute, message, Step input); default 16 MiB. */
  readonly maxValueBytes: number
  /** Largest stream message; default 100 KiB. */
  readonly maxStreamMessageBytes: number
  /**
   * Task slots of this runner: every running Step attempt and every RPC handler holds one; waiting Steps
   * hold none, and neither does a Step body while it waits for another Flow through the client
   * (`waitForFlow`, `waitForStepExecution`), so a child Flow never waits behind its parent's Step. Default:
   * the CPU count, or a worker layer's own default when it declares one (the agent session worker:
   * `AgentSessionFlow.DEFAULT_MAX_CONCURRENT_TASKS`, because agents' Steps mostly wait on the network).
   */
  readonly maxConcurrentTasks: number
  /**
   * Whether `maxConcurrentTasks` is the engine's default rather than a value the application set (set by
   * `resolve`); a worker layer raises only a defaulted limit (`Worker.layerDefaultTasks`).
   */
  readonly maxConcurrentTasksDefaulted?: boolean | undefined
  /**
   * Control slots of this runner, a capacity apart from the task slots: control Steps (`execute.slot:
   * "control"`, short Steps that only decide, such as one that cancels a sibling) run in them, and an RPC
   * handler takes one when no task slot is free. So a cancellation or a decision never waits behind the Step
   * bodies it would end, however busy the task slots are. Default: the CPU count, at least 2.
   */
  readonly maxControlTasks?: number | undefined
  /**
   * Slots kept for RPC handlers: Steps may hold at most `maxConcurrentTasks - rpcReserve` slots, so RPCs
   * still answer while Steps fill the runner. Default: one slot when `maxConcurrentTasks` is at least
   * two, otherwise none.
   */
  readonly rpcReserve?: number | undefined
  /**
   * How long an RPC handler waits for a free slot; one that finds none in time fails with `NoTaskSlot`.
   * Default 10 s. A Step attempt waits in the queue for as long as it takes and consumes no attempt
   * meanwhile (the adapters spec, "Known limits"; the deploy guide's older rule, in which a Step failed with
   * `NoTaskSlot` after this wait, is deliberately not followed). Every attempt's start, the first one's too,
   * is recorded only once the attempt has a slot.
   */
  readonly dispatchWait: Duration.Input
  /**
   * How long a stopping runner (SIGTERM through `Worker.runMain`, or its layer's scope closing) waits for
   * running Step attempts before it cancels them. Default 30 s.
   */
  readonly drainTimeout: Duration.Input
  /**
   * The run budget: the run state of one Flow (its current attribute values and queued messages; the
   * engine keeps superseded values only while a running Step reads them). A Step completion that adds
   * storage and would leave the Flow over it fails the Step without retry with `ValueTooLarge` (detail
   * `Flow run state of N bytes is over the run budget ...`). Transactional RPC writes and Flow starts are
   * not checked. Default 64 MiB.
   */
  readonly maxFlowStateBytes: number
  /**
   * How long a client's write request (a start, an RPC, a publish, a timer skip, an attribute write, a stop)
   * may take, resends included: the client sends a request whose answer was lost (the owner's runner died
   * between its commit and its reply, the Flow's shard moved, the connection dropped) again with the same
   * request ID, and the owner answers it from the reply its transition stored. Past this the call fails with
   * EngineError; the request may have committed, and a retry with the same idempotency key (or start request ID)
   * is answered from its stored reply. Default 60 s, at most 10 minutes (an owner remembers the replies it
   * committed that long).
   */
  readonly requestTimeout?: Duration.Input | undefined
  /** History events kept per Flow run; older ones are pruned. Default 10,000. */
  readonly historyWindowEvents: number
  /** How long a closed Flow stays readable before every row of it is purged. Default 7 days. */
  readonly closedFlowRetention: Duration.Input
  /**
   * Retention of a running Flow: closed Step executions kept per Flow. The owner's transition that closes newer
   * executions deletes, every tenth of this many closings, the closed executions scheduled before the newest
   * `retainedStepExecutions` (with their attempts; an active execution always stays). Reads say where the kept
   * part starts (`Client.retention`). Default 1,000.
   */
  readonly retainedStepExecutions: number
  /**
   * Retention of a running Flow: the messages of each stream kept per Flow (its newest ones), trimmed by the same
   * pass; a resume token before the kept tail is refused with `InvalidResumeToken`. The stream's byte budget per
   * Flow type (`capacityBytes`) applies as well. Default 10,000.
   */
  readonly retainedStreamMessages: number
  /**
   * Retention of a running Flow: how long the stored reply of a keyed request (an RPC's idempotency key) is
   * kept, so a retry with the key within it gets the first reply; a retry after it runs again. Default 7 days.
   * The reply of a request without a key (a random request ID, repeated only by the client's own resends, for
   * at most 10 minutes) goes 11 minutes after its commit, or after this when it is shorter.
   */
  readonly replyRetention: Duration.Input
  /**
   * Retention of a running Flow: how long effect/cluster's processed messages to the Flow (requests whose reply
   * it stored) are kept before the pass deletes them with their replies. Default 10 minutes.
   */
  readonly processedMessageRetention: Duration.Input
}

/** The engine configuration service. */
export class EngineConfig extends Context.Service<EngineConfig, EngineConfigShape>()(
  "@durable-agent/engine/EngineConfig"
) {
  static readonly defaults: EngineConfigShape = {
    maxValueBytes: 16 * 1024 * 1024,
    maxStreamMessageBytes: 100 * 1024,
    maxConcurrentTasks: availableParallelism(),
    dispatchWait: Duration.seconds(10),
    drainTimeout: Duration.seconds(30),
    maxFlowStateBytes: 64 * 1024 * 1024,
    historyWindowEvents: 10_000,
    closedFlowRetention: Duration.days(7),
    retainedStepExecutions: 1_000,
    retainedStreamMessages: 10_000,
    replyRetention: Duration.days(7),
    processedMessageRetention: Duration.minutes(10)
  }
  /** The defaults, with the given fields replaced (fields given as `undefined` keep their default). */
  static readonly layer = (config?: Partial<EngineConfigShape>) => Layer.succeed(EngineConfig, resolve(config))
}

/** The defaults with the given fields replaced; `undefined` fields keep their default. */
export const resolve = (config?: Partial<EngineConfigShape>): EngineConfigShape => {
  const defined = Object.fromEntries(Object.entries(config ?? {}).filter(([, v]) => v !== undefined))
  return {
    ...EngineConfig.defaults,
    ...defined,
    maxConcurrentTasksDefaulted: config?.maxConcurrentTasks === undefined
  }
}

/** The default `requestTimeout`. */
export const DEFAULT_REQUEST_TIMEOUT = Duration.seconds(60)

/** The RPC reserve in effect: `rpcReserve`, or its default (one slot when there are at least two). */
export const rpcReserveOf = (config: EngineConfigShape): number =>
  Math.max(0, Math.min(config.maxConcurrentTasks - 1, config.rpcReserve ?? (config.maxConcurrentTasks >= 2 ? 1 : 0)))

/** The control slots in effect: `maxControlTasks`, or its default (the CPU count, at least 2). */
export const controlTasksOf = (config: EngineConfigShape): number =>
  Math.max(1, config.maxControlTasks ?? Math.max(2, availableParallelism()))

/** A duration option in milliseconds. */
export const millis = (d: Duration.Input): number => Duration.toMillis(Duration.fromInputUnsafe(d))
