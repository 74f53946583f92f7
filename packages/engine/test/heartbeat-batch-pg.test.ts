// The cluster engine's batched heartbeats (`internal/heartbeats.ts`, `submitFenced`), on a real Postgres database:
// heartbeats with messages asked for in one event-loop turn are one statement that commits alone, each attempt
// fenced by its own owner epoch and by its own shard lease; a refused one writes nothing and gets its refusal,
// the others go on, and a commit notice goes out for each Flow whose messages were written.
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { Client, Engine, Worker } from "../src/index.ts"
import { COMMIT_CHANNEL } from "../src/internal/feed.ts"
import { GroupCommit } from "../src/internal/groupCommit.ts"
import { HeartbeatBatch } from "../src/internal/heartbeats.ts"
import * as EngineStore from "../src/internal/store/EngineStore.ts"
import type { FencedHeartbeat } from "../src/internal/store/flows.ts"
import type { ShardLease, StreamRow, TransitionBatch } from "../src/internal/store/rows.ts"
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

// Lock order: batches of the same attempts in opposite orders, a group commit of transitions that write those
// attempts, and claims of those Flows, side by side, many times over. Before the batched statement locked its
// rows in key order (and the group commit ran its transitions in Flow order), a batch and another batch or a
// group could each hold an attempt row the other wanted: Postgres ended one with a deadlock (40P01).

const FLOWS = ["f0", "f1", "f2", "f3", "f4", "f5"]
const STEPS = ["S-1", "S-2"]
const ROUNDS = 40

/** A transition of `flowId` that writes its attempts (in reverse key order) and moves its version on by one. */
const attemptsTransition = (flowId: string, epoch: number, version: number, at: number): TransitionBatch => ({
  fence: { epoch, runner: "r" },
  flow: {
    flow_id: flowId,
    flow_type: "T",
    run_id: "run",
    status: "running",
    input: "null",
    output: null,
    outputs: null,
    reason: null,
    error_type: null,
    request_id: null,
    counters: "{}",
    version: version + 1,
    started_at: 0,
    closed_at: null
  },
  expectedVersion: version,
  steps: [],
  attempts: [...STEPS].reverse().map((step) => ({
    flow_id: flowId,
    step_execution_id: step,
    attempt: 1,
    started_at: at,
    finished_at: null,
    outcome: null,
    error_type: null,
    detail: null
  })),
  attrs: [],
  attrDeletes: [],
  messages: [],
  messageDeletes: [],
  history: [],
  reply: undefined
})

