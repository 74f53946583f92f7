// Hard-delete attributes, the history window and closed-Flow retention, on both engine layers.
import { readdirSync, readFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { SqlClient } from "effect/sql"
import {
  Attribute,
  AttributeMap,
  Channel,
  Client,
  Engine,
  Flow,
  Step,
  StepDecision,
  type StepDef,
  Wait,
  Worker
} from "../src/index.ts"
import { engines } from "./support/engines.ts"

const Secret = Attribute("secret", Schema.String, { hardDelete: true })
const Kept = Attribute("kept", Schema.String)
const Go = Channel("go", Schema.String)

const UseSecret = Step({
  type: "UseSecret",
  input: Schema.String,
  waitFor: () => Wait.anyOf(Go.forOne()),
  execute: (ctx) =>
    Effect.sync(() => {
      ctx.delete(Secret)
      return StepDecision.gracefulComplete(null)
    })
})
const Store = Step({
  type: "Store",
  input: Schema.String,
  execute: (ctx, marker) =>
    Effect.sync(() => {
      ctx.set(Secret, `first-${marker}`)
      ctx.set(Kept, `kept-${marker}`)
      return StepDecision.goTo(UseSecret, marker)
    })
})
const SecretFlow = Flow({
  type: "Secrets",
  start: Store,
  steps: [UseSecret],
  attributes: [Secret, Kept],
  channels: [Go]
})

// An ordinary AttributeMap whose instances are written and deleted again, one per Step.
const Scratch = AttributeMap("scratch", Schema.String)
const DropScratch: StepDef<number> = Step({
  type: "DropScratch",
  input: Schema.Number,
  execute: (ctx, n) =>
    Effect.sync(() => {
      ctx.deleteAt(Scratch, `k${n}`)
      return n < 5 ? StepDecision.goTo(WriteScratch, n + 1) : StepDecision.gracefulComplete(n)
    })
})
const WriteScratch: StepDef<number> = Step({
  type: "WriteScratch",
  input: Schema.Number,
  execute: (ctx, n) =>
    Effect.sync(() => {
      ctx.setAt(Scratch, `k${n}`, `v${n}`)
      return StepDecision.goTo(DropScratch, n)
    })
})
const ScratchFlow = Flow({ type: "Scratch", start: WriteScratch, steps: [DropScratch], attributes: [Scratch] })

const Loop: StepDef<number> = Step({
  type: "Loop",
  input: Schema.Number,
  execute: (_ctx, n) => Effect.succeed(n < 60 ? StepDecision.goTo(Loop, n + 1) : StepDecision.gracefulComplete(n))
})
const LoopFlow = Flow({ type: "Loop", start: Loop })

const rowsMentioning = (needle: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    let found = 0
    for (const [table, column] of [
      ["dex_attrs", "value"],
      ["dex_history", "data"],
      ["dex_steps", "input"],
      ["dex_replies", "reply"],
      ["dex_messages", "value"]
    ] as const) {
      const rows = yield* sql<{
        n: unknown
      }>`SELECT COUNT(*) AS n FROM ${sql(table)} WHERE ${sql(column)} LIKE ${`%${needle}%`}`
      found += Number(rows[0]!.n)
    }
    return found
  })

