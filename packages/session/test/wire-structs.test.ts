// Every wire struct built with `wireStruct` encodes and decodes exactly as the effect form it stands for
// (`Schema.Struct(fields).pipe(Schema.encodeKeys(mapping))`, with `withDefault` fields): the same JSON text for
// generated values, the same decoded values for generated encoded forms (defaulted keys present or absent), and
// a failure wherever the reference fails.
import { JsonCodecAnnotation } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Internal from "../src/internal/schemas.ts"
import * as Wire from "../src/wire/index.ts"
import { wireStructReference } from "../src/wire/internal.ts"
import { compiledJsonCodecOf, JSON_CODEC_ANNOTATION, jsonCodecOf } from "../src/wire/jsonCodec.ts"

const candidates = (module: Record<string, unknown>) =>
  Object.entries(module).flatMap(([name, value]) => {
    if (!Schema.isSchema(value)) return []
    const reference = wireStructReference(value)
    return reference === undefined ? [] : [{ name, schema: value, reference }]
  })

const structs = [...candidates(Wire as Record<string, unknown>), ...candidates(Internal as Record<string, unknown>)]

/** The outcome of a codec call: its JSON text, or that it failed. */
const outcome = (f: () => unknown): string => {
  try {
    return `ok ${JSON.stringify(f())}`
  } catch {
    return "failed"
  }
}

