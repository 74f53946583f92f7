// The stored-value JSON codec of a wire struct, built from its fields: the engine encodes and decodes every
// attribute value it writes and reads with `Schema.toCodecJson(schema)`, and effect's parser walks a 23-field
// tool call record through two structs, a key rename and each field's checks on every write (13-18 µs). This
// module compiles a `wireStruct`'s fields into plain functions for the field types the session stores (strings,
// booleans, integers, literals, null, their unions, arrays, timestamps and nested wire structs) and gives the
// engine the pair under its `@durable-agent/engine/jsonCodec` annotation.
//
// The rule that keeps it exact: the compiled functions only ever answer for a value they are sure of. Any value
// they do not accept (a wrong type, a failed check, a missing key, anything unusual) goes to effect's own codec
// of the whole schema, which gives its result or throws its error; a field type this module does not know is
// encoded and decoded by effect's codec of that field alone. The wire tests check both against effect's codec on
// generated values (test/wire-structs.test.ts).
import * as Schema from "effect/Schema"
import type * as SchemaAST from "effect/SchemaAST"
import { canonicalTimestamp, Timestamp } from "./Common.ts"

/** The annotation under which the engine finds a schema's own JSON codec (the engine README, "Stored values"). */
export const JSON_CODEC_ANNOTATION = "@durable-agent/engine/jsonCodec"

/** A compiled function's answer when it cannot decide: effect's codec decides. */
const FAIL: unique symbol = Symbol("@durable-agent/session/wire/jsonCodec/fail")
type Fast = (value: unknown) => unknown

/** A field's compiled pair: `encode` from the Type value to JSON, `decode` from JSON to the Type value. */
interface FieldCodec {
  readonly encode: Fast
  readonly decode: Fast
}

/** The value of the engine's annotation: the codec and the AST it was made for (a derived schema has another). */
export interface JsonCodecAnnotation {
  readonly ast: SchemaAST.AST | undefined
  readonly encode: (value: unknown) => unknown
  readonly decode: (json: unknown) => unknown
}

/** Field codecs by AST: the wire structs made so far (nested in others) and the session's own leaf schemas. */
const known = new WeakMap<SchemaAST.AST, FieldCodec>()

const timestamp: Fast = (v) => (typeof v === "string" ? canonicalTimestamp(v) : FAIL)
known.set(Timestamp.ast, { encode: timestamp, decode: timestamp })

const PARSE_OPTIONS: SchemaAST.ParseOptions = {}

/** Whether `v` passes every check of `ast` (a check that reports anything counts as failed). */
const passes = (ast: SchemaAST.AST, checks: ReadonlyArray<SchemaAST.Check<any>>, v: unknown): boolean => {
  for (const check of checks) {
    if (check._tag === "Filter") {
      if (check.run(v, ast, PARSE_OPTIONS) !== undefined) return false
    } else if (!passes(ast, check.checks, v)) return false
  }
  return true
}

/** The same function both ways for a type whose JSON is the value itself: `accepts`, then the checks. */
const identity = (ast: SchemaAST.AST, accepts: (v: unknown) => boolean): FieldCodec => {
  const checks = ast.checks
  const f: Fast =
    checks === undefined ? (v) => (accepts(v) ? v : FAIL) : (v) => (accepts(v) && passes(ast, checks, v) ? v : FAIL)
  return { encode: f, decode: f }
}

const hasCheck = (checks: ReadonlyArray<SchemaAST.Check<any>> | undefined, id: string): boolean =>
  checks?.some((c) => (c._tag === "Filter" ? c.annotations?.representation?.id === id : hasCheck(c.checks, id))) ===
  true

const isString = (v: unknown) => typeof v === "string"
const isBoolean = (v: unknown) => typeof v === "boolean"
const isNumber = (v: unknown) => typeof v === "number"

/** The compiled pair of a field's AST, or `undefined` for a type this module does not know. */
const compile = (ast: SchemaAST.AST): FieldCodec | undefined => {
  const found = known.get(ast)
  if (found !== undefined) return found
  if (ast.encoding !== undefined || ast.context !== undefined) return undefined
  switch (ast._tag) {
    case "String":
      return identity(ast, isString)
    case "Boolean":
      return identity(ast, isBoolean)
    case "Number":
      // only a finite number is its own JSON (effect's JSON codec writes the others as strings)
      return hasCheck(ast.checks, "effect/schema/isInt") || hasCheck(ast.checks, "effect/schema/isFinite")
        ? identity(ast, isNumber)
        : undefined
    case "Null":
      return identity(ast, (v) => v === null)
    case "Literal": {
      const literal = ast.literal
      if (typeof literal !== "string" && typeof literal !== "boolean") return undefined
      return identity(ast, (v) => v === literal)
    }
    case "Union":
      return compileUnion(ast)
    case "Arrays":
      return compileArray(ast)
    default:
      return undefined
  }
}

/** A union of literals and null with at most one other member: the members tried in order, as effect does. */
const compileUnion = (ast: SchemaAST.Union): FieldCodec | undefined => {
  const mode = ast.options?.mode
  if (ast.checks !== undefined || ast.encodingChecks !== undefined || (mode !== undefined && mode !== "anyOf")) {
    return undefined
  }
  let others = 0
  const members: Array<FieldCodec> = []
  for (const member of ast.types) {
    if (member._tag !== "Literal" && member._tag !== "Null") others++
    const codec = compile(member)
    if (codec === undefined || others > 1) return undefined
    members.push(codec)
  }
  const first =
    (pick: (c: FieldCodec) => Fast): Fast =>
    (v) => {
      for (const member of members) {
        const out = pick(member)(v)
        if (out !== FAIL) return out
      }
      return FAIL
    }
  return { encode: first((c) => c.encode), decode: first((c) => c.decode) }
}

