// Attribute values (`dex_attrs.value`) as the database stores them: the one place that encodes a value for its
// row and decodes a row's value back to its text, chosen once by the driver (`Driver.values`).
//
// SQLite: a value of more than `COMPRESS_ABOVE` UTF-8 bytes is stored compressed (the zlib format of deflate,
// `node:zlib`), as a BLOB in the TEXT-declared column (a column of TEXT affinity keeps a BLOB as it is), when that
// is smaller than its text; every other value is stored as TEXT, as before. A row is read by its storage class: a
// BLOB is inflated, TEXT read as it is, so a row written as TEXT before keeps reading (no data migration). A session's
// message chunks (about 10 KB of JSON each) take a third of their bytes, or less, and the few pages they take
// leave the file; the small values written on every turn (a window message, the state) cost nothing more.
// Postgres: values stay TEXT (Postgres compresses a large value itself: TOAST, from about 2 KB).

import { deflateSync, inflateSync } from "node:zlib"
import * as Effect from "effect/Effect"
import { SqlError, UnknownError } from "effect/sql/SqlError"

/** A `dex_attrs.value` as the database returns it: TEXT, a BLOB (SQLite, compressed), or NULL (a delete). */
export type StoredValue = string | Uint8Array | null

/** How one database stores attribute values. */
export interface ValueCodec {
  /** The stored form of a value's text. */
  readonly encode: (text: string) => string | Uint8Array
  /**
   * The rows of a read with their values as text (`value` a string, or null for a delete); fails with `SqlError`
   * on a stored value that cannot be decoded (a corrupt compressed value).
   */
  readonly decodeRows: <R extends { readonly value: StoredValue }, E, Req>(
    read: Effect.Effect<ReadonlyArray<R>, E, Req>
  ) => Effect.Effect<ReadonlyArray<Decoded<R>>, E | SqlError, Req>
}

/** A row of a read, its value decoded: the text (or null for a delete, where the read can return one). */
export type Decoded<R extends { readonly value: StoredValue }> = Omit<R, "value"> & {
  readonly value: Exclude<R["value"], Uint8Array>
}

/**
 * The UTF-8 size above which SQLite stores a value compressed: a value this long or shorter stays TEXT (a value
 * written on every turn is usually far below it; compressing it would cost CPU for a few bytes). Postgres's TOAST
 * compresses from about the same size (`TOAST_TUPLE_THRESHOLD`, about 2 KB).
 */
export const COMPRESS_ABOVE = 2048

/** Whether `text` is longer than `COMPRESS_ABOVE` UTF-8 bytes, without counting them when its length tells. */
const aboveThreshold = (text: string): boolean =>
  // a UTF-16 code unit takes 1 to 3 UTF-8 bytes
  text.length > COMPRESS_ABOVE || (text.length * 3 > COMPRESS_ABOVE && Buffer.byteLength(text) > COMPRESS_ABOVE)

/** SQLite's stored form: a value above the threshold compressed when that is smaller, as a BLOB. */
const encodeCompressed = (text: string): string | Uint8Array => {
  if (!aboveThreshold(text)) return text
  const bytes = Buffer.from(text, "utf8")
  const packed = deflateSync(bytes)
  return packed.length < bytes.length ? packed : text
}

/** A stored value that does not inflate (a damaged BLOB, or one the engine did not write). */
const undecodable = (cause: unknown) =>
  new SqlError({
    reason: new UnknownError({
      cause,
      message: "a stored attribute value cannot be decoded (a BLOB that is not a compressed value of this engine)",
      operation: "decodeValue"
    })
  })

/** A read's rows with their BLOB values inflated (the array itself when it holds none). */
const inflateRows = <R extends { readonly value: StoredValue }>(
  rows: ReadonlyArray<R>
): Effect.Effect<ReadonlyArray<Decoded<R>>, SqlError> => {
  let out: Array<Decoded<R>> | undefined
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!
    if (!(r.value instanceof Uint8Array)) continue
    let text: string
    try {
      // the zlib format checks its Adler-32 checksum: damaged bytes fail here instead of reading as other text
      text = inflateSync(r.value).toString("utf8")
    } catch (cause) {
      return Effect.fail(undecodable(cause))
    }
    out ??= rows.slice() as unknown as Array<Decoded<R>>
    out[i] = { ...r, value: text } as unknown as Decoded<R>
  }
  return Effect.succeed(out ?? (rows as unknown as ReadonlyArray<Decoded<R>>))
}

/** SQLite: large values compressed as BLOBs; a TEXT row (every row written before) reads as it is. */
export const compressed: ValueCodec = {
  encode: encodeCompressed,
  decodeRows: (read) => Effect.flatMap(read, inflateRows)
}

/** Postgres: every value is TEXT, stored and read as it is (the server compresses large values itself). */
export const plain: ValueCodec = {
  encode: (text) => text,
  decodeRows: (read) => read as Effect.Effect<ReadonlyArray<any>, any, any>
}
