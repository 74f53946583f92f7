import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { AttributeMap, Channel, Client, Engine, Flow, Step, StepDecision, Wait, Worker } from "../src/index.ts"

const dir = mkdtempSync(join(tmpdir(), "das-restart-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const Inbox = Channel("inbox", Schema.String)
const Seen = AttributeMap("seen", Schema.String)
const Receive: ReturnType<typeof Step<null>> = Step({
  type: "Receive",
  input: Schema.Null,
  waitFor: () => Wait.anyOf(Inbox.forOne()),
  execute: (ctx) =>
    Effect.sync(() => {
      const [message] = ctx.channelResults(Inbox)
      ctx.setAt(Seen, String(ctx.keys(Seen).length + 1), message!)
      return StepDecision.goTo(Receive, null)
    })
})
const Inboxes = Flow({ type: "Inboxes", start: Receive, attributes: [Seen], channels: [Inbox] })

/** One worker process on the file, until `body` ends. */
const withWorker = <A, E>(filename: string, body: Effect.Effect<A, E, Client.Client>) =>
  body.pipe(
    Effect.provide(Worker.layer(Inboxes).pipe(Layer.provideMerge(Engine.layerEmbedded({ filename })))),
    Effect.scoped
  )

const seen = (flowId: string, n: number) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    return yield* Effect.forEach(
      Array.from({ length: n }, (_, i) => String(i + 1)),
      (k) => client.getAttribute(flowId, Seen, k)
    )
  })

describe("embedded engine: state reloaded from the file", () => {
  it.live("a message published and consumed in one transition is not consumed again after a restart", () =>
    Effect.gen(function* () {
      const filename = join(dir, "inbox.db")
      yield* withWorker(
        filename,
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Inboxes, "inbox-1", null)
          yield* client.publish("inbox-1", Inbox, "first")
          yield* seen("inbox-1", 1).pipe(
            Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (v) => v[0]?._tag === "Some" }),
            Effect.timeout("30 seconds")
          )
        })
      )
      const after = yield* withWorker(
        filename,
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.publish("inbox-1", Inbox, "second")
          return yield* seen("inbox-1", 3).pipe(
            Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (v) => v[1]?._tag === "Some" }),
            Effect.timeout("30 seconds")
          )
        })
      )
      assert.deepStrictEqual(
        after.map((v) => (v._tag === "Some" ? v.value : null)),
        ["first", "second", null]
      )
    })
  )
})

const Timed = Flow({ type: "Timed", start: Receive, attributes: [Seen], channels: [Inbox] })

describe("embedded engine: an execution timeout is durable", () => {
  it.live("a Flow whose worker stopped before its deadline fails ExecutionTimeout in the next worker", () =>
    Effect.gen(function* () {
      const filename = join(dir, "timeout.db")
      const worker = <A, E>(body: Effect.Effect<A, E, Client.Client>) =>
        body.pipe(
          Effect.provide(Worker.layer(Timed).pipe(Layer.provideMerge(Engine.layerEmbedded({ filename })))),
          Effect.scoped
        )
      yield* worker(
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Timed, "timed-1", null, { executionTimeout: "3 seconds" })
          assert.strictEqual((yield* client.describeFlow("timed-1")).status, "running")
        })
      )
      // nothing asks for the Flow in the next process: only its persisted wake-up can time it out
      const closed = yield* worker(
        Effect.gen(function* () {
          const client = yield* Client.Client
          return yield* client.waitForFlow("timed-1", { timeout: "30 seconds" })
        })
      )
      assert.strictEqual(closed.status, "failed")
      assert.strictEqual(closed.errorType, "ExecutionTimeout")
    })
  )
})