/** An array of one item type, no checks: a new array of the items' results. */
const compileArray = (ast: SchemaAST.Arrays): FieldCodec | undefined => {
  if (ast.checks !== undefined || ast.elements.length !== 0 || ast.rest.length !== 1) return undefined
  const item = compile(ast.rest[0]!)
  if (item === undefined) return undefined
  const each =
    (f: Fast): Fast =>
    (v) => {
      if (!Array.isArray(v)) return FAIL
      const out = new Array<unknown>(v.length)
      for (let i = 0; i < v.length; i++) {
        const r = f(v[i])
        if (r === FAIL) return FAIL
        out[i] = r
      }
      return out
    }
  return { encode: each(item.encode), decode: each(item.decode) }
}

/** Effect's JSON codec of a schema: `Schema.toCodecJson`'s encode and decode, which throw on a value they refuse. */
const effectJsonCodec = (schema: Schema.Top) => {
  const json = Schema.toCodecJson(schema as Schema.Codec<unknown, unknown>)
  return { encode: Schema.encodeUnknownSync(json), decode: Schema.decodeUnknownSync(json) }
}

/** Effect's JSON codec of one field, as a compiled pair: its result, or FAIL where it throws. */
const effectField = (schema: Schema.Top): FieldCodec => {
  const { encode, decode } = effectJsonCodec(schema)
  const guard =
    (f: (v: unknown) => unknown): Fast =>
    (v) => {
      try {
        return f(v)
      } catch {
        return FAIL
      }
    }
  return { encode: guard(encode), decode: guard(decode) }
}

/** One field of a wire struct: its decoded key, its key on the wire, its type, and its default when defaulted. */
export interface WireField {
  readonly key: string
  readonly encodedKey: string
  readonly schema: Schema.Top
  readonly defaulted: boolean
  readonly encodedDefault: unknown
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * Annotates a wire struct's schema with its compiled JSON codec and returns the annotated schema (the same
 * Type, Encoded and codecs; effect's parser ignores the annotation). The codec answers for the values it is sure
 * of and hands every other value to effect's codec of the whole schema.
 */
export const withJsonCodec = <S extends Schema.Top>(schema: S, fields: ReadonlyArray<WireField>): S => {
  const compiled = fields.map((f) => ({ ...f, codec: compile(f.schema.ast) ?? effectField(f.schema) }))
  const encodeFast = (input: unknown): unknown => {
    if (!isRecord(input)) return FAIL
    const out: Record<string, unknown> = {}
    for (const f of compiled) {
      if (!Object.hasOwn(input, f.key)) return FAIL
      const v = f.codec.encode(input[f.key])
      if (v === FAIL) return FAIL
      out[f.encodedKey] = v
    }
    return out
  }
  const decodeFast = (input: unknown): unknown => {
    if (!isRecord(input)) return FAIL
    const out: Record<string, unknown> = {}
    for (const f of compiled) {
      let v: unknown
      if (Object.hasOwn(input, f.encodedKey)) {
        const json = input[f.encodedKey]
        if (json === undefined) return FAIL
        v = f.codec.decode(json)
      } else if (f.defaulted) v = f.codec.decode(f.encodedDefault)
      else return FAIL
      if (v === FAIL) return FAIL
      out[f.key] = v
    }
    return out
  }
  // built on the first value the compiled functions hand over, not at module load
  let whole: ReturnType<typeof effectJsonCodec> | undefined
  const effectCodec = () => (whole ??= effectJsonCodec(schema))
  const annotation: JsonCodecAnnotation = {
    ast: undefined,
    encode: (value) => {
      const out = encodeFast(value)
      return out === FAIL ? effectCodec().encode(value) : out
    },
    decode: (json) => {
      const out = decodeFast(json)
      return out === FAIL ? effectCodec().decode(json) : out
    }
  }
  const annotated = schema.annotate({ [JSON_CODEC_ANNOTATION]: annotation }) as S
  // not enumerable: the AST holds the annotation, so anything that walks annotations (JSON.stringify) would loop
  Object.defineProperty(annotation, "ast", { value: annotated.ast, enumerable: false })
  known.set(annotated.ast, { encode: encodeFast, decode: decodeFast })
  return annotated
}

/** The compiled JSON codec of a schema made by {@link withJsonCodec} (tests), or `undefined`. */
export const jsonCodecOf = (schema: Schema.Top): JsonCodecAnnotation | undefined => {
  const annotation = (schema.ast.annotations as Record<string, unknown> | undefined)?.[JSON_CODEC_ANNOTATION]
  return annotation !== undefined && (annotation as JsonCodecAnnotation).ast === schema.ast
    ? (annotation as JsonCodecAnnotation)
    : undefined
}

/**
 * The compiled functions of a schema made by {@link withJsonCodec}, without effect's codec behind them (tests):
 * each returns `undefined` where it would hand the value to effect's codec.
 */
export const compiledJsonCodecOf = (
  schema: Schema.Top
): { readonly encode: (v: unknown) => unknown; readonly decode: (v: unknown) => unknown } | undefined => {
  const compiled = known.get(schema.ast)
  if (compiled === undefined) return undefined
  const orUndefined = (f: Fast) => (v: unknown) => {
    const out = f(v)
    return out === FAIL ? undefined : out
  }
  return { encode: orUndefined(compiled.encode), decode: orUndefined(compiled.decode) }
}
