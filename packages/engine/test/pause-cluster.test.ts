// One owner per Flow when a runner pauses (issue 28): each of the five sequences on real runner processes over
// Postgres. A runner stops at a named point (the engine's pause hook, src/internal/faults.ts, or a marker of the
// fixture's Step), the test SIGSTOPs it, lets its shard lock expire and another runner take the Flow over, then
// SIGCONTs it and checks the invariant. Tool runs are counted in a ledger file the Steps write before anything
// else; stream messages carry the writer's pid.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { SqlClient } from "effect/sql"
import { Inspect } from "../src/index.ts"
import { type Child, fileLines, spawnNode } from "../src/testing/ChildProcess.ts"
import { freePort } from "./support/ports.ts"
import { withTestDatabase } from "./support/postgres.ts"

const workerPath = fileURLToPath(new URL("./fixtures/pause-worker.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "das-pause-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0
const scratch = () => {
  n++
  return { ledger: join(dir, `ledger-${n}.log`), release: join(dir, `release-${n}`) }
}

/** A runner process of the pause fixture; `pauseAt` arms the engine's pause hook. */
const runner = (url: string, args: ReadonlyArray<string>, pause?: { readonly at: string; readonly release: string }) =>
  Effect.gen(function* () {
    const port = yield* Effect.promise(freePort)
    const env: Record<string, string> =
      pause === undefined ? {} : { DURABLE_ENGINE_PAUSE_AT: pause.at, DURABLE_ENGINE_PAUSE_RELEASE: pause.release }
    const child = yield* spawnNode(workerPath, [url, String(port), ...args], env)
    yield* child.waitFor("READY", 60_000)
    return child
  })

const db = (url: string) => PgClient.layer({ url: Redacted.make(url) })

const query = <A>(url: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.gen(function* () {
    return yield* f(yield* SqlClient.SqlClient)
  }).pipe(Effect.provide(db(url)))

/** Polls `check` until it holds (a generous bound: a test that passes does not wait for it). */
const eventually = <A>(what: string, effect: Effect.Effect<A, unknown>, until: (a: A) => boolean, seconds = 90) =>
  effect.pipe(
    Effect.repeat({ schedule: Schedule.spaced("100 millis"), until }),
    Effect.timeout(`${seconds} seconds`),
    Effect.mapError((e) => new Error(`${what}: ${String(e)}`))
  )

const closed = (url: string, flowId: string) =>
  eventually(
    `Flow ${flowId} closes`,
    Inspect.describeFlow(flowId).pipe(Effect.provide(db(url))),
    (d) => d.status !== "running"
  )

/**
 * A user's request to the Flow from a client-only process (as an RPC of a UI would arrive), so the takeover does
 * not wait for the engine's own recovery.
 */
const poke = (url: string, flowId: string) =>
  Effect.gen(function* () {
    const child = yield* spawnNode(workerPath, [url, "-", "poke", flowId])
    yield* child.waitFor("POKED", 120_000)
  })

/** Pauses the process (SIGSTOP). */
const stop = (child: Child) => Effect.sync(() => process.kill(child.pid, "SIGSTOP"))

/** Lets the paused process go on: its release file first, then SIGCONT. */
const resume = (child: Child, release?: string) =>
  Effect.sync(() => {
    if (release !== undefined) writeFileSync(release, "")
    process.kill(child.pid, "SIGCONT")
  })

/** Waits (up to 30 s) until the resumed runner logs that a write of it was refused or failed. */
const noticed = (child: Child) =>
  Effect.sync(() => child.lines().some((l) => /refused|commit failed/.test(l))).pipe(
    Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (seen) => seen }),
    Effect.timeoutOption("30 seconds")
  )

interface EventRow {
  readonly flow_id: string
  readonly step_execution_id: string
  readonly attempt: number
  readonly kind: string
  readonly pid: number
}

const events = (url: string) =>
  query(url, (sql) =>
    Effect.map(
      sql<{ flow_id: string; step_execution_id: string; attempt: unknown; value: string }>`SELECT flow_id,
        step_execution_id, attempt, value FROM dex_stream ORDER BY seq`,
      (rows) =>
        rows.map((r): EventRow => {
          const v = JSON.parse(r.value) as { kind: string; pid: number }
          return {
            flow_id: r.flow_id,
            step_execution_id: r.step_execution_id,
            attempt: Number(r.attempt),
            kind: v.kind,
            pid: v.pid
          }
        })
    )
  )

describe("cluster engine: a runner paused past its shard lock (issue 28)", () => {
  it.live(
    "1. paused before a single-attempt tool's heartbeat: the tool runs once, on the new owner; the stale runner writes nothing",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const { ledger, release } = scratch()
        const a = yield* runner(url, ["start", "t", "tool", ledger], { at: "heartbeat", release })
        yield* a.waitFor("PAUSED heartbeat", 60_000)
        yield* stop(a)
        const b = yield* runner(url, ["serve"])
        yield* poke(url, "t")
        const flow = yield* closed(url, "t")
        yield* resume(a, release)
        yield* noticed(a)
        const tools = fileLines(ledger).filter((l) => l.startsWith("tool "))
        assert.deepStrictEqual(tools, [`tool attempt 1 pid ${b.pid}`], fileLines(ledger).join("\n"))
        assert.strictEqual(flow.status, "completed")
        const finished = (yield* events(url)).filter((e) => e.kind === "tool_call_finished")
        assert.deepStrictEqual(
          finished.map((e) => e.pid),
          [b.pid]
        )
        // who did what: the attempt, the history and the Flow's owner name the runner that ran it
        const steps = yield* Inspect.stepExecutions("t").pipe(Effect.provide(db(url)))
        const tool = steps.find((s) => s.stepType === "Tool")!
        assert.strictEqual(tool.attempts.length, 1)
        assert.include(tool.attempts[0]!.runner ?? "", `pid ${b.pid}`)
        const owner = yield* Inspect.flowOwner("t").pipe(Effect.provide(db(url)))
        assert.include(owner.runner, `pid ${b.pid}`)
        assert.isAbove(owner.epoch, 1)
        const history = yield* Inspect.history("t").pipe(Effect.provide(db(url)))
        const completed = history.find((e) => e.kind === "StepCompleted" && e.stepExecutionId === tool.stepExecutionId)
        assert.include(completed?.runner ?? "", `pid ${b.pid}`)
        const text = yield* Inspect.renderHistory("t").pipe(Effect.provide(db(url)))
        assert.include(text, `Owner: ${owner.runner}`)
      }),
    240_000
  )

  it.live(
    "1b. paused just after the heartbeat: the new owner records the outcome as unknown and no event says the tool finished",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const { ledger } = scratch()
        const a = yield* runner(url, ["start", "g", "tool-after-heartbeat", ledger])
        yield* a.waitFor("GATED", 60_000)
        yield* stop(a)
        yield* runner(url, ["serve"])
        const flow = yield* closed(url, "g")
        assert.deepStrictEqual(flow.output, { recovered: "WorkerLost" })
        yield* resume(a, `${ledger}.go`)
        yield* noticed(a)
        // the paused runner was past the gate: the tool ran there, once, and nowhere else
        const tools = fileLines(ledger).filter((l) => l.startsWith("tool "))
        assert.isAtMost(tools.length, 1, fileLines(ledger).join("\n"))
        // the settled stream agrees with the record: no tool_call_finished for an attempt recorded WorkerLost
        const finished = (yield* events(url)).filter((e) => e.kind === "tool_call_finished")
        assert.deepStrictEqual(finished, [])
      }),
    240_000
  )

  it.live(
    "2. paused during a model call: the new owner runs the attempt again; no event of that attempt is written twice",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const { ledger, release } = scratch()
        const a = yield* runner(url, ["start", "m", "events", ledger], { at: "emit", release })
        yield* a.waitFor("PAUSED emit", 60_000)
        yield* stop(a)
        const b = yield* runner(url, ["serve"])
        yield* poke(url, "m")
        const flow = yield* closed(url, "m")
        assert.strictEqual(flow.status, "completed")
        yield* resume(a, release)
        yield* noticed(a)
        const all = yield* events(url)
        const keys = all.map((e) => `${e.step_execution_id}#${e.attempt} ${e.kind}`)
        assert.deepStrictEqual(keys, [...new Set(keys)], `duplicate events:\n${keys.join("\n")}`)
        assert.deepStrictEqual(
          all.filter((e) => e.pid === a.pid),
          []
        )
        assert.deepStrictEqual(
          all.map((e) => e.kind),
          ["delta 1", "delta 2", "turn_completed"]
        )
        assert.isTrue(all.every((e) => e.pid === b.pid))
      }),
    240_000
  )

  it.live(
    "3. paused inside a transition's transaction before COMMIT: the transaction ends with the lease; the stale runner commits nothing after the move",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const { ledger, release } = scratch()
        const a = yield* runner(url, ["start", "c", "commit", ledger], { at: "commit", release })
        yield* a.waitFor("PAUSED commit", 60_000)
        yield* stop(a)
        const b = yield* runner(url, ["serve"])
        // the new owner finishes the Flow, or (without the fix) waits on the paused transaction's row lock
        yield* eventually(
          "the Flow closes or the new owner blocks on the paused transaction",
          query(url, (sql) =>
            Effect.map(
              sql<{ closed: unknown; blocked: unknown }>`SELECT
                (SELECT COUNT(*) FROM dex_flows WHERE flow_id = 'c' AND status <> 'running') AS closed,
                (SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock') AS blocked`,
              (rows) => Number(rows[0]!.closed) + Number(rows[0]!.blocked)
            )
          ),
          (x) => x > 0
        )
        yield* resume(a, release)
        yield* noticed(a)
        const flow = yield* closed(url, "c")
        assert.strictEqual(flow.status, "completed")
        const lines = fileLines(ledger)
        // every Step after the paused commit ran on the new owner, once each
        assert.deepStrictEqual(
          lines.filter((l) => l.startsWith("second ")),
          [`second attempt 1 pid ${b.pid}`],
          lines.join("\n")
        )
        assert.deepStrictEqual(
          lines.filter((l) => l.includes(`pid ${a.pid}`)),
          [],
          lines.join("\n")
        )
        assert.deepStrictEqual(flow.output, { pid: b.pid })
        const history = yield* Inspect.history("c").pipe(Effect.provide(db(url)))
        assert.deepStrictEqual(
          history.filter((e) => e.runner?.includes(`pid ${a.pid}`) && e.kind === "StepCompleted"),
          []
        )
      }),
    240_000
  )

  it.live(
    "4. a stale owner's refused commit does not release the keep-alive: when the new owner dies too, the Flow is recovered",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const { ledger } = scratch()
        const a = yield* runner(url, ["start", "s", "stuck", ledger])
        yield* a.waitFor("HOLDING 1", 60_000)
        yield* stop(a)
        const b = yield* runner(url, ["serve"])
        // the new owner failed attempt 1 WorkerLost (it had output) and runs attempt 2, which hangs
        yield* b.waitFor("HOLDING 2", 90_000)
        // the paused runner resumes, its attempt 1 finishes and its commit is refused
        yield* resume(a, `${ledger}.release`)
        yield* noticed(a)
        // the current owner dies: the Flow must come back on the remaining runner, not stay `running`
        yield* b.kill()
        const flow = yield* closed(url, "s")
        assert.strictEqual(flow.status, "completed")
        assert.deepStrictEqual(flow.output, { attempt: 3, pid: a.pid })
        const holds = fileLines(ledger).filter((l) => l.startsWith("hold "))
        assert.deepStrictEqual(holds, [
          `hold attempt 1 pid ${a.pid}`,
          `hold attempt 2 pid ${b.pid}`,
          `hold attempt 3 pid ${a.pid}`
        ])
      }),
    240_000
  )

  it.live(
    "5. ten Flows write their first stream messages at once on a fresh database: none is lost, none counted twice",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const burst = mkdtempSync(join(dir, "burst-"))
        const r = yield* runner(url, ["start-many", "b", "10", burst])
        yield* r.waitFor("STARTED", 60_000)
        yield* eventually(
          "ten Flows close",
          Inspect.listFlows().pipe(Effect.provide(db(url))),
          (list) => list.length === 10 && list.every((f) => f.status !== "running")
        )
        const all = yield* events(url)
        for (let i = 0; i < 10; i++) {
          assert.deepStrictEqual(
            all.filter((e) => e.flow_id === `b-${i}`).map((e) => e.kind),
            ["event 1", "event 2", "event 3", "event 4", "event 5"],
            `b-${i}; the runner logged: ${r
              .lines()
              .filter((l) => l.includes("WARN") || l.includes("dropped"))
              .join("\n")}`
          )
        }
        // the budget is kept by the runner in memory (no shared row); the stored messages are the fifty written
        const stored = yield* query(
          url,
          (sql) => sql<{ n: unknown; bytes: unknown }>`SELECT COUNT(*) AS n, SUM(bytes) AS bytes FROM dex_stream`
        )
        assert.strictEqual(Number(stored[0]!.n), 50)
        assert.isBelow(Number(stored[0]!.bytes), 10 * 1024 * 1024)
      }),
    240_000
  )
})
