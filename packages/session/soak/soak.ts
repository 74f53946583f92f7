/**
 * The soak (`npm run soak -- --mode cluster|embedded --sessions N --minutes M`): sessions with a scripted model
 * and a tool of every effect class run in real worker processes (soak-worker.ts) while this process injects
 * faults, then the durable state is checked.
 *
 * - cluster: three runners on one Postgres database that the soak creates and drops; embedded: one worker on a
 *   SQLite file in a temporary directory.
 * - Faults, one at a time every 2 to 6 s until the send deadline (`--minutes`, fractions allowed), alternating
 *   (the first at random) between SIGKILL of a worker's process group (restarted 1 to 2 s later) and SIGSTOP
 *   (cluster: 5 to 7 s, past the 2 s shard-lock expiry; embedded: 1 to 4 s) and SIGCONT, of a random worker.
 * - Every real tool execution, and every send and approval that returned, is a line in a ledger file outside
 *   the workers (O_APPEND writes).
 * - After the deadline no new messages are sent; the sessions must settle within `--settle-seconds` (120).
 *
 * Checks, each a list of violations: single-attempt tool calls (non_idempotent_write, unclassified) executed at
 * most once; every tool record final and finished by exactly one `tool_call_finished`, whose status is the
 * record's, and no `succeeded` record without an execution; no event twice for the same Step execution, attempt,
 * type and tool call or interrupt, and no attempt whose text deltas repeat; every message stored once, in sequence
 * (the chunks the index lists hold their ranges, no chunk unlisted, no sequence missing or twice); every user
 * message once, answered once, every acknowledged send present; no session stuck (settled in time, no active turn, no queued message, no
 * ready or running Step). Prints the figures (faults injected and survived, turns completed, tool executions,
 * time to progress after a fault, p50 and max) and a final `SOAK_RESULT <json>` line; exits 1 on any violation.
 *
 * Each worker slot's output (its warnings and errors too) is appended to `worker-<slot>.log` in the run's directory.
 * `SOAK_KEEP_DIR=1` keeps that directory (ledger, logs, SQLite file) and the Postgres database; `--recheck <dir>` (with
 * `--database <url>` for a cluster run) runs the checks again over what a kept run left.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { NodeSqlite } from "@durable-agent/engine"
import { PgClient } from "@effect/sql-pg"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { SqlClient } from "effect/sql"
import * as StoredValues from "../../engine/src/internal/store/values.ts"
import { createTestDatabase } from "../../engine/test/support/postgres.ts"
import { OUTCOME_UNKNOWN_TEXT, settleEvents } from "../src/wire/index.ts"
import { sessionIds, TOOL_EFFECTS } from "./scenario.ts"

const workerPath = fileURLToPath(new URL("./soak-worker.ts", import.meta.url))

/** What the soak found, as printed on its SOAK_RESULT line. */
export interface SoakResult {
  readonly mode: "cluster" | "embedded"
  readonly sessions: number
  readonly minutes: number
  readonly faults: {
    readonly injected: number
    readonly kills: number
    readonly stops: number
    readonly survived: number
    /** The faults not survived: a session whose turn was under way then wrote no event after it. */
    readonly unprogressed: ReadonlyArray<string>
  }
  readonly turnsCompleted: number
  /** What the checks read: tool calls, events and user messages (a check over nothing proves nothing). */
  readonly checked: { readonly toolCalls: number; readonly events: number; readonly userMessages: number }
  readonly toolExecutions: Readonly<Record<string, number>>
  readonly approvals: number
  readonly progressMs: { readonly p50: number | null; readonly max: number | null }
  readonly settledAfterMs: number | null
  readonly checks: ReadonlyArray<{ readonly name: string; readonly violations: ReadonlyArray<string> }>
  readonly violations: number
}

// --- worker processes ---------------------------------------------------------------------------------------

interface Worker {
  readonly child: ChildProcess
  readonly lines: Array<string>
  stopped: boolean
  dead: boolean
}

