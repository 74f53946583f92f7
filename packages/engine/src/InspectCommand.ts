/**
 * The `durable-engine` inspection command as an `effect/cli` Command: `flows` lists Flows, `history`
 * prints one Flow's Step executions, attempts and history, `inspect` serves the run inspector page
 * (`InspectPage`). It reads an embedded engine's SQLite file
 * (read-only) or a cluster engine's Postgres database.
 *
 * Every failure a user can cause (no such file, a file a running worker holds, a file that is not an
 * engine database, a server that refuses the connection, an unknown Flow) ends in one
 * {@link InspectError} whose message says what happened and what to do; `effect/cli` prints it, with
 * help on bad arguments.
 *
 * @since 0.1.0
 */
import { existsSync } from "node:fs"
import { PgClient } from "@effect/sql-pg"
import * as Console from "effect/Console"
import * as Argument from "effect/cli/Argument"
import * as CliError from "effect/cli/CliError"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Effect from "effect/Effect"
import { HttpServer } from "effect/http"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { SqlClient } from "effect/sql"
import * as Inspect from "./Inspect.ts"
import * as InspectPage from "./InspectPage.ts"
import { make as makeStore } from "./internal/store/EngineStore.ts"
import * as NodeSqlite from "./NodeSqliteClient.ts"

/**
 * A failure of the inspection command, with a message for the person at the terminal.
 *
 * @category errors
 * @since 0.1.0
 */
export class InspectError extends Schema.TaggedError<InspectError>()("InspectError", {
  reason: Schema.String
}) {
  override get message() {
    return this.reason
  }
  /** Read by `effect/cli`, which prints it instead of a stack. */
  override get [CliError.userMessage]() {
    return this.reason
  }
}

const isPostgres = (target: string) => /^postgres(ql)?:\/\//.test(target)

/** The first line of a failure's text, without effect's `Cause(...)` wrapping. */
const firstLine = (error: unknown): string => {
  const text = typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
  return text.split("\n")[0] ?? text
}

/** The innermost cause's first line (the driver's own words: "connection refused", "relation ... does not exist"). */
const rootCause = (error: unknown): string => {
  let current = error
  for (let depth = 0; depth < 8; depth++) {
    const next = typeof current === "object" && current !== null && "cause" in current ? current.cause : undefined
    if (next === undefined || next === null) break
    current = next
  }
  return firstLine(current)
}

