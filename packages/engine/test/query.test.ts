// The query path (`Client.queryRpc`) with AttributeMaps read lazily (`readLazily`), on both engine layers: the
// handler sees one commit even when the Flow commits between the query's statements, and it reads the same as
// the whole-state query and the RPC through the owner. The lazily read values this process holds (by stored row)
// serve a read only while they are the stored ones: not after a rewrite or a delete of the key, nor in a new run
// of the same Flow ID whose row has the same version, nor in another database (a copy of the file) whose Flow has
// the same run and version. The state a read read is held by the Flow's run and version: an unchanged Flow is
// read with the statement of its row alone, and any commit, a read with other lazy maps, a new run at the same
// version or another database reads it again.
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { SqlClient } from "effect/sql"
import {
  Attribute,
  AttributeMap,
  Client,
  Engine,
  Flow,
  FlowRpc,
  type RpcContext,
  Step,
  StepDecision,
  Worker
} from "../src/index.ts"
import { engines } from "./support/engines.ts"

const Pages = AttributeMap("pages", Schema.String)
const Newest = Attribute("newest", Schema.Number)
/** A large value outside the lazy map: the text of the last `put`. */
const Note = Attribute("note", Schema.String)

/** Writes page `n` and moves `newest` to it, in one transition. */
const Write = FlowRpc({
  name: "write",
  input: Schema.Number,
  output: Schema.Null,
  handler: (ctx, n) =>
    Effect.sync(() => {
      ctx.setAt(Pages, String(n), `page ${n} ${"x".repeat(3000)}`)
      ctx.set(Newest, n)
      return { output: null }
    })
})

const Page = Schema.Struct({ newest: Schema.Number, page: Schema.NullOr(Schema.String), keys: Schema.Number })
/** The newest page, as `newest` names it, and how many pages there are: both from one commit or never. */
const readNewest = (ctx: RpcContext) => {
  const newest = Option.getOrElse(ctx.get(Newest), () => 0)
  const page = Option.getOrNull(ctx.getAt(Pages, String(newest)))
  return { newest, page: page === null ? null : page.slice(0, 12), keys: ctx.keys(Pages).length }
}
const ReadNewest = FlowRpc({
  name: "read_newest",
  input: Schema.Null,
  output: Page,
  handler: (ctx) => Effect.sync(() => ({ output: readNewest(ctx) }))
})

/** Sets page `n` to `text` (`null`: deletes it) and moves `newest` to it, in one transition. */
const Put = FlowRpc({
  name: "put",
  input: Schema.Struct({ n: Schema.Number, text: Schema.NullOr(Schema.String) }),
  output: Schema.Null,
  handler: (ctx, { n, text }) =>
    Effect.sync(() => {
      if (text === null) ctx.deleteAt(Pages, String(n))
      else ctx.setAt(Pages, String(n), text)
      ctx.set(Newest, n)
      ctx.set(Note, `put ${n}: ${text}`)
      return { output: null }
    })
})

/** The page `newest` names (without listing the keys, so that a held page serves the whole read), and the note. */
const ReadPage = FlowRpc({
  name: "read_page",
  input: Schema.Null,
  output: Schema.Struct({ page: Schema.NullOr(Schema.String), note: Schema.NullOr(Schema.String) }),
  handler: (ctx) =>
    Effect.sync(() => ({
      output: {
        page: Option.getOrNull(ctx.getAt(Pages, String(Option.getOrElse(ctx.get(Newest), () => 0)))),
        note: Option.getOrNull(ctx.get(Note))
      }
    }))
})

/** Sets the note alone (a value outside the lazy map), in one transition. */
const SetNote = FlowRpc({
  name: "set_note",
  input: Schema.String,
  output: Schema.Null,
  handler: (ctx, text) =>
    Effect.sync(() => {
      ctx.set(Note, text)
      return { output: null }
    })
})

/** Every page (its first 12 characters) by key, and the note: what a read that lists the pages sees. */
const ReadAll = FlowRpc({
  name: "read_all",
  input: Schema.Null,
  output: Schema.Struct({
    pages: Schema.Array(Schema.Tuple([Schema.String, Schema.String])),
    note: Schema.NullOr(Schema.String)
  }),
  handler: (ctx) =>
    Effect.sync(() => ({
      output: {
        pages: ctx.keys(Pages).map((k) => [k, Option.getOrElse(ctx.getAt(Pages, k), () => "").slice(0, 12)] as const),
        note: Option.getOrNull(ctx.get(Note))
      }
    }))
})

