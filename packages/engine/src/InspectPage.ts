/**
 * The run inspector: a local, read-only web page over an engine database (`durable-engine inspect`). It lists
 * the Flows and shows one Flow as a timeline: each Step execution a bar over time with its wait and attempts
 * (retries, failures, cancellations), the failure route it is, the Step whose decision scheduled it, and its
 * input and decision (large values truncated, secrets redacted). For a Flow that stores `AgentMessages` and
 * writes `AgentEvents` (an agent session), the page also shows the messages, the tool calls with their
 * effect class and status, and the events.
 *
 * - `GET /`: the page.
 * - `GET /api/flows`: the Flows, newest first.
 * - `GET /api/flows/:flowId`: one Flow's description, Step executions, history, attributes and stream messages.
 *
 * It only reads (through the database layer of `InspectCommand`, which opens SQLite read-only).
 *
 * @since 0.1.0
 */
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Effect from "effect/Effect"
import type { HttpServerError } from "effect/http"
import { HttpRouter, type HttpServer, HttpServerResponse } from "effect/http"
import * as Layer from "effect/Layer"
import { SqlClient } from "effect/sql"
import * as Inspect from "./Inspect.ts"
import { PAGE } from "./internal/inspectPage.ts"
import { make as makeStore } from "./internal/store/EngineStore.ts"

/**
 * Keys whose values the page never shows.
 *
 * @category constants
 * @since 0.1.0
 */
export const SECRET_KEY = /secret|password|passwd|token|api[_-]?key|authorization|cookie|credential|private[_-]?key/i

const SECRET_VALUE = /^(sk-[A-Za-z0-9_-]{8,}|Bearer\s+\S+|ghp_[A-Za-z0-9]{8,}|xox[abp]-\S+)/

/** The same tokens inside a longer text (an error message or a message that quotes one). */
const SECRET_IN_TEXT =
  /\b(sk-[A-Za-z0-9_-]{8,}|Bearer\s+[A-Za-z0-9._~+/=-]+|ghp_[A-Za-z0-9]{8,}|xox[abp]-[A-Za-z0-9-]+)/g

/**
 * The longest text of one value on the page; longer values are cut with a note of how much was left out.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_VALUE_CHARS = 2000

const REDACTED = "[redacted]"

/** Replaces secret-looking keys' values and strings; parses JSON text so nested secrets are found too. */
const redact = (value: unknown, depth = 0): unknown => {
  if (depth > 20) return value
  if (typeof value === "string") {
    if (SECRET_VALUE.test(value)) return REDACTED
    const trimmed = value.trim()
    if ((trimmed.startsWith("{") || trimmed.startsWith("[")) && trimmed.length < 1_000_000) {
      try {
        const parsed = JSON.parse(trimmed)
        const cleaned = redact(parsed, depth + 1)
        return JSON.stringify(cleaned) === JSON.stringify(parsed) ? value : JSON.stringify(cleaned)
      } catch {
        return value.replace(SECRET_IN_TEXT, REDACTED)
      }
    }
    return value.replace(SECRET_IN_TEXT, REDACTED)
  }
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1))
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, SECRET_KEY.test(k) ? REDACTED : redact(v, depth + 1)])
    )
  }
  return value
}

/**
 * A value as the page shows it: secrets redacted, then as JSON text cut at {@link MAX_VALUE_CHARS}.
 *
 * @category formatting
 * @since 0.1.0
 */