/** What a failure to open or read `target` means for the user. */
const explain = (target: string, error: unknown): InspectError => {
  const whole = firstLine(error)
  const text = whole
    .replace(/^not an engine database \(no readable dex_meta table\): /, "")
    .replace(/ \(effect\/sql\/.*$/, "")
  if (/locked|busy/i.test(text)) {
    return new InspectError({
      reason: `${target} is in use by a running worker (the embedded engine locks its file while it runs). Stop the worker first, or read the Flows through that worker's own Client.`
    })
  }
  if (/file is not a database/i.test(text)) {
    return new InspectError({ reason: `${target} is not a SQLite database` })
  }
  if (/dex_meta|no such table|another program|schema version/i.test(whole)) {
    return new InspectError({
      reason: `${isPostgres(target) ? redact(target) : target} is not an engine database this version can read: ${text}`
    })
  }
  if (isPostgres(target)) {
    return new InspectError({ reason: `cannot read the Postgres database at ${redact(target)}: ${text}` })
  }
  return new InspectError({ reason: `cannot open ${target}: ${text}` })
}

/** A Postgres URL with its password replaced. */
const redact = (url: string) => url.replace(/\/\/([^:/@]+):[^@]*@/, "//$1:***@")

/**
 * The database behind `--db`: a SQLite file opened read-only, or a Postgres URL. A missing file is
 * reported as such (SQLite would otherwise say only "unable to open database file").
 *
 * @category layers
 * @since 0.1.0
 */
export const database = (target: string): Layer.Layer<SqlClient.SqlClient, InspectError> => {
  if (!isPostgres(target) && !existsSync(target)) {
    return Layer.effect(
      SqlClient.SqlClient,
      Effect.fail(
        new InspectError({
          reason: `no such file: ${target} (pass the SQLite file of an embedded engine, or a postgres:// URL)`
        })
      )
    )
  }
  const layer: Layer.Layer<SqlClient.SqlClient, unknown> = isPostgres(target)
    ? PgClient.layer({ url: Redacted.make(target) })
    : NodeSqlite.layer({ filename: target, readOnly: true })
  return Layer.catchCause(layer, (cause) => Layer.effect(SqlClient.SqlClient, Effect.fail(explain(target, cause))))
}

const db = Flag.String("db").pipe(
  Flag.withDescription("the engine's database: an embedded engine's SQLite file, or a postgres:// URL")
)

/** Runs `program` against `target` after checking it is an engine database. */
const withDatabase = <A, E>(target: string, program: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.gen(function* () {
    const store = yield* makeStore
    if (isPostgres(target)) {
      // Connect first, so that a refused connection is not reported as "not an engine database".
      yield* Effect.mapError(
        store.ping,
        (e) => new InspectError({ reason: `cannot connect to ${redact(target)}: ${rootCause(e)}` })
      )
    }
    yield* Effect.mapError(store.verify, (e) => explain(target, e))
    return yield* program
  }).pipe(
    Effect.provide(database(target)),
    Effect.mapError((e) => (e instanceof InspectError ? e : explain(target, e)))
  )

const flows = Command.make(
  "flows",
  {
    db,
    status: Flag.Literals("status", ["running", "completed", "failed", "cancelled", "terminated"]).pipe(
      Flag.optional,
      Flag.withDescription("list only Flows in this status")
    )
  },
  ({ db, status }) =>
    withDatabase(db, Inspect.listFlows(status._tag === "Some" ? { status: status.value } : undefined)).pipe(
      Effect.flatMap((list) =>
        Console.log(
          list.length === 0
            ? "no Flows"
            : list
                .map(
                  (f) =>
                    `${f.flowId.padEnd(36)} ${f.flowType.padEnd(20)} ${f.status.padEnd(10)} ${new Date(f.startedAt).toISOString()}` +
                    (f.waitingSteps.length ? ` waiting: ${f.waitingSteps.join(", ")}` : "") +
                    (f.runningSteps.length ? ` running: ${f.runningSteps.join(", ")}` : "")
                )
                .join("\n")
        )
      )
    )
).pipe(Command.withDescription("List the Flows in the database, newest first."))

const history = Command.make(
  "history",
  { db, flowId: Argument.String("flowId").pipe(Argument.withDescription("the Flow to show")) },
  ({ db, flowId }) =>
    withDatabase(
      db,
      Inspect.renderHistory(flowId).pipe(
        Effect.catchTag("FlowNotFound", () =>
          Effect.fail(new InspectError({ reason: `no Flow ${flowId} in ${isPostgres(db) ? redact(db) : db}` }))
        )
      )
    ).pipe(Effect.flatMap(Console.log))
).pipe(Command.withDescription("Print a Flow's Step executions, their attempts, and its history."))

const inspect = Command.make(
  "inspect",
  {
    db: Flag.String("db").pipe(Flag.optional, Flag.withDescription("an embedded engine's SQLite file")),
    postgres: Flag.String("postgres").pipe(Flag.optional, Flag.withDescription("a cluster engine's postgres:// URL")),
    port: Flag.Int("port").pipe(Flag.withDefault(0), Flag.withDescription("the port on 127.0.0.1; 0 picks one"))
  },
  ({ db, postgres, port }) =>
    Effect.gen(function* () {
      const target = db._tag === "Some" ? db.value : postgres._tag === "Some" ? postgres.value : undefined
      if (target === undefined || (db._tag === "Some" && postgres._tag === "Some")) {
        return yield* new InspectError({ reason: "pass one of --db <SQLite file> or --postgres <URL>" })
      }
      yield* withDatabase(
        target,
        Effect.gen(function* () {
          const server = yield* HttpServer.HttpServer
          const address = server.address
          const url = "port" in address ? `http://127.0.0.1:${address.port}/` : String(address)
          yield* Console.log(`inspector on ${url} (read-only; Ctrl-C stops it)`)
          return yield* Effect.never
        }).pipe(
          Effect.provide(InspectPage.layer({ port })),
          Effect.mapError((e) =>
            e instanceof InspectError ? e : new InspectError({ reason: `cannot serve: ${firstLine(e)}` })
          )
        )
      )
    })
).pipe(
  Command.withDescription(
    "Serve a local read-only page (127.0.0.1) that lists the Flows and shows one as a timeline of its Steps."
  )
)

/**
 * `durable-engine flows | history | inspect`, ready for `Command.run` (the `bin` entry) or `Command.runWith` (tests).
 *
 * @category commands
 * @since 0.1.0
 */
export const command = Command.make("durable-engine").pipe(
  Command.withDescription("Inspect the Flows of a durable engine database (read-only)."),
  Command.withSubcommands([flows, history, inspect])
)
