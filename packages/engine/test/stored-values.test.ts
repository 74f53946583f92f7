// Attribute values as the store keeps them (`internal/store/values.ts`): on SQLite a value of more than 2 KiB of
// UTF-8 is stored compressed, as a BLOB, and every other value as TEXT; on Postgres every value is TEXT. On both
// engine layers a large value (non-ASCII text) reads back the same through a transition, the owner's load, the
// query path (whole and lazy), `getAttribute` and the run inspector page, and leaves storage when it is deleted
// or its closed Flow is purged. A SQLite file of schema version 3 (every value TEXT) opens, reads and is upgraded
// to version 4; a damaged BLOB is a typed `SqlError`, not a crash.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { SqlClient } from "effect/sql"
import * as InspectPage from "../src/InspectPage.ts"
import {
  Attribute,
  AttributeMap,
  Channel,
  Client,
  Engine,
  Flow,
  FlowRpc,
  NodeSqlite,
  Step,
  StepDecision,
  Wait,
  Worker
} from "../src/index.ts"
import * as EngineStore from "../src/internal/store/EngineStore.ts"
import * as Values from "../src/internal/store/values.ts"
import { engines } from "./support/engines.ts"

const dir = mkdtempSync(join(tmpdir(), "das-values-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** About 9 KB of UTF-8 in 4,000 characters: two- and three-byte characters, and an astral one. */
const large = (tag: string) => `${tag}: ${"grüße, ünïcødé ✓ 日本語 𝄞 ".repeat(160)}`
/** A value whose JSON text (the stored form: quotes around it) is exactly `COMPRESS_ABOVE` bytes. */
const atThreshold = "a".repeat(Values.COMPRESS_ABOVE - 2)

const Big = Attribute("big", Schema.String)
const AtLimit = Attribute("atLimit", Schema.String)
const BigSecret = Attribute("bigSecret", Schema.String, { hardDelete: true })
const Copy = Attribute("copy", Schema.String)
const Pages = AttributeMap("pages", Schema.String)
const Go = Channel("go", Schema.String)

/** What a query reads: the large value, the value at the threshold and a page. */
const Read = FlowRpc({
  name: "read",
  input: Schema.String,
  output: Schema.Struct({
    big: Schema.NullOr(Schema.String),
    atLimit: Schema.NullOr(Schema.String),
    page: Schema.NullOr(Schema.String)
  }),
  handler: (ctx, key) =>
    Effect.sync(() => ({
      output: {
        big: Option.getOrNull(ctx.get(Big)),
        atLimit: Option.getOrNull(ctx.get(AtLimit)),
        page: Option.getOrNull(ctx.getAt(Pages, key))
      }
    }))
})

/** Waits for `go`, copies the large value (as the owner holds it) and deletes the large secret. */
const CopyBig = Step({
  type: "CopyBig",
  input: Schema.String,
  waitFor: () => Wait.anyOf(Go.forOne()),
  execute: (ctx) =>
    Effect.sync(() => {
      ctx.set(Copy, `copy of ${Option.getOrElse(ctx.get(Big), () => "nothing")}`)
      ctx.delete(BigSecret)
      return StepDecision.gracefulComplete(null)
    })
})
const WriteBig = Step({
  type: "WriteBig",
  input: Schema.String,
  execute: (ctx, tag) =>
    Effect.sync(() => {
      ctx.set(Big, large(tag))
      ctx.set(AtLimit, atThreshold)
      ctx.set(BigSecret, large(`secret ${tag}`))
      ctx.setAt(Pages, "p1", large(`page ${tag}`))
      return StepDecision.goTo(CopyBig, tag)
    })
})
const BigFlow = Flow({
  type: "StoredValues",
  start: WriteBig,
  steps: [CopyBig],
  attributes: [Big, AtLimit, BigSecret, Copy, Pages],
  channels: [Go],
  rpcs: [Read]
})

/** The storage class of each stored version of an attribute (`typeof(value)` on SQLite; Postgres: `pg_typeof`). */
const storedTypes = (flowId: string, name: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.onDialectOrElse({
      pg: () => sql<{ t: string }>`SELECT pg_typeof(value)::text AS t FROM dex_attrs WHERE flow_id = ${flowId}
        AND name = ${name} ORDER BY version`,
      orElse: () => sql<{ t: string }>`SELECT typeof(value) AS t FROM dex_attrs WHERE flow_id = ${flowId}
        AND name = ${name} ORDER BY version`
    })
    return rows.map((r) => r.t)
  })

const waitForAttr = (flowId: string, attribute: typeof Copy) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    return yield* Effect.suspend(() => client.getAttribute(flowId, attribute)).pipe(
      Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: Option.isSome }),
      Effect.timeout("30 seconds"),
      Effect.map(Option.getOrThrow)
    )
  })

