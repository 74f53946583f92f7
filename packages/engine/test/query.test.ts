// The query path (`Client.queryRpc`) with AttributeMaps read lazily (`readLazily`), on both engine layers: the
// handler sees one commit even when the Flow commits between the query's statements, and it reads the same as
// the whole-state query and the RPC through the owner.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  Attribute,
  AttributeMap,
  Client,
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

const Idle = Step({ type: "Idle", input: Schema.Null, execute: () => Effect.succeed(StepDecision.deadEnd()) })
const Book = Flow({ type: "Book", start: Idle, attributes: [Pages, Newest], rpcs: [Write, ReadNewest] })

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
