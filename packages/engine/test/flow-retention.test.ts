// Retention of a running Flow, on both engine layers: a long-lived Flow keeps a bounded number of closed Step
// executions (with their attempts), a bounded tail of each stream, its stored replies for the reply retention and
// effect/cluster's processed messages for their retention; the reads say where the kept part starts, a resume
// token before the kept tail is refused, and one inside it reads on.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { SqlClient } from "effect/sql"
import {
  Attribute,
  Channel,
  Client,
  Flow,
  FlowStream,
  Inspect,
  Step,
  StepDecision,
  type StepDef,
  Wait,
  Worker
} from "../src/index.ts"
import { engines } from "./support/engines.ts"

const Count = Attribute("count", Schema.Number)
const Go = Channel("go", Schema.Number)
const Ticks = FlowStream("ticks", Schema.Number)

/** One execution per published number: stages `n` on the stream, commits `count = n`, and waits for the next. */
const Tick: StepDef<number> = Step({
  type: "Tick",
  input: Schema.Number,
  waitFor: () => Wait.anyOf(Go.forOne()),
  execute: (ctx) =>
    Effect.gen(function* () {
      const n = ctx.channelResults(Go)[0]!
      yield* ctx.stage(Ticks, n)
      ctx.set(Count, n)
      return StepDecision.goTo(Tick, n)
    })
})
const Ticking = Flow({ type: "Ticking", start: Tick, attributes: [Count], channels: [Go], streams: [Ticks] })

const TICKS = 40
const KEPT_STEPS = 10
const KEPT_MESSAGES = 5

const count = (query: Effect.Effect<ReadonlyArray<{ readonly n: unknown }>, unknown>) =>
  Effect.map(query, (rows) => Number(rows[0]!.n))

