// Helpers shared by the wire modules; not re-exported from the wire barrel.
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as SchemaTransformation from "effect/SchemaTransformation"
import { type WireField, withJsonCodec } from "./jsonCodec.ts"

/** The schema and the encoded default of each {@link withDefault} field, for {@link wireStruct}. */
const defaults = new WeakMap<object, { readonly schema: Schema.Top; readonly value: unknown }>()

/**
 * Makes a struct key optional on the wire and fills in the spec's default (the `= value` defaults of
 * "Persistence schema") when it is absent. Encoding always writes the key.
 */
export const withDefault = <S extends Schema.Top>(self: S, value: S["Encoded"]) => {
  const field = self.pipe(Schema.withDecodingDefaultKey<S>(Effect.succeed(value)))
  defaults.set(field, { schema: self, value })
  return field
}

/** What {@link wireStruct} was given, by the schema it returned: the reference it must equal (tests). */
const references = new WeakMap<Schema.Top, { readonly fields: Schema.Struct.Fields; readonly mapping: object }>()

/**
 * `Schema.Struct(fields).pipe(Schema.encodeKeys(mapping))`: the same Type, Encoded form and JSON (keys renamed by
 * `mapping`, in the fields' order; a {@link withDefault} field's key optional on the wire and filled with its
 * default when absent; the same validation on both sides), built as one struct-to-struct transformation. Effect's
 * `encodeKeys` renames through a generic key walk and each `withDefault` field adds a transformation of its own
 * to every encode and decode; the session writes these values on every Step (a tool call record is 23 fields,
 * 10 of them defaulted), so here the renames are a fixed list of key pairs and the defaults are filled in the same
 * pass.
 */
export const wireStruct = <const F extends Schema.Struct.Fields, const M extends { readonly [K in keyof F]?: string }>(
  fields: F,
  mapping: M
): Schema.encodeKeys<Schema.Struct<F>, M> => {
  const typeFields: Record<string, Schema.Top> = {}
  const encodedFields: Record<string, Schema.Top> = {}
  /** [decoded key, encoded key, whether defaulted, the encoded default] */
  const pairs: Array<readonly [string, string, boolean, unknown]> = []
  const seen = new Set<string>()
  for (const key of Object.keys(fields)) {
    const encodedKey = (mapping as Record<string, string | undefined>)[key] ?? key
    if (key === "__proto__" || encodedKey === "__proto__") throw new Error("wireStruct: a key named __proto__")
    if (seen.has(encodedKey)) throw new Error(`wireStruct: duplicate encoded key ${encodedKey}`)
    seen.add(encodedKey)
    const field = fields[key] as Schema.Top
    const defaulted = defaults.get(field)
    const schema = defaulted?.schema ?? field
    typeFields[key] = schema
    const encoded = Schema.toEncoded(schema)
    encodedFields[encodedKey] = defaulted === undefined ? encoded : Schema.optionalKey(encoded)
    pairs.push([key, encodedKey, defaulted !== undefined, defaulted?.value])
  }
  const decode = (input: Record<string, unknown>) => {
    const out: Record<string, unknown> = {}
    for (const [key, encodedKey, defaulted, value] of pairs) {
      const v = input[encodedKey]
      if (v !== undefined) out[key] = v
      else if (defaulted) out[key] = value
      else if (encodedKey in input) out[key] = v
    }
    return out
  }
  const encode = (input: Record<string, unknown>) => {
    const out: Record<string, unknown> = {}
    for (const [key, encodedKey] of pairs) if (key in input) out[encodedKey] = input[key]
    return out
  }
  const wireFields: Array<WireField> = pairs.map(([key, encodedKey, defaulted, value]) => ({
    key,
    encodedKey,
    schema: typeFields[key]!,
    defaulted,
    encodedDefault: value
  }))
  // the engine stores the value with the compiled codec (wire/jsonCodec.ts), which equals effect's
  const schema = withJsonCodec(
    Schema.Struct(encodedFields).pipe(
      Schema.decodeTo(Schema.Struct(typeFields), SchemaTransformation.transform({ decode, encode }))
    ),
    wireFields
  )
  references.set(schema, { fields, mapping })
  // the same Type and Encoded as the encodeKeys form it stands for (checked by the wire tests)
  return schema as unknown as Schema.encodeKeys<Schema.Struct<F>, M>
}

/**
 * The effect `encodeKeys` form a {@link wireStruct} schema stands for, built from the same fields and mapping;
 * `undefined` for any other schema. The wire tests check that both encode and decode alike.
 */
export const wireStructReference = (schema: Schema.Top): Schema.Top | undefined => {
  const known = references.get(schema)
  return known === undefined
    ? undefined
    : Schema.Struct(known.fields).pipe(Schema.encodeKeys(known.mapping as Record<string, string>))
}
