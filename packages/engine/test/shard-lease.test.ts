// The claim's and the pre-COMMIT lease check's dependency on effect/cluster's advisory-lock numbering
// (`postgresShardLease`, src/internal/runner.ts, mirrors `SqlRunnerStorage`, which does not export it): a real
// cluster runner's shard locks are exactly the locks the engine computes, so an upgrade of effect that numbers
// them differently fails here instead of leaving every claim refused.

import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { SqlClient } from "effect/sql"
import { Client, Engine, Flow, Step, StepDecision, Worker } from "../src/index.ts"
import { COMMIT_CHANNEL } from "../src/internal/feed.ts"
import { requireLease, requireLeaseAndNotify } from "../src/internal/store/ownership.ts"
import * as PgDriver from "../src/internal/store/pg.ts"
import { freePort } from "./support/ports.ts"
import { withTestDatabase } from "./support/postgres.ts"

const SHARDS = 12

const Done = Step({
  type: "Done",
  input: Schema.String,
  execute: (_ctx, input) => Effect.succeed(StepDecision.gracefulComplete(input))
})
const Leased = Flow({ type: "Leased", start: Done })

describe("cluster engine: the shard lease the claims check", () => {
  it.live(
    "a runner's advisory locks are the ones postgresShardLease computes; a claim and a lease check under them succeed; the check fails once another runner holds the lock, and its commit notice is then never delivered",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const runner = yield* Engine.RunnerState
        // the runner takes every shard (it is alone)
        const held = yield* sql<{ classid: unknown; objid: unknown; objsubid: unknown }>`SELECT l.classid, l.objid,
          l.objsubid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = ${runner.runnerId}
          ORDER BY l.objid`.pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (rows) => rows.length >= SHARDS }),
          Effect.timeout("60 seconds")
        )
        const expected = Array.from({ length: SHARDS }, (_, i) => runner.shardLease("default", i + 1)!)
        assert.deepStrictEqual(
          held.map((r) => `${Number(r.classid)}/${Number(r.objid)}/${Number(r.objsubid)}`),
          expected.map((l) => `${l.classId}/${l.objId}/2`)
        )
        for (const l of expected) assert.strictEqual(l.applicationName, runner.runnerId)
        // a Flow runs: its claim found the lease
        const client = yield* Client.Client
        yield* client.startFlow(Leased, "l", "ok")
        const done = yield* client.waitForFlow("l", { timeout: "60 seconds" })
        assert.strictEqual(done.status, "completed")
        const owner = yield* client.flowOwner("l")
        assert.strictEqual(owner.runner, runner.runnerId)
        // the check before COMMIT: passes under this runner's lock and under a lock nobody holds, fails under a
        // lock another runner's session holds
        const fence = { epoch: owner.epoch, runner: runner.runnerId }
        const free = { ...expected[0]!, objId: 999 }
        yield* requireLease(sql, "l", { ...fence, lease: expected[0]! })
        yield* requireLease(sql, "l", { ...fence, lease: free })
        const taken = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        // a session named as another runner (for its transaction) takes the lock
        const intruder = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql`SELECT set_config('application_name', 'another runner', true)`
              yield* sql`SELECT pg_advisory_xact_lock(${free.classId | 0}, ${free.objId})`
              yield* Deferred.succeed(taken, undefined)
              yield* Deferred.await(release)
            })
          )
          .pipe(Effect.forkChild)
        yield* Deferred.await(taken)
        const lost = yield* Effect.flip(requireLease(sql, "l", { ...fence, lease: free }))
        assert.strictEqual(lost._tag, "LeaseLost")
        // the lease check with the commit notice, in one statement: a transaction it fails rolls back and notifies
        // nobody; one it passes notifies at COMMIT
        const pg = yield* Effect.serviceOption(PgClient.PgClient)
        assert.isTrue(Option.isSome(pg))
        const heard = yield* (pg as Option.Some<PgClient.PgClient>).value.listen(COMMIT_CHANNEL)
        const driver = PgDriver.make(sql)
        const refused = yield* Effect.flip(
          sql.withTransaction(requireLeaseAndNotify(sql, driver, "lease-lost", { ...fence, lease: free }))
        )
        assert.strictEqual(refused._tag, "LeaseLost")
        yield* sql.withTransaction(requireLeaseAndNotify(sql, driver, "lease-held", { ...fence, lease: expected[0]! }))
        // the first of the two notices heard (the engine's own commits notify too) is the committed one's
        const first = yield* Queue.take(heard).pipe(
          Effect.repeat({ until: (n) => n.payload === "lease-lost" || n.payload === "lease-held" })
        )
        assert.strictEqual(first.payload, "lease-held")
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(intruder)
      }).pipe(
        Effect.scoped,
        Effect.provide(
          Layer.unwrap(
            Effect.gen(function* () {
              const url = yield* withTestDatabase
              const runnerPort = yield* Effect.promise(freePort)
              return Worker.layer(Leased).pipe(
                Layer.provideMerge(
                  Engine.layerCluster({ url, runnerPort, pollInterval: "50 millis", shardsPerGroup: SHARDS })
                )
              )
            })
          )
        )
      ),
    120_000
  )
})
