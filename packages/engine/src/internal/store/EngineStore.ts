// The engine's data access: one service that holds every SQL statement of the engine, with typed rows, built by
// one `make` over a `SqlClient` (in the manner of effect/cluster's `SqlMessageStorage` and `SqlRunnerStorage`).
// The statements live in the modules beside this one, by concern; where SQLite and Postgres differ, the driver
// (`sqlite.ts`, `pg.ts`) is chosen once here, never per call.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import type { EngineError } from "../../Errors.ts"
import { type Driver, driverOf } from "./driver.ts"
import * as Flows from "./flows.ts"
import * as Inspection from "./inspect.ts"
import * as Ownership from "./ownership.ts"
import * as Replies from "./replies.ts"
import * as Retention from "./retention.ts"
import type { Sql } from "./rows.ts"
import * as Schema from "./schema.ts"
import * as Streams from "./streams.ts"

/** A statement function of a module, with the client bound. */
type Op<F> = F extends (sql: Sql, ...args: infer A) => infer R ? (...args: A) => R : never
/** A statement function of a module, with the client and the driver bound. */
type OpD<F> = F extends (sql: Sql, d: Driver, ...args: infer A) => infer R ? (...args: A) => R : never

/** Every query of the engine, by concern. Each fails with the driver's `SqlError` unless it says otherwise. */
export interface EngineStoreShape {
  /** The database the store runs on. */
  readonly dialect: Driver["dialect"]
  /** Runs `effect` in one transaction (nested: a savepoint). */
  readonly withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>

  // --- schema (`schema.ts`) ---
  /** Creates the tables, upgrades them from version 2, or checks that they are this engine's. */
  readonly migrate: Effect.Effect<void, EngineError>
  /** Checks, without writing, that the database holds this engine's tables at this schema version. */
  readonly verify: Effect.Effect<void, EngineError>

  // --- a Flow's state and its transitions (`flows.ts`) ---
  readonly loadFlow: Op<typeof Flows.loadFlow>
  readonly loadStep: Op<typeof Flows.loadStep>
  readonly loadAttempt: Op<typeof Flows.loadAttempt>
  readonly loadAttrVersions: OpD<typeof Flows.loadAttrVersions>
  readonly loadMessages: Op<typeof Flows.loadMessages>
  readonly loadActiveSteps: Op<typeof Flows.loadActiveSteps>
  readonly loadOpenAttempts: Op<typeof Flows.loadOpenAttempts>
  readonly loadReachedSteps: Op<typeof Flows.loadReachedSteps>
  readonly loadFlowStarted: Op<typeof Flows.loadFlowStarted>
  readonly loadCheckpoint: Op<typeof Flows.loadCheckpoint>
  readonly loadAttribute: OpD<typeof Flows.loadAttribute>
  /** The query path's read of a Flow's committed state (one statement). */
  readonly loadCommittedState: OpD<typeof Flows.loadCommittedState>
  /** The query path's first statement of a lazy read: everything but the lazily read AttributeMaps. */
  readonly loadCommittedAttributes: OpD<typeof Flows.loadCommittedAttributes>
  /** The query path's read of the keys and maps a handler asked for, with their stored versions. */
  readonly loadCommittedAttributesOf: OpD<typeof Flows.loadCommittedAttributesOf>
  readonly loadOpenSteps: Op<typeof Flows.loadOpenSteps>
  /** One transition's writes; the caller holds the transaction. `false` when the fence refused it. */
  readonly writeTransition: OpD<typeof Flows.writeTransition>
  readonly deleteRun: Op<typeof Flows.deleteRun>
  readonly recordHeartbeat: OpD<typeof Flows.recordHeartbeat>
  /**
   * Postgres: a heartbeat with stream messages in one statement that commits alone (`undefined` on SQLite, whose
   * writes share the group commit's transaction).
   */
  readonly recordHeartbeatWithRows: OpD<typeof Flows.recordHeartbeatWithRows> | undefined
  /**
   * SQLite: the heartbeats of several attempts in one fenced statement (`undefined` on Postgres); the caller
   * holds the transaction. Returns the attempts it wrote.
   */
  readonly recordHeartbeats: Op<typeof Flows.recordHeartbeats> | undefined
  /**
   * Postgres: the heartbeats with stream messages of several attempts in one statement that commits alone, each
   * fenced by its own owner epoch and shard lease (`undefined` on SQLite). Returns the attempts it wrote.
   */
  readonly recordHeartbeatsWithRows: Op<typeof Flows.recordHeartbeatsWithRows> | undefined
  readonly flowsWithRunningSteps: Op<typeof Flows.flowsWithRunningSteps>

