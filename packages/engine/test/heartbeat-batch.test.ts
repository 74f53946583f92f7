// The embedded engine's batched heartbeats (`internal/heartbeats.ts`), on a real SQLite file: heartbeats with
// messages asked for in one event-loop turn are one fenced statement pair in one transaction, each attempt
// fenced by its own owner epoch, and a refused one writes nothing and gets its refusal.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Reactivity } from "effect/reactivity"
import * as Stream from "effect/Stream"
import { SqlClient } from "effect/sql"
import { Client, Engine, Worker } from "../src/index.ts"
import { HeartbeatBatch } from "../src/internal/heartbeats.ts"
import * as EngineStore from "../src/internal/store/EngineStore.ts"
import type { StreamRow } from "../src/internal/store/rows.ts"
import * as NodeSqliteClient from "../src/NodeSqliteClient.ts"
import { Announcing, Events } from "./support/announcing.ts"

const withFile = <A, E, R>(use: (filename: string) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "das-heartbeat-batch-"))),
    (dir) => use(join(dir, "engine.db")),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

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

describe("embedded engine: batched heartbeats", () => {
  it.live("one statement pair per turn; each attempt fenced by its own epoch; a refused one writes nothing", () =>
    withFile((filename) =>
      Effect.gen(function* () {
        const trace: Array<string> = []
        const { client: sql } = yield* NodeSqliteClient.make({ filename, onStatement: (s) => void trace.push(s) })
        const store = EngineStore.makeWith(sql)
        yield* store.migrate
        yield* sql`INSERT INTO dex_owners (flow_id, epoch, runner, claimed_at) VALUES ('a', 1, 'r', 0), ('b', 2, 'r', 0)`
        for (const [flow, step, attempt] of [
          ["a", "S-1", 1],
          ["a", "S-2", 1],
          ["b", "S-1", 1]
        ] as const) {
          yield* sql`INSERT INTO dex_attempts (flow_id, step_execution_id, attempt, started_at)
            VALUES (${flow}, ${step}, ${attempt}, 0)`
        }
        const batch = new HeartbeatBatch()
        const beat = (flowId: string, step: string, epoch: number, at: number, value: string) =>
          batch.submit(
            store,
            store.withTransaction,
            { flow_id: flowId, step_execution_id: step, attempt: 1, epoch, at, checkpoint: null },
            [row(flowId, step, 1, value)]
          )
        trace.length = 0
        const results = yield* Effect.all(
          [
            beat("a", "S-1", 1, 10, "a1"),
            // b's owner is at epoch 2: a heartbeat of its epoch 1 owner is refused
            beat("b", "S-1", 1, 11, "b1"),
            beat("a", "S-2", 1, 12, "a2"),
            // the same attempt again in the same turn: written after the first, in the same transaction
            beat("a", "S-1", 1, 13, "a1 again")
          ],
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(results, [true, false, true, true])
        const statements = trace.map((s) => s.trim().split(/\s+/)[0]!.toUpperCase())
        // one transaction: two rounds of the heartbeat statement (S-1 twice), one INSERT of the written rows
        assert.deepStrictEqual(statements, ["BEGIN", "WITH", "WITH", "INSERT", "COMMIT"])
        const attempts = yield* sql<{
          flow_id: string
          step_execution_id: string
          heartbeat_at: number | null
          output_at: number | null
        }>`SELECT flow_id, step_execution_id, heartbeat_at, output_at FROM dex_attempts ORDER BY flow_id, step_execution_id`
        assert.deepStrictEqual(
          attempts.map((a) => [a.flow_id, a.step_execution_id, a.heartbeat_at, a.output_at]),
          [
            ["a", "S-1", 13, 10],
            ["a", "S-2", 12, 12],
            ["b", "S-1", null, null]
          ]
        )
        const stored = yield* sql<{ value: string }>`SELECT value FROM dex_stream ORDER BY seq`
        assert.deepStrictEqual(
          stored.map((r) => r.value),
          ["a1", "a2", "a1 again"]
        )
      }).pipe(Effect.scoped, Effect.provide(Reactivity.layer))
    )
  )
})

// Through the engine: parallel Steps that each announce themselves with `heartbeatWith` before they go on.

describe("embedded engine: parallel Steps announcing themselves", () => {
  it.live("every heartbeat's message is stored before its Step's commit, and each attempt's heartbeat holds", () =>
    withFile((filename) =>
      Effect.gen(function* () {
        const client = yield* Client.Client
        yield* client.startFlow(Announcing, "f", null)
        assert.strictEqual((yield* client.waitForFlow("f", { timeout: "60 seconds" })).status, "completed")
        const messages = yield* client.readStream("f", Events).pipe(Stream.runCollect)
        const kinds = Array.from(messages, (m) => `${m.value.kind} ${m.value.name}`)
        for (const name of ["x", "y", "z"]) {
          // the started message of each Step comes before its finished one
          const started = kinds.indexOf(`started ${name}`)
          const finished = kinds.indexOf(`finished ${name}`)
          assert.isTrue(started >= 0 && finished > started, kinds.join(", "))
        }
        const sql = yield* SqlClient.SqlClient
        const beats = yield* sql<{
          step_execution_id: string
          output_at: number | null
        }>`SELECT step_execution_id, output_at FROM dex_attempts WHERE flow_id = 'f' AND step_execution_id LIKE 'Announcer%'`
        assert.strictEqual(beats.length, 3)
        for (const b of beats) assert.isTrue(Option.isSome(Option.fromNullishOr(b.output_at)), b.step_execution_id)
      }).pipe(Effect.provide(Worker.layer(Announcing).pipe(Layer.provideMerge(Engine.layerEmbedded({ filename })))))
    )
  )
})
