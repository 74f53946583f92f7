// The delete of superseded attribute versions in a transition: each row is found by its whole key, so its cost
// follows the rows it deletes, not the Flow's attribute rows (a session holds about a hundred: its message
// window, chunks, records and state). The plan is checked on SQLite, where `flow_id = ? AND (... OR ...)` read
// every row of the Flow; on both engines the rewritten keys keep exactly their newest version.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { SqlClient } from "effect/sql"
import { AttributeMap, Client, Flow, FlowRpc, Step, StepDecision, Worker } from "../src/index.ts"
import { embeddedLayer, engines } from "./support/engines.ts"

const Pages = AttributeMap("pages", Schema.String)

/** Sets pages `from` to `from + count - 1` to `text`, in one transition. */
const Rewrite = FlowRpc({
  name: "rewrite",
  input: Schema.Struct({ from: Schema.Number, count: Schema.Number, text: Schema.String }),
  output: Schema.Null,
  handler: (ctx, { from, count, text }) =>
    Effect.sync(() => {
      for (let n = from; n < from + count; n++) ctx.setAt(Pages, String(n), `${text} ${n}`)
      return { output: null }
    })
})

/** The text of page `n`. */
const ReadPage = FlowRpc({
  name: "read_page",
  input: Schema.Number,
  output: Schema.NullOr(Schema.String),
  handler: (ctx, n) => Effect.sync(() => ({ output: Option.getOrNull(ctx.getAt(Pages, String(n))) }))
})

const Idle = Step({ type: "Idle", input: Schema.Null, execute: () => Effect.succeed(StepDecision.deadEnd()) })
const Book = Flow({ type: "AttrDeletes", start: Idle, attributes: [Pages], rpcs: [Rewrite, ReadPage] })

const PAGES = 60

/** The stored versions of each page of the Flow, by key. */
const storedVersions = (flowId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ key: string; version: unknown }>`SELECT key, version FROM dex_attrs
      WHERE flow_id = ${flowId} AND name = ${Pages.name} ORDER BY key, version`
    const byKey = new Map<string, Array<number>>()
    for (const r of rows) byKey.set(r.key, [...(byKey.get(r.key) ?? []), Number(r.version)])
    return byKey
  })

for (const engine of engines) {
  describe(`${engine.name} engine: superseded attribute versions`, () => {
    it.live("a rewrite deletes the old versions of the keys it wrote and no other row", () =>
      Effect.gen(function* () {
        const client = yield* Client.Client
        yield* client.startFlow(Book, "book", null)
        yield* client.invokeRpc(Book, Rewrite, "book", { from: 0, count: PAGES, text: "first" })
        const before = yield* storedVersions("book")
        assert.strictEqual(before.size, PAGES)
        yield* client.invokeRpc(Book, Rewrite, "book", { from: 10, count: 5, text: "second" })
        yield* client.invokeRpc(Book, Rewrite, "book", { from: 12, count: 1, text: "third" })
        const after = yield* storedVersions("book")
        assert.strictEqual(after.size, PAGES)
        for (let n = 0; n < PAGES; n++) {
          const versions = after.get(String(n))!
          // one version each: the rewritten keys' newest, the others' untouched
          assert.strictEqual(versions.length, 1, `page ${n}: ${versions}`)
          if (n < 10 || n >= 15) assert.deepStrictEqual(versions, before.get(String(n)))
          else assert.isAbove(versions[0]!, before.get(String(n))![0]!)
        }
        assert.strictEqual(yield* client.invokeRpc(Book, ReadPage, "book", 12), "third 12")
        assert.strictEqual(yield* client.invokeRpc(Book, ReadPage, "book", 14), "second 14")
        assert.strictEqual(yield* client.invokeRpc(Book, ReadPage, "book", 15), "first 15")
      }).pipe(Effect.provide(Worker.layer(Book).pipe(Layer.provideMerge(engine.layer({})))))
    )
  })
}

/** An embedded engine on a fresh SQLite file that records each delete of attribute versions it runs. */
const recorded = (deletes: Array<string>) =>
  embeddedLayer({
    onStatement: (statement) => {
      if (statement.startsWith("DELETE FROM dex_attrs")) deletes.push(statement)
    }
  })

describe("embedded engine: the delete's plan", () => {
  it.live("looks up each superseded row by its whole primary key, never by the Flow alone", () => {
    const deletes: Array<string> = []
    return Effect.gen(function* () {
      const client = yield* Client.Client
      const sql = yield* SqlClient.SqlClient
      yield* client.startFlow(Book, "book", null)
      yield* client.invokeRpc(Book, Rewrite, "book", { from: 0, count: PAGES, text: "first" })
      yield* client.invokeRpc(Book, Rewrite, "book", { from: 20, count: 8, text: "second" })
      const statement = deletes.at(-1)
      assert.isDefined(statement, "the rewrite deleted the superseded versions")
      const parameters = (statement!.match(/\?/g) ?? []).map((_, i) => (i % 4 === 3 ? 1 : "x"))
      const plan = yield* sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${statement}`, parameters)
      const searches = plan.map((r) => r.detail).filter((d) => d.includes("dex_attrs"))
      assert.isAtLeast(searches.length, 8, plan.map((r) => r.detail).join(" | "))
      for (const detail of searches) {
        assert.match(detail, /^SEARCH dex_attrs .*\(flow_id=\? AND name=\? AND key=\? AND version=\?\)$/, detail)
      }
    }).pipe(Effect.provide(Worker.layer(Book).pipe(Layer.provideMerge(recorded(deletes)))))
  })
})