  // --- ownership and leases (`ownership.ts`) ---
  readonly claimOwnership: Op<typeof Ownership.claimOwnership>
  readonly loadOwner: Op<typeof Ownership.loadOwner>
  /** The first statement of a fenced transaction: whether the fence still owns the Flow. */
  readonly fenceCheck: (
    flowId: string,
    fence: Parameters<typeof Ownership.fenceCheck>[2]
  ) => Effect.Effect<boolean, SqlError>
  /** The last statement of a fenced transaction on a cluster runner (a no-op without a lease). */
  readonly requireLease: Op<typeof Ownership.requireLease>
  /** The lease check and the commit notice of a fenced transaction, in one last statement. */
  readonly requireLeaseAndNotify: (
    flowId: string,
    fence: Parameters<typeof Ownership.requireLease>[2]
  ) => ReturnType<typeof Ownership.requireLease>
  readonly runnerSessions: Op<typeof Ownership.runnerSessions>

  // --- replies of requests (`replies.ts`) ---
  readonly loadReply: Op<typeof Replies.loadReply>
  readonly loadKeyedRequestIds: Op<typeof Replies.loadKeyedRequestIds>

  // --- streams (`streams.ts`) ---
  readonly insertStreamRows: Op<typeof Streams.insertStreamRows>
  readonly streamStoredBytes: Op<typeof Streams.storedBytes>
  readonly oldestStreamMessages: Op<typeof Streams.oldestMessages>
  readonly deleteStreamThrough: Op<typeof Streams.deleteThrough>
  readonly markStreamTrim: Op<typeof Streams.markTrim>
  /** Whether this transaction may trim the stream (Postgres: one runner at a time). */
  readonly mayTrimStream: Driver["mayTrimStream"]
  readonly loadTrimmedThrough: Op<typeof Streams.loadTrimmedThrough>
  readonly readStreamPage: Op<typeof Streams.readStreamPage>
  readonly loadStreamRetention: Op<typeof Streams.loadStreamRetention>
  /** A stream read's start in one statement: the Flow exists, the budget's trim, the retention mark. */
  readonly loadStreamStart: Op<typeof Streams.loadStreamStart>
  /** Tells other processes a Flow committed, inside its transaction (the feed; nothing on SQLite). */
  readonly notifyCommit: Driver["notifyCommit"]

  // --- retention (`retention.ts`) ---
  readonly purgeClosedFlows: Op<typeof Retention.purgeClosedFlows>
  readonly loadRetentionMarks: Op<typeof Retention.loadRetentionMarks>

  // --- inspection reads (`inspect.ts`) ---
  readonly activeStepsOf: Op<typeof Inspection.activeStepsOf>
  readonly listFlows: Op<typeof Inspection.listFlows>
  readonly allSteps: Op<typeof Inspection.allSteps>
  readonly allAttempts: Op<typeof Inspection.allAttempts>
  readonly history: Op<typeof Inspection.history>
  readonly loadCounters: Op<typeof Inspection.loadCounters>
  readonly stepStored: Op<typeof Inspection.stepStored>
  readonly stepInputs: Op<typeof Inspection.stepInputs>
  readonly attributeVersions: OpD<typeof Inspection.attributeVersions>
  readonly streamMessages: Op<typeof Inspection.streamMessages>
  readonly ping: Effect.Effect<void, SqlError>
}

