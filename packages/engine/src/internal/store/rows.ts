// The rows of the engine's tables, as the store's methods return and take them, and their decoders (Postgres
// returns BIGINT columns as strings).
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { EngineError } from "../../Errors.ts"
import { MAX_RESEND_MS } from "../protocol.ts"
import type { FlowState } from "../state.ts"

/**
 * The schema version of the engine's tables (`dex_meta.schema_version`) on Postgres. SQLite's is one more
 * (`Driver.schemaVersion`): the same tables, with large attribute values stored compressed (`values.ts`).
 */
export const SCHEMA_VERSION = "3"
/** The engine's name in `dex_meta.engine`: a database that names another program is refused. */
export const ENGINE_NAME = "durable-agent-engine"

/** The client the store's statements run on. */
export type Sql = SqlClient.SqlClient

/** A database failure as the engine's `EngineError`, saying what could not be done. */
export const orEngineError = <A, R>(effect: Effect.Effect<A, SqlError, R>, what: string) =>
  Effect.mapError(
    effect,
    (e) => new EngineError({ reason: `${what}: ${e.message}${e.cause ? ` (${String(e.cause)})` : ""}` })
  )

/**
 * The stored outcome of a failed attempt that never reached the Step's code (its definition was missing);
 * the inspection API reports it as `failure`.
 */
export const NOT_RUN = "not_run"

/** One `dex_flows` row: a Flow's run. `version` is the owner's compare-and-set fence. */
export interface FlowRow {
  readonly flow_id: string
  readonly flow_type: string
  readonly run_id: string
  readonly status: string
  readonly input: string
  readonly output: string | null
  /** Every graceful completion's output, as a JSON array of JSON texts (parallel branches may each complete). */
  readonly outputs: string | null
  readonly reason: string | null
  /** What failed a failed Flow: the failing Step's error type, `ForceFail`, `WaitForFailed` or `Stopped`. */
  readonly error_type: string | null
  readonly request_id: string | null
  readonly counters: string
  readonly version: number
  readonly started_at: number
  readonly closed_at: number | null
}

/** One `dex_steps` row: a Step execution. */
export interface StepRow {
  readonly flow_id: string
  readonly step_execution_id: string
  readonly step_type: string
  readonly status: StepStatus
  readonly input: string
  readonly options: string
  readonly from_step_execution_id: string | null
  readonly wait: string | null
  readonly wait_result: string | null
  readonly wait_failed: number
  readonly waiting_since: number | null
  readonly attempt: number
  readonly first_attempt_at: number | null
  /** When the current attempt may start (a retry's backoff); null once it has started. */
  readonly retry_at: number | null
  /** The Flow version this execution reads (set when it is dispatched). */
  readonly view_version: number | null
  /** Queued message counts (channel key -> count) as of `view_version`, for `channelSize`. */
  readonly view_channels: string | null
  readonly recovery: string | null
  readonly locks: string
  readonly created_at: number
  readonly seq: number
}

/**
 * `waiting` (wait pending), `ready` (satisfied, waiting for locks), `running` (dispatched; the
 * current attempt is `attempt`), and the final `completed`, `failed`, `cancelled`.
 */
export type StepStatus = "waiting" | "ready" | "running" | "completed" | "failed" | "cancelled"
export const ACTIVE_STEP_STATUSES: ReadonlyArray<StepStatus> = ["waiting", "ready", "running"]

/** One `dex_attempts` row: an attempt of a Step execution. */
export interface AttemptRow {
  readonly flow_id: string
  readonly step_execution_id: string
  readonly attempt: number
  readonly started_at: number
  readonly output_at: number | null
  readonly heartbeat_at: number | null
  readonly checkpoint: string | null
  readonly finished_at: number | null
  readonly outcome: string | null
  readonly error_type: string | null
  readonly detail: string | null
  /** The runner that started this attempt (its process identity), null for rows of schema version 2. */
  readonly runner: string | null
  /** The ownership epoch under which the attempt was started. */
  readonly epoch: number | null
}

/** Postgres returns BIGINT columns as strings; every numeric column goes through this. */
export const num = (v: unknown): number => Number(v)

/** Byte order of UTF-8 strings (code point order), as Postgres's `COLLATE "C"` sorts them. */
export const utf8Order = (x: string, y: string): number => {
  const n = Math.min(x.length, y.length)
  for (let i = 0; i < n; i++) {
    const a = x.codePointAt(i)!
    const b = y.codePointAt(i)!
    if (a !== b) return a - b
    if (a > 0xffff) i++
  }
  return x.length - y.length
}

