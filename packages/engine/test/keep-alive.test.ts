// The keep-alive's writes (internal/keepAlive.ts): the commit that wakes a waiting Flow's Step holds the keep-alive
// in its own transaction, so between a publish and the woken Step's execute the file sees exactly one write
// transaction, which holds both the transition and effect/cluster's keep-alive request. (Before, the keep-alive
// was saved in a commit of its own after the transition, and its read and the previous keep-alive's reply
// were more commits on the same path.) Then the keep-alive is delivered and, after the Flow's last Step, released:
// the request is processed and its reply stored, so nothing is redelivered on the next start.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { SqlClient } from "effect/sql"
import { Channel, Client, Engine, Flow, Step, StepDecision, Wait, Worker } from "../src/index.ts"
import { ControlPayload, FlowEntity } from "../src/internal/protocol.ts"
import { engines } from "./support/engines.ts"

const Ping = Channel("ping", Schema.String)

/** The statements of the file, and where the Step's execute came among them. */
const trace: Array<string> = []
const executed = { at: -1, done: Deferred.makeUnsafe<void>() }

const AwaitPing = Step({
  type: "AwaitPing",
  input: Schema.Null,
  waitFor: () => Wait.anyOf(Ping.forOne()),
  execute: () =>
    Effect.gen(function* () {
      executed.at = trace.length
      yield* Deferred.succeed(executed.done, undefined)
      return StepDecision.gracefulComplete()
    })
})
const PingFlow = Flow({ type: "KeepAlivePing", start: AwaitPing, channels: [Ping] })

const Held = Channel("held", Schema.String)

/** A Step that waits for two messages, so a Flow waits on after one publish. */
const AwaitTwo = Step({
  type: "AwaitTwo",
  input: Schema.Null,
  waitFor: () => Wait.anyOf(Held.forN(2)),
  execute: (ctx) => Effect.succeed(StepDecision.gracefulComplete(ctx.channelResults(Held)))
})
const HeldFlow = Flow({ type: "KeepAliveHeld", start: AwaitTwo, channels: [Held] })

/** Write transactions in `statements`: BEGIN ... COMMIT blocks with a write, and writes outside one. */
const writeTransactions = (statements: ReadonlyArray<string>) => {
  const blocks: Array<Array<string>> = []
  let open: Array<string> | undefined
  for (const s of statements) {
    const verb = s.trim().split(/\s+/)[0]!.toUpperCase()
    if (verb === "BEGIN") open = []
    else if (verb === "COMMIT") {
      if (open?.some((x) => /^\s*(INSERT|UPDATE|DELETE)/i.test(x))) blocks.push(open)
      open = undefined
    } else if (open !== undefined) open.push(s)
    else if (/^(INSERT|UPDATE|DELETE)$/.test(verb)) blocks.push([s])
  }
  return blocks
}

describe("embedded engine: the keep-alive's writes", () => {
  it.live(
    "a publish that wakes a waiting Step makes one write transaction before the Step runs, keep-alive included; the keep-alive is released after the Flow ends",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "das-keepalive-"))
      const engine = Engine.layerEmbedded({
        filename: join(dir, "engine.db"),
        pollInterval: "50 millis",
        onStatement: (s) => void trace.push(s)
      })
      return Effect.gen(function* () {
        const client = yield* Client.Client
        const sql = yield* SqlClient.SqlClient
        yield* client.startFlow(PingFlow, "ka-1", null)
        // waiting on its channel: no running Step, so no keep-alive yet
        yield* Effect.gen(function* () {
          const flow = yield* client.describeFlow("ka-1")
          if (flow.waitingSteps.length !== 1) return yield* Effect.fail("not waiting yet")
        }).pipe(Effect.retry(Schedule.spaced("20 millis")), Effect.timeout("30 seconds"))
        const from = trace.length
        yield* client.publish("ka-1", Ping, "hello")
        yield* Deferred.await(executed.done).pipe(Effect.timeout("30 seconds"))
        const path = writeTransactions(trace.slice(from, executed.at))
        assert.strictEqual(path.length, 1, `write transactions before execute: ${JSON.stringify(path)}`)
        assert.isTrue(
          path[0]!.some((s) => /INSERT INTO "cluster_messages"/.test(s)),
          "the keep-alive request is saved in the transition's transaction"
        )
        assert.isTrue(path[0]!.some((s) => /UPDATE dex_flows/.test(s)))
        // the publish's reply is stored in that transaction, and no read of a stored reply precedes it (a resend
        // finds the reply as its insert's conflict)
        assert.isTrue(path[0]!.some((s) => /INSERT INTO dex_replies/.test(s)))
        assert.isFalse(
          trace.slice(from, executed.at).some((s) => /FROM dex_replies/.test(s)),
          "no read of a stored reply before the commit"
        )
        const done = yield* client.waitForFlow("ka-1", { timeout: "30 seconds" })
        assert.strictEqual(done.status, "completed")
        // released after the linger: the request is processed (effect/cluster stored its reply)
        yield* Effect.gen(function* () {
          const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM cluster_messages
            WHERE entity_id = 'ka-1' AND tag = 'Cluster/Entity/keepAlive' AND processed = 0`
          const all = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM cluster_messages
            WHERE entity_id = 'ka-1' AND tag = 'Cluster/Entity/keepAlive'`
          if (Number(all[0]!.n) !== 1 || Number(rows[0]!.n) !== 0) return yield* Effect.fail("not released yet")
        }).pipe(Effect.retry(Schedule.spaced("200 millis")), Effect.timeout("60 seconds"))
      }).pipe(
        Effect.provide(Worker.layer(PingFlow).pipe(Layer.provideMerge(engine))),
        Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      )
    },
    120_000
  )
})

for (const engine of engines) {
  describe(`${engine.name} engine: a request sent again`, () => {
    it.live(
      "a publish sent again with its request ID after it committed is answered true and publishes nothing more",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          const flows = yield* FlowEntity.client
          yield* client.startFlow(HeldFlow, "resend-1", null)
          const payload = new ControlPayload({
            flowId: "resend-1",
            requestId: "resend-1-publish",
            command: { _tag: "Publish", channel: Held.name, key: "", value: JSON.stringify("once") }
          })
          assert.isTrue(yield* flows("resend-1").Control(payload))
          // the Flow is still running and the Step still waits (it wants two messages): the resend's transition
          // would publish again; its reply's insert finds the stored reply, and nothing of it is written
          assert.isTrue(yield* flows("resend-1").Control(payload))
          const history = yield* client.history("resend-1")
          assert.deepStrictEqual(history.filter((e) => e.kind === "Published").length, 1, "published once")
          const flow = yield* client.describeFlow("resend-1")
          assert.strictEqual(flow.status, "running")
          assert.strictEqual(flow.waitingSteps.length, 1)
          // a later publish with another request ID is a new one: the Step gets its two messages
          yield* client.publish("resend-1", Held, "twice")
          const done = yield* client.waitForFlow("resend-1", { timeout: "30 seconds" })
          assert.strictEqual(done.status, "completed")
          assert.deepStrictEqual(done.output, ["once", "twice"])
        }).pipe(Effect.provide(Worker.layer(HeldFlow).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )
  })
}