describe("cluster engine: batched heartbeats and the other writers of their rows", () => {
  it.live(
    "batches of the same attempts in opposite orders, a group commit writing those attempts and claims of their Flows: no deadlock reaches a caller, each written heartbeat is stored once",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = EngineStore.makeWith(sql)
        yield* store.migrate
        const groupCommit = yield* Effect.provide(
          Effect.gen(function* () {
            return yield* GroupCommit
          }),
          GroupCommit.layer.pipe(Layer.provide(Layer.succeed(EngineStore.EngineStore, store)))
        )
        for (const flowId of FLOWS) {
          yield* sql`INSERT INTO dex_owners (flow_id, epoch, runner, claimed_at) VALUES (${flowId}, 1, 'r', 0)`
          yield* sql`INSERT INTO dex_flows (flow_id, flow_type, run_id, status, input, counters, version, started_at)
            VALUES (${flowId}, 'T', 'run', 'running', 'null', '{}', 1, 0)`
        }
        yield* insertAttempts(
          sql,
          FLOWS.flatMap((flowId) => STEPS.map((step) => [flowId, step] as const))
        )
        const attempts = FLOWS.flatMap((flowId) => STEPS.map((step) => ({ flowId, step })))
        const ascending = new HeartbeatBatch()
        const descending = new HeartbeatBatch()
        const beats: Array<{
          value: string
          flowId: string
          step: string
          epoch: number
          at: number
          written: boolean
        }> = []
        const committed = new Map(FLOWS.map((f) => [f, 0]))
        for (let round = 0; round < ROUNDS; round++) {
          const epochs = new Map(
            (yield* sql<{ flow_id: string; epoch: unknown }>`SELECT flow_id, epoch FROM dex_owners`).map(
              (r) => [r.flow_id, Number(r.epoch)] as const
            )
          )
          const versions = new Map(
            (yield* sql<{ flow_id: string; version: unknown }>`SELECT flow_id, version FROM dex_flows`).map(
              (r) => [r.flow_id, Number(r.version)] as const
            )
          )
          const at = round + 1
          const side = (batch: HeartbeatBatch, name: string, order: ReadonlyArray<{ flowId: string; step: string }>) =>
            Effect.forEach(
              order,
              ({ flowId, step }) => {
                const epoch = epochs.get(flowId)!
                const value = `${name} ${round} ${flowId} ${step}`
                return Effect.map(
                  batch.submitFenced(
                    store,
                    { flow_id: flowId, step_execution_id: step, attempt: 1, epoch, at, checkpoint: null },
                    undefined,
                    [row(flowId, step, 1, value)]
                  ),
                  (written) => beats.push({ value, flowId, step, epoch, at, written })
                )
              },
              { concurrency: "unbounded", discard: true }
            )
          // one group of transitions, given in reverse Flow order, each writing its attempts in reverse key order
          const group = Effect.forEach(
            [...FLOWS].reverse(),
            (flowId) => {
              const fence = { epoch: epochs.get(flowId)!, runner: "r" }
              return Effect.map(
                groupCommit.run(
                  Effect.gen(function* () {
                    const batch = attemptsTransition(flowId, fence.epoch, versions.get(flowId)!, at)
                    if (!(yield* store.writeTransition(batch))) return false
                    yield* store.requireLeaseAndNotify(flowId, fence)
                    return true
                  }),
                  flowId
                ),
                (ok) => {
                  if (ok) committed.set(flowId, committed.get(flowId)! + 1)
                }
              )
            },
            { concurrency: "unbounded", discard: true }
          )
          const claim = store.claimOwnership(FLOWS[round % FLOWS.length]!, "r", at, undefined)
          yield* Effect.all(
            [side(ascending, "up", attempts), side(descending, "down", [...attempts].reverse()), group, claim],
            { concurrency: "unbounded", discard: true }
          )
        }
        const finalEpochs = new Map(
          (yield* sql<{ flow_id: string; epoch: unknown }>`SELECT flow_id, epoch FROM dex_owners`).map(
            (r) => [r.flow_id, Number(r.epoch)] as const
          )
        )
        const stored = new Map(
          (yield* sql<{ value: string; n: unknown }>`SELECT value, COUNT(*) AS n FROM dex_stream GROUP BY value`).map(
            (r) => [r.value, Number(r.n)] as const
          )
        )
        assert.strictEqual(beats.length, ROUNDS * 2 * attempts.length)
        for (const b of beats) {
          if (b.written) assert.strictEqual(stored.get(b.value), 1, b.value)
          else {
            // refused only because a claim moved its Flow's epoch on
            assert.isUndefined(stored.get(b.value), b.value)
            assert.isAbove(finalEpochs.get(b.flowId)!, b.epoch, b.value)
          }
        }
        assert.strictEqual(stored.size, beats.filter((b) => b.written).length)
        assert.isAbove(stored.size, 0)
        // each attempt's heartbeat is the last round's in which one of its heartbeats was written
        const rows = yield* sql<{
          flow_id: string
          step_execution_id: string
          heartbeat_at: unknown
        }>`SELECT flow_id, step_execution_id, heartbeat_at FROM dex_attempts`
        assert.strictEqual(rows.length, attempts.length)
        for (const r of rows) {
          const last = Math.max(
            0,
            ...beats
              .filter((b) => b.written && b.flowId === r.flow_id && b.step === r.step_execution_id)
              .map((b) => b.at)
          )
          assert.strictEqual(r.heartbeat_at === null ? 0 : Number(r.heartbeat_at), last, r.step_execution_id)
        }
        // each committed transition moved its Flow's version on once
        const versions = yield* sql<{ flow_id: string; version: unknown }>`SELECT flow_id, version FROM dex_flows`
        for (const v of versions) assert.strictEqual(Number(v.version), 1 + committed.get(v.flow_id)!, v.flow_id)
      }).pipe(Effect.scoped, Effect.provide(layerTestDatabase)),
    300_000
  )
  it.live(
    "a batch that Postgres ends as a deadlock victim runs again and writes each heartbeat once; the caller never sees the deadlock",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const real = EngineStore.makeWith(sql)
        yield* real.migrate
        // how each run of the statement ended (a statement run again too); the batch uses it only as an Effect
        const runs: Array<string> = []
        const store: EngineStore.EngineStoreShape = {
          ...real,
          recordHeartbeatsWithRows: ((beats: ReadonlyArray<FencedHeartbeat>) =>
            real.recordHeartbeatsWithRows!(beats).pipe(
              Effect.tapError((error: SqlError) => Effect.sync(() => runs.push(error.reason._tag))),
              Effect.tap(() => Effect.sync(() => runs.push("Written")))
            )) as unknown as EngineStore.EngineStoreShape["recordHeartbeatsWithRows"]
        }
        yield* sql`INSERT INTO dex_owners (flow_id, epoch, runner, claimed_at) VALUES ('d', 1, 'r', 0)`
        yield* insertAttempts(sql, [
          ["d", "S-1"],
          ["d", "S-2"]
        ])
        // a transaction that holds S-2, then (once the batch holds S-1 and waits for S-2) wants S-1: a deadlock,
        // which Postgres breaks by ending one of the two, the batch or this transaction
        const locked = yield* Deferred.make<void>()
        const goOn = yield* Deferred.make<void>()
        const holder = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql`SELECT attempt FROM dex_attempts WHERE flow_id = 'd' AND step_execution_id = 'S-2' FOR UPDATE`
              yield* Deferred.succeed(locked, undefined)
              yield* Deferred.await(goOn)
              yield* sql`UPDATE dex_attempts SET checkpoint = 'holder' WHERE flow_id = 'd' AND step_execution_id = 'S-1'`
            })
          )
          .pipe(Effect.exit, Effect.forkScoped)
        yield* Deferred.await(locked)
        const batch = new HeartbeatBatch()
        const beat = (step: string) =>
          batch.submitFenced(
            store,
            { flow_id: "d", step_execution_id: step, attempt: 1, epoch: 1, at: 30, checkpoint: null },
            undefined,
            [row("d", step, 1, step)]
          )
        const beating = yield* Effect.all([beat("S-1"), beat("S-2")], { concurrency: "unbounded" }).pipe(
          Effect.forkScoped
        )
        // the batch statement waits for S-2's row lock
        yield* sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database()
            AND wait_event_type = 'Lock' AND query LIKE '%json_to_recordset%' AND pid <> pg_backend_pid()`.pipe(
          Effect.repeat({ until: (rows) => Number(rows[0]!.n) > 0, schedule: Schedule.spaced("20 millis") })
        )
        yield* Deferred.succeed(goOn, undefined)
        const results = yield* Fiber.join(beating)
        const held = yield* Fiber.join(holder)
        assert.deepStrictEqual(results, [true, true])
        // every run but the last was a deadlock victim and wrote nothing; the last wrote both. A run again can take
        // S-1's lock before the woken transaction does and be the victim once more, so how many runs is not fixed
        assert.strictEqual(runs.at(-1), "Written", runs.join())
        assert.deepStrictEqual(runs.slice(0, -1), Array(runs.length - 1).fill("DeadlockError"), runs.join())
        if (held._tag === "Success") {
          // the batch was the victim (once or more): it ran again until the transaction committed
          assert.isAtLeast(runs.length, 2, runs.join())
        } else {
          // the transaction was, perhaps after the batch had been once or more: the batch went on
          assert.isTrue(Cause.hasFails(held.cause), String(held.cause))
          const error = Cause.squash(held.cause) as SqlError
          assert.strictEqual(error.reason._tag, "DeadlockError")
        }
        assert.deepStrictEqual(yield* valuesOf(sql), ["S-1", "S-2"])
        assert.deepStrictEqual(yield* attemptsOf(sql), [
          ["d", "S-1", 30, 30],
          ["d", "S-2", 30, 30]
        ])
      }).pipe(Effect.scoped, Effect.provide(layerTestDatabase)),
    120_000
  )
})
