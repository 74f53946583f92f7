// Inspection reads (`Inspect`, the run inspector page, the inspection command): SELECTs only.
import * as Effect from "effect/Effect"
import type { Driver } from "./driver.ts"
import {
  type AttemptRow,
  type FlowRow,
  normalizeAttempt,
  normalizeFlow,
  normalizeStep,
  type Sql,
  type StepRow
} from "./rows.ts"
import type { StoredValue } from "./values.ts"

/** The active Step executions of some Flows, in scheduling order. */
export const activeStepsOf = (sql: Sql, flowIds: ReadonlyArray<string>) =>
  sql<{
    flow_id: string
    step_execution_id: string
    status: string
  }>`SELECT flow_id, step_execution_id, status FROM dex_steps
    WHERE flow_id IN ${sql.in(flowIds as Array<string>)} AND status IN ('waiting', 'ready', 'running') ORDER BY seq`

/** Flows, newest first, optionally by status or type. */
export const listFlows = (
  sql: Sql,
  options: { readonly status?: string | undefined; readonly flowType?: string | undefined; readonly limit: number }
) => {
  const where = [
    ...(options?.status ? [sql`status = ${options.status}`] : []),
    ...(options?.flowType ? [sql`flow_type = ${options.flowType}`] : [])
  ]
  return Effect.map(
    sql`SELECT * FROM dex_flows ${where.length ? sql`WHERE ${sql.and(where)}` : sql``}
          ORDER BY started_at DESC, flow_id LIMIT ${options.limit}`,
    (rows): Array<FlowRow> => rows.map(normalizeFlow)
  )
}

/** Every stored Step execution of a Flow, in scheduling order. */
export const allSteps = (sql: Sql, flowId: string) =>
  Effect.map(
    sql`SELECT * FROM dex_steps WHERE flow_id = ${flowId} ORDER BY seq`,
    (rows): Array<StepRow> => rows.map(normalizeStep)
  )

/** Every stored attempt of a Flow, by attempt number. */
export const allAttempts = (sql: Sql, flowId: string) =>
  Effect.map(
    sql`SELECT * FROM dex_attempts WHERE flow_id = ${flowId} ORDER BY attempt`,
    (rows): Array<AttemptRow> => rows.map(normalizeAttempt)
  )

/** One stored history event. */
export interface HistoryEventRow {
  readonly id: number
  readonly at: number
  readonly kind: string
  readonly step_execution_id: string | null
  readonly attempt: number | null
  readonly data: string
  readonly runner: string | null
}

/** A Flow's stored history, oldest first. */
export const history = (sql: Sql, flowId: string) =>
  Effect.map(
    sql<any>`SELECT * FROM dex_history WHERE flow_id = ${flowId} ORDER BY id`,
    (rows): Array<HistoryEventRow> =>
      rows.map((r) => ({
        id: Number(r.id),
        at: Number(r.at),
        kind: r.kind,
        step_execution_id: r.step_execution_id ?? null,
        attempt: r.attempt === null || r.attempt === undefined ? null : Number(r.attempt),
        data: r.data,
        runner: r.runner ?? null
      }))
  )

/** A Flow's Step counters (JSON: Step type -> executions scheduled), `undefined` for an unknown Flow. */
export const loadCounters = (sql: Sql, flowId: string) =>
  Effect.map(
    sql<{ counters: string }>`SELECT counters FROM dex_flows WHERE flow_id = ${flowId}`,
    (rows) => rows[0]?.counters
  )

/** Whether a Step execution's row is stored. */
export const stepStored = (sql: Sql, flowId: string, stepExecutionId: string) =>
  Effect.map(
    sql`SELECT 1 FROM dex_steps WHERE flow_id = ${flowId} AND step_execution_id = ${stepExecutionId}`,
    (rows) => rows.length > 0
  )

/** The inputs and recovery records of a Flow's stored Step executions (the run inspector page). */
export const stepInputs = (sql: Sql, flowId: string) =>
  sql<{
    step_execution_id: string
    input: string
    recovery: string | null
  }>`SELECT step_execution_id, input, recovery FROM dex_steps WHERE flow_id = ${flowId}`

/** Every stored attribute version of a Flow by name, key and version (the run inspector page). */
export const attributeVersions = (sql: Sql, d: Driver, flowId: string) =>
  d.values.decodeRows(
    sql<{
      name: string
      key: string
      version: unknown
      value: StoredValue
    }>`SELECT name, key, version, value FROM dex_attrs WHERE flow_id = ${flowId} ORDER BY name, key, version`
  )

/** A Flow's first 5,000 stream messages of every stream (the run inspector page). */
export const streamMessages = (sql: Sql, flowId: string) =>
  sql<{
    stream: string
    step_execution_id: string
    attempt: unknown
    at: unknown
    value: string
  }>`SELECT stream, step_execution_id, attempt, at, value FROM dex_stream WHERE flow_id = ${flowId} ORDER BY seq LIMIT 5000`

/** A statement that only checks the connection. */
export const ping = (sql: Sql) => Effect.asVoid(sql`SELECT 1`)