describe("wire structs", () => {
  it("the hot session values are among them", () => {
    const names = new Set(structs.map((s) => s.name))
    for (const name of [
      "AgentToolCall",
      "AgentMessage",
      "AgentState",
      "AgentUsage",
      "AgentMessageIndex",
      "AgentEventEnvelope",
      "QuestionAnswer",
      "TurnSessionSettings",
      "TurnReplySequence"
    ]) {
      assert.isTrue(names.has(name), name)
    }
    assert.isAtLeast(structs.length, 40)
  })

  it.effect("encode and decode as their effect reference", () =>
    Effect.gen(function* () {
      for (const { name, schema, reference } of structs) {
        const json = Schema.toCodecJson(schema as Schema.Codec<unknown, unknown>)
        const referenceJson = Schema.toCodecJson(reference as Schema.Codec<unknown, unknown>)
        const encode = Schema.encodeUnknownSync(json)
        const encodeReference = Schema.encodeUnknownSync(referenceJson)
        const decode = Schema.decodeUnknownSync(json)
        const decodeReference = Schema.decodeUnknownSync(referenceJson)

        const values = yield* Arbitrary.sampleEffect(Arbitrary.schema(reference as Schema.Codec<unknown, unknown>), {
          count: 40,
          seed: name
        })
        let encodedOk = 0
        for (const value of values) {
          const expected = outcome(() => encodeReference(value))
          if (expected.startsWith("ok ")) encodedOk++
          assert.strictEqual(
            outcome(() => encode(value)),
            expected,
            `${name}: encode ${JSON.stringify(value)}`
          )
          if (!expected.startsWith("ok ")) continue
          const encoded = JSON.parse(expected.slice(3)) as Record<string, unknown>
          assert.strictEqual(
            outcome(() => decode(encoded)),
            outcome(() => decodeReference(encoded)),
            `${name}: decode`
          )
          // each key left out in turn: a defaulted key is filled in, a required one fails, in both
          for (const key of Object.keys(encoded)) {
            const { [key]: _, ...without } = encoded
            assert.strictEqual(
              outcome(() => decode(without)),
              outcome(() => decodeReference(without)),
              `${name}: decode without ${key}`
            )
          }
          // a wrong type under each key fails in both
          for (const key of Object.keys(encoded)) {
            const wrong = { ...encoded, [key]: { unexpected: true } }
            assert.strictEqual(
              outcome(() => decode(wrong)),
              outcome(() => decodeReference(wrong)),
              `${name}: decode a wrong ${key}`
            )
          }
        }
        assert.isAtLeast(encodedOk, values.length / 2, `${name}: most generated values encode`)
        // values that are not objects fail in both
        for (const input of [null, 1, "x", []]) {
          assert.strictEqual(
            outcome(() => decode(input)),
            "failed",
            `${name}: decode ${JSON.stringify(input)}`
          )
          assert.strictEqual(
            outcome(() => decodeReference(input)),
            "failed"
          )
        }
      }
    })
  )

  it.effect(
    "the compiled JSON codec the engine stores them with equals effect's, and answers for every value itself",
    () =>
      Effect.gen(function* () {
        for (const { name, schema, reference } of structs) {
          const own = jsonCodecOf(schema)
          const compiled = compiledJsonCodecOf(schema)
          assert.isDefined(own, name)
          assert.isDefined(compiled, name)
          const json = Schema.toCodecJson(schema as Schema.Codec<unknown, unknown>)
          const encodeEffect = Schema.encodeUnknownSync(json)
          const decodeEffect = Schema.decodeUnknownSync(json)
          const same = (label: string, input: unknown, codec: "encode" | "decode") => {
            const expected = outcome(() => (codec === "encode" ? encodeEffect : decodeEffect)(input))
            assert.strictEqual(
              outcome(() => own![codec](input)),
              expected,
              `${name}: ${label}`
            )
            // the compiled functions answer for every value effect accepts, and never for one it refuses
            const fast = compiled![codec](input)
            if (expected.startsWith("ok "))
              assert.strictEqual(`ok ${JSON.stringify(fast)}`, expected, `${name}: ${label}`)
            else assert.isUndefined(fast, `${name}: ${label}`)
          }
          const values = yield* Arbitrary.sampleEffect(Arbitrary.schema(reference as Schema.Codec<unknown, unknown>), {
            count: 40,
            seed: `${name} compiled`
          })
          for (const value of values) {
            same(`encode ${JSON.stringify(value)}`, value, "encode")
            const encoded = outcome(() => encodeEffect(value))
            if (!encoded.startsWith("ok ")) continue
            const wire = JSON.parse(encoded.slice(3)) as Record<string, unknown>
            same("decode", wire, "decode")
            // keys in another order, and keys nobody declared: dropped in both, the declared order kept
            same(
              "decode reversed with an extra key",
              Object.fromEntries([["extra", 1], ...Object.entries(wire).reverse()]),
              "decode"
            )
            const typed = value as Record<string, unknown>
            same("encode with an extra key", { ...typed, extra: 1 }, "encode")
            for (const key of Object.keys(wire)) {
              const { [key]: _, ...without } = wire
              same(`decode without ${key}`, without, "decode")
              same(`decode ${key} undefined`, { ...wire, [key]: undefined }, "decode")
              same(`decode a wrong ${key}`, { ...wire, [key]: { unexpected: true } }, "decode")
              same(`decode ${key} null`, { ...wire, [key]: null }, "decode")
              same(`decode ${key} 1.5`, { ...wire, [key]: 1.5 }, "decode")
            }
            for (const key of Object.keys(typed)) {
              const { [key]: _, ...without } = typed
              same(`encode without ${key}`, without, "encode")
              same(`encode a wrong ${key}`, { ...typed, [key]: { unexpected: true } }, "encode")
              same(`encode ${key} NaN`, { ...typed, [key]: Number.NaN }, "encode")
              same(
                `encode ${key} a timestamp with an offset`,
                { ...typed, [key]: "2026-11-01T12:00:00+00:00" },
                "encode"
              )
            }
          }
          for (const input of [null, 1, "x", [], undefined]) {
            same(`decode ${String(input)}`, input, "decode")
            same(`encode ${String(input)}`, input, "encode")
          }
        }
      })
  )

  it("a schema derived from a wire struct goes back to effect's codec in the engine", () => {
    const { AgentToolCall } = Wire
    // the key the engine looks for (the wire modules do not import the engine: client apps use them alone)
    assert.strictEqual(JSON_CODEC_ANNOTATION, JsonCodecAnnotation)
    assert.isDefined(jsonCodecOf(AgentToolCall))
    const derived = AgentToolCall.annotate({ description: "a copy" })
    // the annotation is still there, but names the struct's own AST, not the derived one's
    assert.isDefined((derived.ast.annotations as Record<string, unknown>)[JSON_CODEC_ANNOTATION])
    assert.isUndefined(jsonCodecOf(derived))
  })
})