/** Starts a worker; its stdout and stderr (its warnings and errors) are appended to `log`. */
const startWorker = (args: ReadonlyArray<string>, log: string): Worker => {
  const child = spawn(process.execPath, [...process.execArgv, workerPath, ...args], {
    detached: true,
    stdio: ["ignore", "pipe", "pipe"]
  })
  const worker: Worker = { child, lines: [], stopped: false, dead: false }
  let buffer = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    appendFileSync(log, chunk)
    buffer += chunk.toString("utf8")
    let i = buffer.indexOf("\n")
    while (i >= 0) {
      const line = buffer.slice(0, i)
      // only the protocol lines are kept in memory (the log lines are in the file)
      if (/^(READY|PROGRESS|ALL_SETTLED|UNSETTLED|ERROR) /.test(line)) worker.lines.push(line)
      buffer = buffer.slice(i + 1)
      i = buffer.indexOf("\n")
    }
  })
  child.stderr!.on("data", (chunk: Buffer) => appendFileSync(log, chunk))
  child.once("exit", () => {
    worker.dead = true
  })
  return worker
}

/** Signals the worker's whole process group. */
const signal = (worker: Worker, sig: NodeJS.Signals) => {
  try {
    process.kill(-worker.child.pid!, sig)
  } catch {
    // already gone
  }
}

const killWorker = async (worker: Worker) => {
  if (worker.dead) return
  const exited = new Promise<void>((resolve) => worker.child.once("exit", () => resolve()))
  signal(worker, "SIGKILL")
  await exited
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const between = (min: number, max: number) => min + Math.floor(Math.random() * (max - min))

// --- checks ---------------------------------------------------------------------------------------------------

/** One line of the ledger. */
export interface LedgerLine {
  readonly kind: "exec" | "sent" | "approved"
  readonly session: string
  readonly toolCallId?: string
  readonly tool?: string
  readonly turn?: number
  readonly ok?: boolean
  readonly pid: number
  readonly at: number
}

/** One stored event, its payload parsed. */
export interface EventRow {
  readonly session: string
  readonly stepExecutionId: string
  readonly attempt: number
  readonly type: string
  readonly turnId: string | null
  readonly payload: Record<string, any>
  readonly at: number
}

/**
 * A session's message storage as stored ("Message storage"): the index, every `AgentMessageChunks` instance by
 * key, and the window's `AgentMessages` instances.
 */
export interface MessageStorage {
  readonly index: {
    readonly chunks: ReadonlyArray<{ readonly first_sequence: number; readonly last_sequence: number }>
    readonly first_sequence: number
    readonly window_first_sequence: number
  } | null
  readonly chunks: ReadonlyMap<string, ReadonlyArray<Record<string, any>>>
  readonly window: ReadonlyArray<Record<string, any>>
}

/** What the checks read of the engine's tables, per session. */
export interface Durable {
  readonly records: Map<string, Array<Record<string, any>>>
  /** Each session's messages as the library reads them: the chunks its index lists, then the window. */
  readonly messages: Map<string, Array<Record<string, any>>>
  /** Each session's message storage as stored, when read (the storage check's input). */
  readonly storage?: Map<string, MessageStorage>
  readonly states: Map<string, Record<string, any> | null>
  readonly events: Array<EventRow>
  readonly queued: Map<string, number>
  readonly activeSteps: Map<string, Array<string>>
  /** Each session's waiting AwaitUserMessage Steps, when read: a settled session has exactly one. */
  readonly waitingForMessages?: Map<string, number>
}

/** Reads what the checks need straight from the engine's tables (no worker runs any more). */
const readDurable = (sessions: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // a large value is stored compressed on SQLite (the engine's `internal/store/values.ts`): read as the engine does
    const attrs = yield* StoredValues.compressed.decodeRows(sql<{
      flow_id: string
      name: string
      key: string
      value: StoredValues.StoredValue
    }>`SELECT a.flow_id, a.name, a.key, a.value
      FROM dex_attrs a WHERE a.name IN ('AgentState', 'AgentToolCalls', 'AgentMessages', 'AgentMessageChunks',
        'AgentMessageIndex') AND a.version = (SELECT MAX(b.version)
      FROM dex_attrs b WHERE b.flow_id = a.flow_id AND b.name = a.name AND b.key = a.key)`)
    const stream = yield* sql<{
      flow_id: string
      step_execution_id: string
      attempt: number
      value: string
      at: number
    }>`SELECT flow_id, step_execution_id, attempt, value, at FROM dex_stream ORDER BY seq`
    const queued = yield* sql<{ flow_id: string; n: number }>`SELECT flow_id, COUNT(*) AS n FROM dex_messages
      WHERE channel = 'QueuedUserMessages' GROUP BY flow_id`
    const steps = yield* sql<{ flow_id: string; step_execution_id: string; step_type: string; status: string }>`SELECT
      flow_id, step_execution_id, step_type, status FROM dex_steps WHERE status IN ('ready', 'running', 'waiting')`
    const storage = new Map(
      sessions.map((s) => [
        s,
        {
          index: null as MessageStorage["index"],
          chunks: new Map<string, ReadonlyArray<Record<string, any>>>(),
          window: [] as Array<Record<string, any>>
        }
      ])
    )
    const durable: Durable = {
      records: new Map(sessions.map((s) => [s, []])),
      messages: new Map(sessions.map((s) => [s, []])),
      storage,
      states: new Map(sessions.map((s) => [s, null])),
      events: [],
      queued: new Map(queued.map((q) => [q.flow_id, Number(q.n)])),
      activeSteps: new Map(),
      waitingForMessages: new Map()
    }
    for (const a of attrs) {
      if (a.value === null || !durable.states.has(a.flow_id)) continue
      const value = JSON.parse(a.value)
      if (a.name === "AgentState") durable.states.set(a.flow_id, value)
      else if (a.name === "AgentToolCalls") durable.records.get(a.flow_id)!.push(value)
      else if (a.name === "AgentMessageIndex") storage.get(a.flow_id)!.index = value
      else if (a.name === "AgentMessageChunks") storage.get(a.flow_id)!.chunks.set(a.key, value.messages)
      else storage.get(a.flow_id)!.window.push(value)
    }
    // read as the library reads them (internal/messages.ts): the chunks the index lists, then the window; what
    // the index does not list, or lists twice, is the storage check's to report
    for (const [session, stored] of storage) durable.messages.set(session, readMessages(stored))
    for (const r of stream) {
      const envelope = JSON.parse(r.value)
      durable.events.push({
        session: r.flow_id,
        stepExecutionId: r.step_execution_id,
        attempt: Number(r.attempt),
        type: envelope.type,
        turnId: envelope.turn_id ?? null,
        payload: typeof envelope.payload === "string" ? JSON.parse(envelope.payload) : (envelope.payload ?? {}),
        at: Number(r.at)
      })
    }
    for (const s of steps) {
      if (s.status === "waiting" && s.step_type === "AwaitUserMessage") {
        durable.waitingForMessages!.set(s.flow_id, (durable.waitingForMessages!.get(s.flow_id) ?? 0) + 1)
        continue
      }
      const list = durable.activeSteps.get(s.flow_id) ?? []
      list.push(`${s.step_execution_id} ${s.status}`)
      durable.activeSteps.set(s.flow_id, list)
    }
    return durable
  })

