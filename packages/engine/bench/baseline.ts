/**
 * The baseline: plain insert transactions into the engine's own database with the same durability settings,
 * one transaction per "transition".
 *
 * - SQLite: `node:sqlite` `DatabaseSync` on the engine's file (opened after the engine released its
 *   exclusive lock), WAL, `synchronous=FULL`, `locking_mode=EXCLUSIVE` like the engine; one
 *   `BEGIN; INSERT; COMMIT` per transition. One connection, so the throughput run is sequential (SQLite
 *   serializes writers anyway, and the engine has one connection too).
 * - Postgres: `@effect/sql-pg` `PgClient` with the engine's pool settings (the defaults); one
 *   `BEGIN; INSERT; COMMIT` (`withTransaction`) per transition; the throughput run has one fiber per Flow.
 */
import { DatabaseSync } from "node:sqlite"
import { PgClient } from "@effect/sql-pg"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { nowMs } from "./flows.ts"

export interface BaselineResult {
  /** Duration of one insert transaction, sequential (ms). */
  readonly latency: ReadonlyArray<number>
  readonly transitions: number
  readonly wallMs: number
  readonly perSecond: number
  /** What the baseline ran on, for the report. */
  readonly settings: string
}

export interface BaselineOptions {
  readonly latencySamples: number
  readonly flows: number
  readonly transitionsPerFlow: number
}

const payload = JSON.stringify({ left: 0, note: "baseline" })

export const sqliteBaseline = (filename: string, options: BaselineOptions): BaselineResult => {
  const db = new DatabaseSync(filename)
  try {
    db.exec("PRAGMA locking_mode = EXCLUSIVE")
    const journal = db.prepare("PRAGMA journal_mode = WAL").get() as { journal_mode: string }
    db.exec("PRAGMA synchronous = FULL")
    const sync = db.prepare("PRAGMA synchronous").get() as { synchronous: number }
    db.exec(`CREATE TABLE IF NOT EXISTS bench_baseline (
      id INTEGER PRIMARY KEY AUTOINCREMENT, flow_id TEXT NOT NULL, step INTEGER NOT NULL, payload TEXT NOT NULL,
      at REAL NOT NULL)`)
    const insert = db.prepare("INSERT INTO bench_baseline (flow_id, step, payload, at) VALUES (?, ?, ?, ?)")
    const transaction = (flowId: string, step: number) => {
      db.exec("BEGIN")
      insert.run(flowId, step, payload, nowMs())
      db.exec("COMMIT")
    }
    for (let i = 0; i < 20; i++) transaction("warmup", i)
    const latency: Array<number> = []
    for (let i = 0; i < options.latencySamples; i++) {
      const t = nowMs()
      transaction("latency", i)
      latency.push(nowMs() - t)
    }
    const transitions = options.flows * options.transitionsPerFlow
    const t0 = nowMs()
    for (let step = 0; step < options.transitionsPerFlow; step++) {
      for (let flow = 0; flow < options.flows; flow++) transaction(`tp-${flow}`, step)
    }
    const wallMs = nowMs() - t0
    db.exec("DROP TABLE bench_baseline")
    return {
      latency,
      transitions,
      wallMs,
      perSecond: transitions / (wallMs / 1000),
      settings: `node:sqlite journal_mode=${journal.journal_mode} synchronous=${sync.synchronous === 2 ? "FULL" : sync.synchronous}`
    }
  } finally {
    db.close()
  }
}

export const postgresBaseline = (url: string, options: BaselineOptions) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient
    const settings = yield* sql<{ name: string; setting: string }>`SELECT name, setting FROM pg_settings
      WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method') ORDER BY name`
    yield* sql`CREATE TABLE IF NOT EXISTS bench_baseline (
      id BIGSERIAL PRIMARY KEY, flow_id TEXT NOT NULL, step INTEGER NOT NULL, payload TEXT NOT NULL,
      at DOUBLE PRECISION NOT NULL)`
    const transaction = (flowId: string, step: number) =>
      sql.withTransaction(
        sql`INSERT INTO bench_baseline (flow_id, step, payload, at) VALUES (${flowId}, ${step}, ${payload}, ${nowMs()})`
      )
    for (let i = 0; i < 20; i++) yield* transaction("warmup", i)
    const latency: Array<number> = []
    for (let i = 0; i < options.latencySamples; i++) {
      const t = nowMs()
      yield* transaction("latency", i)
      latency.push(nowMs() - t)
    }
    const transitions = options.flows * options.transitionsPerFlow
    const t0 = nowMs()
    yield* Effect.forEach(
      Array.from({ length: options.flows }, (_, i) => `tp-${i}`),
      (flowId) =>
        Effect.gen(function* () {
          for (let step = 0; step < options.transitionsPerFlow; step++) yield* transaction(flowId, step)
        }),
      { concurrency: "unbounded", discard: true }
    )
    const wallMs = nowMs() - t0
    yield* sql`DROP TABLE bench_baseline`
    return {
      latency,
      transitions,
      wallMs,
      perSecond: transitions / (wallMs / 1000),
      settings: `@effect/sql-pg pool (default size) ${settings.map((s) => `${s.name}=${s.setting}`).join(" ")}`
    } satisfies BaselineResult
  }).pipe(Effect.scoped, Effect.provide(PgClient.layer({ url: Redacted.make(url) })))
