// Test support for the wire schemas: round trips of snake_case JSON and decode failures.
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** Decodes snake_case JSON, encodes the result back, and checks that it equals the input. */
export const roundTrip = <T, E>(schema: Schema.Codec<T, E>, json: E) =>
  Effect.gen(function* () {
    const decoded = yield* Schema.decodeUnknownEffect(schema)(json)
    const encoded = yield* Schema.encodeEffect(schema)(decoded)
    assert.deepStrictEqual(encoded, json)
    return decoded
  })

/** Checks that decoding fails with a SchemaError whose message includes `text` (a path or a phrase). */
export const decodeFails = <T, E>(schema: Schema.Codec<T, E>, json: unknown, text: string) =>
  Effect.gen(function* () {
    const error = yield* Effect.flip(Schema.decodeUnknownEffect(schema)(json))
    assert.isTrue(Schema.isSchemaError(error))
    assert.include(error.message, text)
  })