for (const engine of engines) {
  describe(`${engine.name} engine: retention of a running Flow`, () => {
    it.live(
      "closed Step executions, the stream's tail, old replies and processed cluster messages are trimmed; reads say where the kept part starts",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          const sql = yield* SqlClient.SqlClient
          yield* client.startFlow(Ticking, "t", 0)
          let firstToken: string | undefined
          for (let n = 1; n <= TICKS; n++) {
            yield* client.publish("t", Go, n)
            yield* Effect.suspend(() => client.getAttribute("t", Count)).pipe(
              Effect.repeat({
                schedule: Schedule.spaced("5 millis"),
                until: (c) => Option.isSome(c) && c.value >= n
              }),
              Effect.timeout("30 seconds")
            )
            if (n === 1) {
              const first = yield* Stream.runCollect(client.readStream("t", Ticks))
              firstToken = Array.from(first)[0]!.token
            }
          }
          assert.strictEqual((yield* client.describeFlow("t")).status, "running")

          // Step executions: the active one and about the newest KEPT_STEPS closed ones (a pass every tenth closing)
          const steps = yield* client.stepExecutions("t")
          assert.isAtMost(steps.length, KEPT_STEPS + 10 + 1)
          assert.isAtLeast(steps.length, KEPT_STEPS)
          assert.strictEqual(steps.at(-1)!.status, "waiting", "the active execution stays")
          const retention = yield* client.retention("t")
          assert.isNotNull(retention.stepExecutionsFromSeq)
          assert.isAbove(retention.stepExecutionsFromSeq!, 1)
          // no attempt outlives its execution
          const orphans = yield* count(sql`SELECT COUNT(*) AS n FROM dex_attempts a WHERE a.flow_id = 't'
            AND NOT EXISTS (SELECT 1 FROM dex_steps s WHERE s.flow_id = a.flow_id
              AND s.step_execution_id = a.step_execution_id)`)
          assert.strictEqual(orphans, 0)
          // a waiter for a deleted execution learns it is gone instead of waiting for it forever
          const gone = yield* client.waitForStepExecution("t", "Tick-1", { timeout: "10 seconds" }).pipe(Effect.flip)
          assert.strictEqual(gone._tag, "EngineError")
          assert.include(gone._tag === "EngineError" ? gone.reason : "", "retention")
          const kept = yield* client.waitForStepExecution("t", steps[0]!.stepExecutionId, { timeout: "10 seconds" })
          assert.strictEqual(kept.status, "completed")

          // the stream: its newest KEPT_MESSAGES messages (plus what arrived since the last pass)
          const tail = Array.from(yield* Stream.runCollect(client.readStream("t", Ticks)))
          assert.isAtMost(tail.length, KEPT_MESSAGES + 10)
          assert.strictEqual(tail.at(-1)!.value, TICKS)
          const trimmedThrough = retention.streamsTrimmedThrough.ticks
          assert.isDefined(trimmedThrough)
          // a token before the kept tail is refused; one inside it reads on
          const refused = yield* Stream.runCollect(
            client.readStream("t", Ticks, { from: { after: firstToken! } })
          ).pipe(Effect.flip)
          assert.strictEqual(refused._tag, "InvalidResumeToken")
          const after = Array.from(
            yield* Stream.runCollect(client.readStream("t", Ticks, { from: { after: tail[0]!.token } }))
          )
          assert.deepStrictEqual(
            after.map((m) => m.value),
            tail.slice(1).map((m) => m.value)
          )

          // history: the window's mark is the first event read
          const history = yield* client.history("t")
          assert.isAtMost(history.length, 50 + 10)
          assert.strictEqual((yield* client.retention("t")).historyFromId, history[0]!.id)
          // the inspection text says it too
          const text = yield* Inspect.renderHistory("t")
          assert.include(text, `Retention: closed Step executions scheduled before seq`)
          assert.include(text, `history from event ${history[0]!.id}`)

          // stored replies older than the reply retention are gone; so are the processed cluster messages
          const replies = yield* count(sql`SELECT COUNT(*) AS n FROM dex_replies WHERE flow_id = 't'`)
          assert.isBelow(replies, TICKS / 2)
          const processed = yield* count(sql`SELECT COUNT(*) AS n FROM cluster_messages WHERE entity_id = 't'
            AND processed = ${sql.onDialectOrElse({ pg: () => sql.literal("TRUE"), orElse: () => sql.literal("1") })}`)
          assert.isBelow(processed, TICKS / 2)

          // SQLite: the file is made with incremental auto-vacuum, and the passes give its free pages back
          yield* sql.onDialectOrElse({
            sqlite: () =>
              Effect.gen(function* () {
                const mode = yield* sql<{ auto_vacuum: unknown }>`PRAGMA auto_vacuum`
                assert.strictEqual(Number(mode[0]!.auto_vacuum), 2, "incremental")
                const free = yield* sql<{ freelist_count: unknown }>`PRAGMA freelist_count`
                assert.isBelow(Number(free[0]!.freelist_count), 64)
              }),
            orElse: () => Effect.void
          })

          // the Flow goes on: one more tick commits and is read
          yield* client.publish("t", Go, TICKS + 1)
          yield* Effect.suspend(() => client.getAttribute("t", Count)).pipe(
            Effect.repeat({
              schedule: Schedule.spaced("5 millis"),
              until: (c) => Option.isSome(c) && c.value === TICKS + 1
            }),
            Effect.timeout("30 seconds")
          )
        }).pipe(
          Effect.provide(
            Worker.layer(Ticking).pipe(
              Layer.provideMerge(
                engine.layer({
                  retainedStepExecutions: KEPT_STEPS,
                  retainedStreamMessages: KEPT_MESSAGES,
                  historyWindowEvents: 50,
                  replyRetention: "1 millis",
                  processedMessageRetention: "1 millis"
                })
              )
            )
          )
        ),
      120_000
    )

    it.live(
      "with the default retention, a reply no resend can ask for any more goes, a keyed one stays, and a processed keep-alive goes at once",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          const sql = yield* SqlClient.SqlClient
          yield* client.startFlow(Ticking, "w", 0)
          // two replies committed 12 minutes ago: one of a request without a key (a random request ID, which only
          // the client's own resends repeat, for at most 10 minutes) and one of a keyed request (idempotency key)
          const longAgo = Date.now() - 12 * 60 * 1000
          const keyed = `idem/${"0".repeat(64)}/order-1`
          yield* sql`INSERT INTO dex_replies (flow_id, request_id, reply, at)
            VALUES ('w', 'old-request', 'true', ${longAgo}), ('w', ${keyed}, '"done"', ${longAgo})`
          for (let n = 1; n <= 25; n++) {
            yield* client.publish("w", Go, n)
            yield* Effect.suspend(() => client.getAttribute("w", Count)).pipe(
              Effect.repeat({ schedule: Schedule.spaced("5 millis"), until: (c) => Option.isSome(c) && c.value >= n }),
              Effect.timeout("30 seconds")
            )
          }
          // the passes ran (a pass every ten closings)
          assert.isNotNull((yield* client.retention("w")).stepExecutionsFromSeq)
          const ids = (yield* sql<{ request_id: string }>`SELECT request_id FROM dex_replies WHERE flow_id = 'w'`).map(
            (r) => r.request_id
          )
          assert.notInclude(ids, "old-request", "no resend can ask for it: gone")
          assert.include(ids, keyed, "a keyed reply is kept for the reply retention (7 days)")
          // the publishes' own replies are seconds old: kept, a resend may still ask for them
          assert.isAtLeast(ids.length - 1, 25)
          // effect/cluster's keep-alive messages (one as each woken Step starts): a processed one is gone at the
          // next pass, not after the processed-message retention (10 minutes)
          const processed = sql.onDialectOrElse({ pg: () => sql.literal("TRUE"), orElse: () => sql.literal("1") })
          const keepAlives = yield* count(sql`SELECT COUNT(*) AS n FROM cluster_messages WHERE entity_id = 'w'
            AND tag = 'Cluster/Entity/keepAlive' AND processed = ${processed}`)
          assert.isBelow(keepAlives, 12)
          const orphanReplies = yield* count(sql`SELECT COUNT(*) AS n FROM cluster_replies r
            WHERE NOT EXISTS (SELECT 1 FROM cluster_messages m WHERE m.id = r.request_id)`)
          assert.strictEqual(orphanReplies, 0, "their replies went with them")
        }).pipe(
          Effect.provide(Worker.layer(Ticking).pipe(Layer.provideMerge(engine.layer({ retainedStepExecutions: 10 }))))
        ),
      120_000
    )

    it.live("with the default retention, a running Flow keeps its replies and processed cluster messages", () =>
      Effect.gen(function* () {
        const client = yield* Client.Client
        const sql = yield* SqlClient.SqlClient
        yield* client.startFlow(Ticking, "d", 0)
        for (let n = 1; n <= 12; n++) {
          yield* client.publish("d", Go, n)
          yield* Effect.suspend(() => client.getAttribute("d", Count)).pipe(
            Effect.repeat({ schedule: Schedule.spaced("5 millis"), until: (c) => Option.isSome(c) && c.value >= n }),
            Effect.timeout("30 seconds")
          )
        }
        // twelve closings are far from a pass of the default retention: nothing is deleted
        assert.strictEqual((yield* client.stepExecutions("d")).length, 13)
        const replies = yield* count(sql`SELECT COUNT(*) AS n FROM dex_replies WHERE flow_id = 'd'`)
        assert.isAtLeast(replies, 12, "every publish's reply stays")
        const retention = yield* client.retention("d")
        assert.isNull(retention.stepExecutionsFromSeq)
        assert.deepStrictEqual(retention.streamsTrimmedThrough, {})
      }).pipe(Effect.provide(Worker.layer(Ticking).pipe(Layer.provideMerge(engine.layer({})))))
    )
  })
}