const flowRows = (flowId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    let found = 0
    for (const table of ["dex_flows", "dex_attrs", "dex_messages", "dex_steps", "dex_attempts", "dex_history"]) {
      const rows = yield* sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM ${sql(table)} WHERE flow_id = ${flowId}`
      found += Number(rows[0]!.n)
    }
    return found
  })

for (const engine of engines) {
  describe(`${engine.name} engine: hard-delete, history window, retention`, () => {
    it.live("a hard-delete attribute keeps no superseded value and leaves storage when deleted", () => {
      const marker = `S3CR3T${Math.random().toString(36).slice(2, 10)}`
      return Effect.gen(function* () {
        const client = yield* Client.Client
        const sql = yield* SqlClient.SqlClient
        yield* client.startFlow(SecretFlow, "s", marker)
        yield* Effect.suspend(() => client.getAttribute("s", Kept)).pipe(
          Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: Option.isSome }),
          Effect.timeout("30 seconds")
        )
        assert.isAbove(yield* rowsMentioning(`first-${marker}`), 0)
        yield* client.publish("s", Go, "now")
        const done = yield* client.waitForFlow("s", { timeout: "30 seconds" })
        assert.strictEqual(done.status, "completed")
        assert.deepStrictEqual(yield* client.getAttribute("s", Secret), Option.none())
        assert.strictEqual(yield* rowsMentioning(`first-${marker}`), 0, "no row holds the secret")
        assert.isAbove(yield* rowsMentioning(`kept-${marker}`), 0, "the ordinary attribute is still stored")
        // SQLite: after delete + checkpoint, the secret's bytes are gone from the database file (and its WAL)
        yield* sql.onDialectOrElse({
          sqlite: () =>
            Effect.gen(function* () {
              const rows = yield* sql<{ file: string }>`SELECT file FROM pragma_database_list WHERE name = 'main'`
              const file = rows[0]!.file
              yield* sql`PRAGMA wal_checkpoint(TRUNCATE)`
              const bytes = Buffer.concat(
                readdirSync(dirname(file))
                  .filter((f) => f.startsWith(basename(file)))
                  .map((f) => readFileSync(join(dirname(file), f)))
              )
              assert.strictEqual(bytes.indexOf(`first-${marker}`), -1, "the deleted secret is not in the file")
              assert.notStrictEqual(bytes.indexOf(`kept-${marker}`), -1, "the file does hold the ordinary value")
            }),
          orElse: () => Effect.void
        })
      }).pipe(Effect.provide(Worker.layer(SecretFlow).pipe(Layer.provideMerge(engine.layer({})))))
    })

    it.live("a deleted attribute that no running Step reads leaves no row behind (no tombstone)", () =>
      Effect.gen(function* () {
        const client = yield* Client.Client
        const sql = yield* SqlClient.SqlClient
        yield* client.startFlow(ScratchFlow, "scratch", 1)
        const done = yield* client.waitForFlow("scratch", { timeout: "30 seconds" })
        assert.strictEqual(done.status, "completed")
        const rows = yield* sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM dex_attrs
          WHERE flow_id = 'scratch' AND name = 'scratch'`
        assert.strictEqual(Number(rows[0]!.n), 0, "five written and deleted instances leave nothing stored")
        assert.deepStrictEqual(yield* client.getAttribute("scratch", Scratch, "k5"), Option.none())
      }).pipe(Effect.provide(Worker.layer(ScratchFlow).pipe(Layer.provideMerge(engine.layer({})))))
    )

    it.live(
      "the history window keeps about the newest events of a run",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(LoopFlow, "loop", 0)
          const done = yield* client.waitForFlow("loop", { timeout: "60 seconds" })
          assert.strictEqual(done.status, "completed")
          const history = yield* client.history("loop")
          assert.isAtMost(history.length, 50 + 10)
          assert.isAtLeast(history.length, 50)
          assert.strictEqual(history[history.length - 1]!.kind, "FlowCompleted")
          assert.notStrictEqual(history[0]!.kind, "FlowStarted", "the oldest events were pruned")
        }).pipe(
          Effect.provide(Worker.layer(LoopFlow).pipe(Layer.provideMerge(engine.layer({ historyWindowEvents: 50 }))))
        ),
      120_000
    )

    it.live(
      "a closed Flow stays readable for closedFlowRetention, then every row of it is purged",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(LoopFlow, "old", 55)
          const done = yield* client.waitForFlow("old", { timeout: "60 seconds" })
          assert.strictEqual(done.status, "completed")
          assert.strictEqual((yield* client.describeFlow("old")).status, "completed")
          const gone = yield* client
            .describeFlow("old")
            .pipe(Effect.flip, Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 300 }))
          assert.strictEqual(gone._tag, "FlowNotFound")
          assert.strictEqual(yield* flowRows("old"), 0)
          const runner = yield* Engine.RunnerState
          assert.isAtLeast(runner.counters.flowsPurged, 1)
          // the purged Flow ID is free again (a cached owner of the closed Flow reads it again)
          yield* client.startFlow(LoopFlow, "old", 60)
          assert.strictEqual((yield* client.waitForFlow("old", { timeout: "60 seconds" })).status, "completed")
        }).pipe(
          Effect.provide(
            Worker.layer(LoopFlow).pipe(Layer.provideMerge(engine.layer({ closedFlowRetention: "2 seconds" })))
          )
        ),
      120_000
    )
  })
}