/** The zero-padded key of a message sequence (`Wire.messageSequenceKey`). */
const sequenceKey = (sequence: number) => String(sequence).padStart(12, "0")

/** A session's messages as the library reads them: the chunks its index lists, then the window, by sequence. */
export const readMessages = (stored: MessageStorage): Array<Record<string, any>> => {
  const out: Array<Record<string, any>> = []
  for (const range of stored.index?.chunks ?? [])
    out.push(...(stored.chunks.get(sequenceKey(range.first_sequence)) ?? []))
  out.push(...stored.window)
  return out.sort((a, b) => a.sequence - b.sequence)
}

/**
 * The message storage's invariants ("Message storage"): each chunk the index lists holds exactly its range, no
 * chunk is stored that the index does not list, the window starts at the index's `window_first_sequence`, and
 * the stored sequences run from the index's `first_sequence` to `next_message_sequence - 1`, each once.
 */
const storageViolations = (
  session: string,
  stored: MessageStorage,
  state: Record<string, any> | null | undefined
): Array<string> => {
  const out: Array<string> = []
  const listed = new Set<string>()
  for (const r of stored.index?.chunks ?? []) {
    const key = sequenceKey(r.first_sequence)
    if (listed.has(key)) out.push(`${session}: the index lists chunk ${key} twice`)
    listed.add(key)
    const messages = stored.chunks.get(key)
    const sequences = (messages ?? []).map((m) => m.sequence)
    const expected = Array.from({ length: r.last_sequence - r.first_sequence + 1 }, (_, i) => r.first_sequence + i)
    if (messages === undefined)
      out.push(`${session}: chunk ${key} (${r.first_sequence}..${r.last_sequence}) is missing`)
    else if (sequences.join() !== expected.join()) {
      out.push(
        `${session}: chunk ${key} holds ${sequences[0]}..${sequences.at(-1)} (${sequences.length}), its index entry ${r.first_sequence}..${r.last_sequence}`
      )
    }
  }
  for (const key of stored.chunks.keys()) {
    if (!listed.has(key)) out.push(`${session}: chunk ${key} is stored but not listed in the index`)
  }
  const windowFirst = stored.index?.window_first_sequence ?? 1
  for (const m of stored.window) {
    if (m.sequence < windowFirst) {
      out.push(`${session}: window message ${m.sequence} is below window_first_sequence ${windowFirst}`)
    }
  }
  const sequences = readMessages(stored).map((m) => m.sequence as number)
  for (const [sequence, n] of countBy(sequences, String)) {
    if (n > 1) out.push(`${session}: message ${sequence} stored ${n} times`)
  }
  const first = stored.index?.first_sequence ?? 1
  const next = typeof state?.next_message_sequence === "number" ? state.next_message_sequence : undefined
  const distinct = new Set(sequences)
  const last = next === undefined ? Math.max(0, ...sequences) : next - 1
  const missing: Array<number> = []
  for (let s = first; s <= last; s++) if (!distinct.has(s)) missing.push(s)
  if (missing.length > 0)
    out.push(`${session}: messages ${missing.slice(0, 10).join(", ")} missing (${missing.length})`)
  const beyond = sequences.filter((s) => s > last)
  if (beyond.length > 0)
    out.push(`${session}: messages ${beyond.slice(0, 10).join(", ")} at or after next_message_sequence ${next}`)
  return out
}

