// The cluster engine's batched heartbeats (`internal/heartbeats.ts`, `submitFenced`), on a real Postgres database:
// heartbeats with messages asked for in one event-loop turn are one statement that commits alone, each attempt
// fenced by its own owner epoch and by its own shard lease; a refused one writes nothing and gets its refusal,
// the others go on, and a commit notice goes out for each Flow whose messages were written.
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import { SqlClient } from "effect/sql"
import { Client, Engine, Worker } from "../src/index.ts"
import { COMMIT_CHANNEL } from "../src/internal/feed.ts"
import { HeartbeatBatch } from "../src/internal/heartbeats.ts"
import * as EngineStore from "../src/internal/store/EngineStore.ts"
import type { FencedHeartbeat } from "../src/internal/store/flows.ts"
import type { ShardLease, StreamRow } from "../src/internal/store/rows.ts"
import { Announcing, Events } from "./support/announcing.ts"
import { freePort } from "./support/ports.ts"
import { layerTestDatabase, withTestDatabase } from "./support/postgres.ts"

const row = (flowId: string, stepExecutionId: string, attempt: number, value: string): StreamRow => ({
  flow_type: "T",
  stream: "events",
  flow_id: flowId,
  step_execution_id: stepExecutionId,
  attempt,
  value,
  bytes: 600,
  at: 1,
  runner: "r"
})

/** The store, with the batched statement's calls counted (how many heartbeats each carried). */
const countedStore = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const real = EngineStore.makeWith(sql)
  yield* real.migrate
  const calls: Array<number> = []
  const store: EngineStore.EngineStoreShape = {
    ...real,
    recordHeartbeatsWithRows: (beats: ReadonlyArray<FencedHeartbeat>) => {
      calls.push(beats.length)
      return real.recordHeartbeatsWithRows!(beats)
    }
  }
  return { sql, store, calls }
})

const attemptsOf = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{
      flow_id: string
      step_execution_id: string
      heartbeat_at: unknown
      output_at: unknown
    }>`SELECT flow_id, step_execution_id, heartbeat_at, output_at FROM dex_attempts ORDER BY flow_id, step_execution_id`,
    (rows) =>
      rows.map((a) => [
        a.flow_id,
        a.step_execution_id,
        a.heartbeat_at === null ? null : Number(a.heartbeat_at),
        a.output_at === null ? null : Number(a.output_at)
      ])
  )

const valuesOf = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ value: string }>`SELECT value FROM dex_stream ORDER BY seq`, (rows) => rows.map((r) => r.value))

const insertAttempts = (sql: SqlClient.SqlClient, attempts: ReadonlyArray<readonly [string, string]>) =>
  Effect.forEach(
    attempts,
    ([flow, step]) => sql`INSERT INTO dex_attempts (flow_id, step_execution_id, attempt, started_at)
      VALUES (${flow}, ${step}, 1, 0)`,
    { discard: true }
  )