describe("stored values: the codec", () => {
  it("keeps a value at the threshold as TEXT and compresses one byte more", () => {
    const at = "x".repeat(Values.COMPRESS_ABOVE)
    assert.strictEqual(Values.compressed.encode(at), at)
    const above = `${at}x`
    const packed = Values.compressed.encode(above)
    assert.instanceOf(packed, Uint8Array)
    assert.isBelow((packed as Uint8Array).length, above.length)
  })

  it("counts UTF-8 bytes, not characters: short non-ASCII text above the threshold is compressed", () => {
    // 700 characters of three bytes each: 2,100 bytes
    const text = "日本語".repeat(Math.ceil(700 / 3))
    assert.isAtMost(text.length, Values.COMPRESS_ABOVE)
    assert.instanceOf(Values.compressed.encode(text), Uint8Array)
    // 682 of them: 2,046 bytes, at most the threshold
    const below = "語".repeat(682)
    assert.strictEqual(Values.compressed.encode(below), below)
  })

  it.effect("decodes TEXT, NULL and BLOB rows, and fails a damaged BLOB with SqlError", () =>
    Effect.gen(function* () {
      const text = large("round trip")
      const rows = yield* Values.compressed.decodeRows(
        Effect.succeed([{ value: Values.compressed.encode(text) }, { value: "plain" }, { value: null }])
      )
      assert.deepStrictEqual(
        rows.map((r) => r.value),
        [text, "plain", null]
      )
      const damaged = Uint8Array.from(Values.compressed.encode(text) as Uint8Array)
      damaged[damaged.length - 1]! ^= 0xff
      const exit = yield* Effect.exit(Values.compressed.decodeRows(Effect.succeed([{ value: damaged }])))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const error = exit.cause.reasons[0]
        assert.strictEqual(error?._tag, "Fail")
        assert.strictEqual(error?._tag === "Fail" ? error.error._tag : undefined, "SqlError")
      }
    })
  )
})