export const display = (value: unknown, max: number = MAX_VALUE_CHARS): string => {
  const cleaned = redact(value)
  const text = typeof cleaned === "string" ? cleaned : (JSON.stringify(cleaned, null, 1) ?? String(cleaned))
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`
}

const parse = (text: string | null | undefined): unknown => {
  if (text === null || text === undefined) return null
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * One Flow as the page shows it.
 *
 * @category models
 * @since 0.1.0
 */
export interface FlowDetail {
  readonly flow: Inspect.FlowDescription
  readonly steps: ReadonlyArray<
    Inspect.StepExecution & {
      /** The input, for display. */
      readonly input: string
      /** Why a failure route runs: the failing Step's error type and progress. */
      readonly recovery: unknown
      /** The decision of its completion (`Next` with the Steps it scheduled, `Complete`, ...), for display. */
      readonly decision: string | null
    }
  >
  readonly history: ReadonlyArray<Inspect.HistoryEvent>
  /** The current attribute values (deleted ones left out), for display, by attribute name and instance key. */
  readonly attributes: ReadonlyArray<{
    readonly name: string
    readonly key: string
    readonly value: string
    /** The value parsed and redacted (not cut), for the attributes the page reads field by field: `AgentMessages`. */
    readonly data?: unknown
  }>
  /** Stream messages, oldest first (values parsed, then shown redacted and truncated by the page). */
  readonly streams: ReadonlyArray<{
    readonly stream: string
    readonly stepExecutionId: string
    readonly attempt: number
    readonly at: number
    readonly value: unknown
  }>
}

/**
 * Reads one Flow for the page (read-only queries).
 *
 * @category reading
 * @since 0.1.0
 */
export const flowDetail = (flowId: string) =>
  Effect.gen(function* () {
    const store = yield* makeStore
    const flow = yield* Inspect.describeFlow(flowId)
    const steps = yield* Inspect.stepExecutions(flowId)
    const history = yield* Inspect.history(flowId)
    const rows = yield* store.stepInputs(flowId)
    const attrs = yield* store.attributeVersions(flowId)
    const latest = new Map<string, { name: string; key: string; value: string | null }>()
    for (const a of attrs) latest.set(`${a.name}\u0000${a.key}`, a)
    const streamRows = yield* store.streamMessages(flowId)
    const completions = new Map(
      history.filter((h) => h.kind === "StepCompleted").map((h) => [h.stepExecutionId, h.data] as const)
    )
    return {
      flow,
      steps: steps.map((s) => {
        const row = rows.find((r) => r.step_execution_id === s.stepExecutionId)
        const completion = completions.get(s.stepExecutionId)
        return {
          ...s,
          // an attempt's error text may quote a secret too
          attempts: s.attempts.map((a) => ({ ...a, detail: a.detail === null ? null : display(a.detail) })),
          input: display(parse(row?.input)),
          recovery: redact(parse(row?.recovery)),
          decision: completion === undefined ? null : display(completion)
        }
      }),
      history,
      attributes: [...latest.values()]
        .filter((a) => a.value !== null)
        .map((a) => {
          const value = parse(a.value)
          return {
            name: a.name,
            key: a.key,
            value: display(value),
            ...(FIELD_BY_FIELD.has(a.name) ? { data: redact(value) } : {})
          }
        }),
      streams: streamRows.map((r) => ({
        stream: r.stream,
        stepExecutionId: r.step_execution_id,
        attempt: Number(r.attempt),
        at: Number(r.at),
        value: redact(parse(r.value))
      }))
    } satisfies FlowDetail
  })

/** The attributes whose parsed value the page also gets (it shows a message's turn, role and text apart). */
const FIELD_BY_FIELD = new Set(["AgentMessages"])

const json = (body: unknown, status = 200) => HttpServerResponse.jsonUnsafe(body, { status })

/**
 * The page's routes over the database in the context.
 *
 * @category layers
 * @since 0.1.0
 */
export const routes: Layer.Layer<never, never, HttpRouter.HttpRouter | SqlClient.SqlClient> = Layer.unwrap(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const read = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
      Effect.provideService(effect, SqlClient.SqlClient, sql)
    return Layer.mergeAll(
      HttpRouter.add("GET", "/", HttpServerResponse.html(PAGE)),
      HttpRouter.add(
        "GET",
        "/api/flows",
        read(Inspect.listFlows()).pipe(
          Effect.map((flows) => json(flows)),
          Effect.catchCause((cause) => Effect.succeed(json({ error: String(cause) }, 500)))
        )
      ),
      HttpRouter.add(
        "GET",
        "/api/flows/:flowId",
        Effect.gen(function* () {
          const params = yield* HttpRouter.params
          return json(yield* read(flowDetail(params.flowId ?? "")))
        }).pipe(
          Effect.catchTag("FlowNotFound", (e) => Effect.succeed(json({ error: e.message }, 404))),
          Effect.catchCause((cause) => Effect.succeed(json({ error: String(cause) }, 500)))
        )
      )
    )
  })
)

/**
 * Where the inspector listens: 127.0.0.1 only, on `port` (0 picks a free one).
 *
 * @category models
 * @since 0.1.0
 */
export interface InspectPageOptions {
  readonly port: number
}

/**
 * Serves the page on 127.0.0.1 over the database in the context (give it `InspectCommand.database(target)`);
 * the `HttpServer` it provides tells the address it is bound to.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  options: InspectPageOptions
): Layer.Layer<HttpServer.HttpServer, HttpServerError.ServeError, SqlClient.SqlClient> =>
  HttpRouter.serve(routes, { disableListenLog: true, disableLogger: true }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host: "127.0.0.1" }))
  )
