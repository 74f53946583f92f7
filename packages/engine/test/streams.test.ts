// Stream messages on both engine layers: staged messages commit with their transition (a reader never sees
// one the committed record contradicts), and the stream budget is kept without a shared row.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { SqlClient } from "effect/sql"
import { Attribute, Client, Engine, Flow, FlowStream, Step, StepDecision, type StepDef, Worker } from "../src/index.ts"
import { engines } from "./support/engines.ts"

const Count = Attribute("count", Schema.Number)
const Events = FlowStream("events", Schema.Struct({ kind: Schema.String, n: Schema.Number }))

/** Counts to `limit`, one Step per number: each stages `counted n` and commits `count = n` with it. */
const Counter: StepDef<number> = Step({
  type: "Counter",
  input: Schema.Number,
  execute: (ctx, n) =>
    Effect.gen(function* () {
      yield* ctx.emit(Events, { kind: "delta", n })
      yield* ctx.stage(Events, { kind: "counted", n })
      ctx.set(Count, n)
      // work between the staging and the commit, so a reader polling meanwhile would see an early event
      yield* Effect.sleep("5 millis")
      return n < 20 ? StepDecision.goTo(Counter, n + 1) : StepDecision.gracefulComplete(n)
    })
})
const Counting = Flow({ type: "Counting", start: Counter, attributes: [Count], streams: [Events] })

/** Writes each kind of message once: staged, with a heartbeat, and best effort (one and a batch). */
const Writer = Step({
  type: "Writer",
  input: Schema.Number,
  execute: (ctx, n) =>
    Effect.gen(function* () {
      yield* ctx.stage(Events, { kind: "staged", n })
      yield* ctx.heartbeatWith(Events, [{ kind: "started", n }])
      yield* ctx.emit(Events, { kind: "delta", n })
      yield* ctx.emitAll(Events, [
        { kind: "delta", n: n + 1000 },
        { kind: "delta", n: n + 2000 }
      ])
      return StepDecision.gracefulComplete(n)
    })
})
const Writing = Flow({ type: "Writing", start: Writer, streams: [Events] })

for (const engine of engines) {
  describe(`${engine.name} engine: stream messages`, () => {
    it.live(
      "a reader following the stream never sees a staged message before the committed record it describes",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Counting, "c", 1)
          const checked = yield* client.readStream("c", Events, { follow: true, pollInterval: "1 millis" }).pipe(
            Stream.filter((m) => m.value.kind === "counted"),
            Stream.mapEffect((m) =>
              Effect.map(client.getAttribute("c", Count), (count) => {
                // the message commits with `count = n`: a read after it sees n, or later
                assert.isTrue(Option.isSome(count) && count.value >= m.value.n, `counted ${m.value.n}, count ${count}`)
                return m.value.n
              })
            ),
            Stream.runCollect,
            Effect.forkChild
          )
          assert.strictEqual((yield* client.waitForFlow("c", { timeout: "60 seconds" })).status, "completed")
          const seen = Array.from(yield* Fiber.join(checked))
          assert.deepStrictEqual(
            seen,
            Array.from({ length: 20 }, (_, i) => i + 1)
          )
        }).pipe(Effect.provide(Worker.layer(Counting).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )

    it.live(
      "thirty Flows of one type write at once: every message is stored once, in order, and no shared budget row is written",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          const sql = yield* SqlClient.SqlClient
          yield* Effect.forEach(
            Array.from({ length: 30 }, (_, i) => i),
            (i) => client.startFlow(Writing, `w-${i}`, i),
            {
              concurrency: "unbounded"
            }
          )
          for (let i = 0; i < 30; i++) {
            assert.strictEqual((yield* client.waitForFlow(`w-${i}`, { timeout: "60 seconds" })).status, "completed")
            const messages = Array.from(yield* Stream.runCollect(client.readStream(`w-${i}`, Events)))
            assert.deepStrictEqual(
              messages.map((m) => [m.value.kind, m.value.n]),
              [
                ["started", i],
                ["delta", i],
                ["delta", i + 1000],
                ["delta", i + 2000],
                ["staged", i]
              ]
            )
          }
          // far below 90 % of the capacity: nothing was trimmed, so the usage table holds no row at all
          const usage = yield* sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM dex_stream_usage`
          assert.strictEqual(Number(usage[0]!.n), 0)
        }).pipe(Effect.provide(Worker.layer(Writing).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )
  })
}

/** A small stream: a reconcile is due after 5 % of it (2,000 bytes, about three messages). */
const Small = FlowStream("small", Schema.Struct({ kind: Schema.String, n: Schema.Number }), { capacityBytes: 40_000 })

/**
 * Stages one message and commits after a pause: the Flows started together end their pauses together, so their
 * transitions share a group commit and their messages are counted one right after another.
 */
const SmallWriter = Step({
  type: "SmallWriter",
  input: Schema.Number,
  execute: (ctx, n) =>
    Effect.gen(function* () {
      yield* ctx.stage(Small, { kind: "staged", n })
      yield* Effect.sleep("300 millis")
      return StepDecision.gracefulComplete(n)
    })
})
const SmallWriting = Flow({ type: "SmallWriting", start: SmallWriter, streams: [Small] })

describe("embedded engine: the stream budget's reconcile", () => {
  it.live(
    "writes that pass the reconcile point in one group commit start one reconcile, not one each",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "das-streams-"))
      const sums: Array<string> = []
      const engine = Engine.layerEmbedded({
        filename: join(dir, "engine.db"),
        pollInterval: "50 millis",
        // every Flow's Step runs at once (the default is the CPU count)
        maxConcurrentTasks: 100,
        onStatement: (s) => {
          if (/SUM\(bytes\)/.test(s)) sums.push(s)
        }
      })
      const flows = 40
      return Effect.gen(function* () {
        const client = yield* Client.Client
        yield* Effect.forEach(
          Array.from({ length: flows }, (_, i) => i),
          (i) => client.startFlow(SmallWriting, `s-${i}`, i),
          { concurrency: "unbounded" }
        )
        for (let i = 0; i < flows; i++) {
          assert.strictEqual((yield* client.waitForFlow(`s-${i}`, { timeout: "60 seconds" })).status, "completed")
        }
        const messages = yield* Effect.forEach(
          Array.from({ length: flows }, (_, i) => i),
          (i) => Effect.map(Stream.runCollect(client.readStream(`s-${i}`, Small)), (m) => m.length)
        )
        assert.strictEqual(
          messages.reduce((a, b) => a + b, 0),
          flows
        )
        // each message counts at least 512 bytes, so 40 of them pass the reconcile point (2,000 bytes) at most
        // 40 * 600 / 2,000 = 12 times; one reconcile each, plus the first read of the sum
        assert.isAbove(sums.length, 0)
        assert.isAtMost(sums.length, 13, `${sums.length} reads of the stream's sum`)
      }).pipe(
        Effect.provide(Worker.layer(SmallWriting).pipe(Layer.provideMerge(engine))),
        Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      )
    },
    120_000
  )
})