const Idle = Step({ type: "Idle", input: Schema.Null, execute: () => Effect.succeed(StepDecision.deadEnd()) })
const Book = Flow({
  type: "Book",
  start: Idle,
  attributes: [Pages, Newest, Note],
  rpcs: [Write, ReadNewest, Put, ReadPage, SetNote, ReadAll]
})

/** A temporary directory for SQLite files, removed with the scope. */
const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), prefix))),
    (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
  )

/** A worker of `Book` on an embedded engine over the SQLite file `filename`. */
const embeddedWorker = (filename: string, onStatement?: (statement: string) => void) =>
  Worker.layer(Book).pipe(
    Layer.provideMerge(Engine.layerEmbedded({ filename, pollInterval: "50 millis", onStatement }))
  )

/** `ReadPage` read lazily, with how many times its handler ran (twice when the page was not held). */
const readPage = (flowId: string) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    let runs = 0
    const Counted = FlowRpc({
      ...ReadPage,
      handler: (ctx: RpcContext, input: null) => {
        runs++
        return ReadPage.handler(ctx, input)
      }
    })
    const read = yield* client.queryRpc(Book, Counted, flowId, null, { readLazily: [Pages] })
    // the same as the RPC through the owner and the whole-state query
    assert.deepStrictEqual(yield* client.invokeRpc(Book, ReadPage, flowId, null), read)
    assert.deepStrictEqual(yield* client.queryRpc(Book, ReadPage, flowId, null), read)
    return { page: read.page, note: read.note, runs }
  })

/** The stored version of a page's newest row, and the Flow's version. */
const versions = (flowId: string, n: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [attr] = yield* sql<{ version: unknown }>`SELECT version FROM dex_attrs WHERE flow_id = ${flowId}
      AND name = ${Pages.name} AND key = ${String(n)} ORDER BY version DESC LIMIT 1`
    const [flow] = yield* sql<{ version: unknown }>`SELECT version FROM dex_flows WHERE flow_id = ${flowId}`
    return { page: attr === undefined ? undefined : Number(attr.version), flow: Number(flow!.version) }
  })

