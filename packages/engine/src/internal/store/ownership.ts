// Ownership of a Flow: the claim that gives an owner its epoch, and the fence every write of it carries.
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"
import { COMMIT_CHANNEL } from "../feed.ts"
import type { Driver } from "./driver.ts"
import { type Fence, LeaseLost, num, type ShardLease, type Sql } from "./rows.ts"

/** The condition "`fence` is the Flow's current owner", for the WHERE of a fenced statement. */
export const ownerHolds = (sql: Sql, d: Driver, flowId: string, fence: Fence) =>
  sql`EXISTS (SELECT 1 FROM dex_owners WHERE flow_id = ${flowId} AND epoch = ${fence.epoch} ${d.forShare})`

/**
 * The first statement of a fenced transaction: whether `fence` still owns the Flow (the driver's statement: on
 * Postgres it share-locks the owner row until COMMIT and sets the transaction's idle limit).
 */
export const fenceCheck = (d: Driver, flowId: string, fence: Fence) =>
  Effect.map(d.fenceCheck(flowId, fence), (rows) => rows.length > 0)

/** The condition "the runner whose sessions carry `lease.applicationName` holds the shard lock `lease`". */
const leaseHeld = (sql: Sql, lease: ShardLease) =>
  sql`EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.classid = ${lease.classId} AND l.objid = ${lease.objId}
    AND l.objsubid = 2 AND a.datname = current_database() AND a.application_name = ${lease.applicationName})`

/**
 * The last statement of a fenced transaction on a cluster runner: fails with `LeaseLost` (the caller rolls the
 * transaction back) when another runner holds the shard lock the Flow was claimed under. Only the holder of
 * that lock can claim the Flow, so while no other runner holds it nobody can have taken the Flow over, and a
 * runner that merely lost its lock session for a moment (a stall under load; it takes the lock again) goes on
 * committing. A runner paused inside the transaction past the lock's expiry finds the survivor holding it when
 * it wakes, and commits nothing; one paused between this check and COMMIT still holds the owner row
 * (`FOR SHARE`, taken by the first statement), so a new owner's claim, which updates that row, waits for the
 * COMMIT and loads what it committed. A no-op without a lease.
 */
export const requireLease = (sql: Sql, flowId: string, fence: Fence): Effect.Effect<void, LeaseLost | SqlError> =>
  fence.lease === undefined
    ? Effect.void
    : Effect.flatMap(sql<{ taken: unknown }>`SELECT ${leaseTaken(sql, fence.lease)} AS taken`, (rows) =>
        rows[0]?.taken === false ? Effect.void : Effect.fail(new LeaseLost({ flowId }))
      )

/**
 * The last statement of a fenced transaction that other processes hear of (the feed): {@link requireLease} and
 * the commit notice (`notifyCommit`) in one statement, one round trip fewer. The notice is transactional: a
 * transaction the lease check rolls back notifies nobody. Without a lease, the notice alone.
 */
export const requireLeaseAndNotify = (
  sql: Sql,
  d: Driver,
  flowId: string,
  fence: Fence
): Effect.Effect<void, LeaseLost | SqlError> =>
  fence.lease === undefined || d.dialect !== "pg"
    ? Effect.andThen(d.notifyCommit(flowId), requireLease(sql, flowId, fence))
    : Effect.flatMap(
        sql<{ taken: unknown }>`SELECT pg_notify(${COMMIT_CHANNEL}, ${flowId}) AS notified,
          ${leaseTaken(sql, fence.lease)} AS taken`,
        (rows) => (rows[0]?.taken === false ? Effect.void : Effect.fail(new LeaseLost({ flowId })))
      )

/** The condition "a runner other than the one of `lease` holds its shard lock" ({@link requireLease}). */
export const leaseTaken = (sql: Sql, lease: ShardLease) =>
  sql`EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.classid = ${lease.classId}
    AND l.objid = ${lease.objId} AND l.objsubid = 2 AND a.datname = current_database()
    AND a.application_name IS DISTINCT FROM ${lease.applicationName})`

/**
 * Takes ownership of a Flow: a new epoch, which refuses every later write of an earlier owner. With a shard
 * lease (Postgres) the claim commits only while this runner holds the Flow's shard lock, so a runner that lost
 * its shard (paused past the lock's expiry) cannot take the Flow back before it notices. `undefined` when the
 * lease is not held.
 */
export const claimOwnership = (sql: Sql, flowId: string, runner: string, now: number, lease: ShardLease | undefined) =>
  Effect.map(
    sql<{ epoch: unknown }>`INSERT INTO dex_owners (flow_id, epoch, runner, claimed_at)
      SELECT ${flowId}, 1, ${runner}, ${now} WHERE ${lease === undefined ? sql`1 = 1` : leaseHeld(sql, lease)}
      ON CONFLICT (flow_id) DO UPDATE SET epoch = dex_owners.epoch + 1, runner = excluded.runner,
      claimed_at = excluded.claimed_at
      RETURNING epoch`,
    (rows) => (rows.length === 0 ? undefined : num(rows[0]!.epoch))
  )

/** The current owner of a Flow: the runner that last claimed it, its epoch and when. */
export const loadOwner = (sql: Sql, flowId: string) =>
  Effect.map(
    sql<{ runner: string; epoch: unknown; claimed_at: unknown }>`SELECT runner, epoch, claimed_at FROM dex_owners
      WHERE flow_id = ${flowId}`,
    (rows) =>
      rows.length === 0
        ? undefined
        : { runner: rows[0]!.runner, epoch: num(rows[0]!.epoch), claimedAt: num(rows[0]!.claimed_at) }
  )

/**
 * How many sessions of the runner whose `application_name` starts with `prefix` are open (Postgres: the
 * cluster's runner health).
 */
export const runnerSessions = (sql: Sql, prefix: string) =>
  Effect.map(
    sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM pg_stat_activity
        WHERE datname = current_database() AND starts_with(application_name, ${prefix})`,
    (rows) => Number(rows[0]?.n ?? 0)
  )
