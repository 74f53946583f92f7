#!/usr/bin/env node
// The inspection command: lists Flows and prints a Flow's Step executions, attempts and history.
//
//   durable-engine flows   --db <file.db | postgres://...> [--status running|completed|failed|cancelled|terminated]
//   durable-engine history <flowId> --db <file.db | postgres://...>
//
// An embedded SQLite file is locked by the worker process that runs it: read it after that process
// stops (or ask the running process through its own Client, as the example chat's `/history` does).
// A Postgres database can be read at any time.
import { PgClient } from "@effect/sql-pg"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type { SqlClient } from "effect/sql"
import { EngineError } from "../src/Errors.ts"
import * as Inspect from "../src/Inspect.ts"
import { verify } from "../src/internal/store.ts"
import * as NodeSqlite from "../src/NodeSqliteClient.ts"

const usage = `usage:
  durable-engine flows   --db <file.db | postgres://...> [--status <status>]
  durable-engine history <flowId> --db <file.db | postgres://...>`

const args = process.argv.slice(2)
const option = (name: string) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}
const positional = args.filter((a, i) => !a.startsWith("--") && !args[i - 1]?.startsWith("--"))
const [command, flowId] = positional
const db = option("--db")

const database = (target: string): Layer.Layer<SqlClient.SqlClient, EngineError> =>
  (/^postgres(ql)?:\/\//.test(target)
    ? PgClient.layer({ url: Redacted.make(target) })
    : NodeSqlite.layer({ filename: target, readOnly: true })
  ).pipe(
    Layer.catchCause((cause) =>
      Layer.effectDiscard(
        Effect.fail(
          new EngineError({
            reason: `cannot open ${target}: ${String(cause).split("\n")[0]}${/locked|busy/i.test(String(cause)) ? " (a running worker holds this file; stop it first)" : ""}`
          })
        )
      )
    )
  ) as Layer.Layer<SqlClient.SqlClient, EngineError>

const program = Effect.gen(function* () {
  yield* verify()
  if (command === "flows") {
    const status = option("--status") as Inspect.FlowStatus | undefined
    const flows = yield* Inspect.listFlows({ status })
    if (flows.length === 0) return "no Flows"
    return flows
      .map(
        (f) =>
          `${f.flowId.padEnd(36)} ${f.flowType.padEnd(20)} ${f.status.padEnd(10)} ${new Date(f.startedAt).toISOString()}` +
          (f.waitingSteps.length ? ` waiting: ${f.waitingSteps.join(", ")}` : "") +
          (f.runningSteps.length ? ` running: ${f.runningSteps.join(", ")}` : "")
      )
      .join("\n")
  }
  return yield* Inspect.renderHistory(flowId!)
})

if (db === undefined || (command !== "flows" && command !== "history") || (command === "history" && !flowId)) {
  process.stderr.write(`${usage}\n`)
  process.exit(2)
}

Effect.runPromise(Effect.provide(program, database(db!)) as Effect.Effect<string, never>).then(
  (text) => {
    process.stdout.write(`${text}\n`)
    process.exit(0)
  },
  (error) => {
    process.stderr.write(`${error?.message ?? String(error)}\n`)
    process.exit(1)
  }
)