describe("cluster engine: batched heartbeats", () => {
  it.live(
    "one statement per turn; each attempt fenced by its own epoch; a refused one writes nothing; the same attempt twice goes in a second statement",
    () =>
      Effect.gen(function* () {
        const { sql, store, calls } = yield* countedStore
        const pg = yield* PgClient.PgClient
        const heard = yield* pg.listen(COMMIT_CHANNEL)
        yield* sql`INSERT INTO dex_owners (flow_id, epoch, runner, claimed_at) VALUES ('a', 1, 'r', 0), ('b', 2, 'r', 0)`
        yield* insertAttempts(sql, [
          ["a", "S-1"],
          ["a", "S-2"],
          ["b", "S-1"]
        ])
        const batch = new HeartbeatBatch()
        const beat = (flowId: string, step: string, epoch: number, at: number, values: ReadonlyArray<string>) =>
          batch.submitFenced(
            store,
            { flow_id: flowId, step_execution_id: step, attempt: 1, epoch, at, checkpoint: null },
            undefined,
            values.map((v) => row(flowId, step, 1, v))
          )
        const results = yield* Effect.all(
          [
            beat("a", "S-1", 1, 10, ["a1", "a1 second"]),
            // b's owner is at epoch 2: a heartbeat of its epoch 1 owner is refused
            beat("b", "S-1", 1, 11, ["b1"]),
            beat("a", "S-2", 1, 12, ["a2"]),
            // the same attempt again in the same turn: written after the first, in the next statement
            beat("a", "S-1", 1, 13, ["a1 again"])
          ],
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(results, [true, false, true, true])
        assert.deepStrictEqual(calls, [3, 1])
        assert.deepStrictEqual(yield* attemptsOf(sql), [
          ["a", "S-1", 13, 10],
          ["a", "S-2", 12, 12],
          ["b", "S-1", null, null]
        ])
        assert.deepStrictEqual(yield* valuesOf(sql), ["a1", "a1 second", "a2", "a1 again"])
        // one notice per statement that wrote a's messages, none for b's refused one
        yield* sql`SELECT pg_notify(${COMMIT_CHANNEL}, 'end')`
        const notices: Array<string> = []
        while (notices.at(-1) !== "end") notices.push((yield* Queue.take(heard)).payload)
        assert.deepStrictEqual(notices, ["a", "a", "end"])
      }).pipe(Effect.scoped, Effect.provide(layerTestDatabase)),
    120_000
  )

  it.live(
    "each attempt fenced by its own shard lease: one whose shard lock another runner holds writes nothing, attempts of other shards proceed, and only their Flows are notified",
    () =>
      Effect.gen(function* () {
        const { sql, store, calls } = yield* countedStore
        const pg = yield* PgClient.PgClient
        const heard = yield* pg.listen(COMMIT_CHANNEL)
        yield* sql`INSERT INTO dex_owners (flow_id, epoch, runner, claimed_at)
          VALUES ('held', 1, 'r', 0), ('free', 1, 'r', 0), ('lost', 1, 'r', 0), ('lost-too', 1, 'r', 0),
            ('none', 1, 'r', 0)`
        yield* insertAttempts(sql, [
          ["held", "S-1"],
          ["free", "S-1"],
          ["lost", "S-1"],
          ["lost", "S-2"],
          ["lost-too", "S-1"],
          ["none", "S-1"]
        ])
        const me = "runner-me"
        const shard = (objId: number, applicationName = me): ShardLease => ({ applicationName, classId: 4242, objId })
        const taken = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        // this runner's lock session holds shard 1; a session named as another runner holds shard 3; shard 2 is
        // nobody's (a runner that lost its lock session for a moment goes on, as the single heartbeat does)
        const holder = (name: string, objId: number) =>
          sql
            .withTransaction(
              Effect.gen(function* () {
                yield* sql`SELECT set_config('application_name', ${name}, true)`
                yield* sql`SELECT pg_advisory_xact_lock(4242, ${objId})`
                yield* Deferred.succeed(taken, undefined)
                yield* Deferred.await(release)
              })
            )
            .pipe(Effect.forkScoped)
        const mine = yield* holder(me, 1)
        yield* Deferred.await(taken)
        const before = yield* Deferred.make<void>()
        const intruder = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql`SELECT set_config('application_name', 'another runner', true)`
              yield* sql`SELECT pg_advisory_xact_lock(4242, 3)`
              yield* Deferred.succeed(before, undefined)
              yield* Deferred.await(release)
            })
          )
          .pipe(Effect.forkScoped)
        yield* Deferred.await(before)
        const batch = new HeartbeatBatch()
        const beat = (flowId: string, step: string, lease: ShardLease | undefined, value: string) =>
          batch.submitFenced(
            store,
            { flow_id: flowId, step_execution_id: step, attempt: 1, epoch: 1, at: 20, checkpoint: null },
            lease,
            [row(flowId, step, 1, value)]
          )
        const results = yield* Effect.all(
          [
            beat("held", "S-1", shard(1), "held"),
            beat("free", "S-1", shard(2), "free"),
            // shard 3 was lost to another runner: every attempt under it is refused
            beat("lost", "S-1", shard(3), "lost 1"),
            beat("lost", "S-2", shard(3), "lost 2"),
            beat("lost-too", "S-1", shard(3), "lost 3"),
            beat("none", "S-1", undefined, "none")
          ],
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(results, [true, true, false, false, false, true])
        assert.deepStrictEqual(calls, [6])
        assert.deepStrictEqual(yield* attemptsOf(sql), [
          ["free", "S-1", 20, 20],
          ["held", "S-1", 20, 20],
          ["lost", "S-1", null, null],
          ["lost", "S-2", null, null],
          ["lost-too", "S-1", null, null],
          ["none", "S-1", 20, 20]
        ])
        assert.deepStrictEqual(yield* valuesOf(sql), ["held", "free", "none"])
        yield* sql`SELECT pg_notify(${COMMIT_CHANNEL}, 'end')`
        const notices: Array<string> = []
        while (notices.at(-1) !== "end") notices.push((yield* Queue.take(heard)).payload)
        assert.deepStrictEqual(notices.slice(0, -1).sort(), ["free", "held", "none"])
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(intruder)
        yield* Fiber.join(mine)
      }).pipe(Effect.scoped, Effect.provide(layerTestDatabase)),
    120_000
  )
})

// Through the cluster engine: parallel Steps that each announce themselves with `heartbeatWith` before they go on.

describe("cluster engine: parallel Steps announcing themselves", () => {
  it.live(
    "every heartbeat's message is stored before its Step's commit, and each attempt's heartbeat holds",
    () =>
      Effect.gen(function* () {
        const client = yield* Client.Client
        yield* client.startFlow(Announcing, "f", null)
        assert.strictEqual((yield* client.waitForFlow("f", { timeout: "60 seconds" })).status, "completed")
        const messages = yield* client.readStream("f", Events).pipe(Stream.runCollect)
        const kinds = Array.from(messages, (m) => `${m.value.kind} ${m.value.name}`)
        for (const name of ["x", "y", "z"]) {
          const started = kinds.indexOf(`started ${name}`)
          const finished = kinds.indexOf(`finished ${name}`)
          assert.isTrue(started >= 0 && finished > started, kinds.join(", "))
        }
        const sql = yield* SqlClient.SqlClient
        const beats = yield* sql<{
          step_execution_id: string
          output_at: unknown
        }>`SELECT step_execution_id, output_at FROM dex_attempts WHERE flow_id = 'f' AND step_execution_id LIKE 'Announcer%'`
        assert.strictEqual(beats.length, 3)
        for (const b of beats) assert.isNotNull(b.output_at, b.step_execution_id)
      }).pipe(
        Effect.scoped,
        Effect.provide(
          Layer.unwrap(
            Effect.gen(function* () {
              const url = yield* withTestDatabase
              const runnerPort = yield* Effect.promise(freePort)
              return Worker.layer(Announcing).pipe(
                Layer.provideMerge(Engine.layerCluster({ url, runnerPort, pollInterval: "50 millis" }))
              )
            })
          )
        )
      ),
    120_000
  )
})