const countBy = <A>(items: ReadonlyArray<A>, key: (a: A) => string) => {
  const counts = new Map<string, number>()
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1)
  return counts
}

/** The events of a tool call, as `(type step#attempt [status])` (what a violation about it needs to be read). */
const describeEvents = (events: ReadonlyArray<EventRow>, key: string) => {
  const of = events.filter((e) => `${e.session} ${e.payload.tool_call_id}` === key)
  return of.length === 0
    ? ""
    : ` (events: ${of.map((e) => `${e.type} ${e.stepExecutionId}#${e.attempt}${e.payload.status === undefined ? "" : ` ${e.payload.status}`}`).join(", ")})`
}

const SINGLE_ATTEMPT = new Set(["non_idempotent_write", "unclassified"])
const DELTA_TYPES = new Set(["text_delta", "reasoning_delta"])
const TURN_ENDS = new Set(["turn_completed", "turn_failed", "turn_steered", "turn_cancelled"])

/** The soak's checks over the ledger and the durable state; exported for the checks' own test. */
export const runChecks = (
  sessions: ReadonlyArray<string>,
  ledger: ReadonlyArray<LedgerLine>,
  d: Durable,
  settled: boolean,
  settleSeconds: number
) => {
  const execs = ledger.filter((l) => l.kind === "exec")
  const atMostOnce: Array<string> = []
  for (const [key, n] of countBy(
    execs.filter((e) => SINGLE_ATTEMPT.has(TOOL_EFFECTS[e.tool!]!)),
    (e) => `${e.session} ${e.toolCallId}`
  )) {
    if (n > 1) atMostOnce.push(`${key} (${TOOL_EFFECTS[key.split(" ")[1]!.split("-")[0]!]}) executed ${n} times`)
  }

  // A record lives in AgentToolCalls while its turn is active; the turn's end keeps its outcome as the tool
  // result message (what the model sees), so that message is the record of a call of an ended turn.
  const finalOnce: Array<string> = []
  const contradicting: Array<string> = []
  const executed = new Set(execs.map((e) => `${e.session} ${e.toolCallId}`))
  const eventsOf = (events: ReadonlyArray<EventRow>, type: string) => {
    const by = new Map<string, Array<EventRow>>()
    for (const e of events.filter((x) => x.type === type)) {
      const key = `${e.session} ${e.payload.tool_call_id}`
      by.set(key, [...(by.get(key) ?? []), e])
    }
    return by
  }
  // the outcomes a reader takes: the settled stream of each session (wire/EventLog.ts)
  const settledEvents = [...d.messages.keys()].flatMap((session) =>
    settleEvents(d.events.filter((e) => e.session === session))
  )
  const deferred = eventsOf(d.events, "tool_call_deferred")
  const finishedBy = eventsOf(settledEvents, "tool_call_finished")
  const results = new Map<string, Array<Record<string, any>>>()
  for (const [session, messages] of d.messages) {
    for (const m of messages.filter((x) => x.role === "tool")) {
      const key = `${session} ${m.tool_call_id}`
      results.set(key, [...(results.get(key) ?? []), m])
    }
  }
  for (const [session, records] of d.records) {
    for (const r of records) {
      if (!FINAL.has(r.status)) finalOnce.push(`${session} ${r.tool_call_id}: record is ${r.status}, not final`)
    }
  }
  for (const key of new Set([...deferred.keys(), ...finishedBy.keys(), ...results.keys()])) {
    const ends = finishedBy.get(key) ?? []
    const result = results.get(key) ?? []
    if (ends.length !== 1) {
      finalOnce.push(`${key}: ${ends.length} settled tool_call_finished events${describeEvents(d.events, key)}`)
    }
    if (result.length !== 1) finalOnce.push(`${key}: ${result.length} tool results stored`)
    const output = result[0]?.tool_output
    const stored =
      output === undefined
        ? undefined
        : output === `${result[0]!.tool_name} ok`
          ? "succeeded"
          : output === OUTCOME_UNKNOWN_TEXT
            ? "outcome_unknown"
            : "another final status"
    for (const e of ends) {
      const said =
        e.payload.status === "succeeded" || e.payload.status === "outcome_unknown"
          ? e.payload.status
          : "another final status"
      if (stored !== undefined && said !== stored) {
        contradicting.push(
          `${key}: tool_call_finished says ${e.payload.status} (${e.stepExecutionId} attempt ${e.attempt}), the stored result ${stored}`
        )
      }
    }
    if (stored === "succeeded" && !executed.has(key)) finalOnce.push(`${key}: succeeded without an execution`)
  }

  const duplicates: Array<string> = []
  const structural = d.events.filter((e) => !DELTA_TYPES.has(e.type))
  for (const [key, n] of countBy(
    structural,
    (e) =>
      `${e.session} ${e.stepExecutionId} attempt ${e.attempt} ${e.type} ${e.payload.tool_call_id ?? e.payload.interrupt_id ?? ""}`
  )) {
    if (n > 1) duplicates.push(`${key.trim()} written ${n} times`)
  }
  const deltas = new Map<string, { text: string; turnId: string | null }>()
  for (const e of d.events.filter((x) => x.type === "text_delta")) {
    const key = `${e.session} ${e.stepExecutionId} attempt ${e.attempt}`
    const entry = deltas.get(key) ?? { text: "", turnId: e.turnId }
    entry.text += e.payload.text
    deltas.set(key, entry)
  }
  for (const [key, { text, turnId }] of deltas) {
    const expected = `done ${Number((turnId ?? "turn-0").slice(5))}`
    if (!expected.startsWith(text)) duplicates.push(`${key}: text deltas "${text}" are not one answer "${expected}"`)
  }

  const stored: Array<string> = []
  for (const [session, storage] of d.storage ?? [])
    stored.push(...storageViolations(session, storage, d.states.get(session)))

  const answered: Array<string> = []
  for (const [session, messages] of d.messages) {
    const userMessages = messages.filter((m) => m.role === "user")
    const users = userMessages.map((m) => String(m.text))
    const turns = users.map((t) => Number(t.slice(5)))
    for (const [text, n] of countBy(users, (t) => t))
      if (n > 1) answered.push(`${session}: "${text}" stored ${n} times`)
    turns.forEach((t, i) => {
      const m = userMessages[i]!
      const where = m.turn_id === undefined ? "" : ` (${m.turn_id}, sequence ${m.sequence})`
      if (t !== i + 1) answered.push(`${session}: user message ${i + 1} is "turn ${t}"${where}`)
    })
    // one user message per turn, and a turn count that counts each turn once (a skipped or repeated turn ID
    // shifts every later message the driver sends)
    const state = d.states.get(session)
    const turnCount = state?.turn_count
    const turnIds = new Set(userMessages.flatMap((m) => (m.turn_id === undefined ? [] : [m.turn_id])))
    // the active turn is counted when it ends
    const ended =
      turnIds.size - (typeof state?.active_turn_id === "string" && turnIds.has(state.active_turn_id) ? 1 : 0)
    if (typeof turnCount === "number" && turnIds.size > 0 && turnCount !== ended) {
      answered.push(`${session}: turn_count is ${turnCount}, the user messages are of ${ended} ended turns`)
    }
    const answers = messages.filter((m) => m.role === "assistant" && m.text !== null).map((m) => String(m.text))
    for (const t of turns) {
      const n = answers.filter((a) => a === `done ${t}`).length
      if (n !== 1) answered.push(`${session}: "turn ${t}" answered ${n} times`)
    }
    const ends = settleEvents(d.events.filter((e) => e.session === session)).filter((e) => TURN_ENDS.has(e.type))
    const completed = ends.filter((e) => e.type === "turn_completed").length
    if (completed !== turns.length || ends.length !== turns.length) {
      answered.push(
        `${session}: ${completed} settled turn_completed of ${ends.length} turn ends for ${turns.length} turns`
      )
    }
  }
  for (const s of ledger.filter((l) => l.kind === "sent" && l.ok === true)) {
    const users = (d.messages.get(s.session) ?? []).filter((m) => m.role === "user").map((m) => m.text)
    if (!users.includes(`turn ${s.turn}`)) answered.push(`${s.session}: acknowledged "turn ${s.turn}" is missing`)
  }

  const stuck: Array<string> = []
  if (!settled) stuck.push(`the sessions did not all settle within ${settleSeconds} s after the faults stopped`)
  for (const session of sessions) {
    const state = d.states.get(session)
    if (state === null || state === undefined) stuck.push(`${session}: never started`)
    else if (state.active_turn_id !== null) stuck.push(`${session}: turn ${state.active_turn_id} still active`)
    if ((d.queued.get(session) ?? 0) > 0) stuck.push(`${session}: ${d.queued.get(session)} queued messages`)
    const waiting = d.waitingForMessages?.get(session) ?? 0
    // one flow of control: exactly one waiting AwaitUserMessage once the session is idle, never two
    const idle = state !== null && state !== undefined && state.active_turn_id === null
    if (d.waitingForMessages !== undefined && (waiting > 1 || (waiting === 0 && idle))) {
      stuck.push(`${session}: ${waiting} AwaitUserMessage Steps waiting, not one`)
    }
    const active = d.activeSteps.get(session)
    if (active !== undefined) stuck.push(`${session}: Steps not settled: ${active.join(", ")}`)
  }

  return [
    { name: "non-idempotent tool calls executed at most once", violations: atMostOnce },
    { name: "every tool record final exactly once", violations: finalOnce },
    { name: "no duplicate event", violations: duplicates },
    { name: "no contradicting event", violations: contradicting },
    { name: "every message stored once, in sequence", violations: stored },
    { name: "every user message answered", violations: answered },
    { name: "no session stuck", violations: stuck }
  ]
}