/** A `dex_flows` row as the driver returned it, decoded. */
export const normalizeFlow = (r: any): FlowRow => ({
  ...r,
  version: num(r.version),
  started_at: num(r.started_at),
  closed_at: r.closed_at === null ? null : num(r.closed_at)
})

/** A `dex_steps` row as the driver returned it, decoded. */
export const normalizeStep = (r: any): StepRow => ({
  ...r,
  wait_failed: num(r.wait_failed),
  waiting_since: r.waiting_since === null ? null : num(r.waiting_since),
  attempt: num(r.attempt),
  first_attempt_at: r.first_attempt_at === null ? null : num(r.first_attempt_at),
  retry_at: r.retry_at === null ? null : num(r.retry_at),
  view_version: r.view_version === null ? null : num(r.view_version),
  created_at: num(r.created_at),
  seq: num(r.seq)
})

/** A `dex_attempts` row as the driver returned it, decoded. */
export const normalizeAttempt = (r: any): AttemptRow => ({
  ...r,
  attempt: num(r.attempt),
  started_at: num(r.started_at),
  output_at: r.output_at === null ? null : num(r.output_at),
  heartbeat_at: r.heartbeat_at === null ? null : num(r.heartbeat_at),
  finished_at: r.finished_at === null ? null : num(r.finished_at),
  runner: r.runner ?? null,
  epoch: r.epoch === null || r.epoch === undefined ? null : num(r.epoch)
})

/** One stored attribute version. */
export interface AttrVersionRow {
  readonly name: string
  readonly key: string
  readonly version: number
  readonly value: string | null
}

/** The attribute values visible at a version: the newest stored version of each key, deletes dropped. */
export const attrsAt = (rows: ReadonlyArray<AttrVersionRow>, atMost: number): FlowState["attrs"] => {
  const attrs: FlowState["attrs"] = new Map()
  for (const r of rows) {
    if (r.version > atMost) continue
    let m = attrs.get(r.name)
    if (m === undefined) {
      m = new Map()
      attrs.set(r.name, m)
    }
    if (r.value === null) m.delete(r.key)
    else m.set(r.key, r.value)
  }
  return attrs
}

/** One history row as a transition writes it. */
export interface HistoryRow {
  readonly flow_id: string
  readonly at: number
  readonly kind: string
  readonly step_execution_id: string | null
  readonly attempt: number | null
  readonly data: string
}

/** An attempt row as a transition writes it (heartbeat columns are left to `recordHeartbeat`). */
export interface AttemptWrite {
  readonly flow_id: string
  readonly step_execution_id: string
  readonly attempt: number
  readonly started_at: number
  readonly finished_at: number | null
  readonly outcome: string | null
  readonly error_type: string | null
  readonly detail: string | null
}

// effect/sql's `insert` takes records with an index signature; the engine's row interfaces have fixed keys
// (callers check that a batch is not empty)
export const row = <T extends object>(value: T) => value as unknown as Record<string, unknown>
export const rows = <T extends object>(values: ReadonlyArray<T>) =>
  values as unknown as readonly [Record<string, unknown>, ...Array<Record<string, unknown>>]

/** One `dex_stream` row: a stream message. */
export interface StreamRow {
  readonly flow_type: string
  readonly stream: string
  readonly flow_id: string
  readonly step_execution_id: string
  readonly attempt: number
  readonly value: string
  readonly bytes: number
  readonly at: number
  readonly runner: string
}

/** Everything one transition writes; `writeTransition` turns it into one SQL transaction. */
export interface TransitionBatch {
  /** The owner's fence: the transition commits only while this epoch is the Flow's current one. */
  readonly fence: Fence
  readonly flow: FlowRow
  /** The version the owner holds: `null` inserts a new Flow row, otherwise the compare-and-set fence. */
  readonly expectedVersion: number | null
  readonly steps: ReadonlyArray<StepRow>
  readonly attempts: ReadonlyArray<AttemptWrite>
  readonly attrs: ReadonlyArray<AttrVersionRow>
  readonly attrDeletes: ReadonlyArray<Omit<AttrVersionRow, "value">>
  readonly messages: ReadonlyArray<{
    readonly id: number
    readonly channel: string
    readonly key: string
    readonly value: string
    readonly published_at: number
  }>
  readonly messageDeletes: ReadonlyArray<number>
  readonly history: ReadonlyArray<HistoryRow>
  /** When set, history is pruned to this many newest events of the Flow (the history window). */
  readonly pruneHistory?: number | undefined
  readonly reply: { readonly requestId: string; readonly reply: string; readonly at: number } | undefined
  /** Stream messages the committing attempt staged (their budget already admitted them). */
  readonly streams?: ReadonlyArray<StreamRow> | undefined
  /** When set, the running Flow's retention pass runs last in this transaction (`applyRetention`). */
  readonly retention?: RetentionPass | undefined
}