for (const engine of engines) {
  describe(`${engine.name} engine: queries that read AttributeMaps lazily`, () => {
    it.live(
      "a commit between the query's statements starts the read again: the handler sees one commit",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Book, "book", null)
          for (let n = 1; n <= 3; n++) yield* client.invokeRpc(Book, Write, "book", n)
          // a handler that, on its first run, commits page 4 after reading `newest` and before the pages are read
          let runs = 0
          const Racing = FlowRpc({
            name: "read_newest",
            input: Schema.Null,
            output: Page,
            handler: (ctx) =>
              Effect.gen(function* () {
                runs++
                const newest = Option.getOrElse(ctx.get(Newest), () => 0)
                if (runs === 1) yield* Effect.orDie(client.invokeRpc(Book, Write, "book", newest + 1))
                return { output: readNewest(ctx) }
              })
          })
          const read = yield* client.queryRpc(Book, Racing, "book", null, { readLazily: [Pages] })
          assert.deepStrictEqual(read, { newest: 4, page: "page 4 xxxxx", keys: 4 })
          assert.isAtLeast(runs, 3, "the first read was dropped and started again")
          // the same as the whole-state query and the RPC through the owner
          assert.deepStrictEqual(yield* client.queryRpc(Book, ReadNewest, "book", null), read)
          assert.deepStrictEqual(yield* client.invokeRpc(Book, ReadNewest, "book", null), read)
          assert.deepStrictEqual(yield* client.queryRpc(Book, ReadNewest, "book", null, { readLazily: [Pages] }), read)
        }).pipe(Effect.provide(Worker.layer(Book).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )

    it.live(
      "a held page serves a read while it is the stored one, and is read again after a rewrite or a delete",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Book, "held", null)
          yield* client.invokeRpc(Book, Put, "held", { n: 1, text: `first ${"x".repeat(3000)}` })
          const first = yield* readPage("held")
          assert.strictEqual(first.page?.slice(0, 7), "first x")
          assert.strictEqual(first.runs, 2, "the page was read with a second statement")
          const again = yield* readPage("held")
          assert.deepStrictEqual(again, { ...first, runs: 1 }, "the held page served the read")
          // the same key rewritten: the held text is of an older row
          yield* client.invokeRpc(Book, Put, "held", { n: 1, text: `second ${"y".repeat(3000)}` })
          const rewritten = yield* readPage("held")
          assert.strictEqual(rewritten.page?.slice(0, 8), "second y")
          assert.strictEqual(rewritten.note?.slice(0, 15), "put 1: second y")
          assert.strictEqual(rewritten.runs, 2)
          assert.strictEqual((yield* readPage("held")).runs, 1)
          // the key deleted: no held text stands for it
          yield* client.invokeRpc(Book, Put, "held", { n: 1, text: null })
          assert.deepStrictEqual((yield* readPage("held")).page, null)
          // written again after the delete
          yield* client.invokeRpc(Book, Put, "held", { n: 1, text: `third ${"z".repeat(3000)}` })
          assert.strictEqual((yield* readPage("held")).page?.slice(0, 7), "third z")
        }).pipe(Effect.provide(Worker.layer(Book).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )

    it.live(
      "a Flow ID started again does not read the old run's held page, though its row has the same version",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Book, "again", null)
          // pages of filler first, so that the held page's version is one the new run reaches after its start
          for (let n = 100; n < 110; n++) yield* client.invokeRpc(Book, Put, "again", { n, text: `filler ${n}` })
          yield* client.invokeRpc(Book, Put, "again", { n: 1, text: `old run ${"o".repeat(3000)}` })
          assert.strictEqual((yield* readPage("again")).page?.slice(0, 9), "old run o")
          assert.strictEqual((yield* readPage("again")).runs, 1, "the page is held")
          const held = (yield* versions("again", 1)).page!
          yield* client.stopFlow("again", { mode: "cancel" })
          yield* client.startFlow(Book, "again", null, { idReusePolicy: "allowIfClosed" })
          // the new run's writes up to the version before the held one, then page 1 at the held version
          let n = 200
          while ((yield* versions("again", 1)).flow < held - 1) {
            yield* client.invokeRpc(Book, Put, "again", { n: n++, text: `filler ${n}` })
          }
          yield* client.invokeRpc(Book, Put, "again", { n: 1, text: `new run ${"n".repeat(3000)}` })
          assert.strictEqual((yield* versions("again", 1)).page, held, "the new run's row has the held version")
          assert.strictEqual((yield* readPage("again")).page?.slice(0, 9), "new run n")
        }).pipe(Effect.provide(Worker.layer(Book).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )

    it.live(
      "a state held for the Flow's version serves no read after a commit, nor a read with other lazy maps",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Book, "commit", null)
          for (let n = 1; n <= 3; n++)
            yield* client.invokeRpc(Book, Put, "commit", { n, text: `page ${n} ${"p".repeat(3000)}` })
          assert.strictEqual((yield* readPage("commit")).note?.slice(0, 8), "put 3: p")
          assert.strictEqual((yield* readPage("commit")).runs, 1, "the state is held")
          // a commit that changes a value outside the lazy map alone
          yield* client.invokeRpc(Book, SetNote, "commit", `a note ${"n".repeat(100)}`)
          assert.strictEqual((yield* readPage("commit")).note?.slice(0, 8), "a note n")
          // the held state knows one page: a read that lists the pages reads them, and a read without lazy maps too
          const listed = yield* client.queryRpc(Book, ReadNewest, "commit", null, { readLazily: [Pages] })
          assert.deepStrictEqual(listed, { newest: 3, page: "page 3 ppppp", keys: 3 })
          assert.deepStrictEqual(yield* client.queryRpc(Book, ReadNewest, "commit", null), listed)
          assert.deepStrictEqual(
            yield* client.queryRpc(Book, ReadNewest, "commit", null, { readLazily: [Pages] }),
            listed
          )
          // a delete: the held state of the version before lists it
          yield* client.invokeRpc(Book, Put, "commit", { n: 2, text: null })
          const deleted = yield* client.queryRpc(Book, ReadNewest, "commit", null, { readLazily: [Pages] })
          assert.deepStrictEqual(deleted, { newest: 2, page: null, keys: 2 })
          assert.deepStrictEqual(yield* client.queryRpc(Book, ReadNewest, "commit", null), deleted)
        }).pipe(Effect.provide(Worker.layer(Book).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )

    it.live(
      "a read after a commit takes the values stored before the held state's version from it, and reads the changed, added and deleted ones",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          // no lazy map: every value is read by the first statement, and held with the state
          const read = client.queryRpc(Book, ReadAll, "since", null)
          const expect = (pages: ReadonlyArray<readonly [string, string]>, note: string | null) =>
            Effect.gen(function* () {
              const out = yield* read
              assert.deepStrictEqual(out, { pages, note })
              // the same as the RPC through the owner, at the same commit
              assert.deepStrictEqual(yield* client.invokeRpc(Book, ReadAll, "since", null), out)
            })
          yield* client.startFlow(Book, "since", null)
          for (let n = 1; n <= 3; n++)
            yield* client.invokeRpc(Book, Put, "since", { n, text: `page ${n} ${"p".repeat(300)}` })
          yield* expect(
            [
              ["1", "page 1 ppppp"],
              ["2", "page 2 ppppp"],
              ["3", "page 3 ppppp"]
            ],
            `put 3: page 3 ${"p".repeat(300)}`
          )
          // a delete that leaves no row (no running Step reads an older version)
          yield* client.invokeRpc(Book, Put, "since", { n: 2, text: null })
          yield* expect(
            [
              ["1", "page 1 ppppp"],
              ["3", "page 3 ppppp"]
            ],
            "put 2: null"
          )
          // a value added, then one rewritten, then a commit outside the pages
          yield* client.invokeRpc(Book, Put, "since", { n: 4, text: `page 4 ${"q".repeat(300)}` })
          yield* client.invokeRpc(Book, Put, "since", { n: 1, text: `again 1 ${"r".repeat(300)}` })
          yield* expect(
            [
              ["1", "again 1 rrrr"],
              ["3", "page 3 ppppp"],
              ["4", "page 4 qqqqq"]
            ],
            `put 1: again 1 ${"r".repeat(300)}`
          )
          yield* client.invokeRpc(Book, SetNote, "since", "a note")
          yield* expect(
            [
              ["1", "again 1 rrrr"],
              ["3", "page 3 ppppp"],
              ["4", "page 4 qqqqq"]
            ],
            "a note"
          )
        }).pipe(Effect.provide(Worker.layer(Book).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )

    it.live(
      "a Flow ID started again does not read the old run's held state, though its row has the same version",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          const read = client.queryRpc(Book, ReadPage, "rerun", null, { readLazily: [Pages] })
          yield* client.startFlow(Book, "rerun", null)
          for (let n = 1; n <= 5; n++) yield* client.invokeRpc(Book, Put, "rerun", { n, text: `old ${n}` })
          assert.deepStrictEqual(yield* read, { page: "old 5", note: "put 5: old 5" })
          assert.deepStrictEqual(yield* read, { page: "old 5", note: "put 5: old 5" })
          const held = (yield* versions("rerun", 5)).flow
          yield* client.stopFlow("rerun", { mode: "cancel" })
          yield* client.startFlow(Book, "rerun", null, { idReusePolicy: "allowIfClosed" })
          while ((yield* versions("rerun", 1)).flow < held) yield* client.invokeRpc(Book, SetNote, "rerun", "new run")
          assert.strictEqual((yield* versions("rerun", 1)).flow, held, "the new run's Flow has the held version")
          assert.deepStrictEqual(yield* read, { page: null, note: "new run" })
        }).pipe(Effect.provide(Worker.layer(Book).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )

    it.live(
      "a lazy map the Flow does not declare is refused with InvalidInput",
      () =>
        Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Book, "book-2", null)
          const error = yield* Effect.flip(
            client.queryRpc(Book, ReadNewest, "book-2", null, { readLazily: [AttributeMap("other", Schema.String)] })
          )
          assert.strictEqual(error._tag, "InvalidInput")
          assert.include(error.message, "AttributeMap other is not declared by Flow Book")
        }).pipe(Effect.provide(Worker.layer(Book).pipe(Layer.provideMerge(engine.layer({}))))),
      120_000
    )
  })
}