for (const engine of engines) {
  describe(`${engine.name} engine: large attribute values`, () => {
    it.live(
      "read back the same through a transition, the query path, getAttribute and the inspector, and leave when deleted",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(BigFlow, "v", "one")
          yield* waitForAttr("v", Big)
          // the storage: compressed on SQLite above the threshold only, TEXT on Postgres
          const blob = engine.name === "embedded" ? "blob" : "text"
          assert.deepStrictEqual(yield* storedTypes("v", "big"), [blob])
          assert.deepStrictEqual(yield* storedTypes("v", "pages"), [blob])
          assert.deepStrictEqual(yield* storedTypes("v", "atLimit"), ["text"])
          // getAttribute, the query path (whole state, lazy maps) and the RPC through the owner
          assert.deepStrictEqual(yield* client.getAttribute("v", Big), Option.some(large("one")))
          assert.deepStrictEqual(yield* client.getAttribute("v", AtLimit), Option.some(atThreshold))
          assert.deepStrictEqual(yield* client.getAttribute("v", Pages, "p1"), Option.some(large("page one")))
          const expected = { big: large("one"), atLimit: atThreshold, page: large("page one") }
          assert.deepStrictEqual(yield* client.queryRpc(BigFlow, Read, "v", "p1"), expected)
          assert.deepStrictEqual(yield* client.queryRpc(BigFlow, Read, "v", "p1", { readLazily: [Pages] }), expected)
          assert.deepStrictEqual(yield* client.invokeRpc(BigFlow, Read, "v", "p1"), expected)
          // the run inspector page shows the text (cut to its display length)
          const detail = yield* InspectPage.flowDetail("v")
          const shown = detail.attributes.find((a) => a.name === "big")
          assert.include(shown?.value ?? "", "one: grüße, ünïcødé ✓ 日本語 𝄞")
          // a transition reads the value as its owner holds it and writes a copy; the large secret is deleted
          yield* client.publish("v", Go, "now")
          assert.strictEqual((yield* client.waitForFlow("v", { timeout: "30 seconds" })).status, "completed")
          assert.deepStrictEqual(yield* client.getAttribute("v", Copy), Option.some(`copy of ${large("one")}`))
          assert.deepStrictEqual(yield* storedTypes("v", "copy"), [blob])
          assert.deepStrictEqual(yield* storedTypes("v", "bigSecret"), [], "the hard-delete value left no row")
          assert.deepStrictEqual(yield* client.getAttribute("v", BigSecret), Option.none())
          // the closed Flow is purged with its large values
          const gone = yield* client
            .describeFlow("v")
            .pipe(Effect.flip, Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 150 }))
          assert.strictEqual(gone._tag, "FlowNotFound")
          const sql = yield* SqlClient.SqlClient
          const [left] = yield* sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM dex_attrs WHERE flow_id = 'v'`
          assert.strictEqual(Number(left!.n), 0)
        }).pipe(
          Effect.provide(
            Worker.layer(BigFlow).pipe(Layer.provideMerge(engine.layer({ closedFlowRetention: "2 seconds" })))
          )
        ),
      60_000
    )
  })
}

/** A worker of `BigFlow` on the embedded engine over `filename`. */
const embeddedWorker = (filename: string) =>
  Worker.layer(BigFlow).pipe(Layer.provideMerge(Engine.layerEmbedded({ filename, pollInterval: "50 millis" })))

const metaVersion = (file: string) => {
  const db = new DatabaseSync(file)
  try {
    return (db.prepare("SELECT value FROM dex_meta WHERE key = 'schema_version'").get() as { value: string }).value
  } finally {
    db.close()
  }
}

describe("embedded engine: a restarted engine's owner", () => {
  it.live("loads the compressed values and commits with them", () =>
    Effect.gen(function* () {
      const file = join(dir, "restart.db")
      yield* Effect.gen(function* () {
        const client = yield* Client.Client
        yield* client.startFlow(BigFlow, "r", "restart")
        yield* waitForAttr("r", Big)
      }).pipe(Effect.provide(embeddedWorker(file)))
      yield* Effect.gen(function* () {
        const client = yield* Client.Client
        const expected = { big: large("restart"), atLimit: atThreshold, page: large("page restart") }
        // through the owner: its load reads every stored version (the compressed ones decoded)
        assert.deepStrictEqual(yield* client.invokeRpc(BigFlow, Read, "r", "p1"), expected)
        yield* client.publish("r", Go, "now")
        assert.strictEqual((yield* client.waitForFlow("r", { timeout: "30 seconds" })).status, "completed")
        assert.deepStrictEqual(yield* client.getAttribute("r", Copy), Option.some(`copy of ${large("restart")}`))
      }).pipe(Effect.provide(embeddedWorker(file)))
    })
  )
})

describe("embedded engine: a file of schema version 3", () => {
  it.live("opens, reads its TEXT values through the owner's load and the query path, and is upgraded to 4", () =>
    Effect.gen(function* () {
      const file = join(dir, "version3.db")
      // a Flow written, then its values rewritten as version 3 stored them (TEXT) and the file marked version 3
      yield* Effect.gen(function* () {
        const client = yield* Client.Client
        yield* client.startFlow(BigFlow, "old", "three")
        yield* waitForAttr("old", Big)
      }).pipe(Effect.provide(embeddedWorker(file)))
      assert.strictEqual(metaVersion(file), "4")
      const db = new DatabaseSync(file)
      const rows = db.prepare("SELECT rowid, value FROM dex_attrs WHERE typeof(value) = 'blob'").all() as Array<{
        rowid: number
        value: Uint8Array
      }>
      assert.isAtLeast(rows.length, 3)
      const update = db.prepare("UPDATE dex_attrs SET value = ? WHERE rowid = ?")
      for (const r of rows) {
        const [decoded] = Effect.runSync(Values.compressed.decodeRows(Effect.succeed([{ value: r.value }])))
        update.run(decoded!.value, r.rowid)
      }
      db.exec("UPDATE dex_meta SET value = '3' WHERE key = 'schema_version'")
      assert.strictEqual(
        (db.prepare("SELECT COUNT(*) AS n FROM dex_attrs WHERE typeof(value) = 'blob'").get() as { n: number }).n,
        0
      )
      db.close()

      // the inspection's check (read-only, as the inspection command opens a file) takes a version-3 file as it
      // is, and the inspector page reads its TEXT values
      yield* Effect.gen(function* () {
        yield* (yield* EngineStore.make).verify
        const detail = yield* InspectPage.flowDetail("old")
        assert.include(detail.attributes.find((a) => a.name === "big")?.value ?? "", "three: grüße")
      }).pipe(Effect.provide(NodeSqlite.layer({ filename: file, readOnly: true })))
      assert.strictEqual(metaVersion(file), "3", "a read-only check writes nothing")

      // a new engine on the file: the owner loads the TEXT rows, the queries read them, the next transition commits
      yield* Effect.gen(function* () {
        const client = yield* Client.Client
        const expected = { big: large("three"), atLimit: atThreshold, page: large("page three") }
        assert.deepStrictEqual(yield* client.queryRpc(BigFlow, Read, "old", "p1"), expected)
        assert.deepStrictEqual(yield* client.queryRpc(BigFlow, Read, "old", "p1", { readLazily: [Pages] }), expected)
        assert.deepStrictEqual(yield* client.invokeRpc(BigFlow, Read, "old", "p1"), expected)
        yield* client.publish("old", Go, "now")
        assert.strictEqual((yield* client.waitForFlow("old", { timeout: "30 seconds" })).status, "completed")
        assert.deepStrictEqual(yield* client.getAttribute("old", Copy), Option.some(`copy of ${large("three")}`))
        // the old row stays TEXT, the new one is compressed
        assert.deepStrictEqual(yield* storedTypes("old", "big"), ["text"])
        assert.deepStrictEqual(yield* storedTypes("old", "copy"), ["blob"])
      }).pipe(Effect.provide(embeddedWorker(file)))
      assert.strictEqual(metaVersion(file), "4")
    })
  )
})
