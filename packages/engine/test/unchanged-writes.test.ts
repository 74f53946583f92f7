// A value written as it already is stores nothing: no new attribute version, no row, while a changed value
// (and a value written back after a change) gets its version as before, and readers read the same values.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
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

const dir = mkdtempSync(join(tmpdir(), "das-unchanged-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** What each message asks the Step to write. */
const Command = Schema.Struct({
  value: Schema.String,
  keyed: Schema.NullOr(Schema.String),
  deleteMissing: Schema.Boolean
})

const Value = Attribute("value", Schema.String)
const Keyed = AttributeMap("keyed", Schema.String)
/** Changes on every Step: the test waits for it. */
const Seen = Attribute("seen", Schema.Number)
const Commands = Channel("commands", Command)

const Apply: StepDef<null> = Step({
  type: "Apply",
  input: Schema.Null,
  waitFor: () => Wait.anyOf(Commands.forOne()),
  execute: (ctx) =>
    Effect.sync(() => {
      const command = ctx.channelResults(Commands)[0]!
      ctx.set(Value, command.value)
      if (command.keyed !== null) ctx.setAt(Keyed, "k", command.keyed)
      if (command.deleteMissing) ctx.deleteAt(Keyed, "missing")
      ctx.set(Seen, Option.getOrElse(ctx.get(Seen), () => 0) + 1)
      return StepDecision.goTo(Apply, null)
    })
})

const Writes = Flow({ type: "UnchangedWrites", start: Apply, attributes: [Value, Keyed, Seen], channels: [Commands] })

/** The stored versions of one attribute (name) and the Flow's version, read on the engine's own connection. */
const stored = (flowId: string, name: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ key: string; version: number; value: string | null }>`SELECT key, version, value
      FROM dex_attrs WHERE flow_id = ${flowId} AND name = ${name} ORDER BY key, version`
    const flow = yield* sql<{ version: number }>`SELECT version FROM dex_flows WHERE flow_id = ${flowId}`
    return {
      rows: rows.map((r) => ({ key: r.key, version: Number(r.version), value: r.value })),
      flow: Number(flow[0]!.version)
    }
  }).pipe(Effect.orDie)

describe("attribute writes of an unchanged value", () => {
  it.live("store no version; a change and a write back after a change do", () =>
    Effect.gen(function* () {
      const file = join(dir, "unchanged.db")
      const flowId = "w"
      yield* Effect.gen(function* () {
        const client = yield* Client.Client
        yield* client.startFlow(Writes, flowId, null)
        let sent = 0
        const send = (command: typeof Command.Type) =>
          Effect.gen(function* () {
            sent++
            const n = sent
            yield* client.publish(flowId, Commands, command)
            yield* Effect.suspend(() => client.getAttribute(flowId, Seen)).pipe(
              Effect.repeat({ schedule: Schedule.spaced("5 millis"), until: (c) => Option.isSome(c) && c.value >= n }),
              Effect.timeout("30 seconds")
            )
            return yield* stored(flowId, "value")
          })

        const first = yield* send({ value: "a", keyed: "x", deleteMissing: false })
        assert.strictEqual(first.rows.length, 1)
        const written = first.rows[0]!.version
        const keyedAt = (yield* stored(flowId, "keyed")).rows[0]!.version

        // the same values three times (and a delete of a key that has none): the stored versions stay
        for (let i = 0; i < 3; i++) {
          const again = yield* send({ value: "a", keyed: "x", deleteMissing: true })
          assert.isAbove(again.flow, written, "the Flow committed")
          assert.deepStrictEqual(again.rows, [{ key: "", version: written, value: '"a"' }])
          assert.deepStrictEqual((yield* stored(flowId, "keyed")).rows, [{ key: "k", version: keyedAt, value: '"x"' }])
        }

        // a change gets a new version; writing the first value back after it gets another
        const changed = yield* send({ value: "b", keyed: null, deleteMissing: false })
        assert.strictEqual(changed.rows.length, 1)
        assert.isAbove(changed.rows[0]!.version, written)
        assert.strictEqual(changed.rows[0]!.value, '"b"')
        const back = yield* send({ value: "a", keyed: null, deleteMissing: false })
        assert.strictEqual(back.rows.length, 1)
        assert.isAbove(back.rows[0]!.version, changed.rows[0]!.version)
        assert.strictEqual(back.rows[0]!.value, '"a"')

        // readers read the values as written
        assert.deepStrictEqual(yield* client.getAttribute(flowId, Value), Option.some("a"))
        assert.deepStrictEqual(yield* client.getAttribute(flowId, Keyed, "k"), Option.some("x"))
        assert.deepStrictEqual(yield* client.getAttribute(flowId, Keyed, "missing"), Option.none())
      }).pipe(
        Effect.provide(
          Worker.layer(Writes).pipe(
            Layer.provideMerge(Engine.layerEmbedded({ filename: file, pollInterval: "50 millis" }))
          )
        )
      )
    })
  )
})