describe("embedded engine: the statements of a query", () => {
  it.live(
    "an unchanged Flow is read with the statement of its row alone; after a commit, with the values again",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir("das-query-statements-")
        const trace: Array<string> = []
        const layer = embeddedWorker(join(dir, "engine.db"), (s) => void trace.push(s))
        yield* Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Book, "statements", null)
          yield* client.invokeRpc(Book, Put, "statements", { n: 1, text: `first ${"f".repeat(3000)}` })
          /** The statements of one lazy read, and what it read. */
          const read = Effect.gen(function* () {
            trace.length = 0
            const out = yield* client.queryRpc(Book, ReadPage, "statements", null, { readLazily: [Pages] })
            return { out, statements: trace.filter((s) => /^\s*SELECT/i.test(s)).length }
          })
          const first = yield* read
          assert.strictEqual(first.out.page?.slice(0, 7), "first f")
          assert.strictEqual(first.statements, 3, "the Flow's row, its values, the page")
          const again = yield* read
          assert.deepStrictEqual(again.out, first.out)
          assert.strictEqual(again.statements, 1, "the Flow's row alone: the state of its version is held")
          yield* client.invokeRpc(Book, SetNote, "statements", "changed")
          const changed = yield* read
          assert.deepStrictEqual(changed.out, { page: first.out.page, note: "changed" })
          assert.strictEqual(changed.statements, 2, "the Flow's row and its values; the page is held")
        }).pipe(Effect.provide(layer), Effect.scoped)
      }).pipe(Effect.scoped),
    120_000
  )
})