/** The owner that writes on a Flow's behalf: its epoch (from `claimOwnership`) and runner identity. */
export interface Fence {
  readonly epoch: number
  readonly runner: string
  /**
   * Postgres: how long a fenced transaction may sit idle (its process paused between statements) before the
   * server ends it, set for the transaction by its first statement. It bounds how long a new owner's claim waits
   * on the owner row a paused transaction holds; the lease check before COMMIT (`requireLease`) keeps the
   * transaction from committing after the shard lock was lost, whatever this limit is.
   */
  readonly idleTimeoutMs?: number | undefined
  /** Postgres cluster runners: the shard lock under which the owner claimed the Flow, checked before COMMIT. */
  readonly lease?: ShardLease | undefined
}

/** A fenced transaction found, just before COMMIT, that another runner holds the Flow's shard lock. */
export class LeaseLost extends Data.TaggedError("LeaseLost")<{ readonly flowId: string }> {}

/**
 * A transition whose request already has a stored reply (a request sent again after its answer was lost): its
 * writes are rolled back, and the request is answered from the stored reply.
 */
export class AlreadyAnswered extends Data.TaggedError("AlreadyAnswered")<{ readonly requestId: string }> {}

/**
 * Where a runner's shard lock lives (Postgres advisory locks of effect/cluster's `SqlRunnerStorage`): a claim
 * commits only while the runner's lock session (found by its `application_name`) holds the shard's lock.
 */
export interface ShardLease {
  readonly applicationName: string
  /** The advisory lock's two keys: the storage's namespace and the shard's lock number. */
  readonly classId: number
  readonly objId: number
}

/** One row of a Flow's committed state: a current attribute value or a queued channel message. */
export interface CommittedStateRow {
  readonly kind: "attr" | "message"
  /** The attribute or channel name. */
  readonly name: string
  readonly key: string
  readonly value: string
  /** The message ID; `null` for an attribute. */
  readonly id: unknown
}

/**
 * A retention mark's kind: `steps` (closed Step executions scheduled before sequence `kept_from` were deleted,
 * with their attempts), `history` (history events before ID `kept_from` were pruned by the history window),
 * `stream:<name>` (the Flow's messages of that stream at or before stream position `kept_from` were deleted: a
 * resume token at `kept_from` or later reads on, an earlier one is refused).
 */
export type RetentionKind = "steps" | "history" | `stream:${string}`

/** The kind of a stream's retention mark. */
export const streamRetentionKind = (stream: string): RetentionKind => `stream:${stream}`

/**
 * How long a stored reply of a request without an idempotency key can still be asked for: the client sends such a
 * request again with its random request ID until its `requestTimeout`, which it clamps to `MAX_RESEND_MS`
 * (10 minutes) from the first send, and never after; a minute more allows for clock skew between the client's host
 * and the owner's (whose commit time the reply keeps) and for a resend still in flight. A reply older than this is
 * never read again, so the retention pass deletes it whatever `replyRetention` says (that one is for keyed requests,
 * which a caller may retry whenever it likes).
 */
export const RESEND_WINDOW_MS = MAX_RESEND_MS + 60_000

/** One retention pass over a running Flow, computed by its owner's transition (`Transition.batch`). */
export interface RetentionPass {
  /** Closed Step executions scheduled before this sequence go, with their attempts (none when undefined). */
  readonly stepsBeforeSeq: number | undefined
  /** The Flow's streams, each trimmed to its newest `streamMessages` messages. */
  readonly streams: ReadonlyArray<string>
  readonly streamMessages: number
  /** Stored replies of keyed requests (the caller's idempotency key, `idem/...`) written before this time (epoch ms) go. */
  readonly repliesBefore: number
  /**
   * Stored replies of the other requests (a random request ID that only the client's own resends repeat) written
   * before this time (epoch ms) go: no resend of them can arrive any more (see `RESEND_WINDOW_MS`).
   */
  readonly resentRepliesBefore: number
  /**
   * effect/cluster's messages to the Flow's entity that were processed (their reply stored) and were sent before
   * this time (epoch ms) go, with their replies.
   */
  readonly clusterMessages: { readonly entityType: string; readonly sentBefore: number } | undefined
}

/** One retention mark of a Flow. */
export interface RetentionMarkRow {
  readonly kind: string
  readonly keptFrom: number
}
