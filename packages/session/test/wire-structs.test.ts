// Every wire struct built with `wireStruct` encodes and decodes exactly as the effect form it stands for
// (`Schema.Struct(fields).pipe(Schema.encodeKeys(mapping))`, with `withDefault` fields): the same JSON text for
// generated values, the same decoded values for generated encoded forms (defaulted keys present or absent), and
// a failure wherever the reference fails.
import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Internal from "../src/internal/schemas.ts"
import * as Wire from "../src/wire/index.ts"
import { wireStructReference } from "../src/wire/internal.ts"

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
})