const FINAL = new Set(["succeeded", "failed", "rejected", "cancelled", "outcome_unknown"])

/** For each fault, how long until every session whose turn was under way at that moment wrote its next event. */
const progressAfterFaults = (
  faults: ReadonlyArray<{ readonly kind: string; readonly at: number; readonly start: number }>,
  events: ReadonlyArray<EventRow>,
  unprogressed: Array<string>
) => {
  const bySession = new Map<string, Array<EventRow>>()
  for (const e of events) bySession.set(e.session, [...(bySession.get(e.session) ?? []), e])
  return faults.map((f) => {
    let worst: number | null = 0
    for (const [session, list] of bySession) {
      const before = list.filter((e) => e.at <= f.at)
      const last = before[before.length - 1]
      // a session between turns at the fault has nothing to resume
      if (last === undefined || last.type === "turn_completed") continue
      const next = list.find((e) => e.at > f.at)
      if (next === undefined) {
        worst = null
        unprogressed.push(`${f.kind} at +${f.at - f.start} ms: ${session} wrote nothing after it (last: ${last.type})`)
        break
      }
      worst = Math.max(worst, next.at - f.at)
    }
    return worst
  })
}

const percentile = (values: ReadonlyArray<number>, p: number) => {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

// --- the run --------------------------------------------------------------------------------------------------

export const runSoak = async (options: {
  readonly mode: "cluster" | "embedded"
  readonly sessions: number
  readonly minutes: number
  readonly settleSeconds: number
  readonly log: (line: string) => void
}): Promise<SoakResult> => {
  const { mode, log } = options
  const dir = mkdtempSync(join(tmpdir(), "das-soak-"))
  const ledger = join(dir, "ledger.jsonl")
  const database = mode === "cluster" ? await createTestDatabase() : undefined
  const target = database?.url ?? join(dir, "soak.db")
  const start = Date.now()
  const sendUntil = start + options.minutes * 60_000
  const args = [target, ledger, String(options.sessions), String(sendUntil)]
  const workerLog = (slot: number) => join(dir, `worker-${slot + 1}.log`)
  const slots: Array<Worker> = Array.from({ length: mode === "cluster" ? 3 : 1 }, (_, slot) =>
    startWorker(args, workerLog(slot))
  )
  const faults: Array<{ readonly kind: "kill" | "stop"; readonly at: number; readonly start: number }> = []
  let settledAt: number | null = null
  const firstKind = between(0, 2)
  try {
    log(`soak: ${mode}, ${options.sessions} sessions, ${options.minutes} min of faults, ${slots.length} worker(s)`)
    await sleep(3000)
    while (Date.now() < sendUntil) {
      await sleep(between(2000, 6000))
      if (Date.now() >= sendUntil) break
      const slot = between(0, slots.length)
      const worker = slots[slot]!
      // the kinds alternate (the first one at random), so even a short run has both
      if ((faults.length + firstKind) % 2 === 0) {
        faults.push({ kind: "kill", at: Date.now(), start })
        await killWorker(worker)
        log(`fault ${faults.length}: SIGKILL worker ${slot + 1}`)
        await sleep(between(1000, 2000))
        slots[slot] = startWorker(args, workerLog(slot))
      } else {
        faults.push({ kind: "stop", at: Date.now(), start })
        signal(worker, "SIGSTOP")
        worker.stopped = true
        const pause = mode === "cluster" ? between(5000, 7000) : between(1000, 4000)
        log(`fault ${faults.length}: SIGSTOP worker ${slot + 1} for ${pause} ms`)
        await sleep(pause)
        signal(worker, "SIGCONT")
        worker.stopped = false
      }
    }
    const faultsStopped = Date.now()
    log(`faults stopped after ${faults.length}; waiting for the sessions to settle`)
    const settleDeadline = faultsStopped + options.settleSeconds * 1000
    // settled when every worker's driver last said so: one driver's word is not enough, since another one
    // (paused by the last SIGSTOP) may still have a send in flight that starts a turn once it resumes
    const saysSettled = (w: Worker) =>
      w.lines
        .findLast((l) => l.startsWith("ALL_SETTLED ") || l.startsWith("UNSETTLED "))
        ?.startsWith("ALL_SETTLED ") === true
    while (Date.now() < settleDeadline && settledAt === null) {
      if (slots.every(saysSettled)) settledAt = Date.now()
      else await sleep(200)
    }
  } finally {
    for (const w of slots) await killWorker(w)
  }
  const faultsStoppedAt = Math.max(sendUntil, faults.at(-1)?.at ?? sendUntil)
  const sessions = sessionIds(options.sessions)
  const ledgerLines: Array<LedgerLine> = existsSync(ledger)
    ? readFileSync(ledger, "utf8")
        .split("\n")
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l))
    : []
  const sqlLayer =
    database === undefined
      ? NodeSqlite.layer({ filename: target })
      : Layer.orDie(PgClient.layer({ url: Redacted.make(database.url) }))
  try {
    const durable = await Effect.runPromise(
      readDurable(sessions).pipe(Effect.provide(sqlLayer)) as Effect.Effect<Durable>
    )
    const checks = runChecks(sessions, ledgerLines, durable, settledAt !== null, options.settleSeconds)
    const unprogressed: Array<string> = []
    const progress = progressAfterFaults(faults, durable.events, unprogressed)
    const measured = progress.filter((p): p is number => p !== null)
    const execs = ledgerLines.filter((l) => l.kind === "exec")
    const toolExecutions: Record<string, number> = {}
    for (const e of execs) toolExecutions[TOOL_EFFECTS[e.tool!]!] = (toolExecutions[TOOL_EFFECTS[e.tool!]!] ?? 0) + 1
    const turnsCompleted = durable.events.filter((e) => e.type === "turn_completed").length
    return {
      mode,
      sessions: options.sessions,
      minutes: options.minutes,
      faults: {
        injected: faults.length,
        kills: faults.filter((f) => f.kind === "kill").length,
        stops: faults.filter((f) => f.kind === "stop").length,
        survived: measured.length,
        unprogressed
      },
      turnsCompleted,
      checked: {
        toolCalls: durable.events.filter((e) => e.type === "tool_call_deferred").length,
        events: durable.events.length,
        userMessages: [...durable.messages.values()].reduce((n, m) => n + m.filter((x) => x.role === "user").length, 0)
      },
      toolExecutions,
      approvals: ledgerLines.filter((l) => l.kind === "approved" && l.ok === true).length,
      progressMs: { p50: percentile(measured, 50), max: measured.length === 0 ? null : Math.max(...measured) },
      settledAfterMs: settledAt === null ? null : settledAt - faultsStoppedAt,
      checks,
      violations: checks.reduce((n, c) => n + c.violations.length, 0)
    }
  } finally {
    if (process.env.SOAK_KEEP_DIR === "1") log(`kept ${dir}${database === undefined ? "" : ` and ${database.url}`}`)
    else {
      await database?.drop()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

const report = (r: SoakResult, log: (line: string) => void) => {
  log("")
  log(`soak ${r.mode}: ${r.sessions} sessions, ${r.minutes} min of faults`)
  log(
    `  faults injected ${r.faults.injected} (SIGKILL ${r.faults.kills}, SIGSTOP/SIGCONT ${r.faults.stops}), survived ${r.faults.survived}`
  )
  for (const u of r.faults.unprogressed) log(`       ${u}`)
  log(`  turns completed ${r.turnsCompleted}, approvals ${r.approvals}`)
  log(
    `  checked ${r.checked.toolCalls} tool calls, ${r.checked.events} events, ${r.checked.userMessages} user messages`
  )
  log(
    `  tool executions: ${Object.entries(r.toolExecutions)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`
  )
  log(`  time to progress after a fault: p50 ${r.progressMs.p50 ?? "-"} ms, max ${r.progressMs.max ?? "-"} ms`)
  log(`  settled ${r.settledAfterMs === null ? "never" : `${r.settledAfterMs} ms`} after the faults stopped`)
  for (const c of r.checks) {
    log(
      `  ${c.violations.length === 0 ? "PASS" : "FAIL"} ${c.name}${c.violations.length === 0 ? "" : ` (${c.violations.length})`}`
    )
    for (const v of c.violations.slice(0, 20)) log(`       ${v}`)
    if (c.violations.length > 20) log(`       ... ${c.violations.length - 20} more`)
  }
  log(`  violations: ${r.violations}`)
}

/** The checks again over a kept run (`SOAK_KEEP_DIR=1`): its ledger, and its database or SQLite file. */
const recheck = async (dir: string, databaseUrl: string | undefined, sessionCount: number) => {
  const ledger = join(dir, "ledger.jsonl")
  const lines: Array<LedgerLine> = readFileSync(ledger, "utf8")
    .split("\n")
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l))
  const sqlLayer =
    databaseUrl === undefined
      ? NodeSqlite.layer({ filename: join(dir, "soak.db") })
      : Layer.orDie(PgClient.layer({ url: Redacted.make(databaseUrl) }))
  const sessions = sessionIds(sessionCount)
  const durable = await Effect.runPromise(
    readDurable(sessions).pipe(Effect.provide(sqlLayer)) as Effect.Effect<Durable>
  )
  return runChecks(sessions, lines, durable, true, 0)
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      recheck: { type: "string" },
      database: { type: "string" },
      mode: { type: "string", default: "embedded" },
      sessions: { type: "string", default: "10" },
      minutes: { type: "string", default: "1" },
      "settle-seconds": { type: "string", default: "120" }
    }
  })
  const mode = values.mode
  const sessions = Number(values.sessions)
  const minutes = Number(values.minutes)
  const settleSeconds = Number(values["settle-seconds"])
  const log = (line: string) => void process.stdout.write(`${line}\n`)
  if (values.recheck !== undefined) {
    await recheck(values.recheck, values.database, sessions).then((checks) => {
      for (const c of checks) {
        log(`${c.violations.length === 0 ? "PASS" : "FAIL"} ${c.name} (${c.violations.length})`)
        for (const v of c.violations) log(`  ${v}`)
      }
      process.exit(checks.some((c) => c.violations.length > 0) ? 1 : 0)
    })
  }
  if ((mode !== "cluster" && mode !== "embedded") || !(sessions >= 1) || !(minutes > 0) || !(settleSeconds > 0)) {
    process.stderr.write(
      "usage: npm run soak -- --mode cluster|embedded --sessions N --minutes M [--settle-seconds S]\n" +
        "       npm run soak -- --recheck <kept dir> [--database <url>] --sessions N\n"
    )
    process.exit(2)
  }
  runSoak({ mode, sessions, minutes, settleSeconds, log }).then(
    (result) => {
      report(result, log)
      log(`SOAK_RESULT ${JSON.stringify(result)}`)
      process.exit(result.violations === 0 ? 0 : 1)
    },
    (error) => {
      process.stderr.write(`soak failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
      process.exit(3)
    }
  )
}
