// A schema's own JSON codec (`JsonCodecAnnotation`): the engine stores a value of an annotated schema with the
// annotation's `encode` and reads it with its `decode` (in the owner's Steps and on the query path), and stores a
// schema derived from it, or one whose annotation names another AST, with effect's codec.
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
  Channel,
  Client,
  Engine,
  Flow,
  JsonCodecAnnotation,
  Step,
  StepDecision,
  type StepDef,
  Wait,
  Worker
} from "../src/index.ts"

const dir = mkdtempSync(join(tmpdir(), "das-json-codec-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const PointStruct = Schema.Struct({ x: Schema.Int, y: Schema.Int })
type Point = typeof PointStruct.Type

/** Counts of the own codec's calls, so the test sees which codec the engine used. */
const calls = { encode: 0, decode: 0 }

/** `{ x, y }` stored as `[x, y]`: plainly not what effect's codec writes. */
const annotateOwn = (schema: typeof PointStruct, ast?: unknown) => {
  const own = {
    ast,
    encode: (value: unknown) => {
      calls.encode++
      const p = value as Point
      return [p.x, p.y]
    },
    decode: (json: unknown) => {
      calls.decode++
      const [x, y] = json as [number, number]
      return { x, y }
    }
  }
  const annotated = schema.annotate({ [JsonCodecAnnotation]: own })
  if (ast === undefined) own.ast = annotated.ast
  return annotated
}

const Own = annotateOwn(PointStruct)
/** Derived from the annotated schema: another AST, so effect's codec. */
const Derived = Own.annotate({ description: "a point" })
/** An annotation that names another AST. */
const Elsewhere = annotateOwn(PointStruct, PointStruct.ast)

const OwnPoint = Attribute("own", Own)
const DerivedPoint = Attribute("derived", Derived)
const ElsewherePoint = Attribute("elsewhere", Elsewhere)
/** The sum the Step read back from the own-codec value on its previous run, or -1 on the first. */
const ReadBack = Attribute("readBack", Schema.Int)
const Points = Channel("points", PointStruct)

const Apply: StepDef<null> = Step({
  type: "Apply",
  input: Schema.Null,
  waitFor: () => Wait.anyOf(Points.forOne()),
  execute: (ctx) =>
    Effect.sync(() => {
      const point = ctx.channelResults(Points)[0]!
      const before = ctx.get(OwnPoint)
      ctx.set(ReadBack, Option.match(before, { onNone: () => -1, onSome: (p) => p.x + p.y }))
      ctx.set(OwnPoint, point)
      ctx.set(DerivedPoint, point)
      ctx.set(ElsewherePoint, point)
      return StepDecision.goTo(Apply, null)
    })
})

const Codecs = Flow({
  type: "OwnJsonCodecs",
  start: Apply,
  attributes: [OwnPoint, DerivedPoint, ElsewherePoint, ReadBack],
  channels: [Points]
})

const storedText = (flowId: string, name: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ value: string }>`SELECT value FROM dex_attrs
      WHERE flow_id = ${flowId} AND name = ${name} ORDER BY version DESC LIMIT 1`
    return rows[0]?.value
  }).pipe(Effect.orDie)

describe("a schema's own JSON codec", () => {
  it.live("stores and reads an annotated schema's values with it, and a derived schema's with effect's", () =>
    Effect.gen(function* () {
      const flowId = "p"
      yield* Effect.gen(function* () {
        const client = yield* Client.Client
        yield* client.startFlow(Codecs, flowId, null)
        const send = (point: Point, readBack: number) =>
          Effect.gen(function* () {
            yield* client.publish(flowId, Points, point)
            yield* Effect.suspend(() => client.getAttribute(flowId, ReadBack)).pipe(
              Effect.repeat({
                schedule: Schedule.spaced("5 millis"),
                until: (r) => Option.isSome(r) && r.value === readBack
              }),
              Effect.timeout("30 seconds")
            )
          })
        yield* send({ x: 1, y: 2 }, -1)
        assert.strictEqual(yield* storedText(flowId, "own"), "[1,2]")
        assert.strictEqual(yield* storedText(flowId, "derived"), '{"x":1,"y":2}')
        assert.strictEqual(yield* storedText(flowId, "elsewhere"), '{"x":1,"y":2}')
        assert.isAtLeast(calls.encode, 1)

        // the next Step reads the stored [1,2] back through the own codec
        const decodes = calls.decode
        yield* send({ x: 5, y: 7 }, 3)
        assert.strictEqual(yield* storedText(flowId, "own"), "[5,7]")
        assert.isAbove(calls.decode, decodes)

        // so does the query path
        assert.deepStrictEqual(yield* client.getAttribute(flowId, OwnPoint), Option.some({ x: 5, y: 7 }))
        assert.deepStrictEqual(yield* client.getAttribute(flowId, DerivedPoint), Option.some({ x: 5, y: 7 }))
        assert.deepStrictEqual(yield* client.getAttribute(flowId, ElsewherePoint), Option.some({ x: 5, y: 7 }))
      }).pipe(
        Effect.provide(
          Worker.layer(Codecs).pipe(
            Layer.provideMerge(Engine.layerEmbedded({ filename: join(dir, "codecs.db"), pollInterval: "50 millis" }))
          )
        )
      )
    })
  )
})