describe("embedded engine: held values of two databases in one process", () => {
  it.live(
    "a copy of a file, changed apart from the original, reads its own page, though run and version are the same",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir("das-query-copy-")
        const [a, b] = [join(dir, "a.db"), join(dir, "b.db")]
        const put = (text: string) =>
          Effect.gen(function* () {
            const client = yield* Client.Client
            yield* client.invokeRpc(Book, Put, "copy", { n: 1, text })
            return yield* readPage("copy")
          })
        yield* Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Book, "copy", null)
          yield* put(`first ${"f".repeat(3000)}`)
        }).pipe(Effect.provide(embeddedWorker(a)), Effect.scoped)
        for (const suffix of ["", "-wal"]) if (existsSync(a + suffix)) copyFileSync(a + suffix, b + suffix)
        // the same write in each, each read once so its page is held, then a page of its own at the same version
        const inA = yield* Effect.gen(function* () {
          yield* put(`in a ${"a".repeat(3000)}`)
          assert.strictEqual((yield* readPage("copy")).runs, 1, "the page is held")
          return yield* versions("copy", 1)
        }).pipe(Effect.provide(embeddedWorker(a)), Effect.scoped)
        const inB = yield* Effect.gen(function* () {
          const read = yield* put(`in b ${"b".repeat(3000)}`)
          return { read, versions: yield* versions("copy", 1) }
        }).pipe(Effect.provide(embeddedWorker(b)), Effect.scoped)
        assert.strictEqual(inB.versions.page, inA.page, "the copy's page row has the original's run and version")
        assert.strictEqual(inB.read.page?.slice(0, 6), "in b b")
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a copy of a file, changed apart from the original, reads its own state, though run and version are the same",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir("das-query-copy-")
        const [a, b] = [join(dir, "a.db"), join(dir, "b.db")]
        // a lazy read only, twice, so that the state of the version is held
        const noteAfter = (text: string) =>
          Effect.gen(function* () {
            const client = yield* Client.Client
            yield* client.invokeRpc(Book, SetNote, "copy", text)
            const read = client.queryRpc(Book, ReadPage, "copy", null, { readLazily: [Pages] })
            yield* read
            return { read: yield* read, flow: (yield* versions("copy", 1)).flow }
          })
        yield* Effect.gen(function* () {
          const client = yield* Client.Client
          yield* client.startFlow(Book, "copy", null)
          yield* noteAfter("first")
        }).pipe(Effect.provide(embeddedWorker(a)), Effect.scoped)
        for (const suffix of ["", "-wal"]) if (existsSync(a + suffix)) copyFileSync(a + suffix, b + suffix)
        const inA = yield* noteAfter("in a").pipe(Effect.provide(embeddedWorker(a)), Effect.scoped)
        const inB = yield* noteAfter("in b").pipe(Effect.provide(embeddedWorker(b)), Effect.scoped)
        assert.strictEqual(inB.flow, inA.flow, "the copy's Flow has the original's run and version")
        assert.deepStrictEqual(inA.read, { page: null, note: "in a" })
        assert.deepStrictEqual(inB.read, { page: null, note: "in b" })
      }).pipe(Effect.scoped),
    120_000
  )
})
