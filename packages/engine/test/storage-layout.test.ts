// The embedded engine's file layout: a new file stores each table keyed by its own primary key as that key's
// B-tree (`WITHOUT ROWID`, one B-tree instead of a rowid B-tree and an index that repeats the key) and has no
// index that another one serves; a file made with the earlier layout (rowid tables, the index `dex_steps_active`)
// opens as it is and runs a Flow through retention passes.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import {
  Attribute,
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

const dir = mkdtempSync(join(tmpdir(), "das-layout-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** The engine's tables keyed by a primary key of their own (not `dex_attrs`, the table of large values). */
const KEYED = [
  "dex_meta",
  "dex_flows",
  "dex_messages",
  "dex_steps",
  "dex_attempts",
  "dex_replies",
  "dex_stream_usage",
  "dex_owners",
  "dex_retention"
]

const schemaOf = (file: string) => {
  const db = new DatabaseSync(file)
  try {
    return db
      .prepare(
        "SELECT type, name, sql FROM sqlite_schema WHERE name LIKE 'dex_%' OR name LIKE 'sqlite_autoindex_dex_%'"
      )
      .all() as Array<{
      type: string
      name: string
      sql: string | null
    }>
  } finally {
    db.close()
  }
}

/** Starts the embedded engine on `file` and stops it: the file gets the engine's tables. */
const open = (file: string) => Effect.scoped(Layer.build(Engine.layerEmbedded({ filename: file })))

const Count = Attribute("count", Schema.Number)
const Go = Channel("go", Schema.Number)
const Tick: StepDef<number> = Step({
  type: "Tick",
  input: Schema.Number,
  waitFor: () => Wait.anyOf(Go.forOne()),
  execute: (ctx) =>
    Effect.sync(() => {
      ctx.set(Count, ctx.channelResults(Go)[0]!)
      return StepDecision.goTo(Tick, 0)
    })
})
const Ticking = Flow({ type: "LayoutTicking", start: Tick, attributes: [Count], channels: [Go] })

describe("embedded engine: the file's layout", () => {
  it.effect("a new file keeps each keyed table as one B-tree and no index another one serves", () =>
    Effect.gen(function* () {
      const file = join(dir, "new.db")
      yield* open(file)
      const schema = schemaOf(file)
      for (const table of KEYED) {
        const row = schema.find((r) => r.type === "table" && r.name === table)
        assert.isDefined(row, table)
        assert.match(row!.sql ?? "", /WITHOUT ROWID\s*$/, `${table} is stored as its primary key's B-tree`)
      }
      // the only automatic index of the engine's tables is dex_attrs's (a rowid table: large values)
      assert.deepStrictEqual(
        schema.filter((r) => r.name.startsWith("sqlite_autoindex_")).map((r) => r.name),
        ["sqlite_autoindex_dex_attrs_1"]
      )
      // a Flow's active Steps are found through dex_steps_status (status, flow_id)
      assert.isUndefined(schema.find((r) => r.name === "dex_steps_active"))
      assert.isDefined(schema.find((r) => r.name === "dex_steps_status"))
    })
  )

  it.live("a file made with the earlier layout opens as it is and runs a Flow through retention passes", () =>
    Effect.gen(function* () {
      // the earlier layout: the same tables as rowid tables, and the index dex_steps_active
      const fresh = join(dir, "fresh.db")
      yield* open(fresh)
      const file = join(dir, "earlier.db")
      const db = new DatabaseSync(file)
      for (const r of schemaOf(fresh)) {
        if (r.sql !== null) db.exec(r.sql.replace(/\s*WITHOUT ROWID\s*$/, ""))
      }
      db.exec("CREATE INDEX dex_steps_active ON dex_steps (flow_id, status)")
      db.exec(
        "INSERT INTO dex_meta SELECT * FROM (SELECT 'engine', 'durable-agent-engine' UNION ALL SELECT 'schema_version', '3')"
      )
      db.close()
      assert.isDefined(schemaOf(file).find((r) => r.name === "sqlite_autoindex_dex_replies_1"))

      yield* Effect.gen(function* () {
        const client = yield* Client.Client
        yield* client.startFlow(Ticking, "old", 0)
        for (let n = 1; n <= 25; n++) {
          yield* client.publish("old", Go, n)
          yield* Effect.suspend(() => client.getAttribute("old", Count)).pipe(
            Effect.repeat({ schedule: Schedule.spaced("5 millis"), until: (c) => Option.isSome(c) && c.value >= n }),
            Effect.timeout("30 seconds")
          )
        }
        assert.isNotNull((yield* client.retention("old")).stepExecutionsFromSeq, "retention passes ran")
        const steps = yield* client.stepExecutions("old")
        assert.strictEqual(steps.at(-1)!.status, "waiting")
        assert.isAtMost(steps.length, 10 + 10 + 1)
        assert.strictEqual((yield* client.describeFlow("old")).status, "running")
      }).pipe(
        Effect.provide(
          Worker.layer(Ticking).pipe(
            Layer.provideMerge(
              Engine.layerEmbedded({ filename: file, pollInterval: "50 millis", retainedStepExecutions: 10 })
            )
          )
        )
      )
      // the file kept its layout
      const schema = schemaOf(file)
      assert.isDefined(schema.find((r) => r.name === "dex_steps_active"))
      assert.notMatch(schema.find((r) => r.name === "dex_replies")!.sql!, /WITHOUT ROWID/)
    })
  )
})