/** Builds the store over a client: the driver of its dialect, every statement bound to it. */
export const makeWith = (sql: Sql): EngineStoreShape => {
  const d = driverOf(sql)
  return {
    dialect: d.dialect,
    withTransaction: sql.withTransaction,
    migrate: Schema.migrate(sql, d),
    verify: Schema.verify(sql, d),
    loadFlow: (...a) => Flows.loadFlow(sql, ...a),
    loadStep: (...a) => Flows.loadStep(sql, ...a),
    loadAttempt: (...a) => Flows.loadAttempt(sql, ...a),
    loadAttrVersions: (...a) => Flows.loadAttrVersions(sql, d, ...a),
    loadMessages: (...a) => Flows.loadMessages(sql, ...a),
    loadActiveSteps: (...a) => Flows.loadActiveSteps(sql, ...a),
    loadOpenAttempts: (...a) => Flows.loadOpenAttempts(sql, ...a),
    loadReachedSteps: (...a) => Flows.loadReachedSteps(sql, ...a),
    loadFlowStarted: (...a) => Flows.loadFlowStarted(sql, ...a),
    loadCheckpoint: (...a) => Flows.loadCheckpoint(sql, ...a),
    loadAttribute: (...a) => Flows.loadAttribute(sql, d, ...a),
    loadCommittedState: (...a) => Flows.loadCommittedState(sql, d, ...a),
    loadCommittedAttributes: (...a) => Flows.loadCommittedAttributes(sql, d, ...a),
    loadCommittedAttributesOf: (...a) => Flows.loadCommittedAttributesOf(sql, d, ...a),
    loadOpenSteps: (...a) => Flows.loadOpenSteps(sql, ...a),
    writeTransition: (...a) => Flows.writeTransition(sql, d, ...a),
    deleteRun: (...a) => Flows.deleteRun(sql, ...a),
    recordHeartbeat: (...a) => Flows.recordHeartbeat(sql, d, ...a),
    recordHeartbeatWithRows: d.dialect === "pg" ? (...a) => Flows.recordHeartbeatWithRows(sql, d, ...a) : undefined,
    recordHeartbeats: d.dialect === "sqlite" ? (...a) => Flows.recordHeartbeats(sql, ...a) : undefined,
    recordHeartbeatsWithRows: d.dialect === "pg" ? (...a) => Flows.recordHeartbeatsWithRows(sql, ...a) : undefined,
    flowsWithRunningSteps: (...a) => Flows.flowsWithRunningSteps(sql, ...a),
    claimOwnership: (...a) => Ownership.claimOwnership(sql, ...a),
    loadOwner: (...a) => Ownership.loadOwner(sql, ...a),
    fenceCheck: (flowId, fence) => Ownership.fenceCheck(d, flowId, fence),
    requireLease: (...a) => Ownership.requireLease(sql, ...a),
    requireLeaseAndNotify: (flowId, fence) => Ownership.requireLeaseAndNotify(sql, d, flowId, fence),
    runnerSessions: (...a) => Ownership.runnerSessions(sql, ...a),
    loadReply: (...a) => Replies.loadReply(sql, ...a),
    loadKeyedRequestIds: (...a) => Replies.loadKeyedRequestIds(sql, ...a),
    insertStreamRows: (...a) => Streams.insertStreamRows(sql, ...a),
    streamStoredBytes: (...a) => Streams.storedBytes(sql, ...a),
    oldestStreamMessages: (...a) => Streams.oldestMessages(sql, ...a),
    deleteStreamThrough: (...a) => Streams.deleteThrough(sql, ...a),
    markStreamTrim: (...a) => Streams.markTrim(sql, ...a),
    mayTrimStream: d.mayTrimStream,
    loadTrimmedThrough: (...a) => Streams.loadTrimmedThrough(sql, ...a),
    readStreamPage: (...a) => Streams.readStreamPage(sql, ...a),
    loadStreamRetention: (...a) => Streams.loadStreamRetention(sql, ...a),
    loadStreamStart: (...a) => Streams.loadStreamStart(sql, ...a),
    notifyCommit: d.notifyCommit,
    purgeClosedFlows: (...a) => Retention.purgeClosedFlows(sql, ...a),
    loadRetentionMarks: (...a) => Retention.loadRetentionMarks(sql, ...a),
    activeStepsOf: (...a) => Inspection.activeStepsOf(sql, ...a),
    listFlows: (...a) => Inspection.listFlows(sql, ...a),
    allSteps: (...a) => Inspection.allSteps(sql, ...a),
    allAttempts: (...a) => Inspection.allAttempts(sql, ...a),
    history: (...a) => Inspection.history(sql, ...a),
    loadCounters: (...a) => Inspection.loadCounters(sql, ...a),
    stepStored: (...a) => Inspection.stepStored(sql, ...a),
    stepInputs: (...a) => Inspection.stepInputs(sql, ...a),
    attributeVersions: (...a) => Inspection.attributeVersions(sql, d, ...a),
    streamMessages: (...a) => Inspection.streamMessages(sql, ...a),
    ping: Inspection.ping(sql)
  }
}

/** The store over the context's `SqlClient`. */
export const make: Effect.Effect<EngineStoreShape, never, SqlClient.SqlClient> = Effect.gen(function* () {
  return makeWith(yield* SqlClient.SqlClient)
})

/** The engine's store as a service. */
export class EngineStore extends Context.Service<EngineStore, EngineStoreShape>()(
  "@durable-agent/engine/internal/EngineStore"
) {
  /** The store over the context's `SqlClient`. */
  static readonly layer: Layer.Layer<EngineStore, never, SqlClient.SqlClient> = Layer.effect(EngineStore, make)
}
