// Helpers shared by the wire modules; not re-exported from the wire barrel.
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * Makes a struct key optional on the wire and fills in the spec's default (the `= value` defaults of
 * "Persistence schema") when it is absent. Encoding always writes the key.
 */
export const withDefault = <S extends Schema.Top>(self: S, value: S["Encoded"]) =>
  self.pipe(Schema.withDecodingDefaultKey<S>(Effect.succeed(value)))
