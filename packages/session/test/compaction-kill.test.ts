// SIGKILL during CompactContext (spec: CompactContext, "A crash reruns only the summary call"): the compacting
// worker (test/fixtures/compaction-worker.ts) runs as a child process, its first summary call logs itself and
// hangs, the parent kills the process group, and a second worker process finishes the session: on the same
// SQLite file (embedded) or as a new runner on the same Postgres database (cluster). RunModel's decision committed
// before the summary call, so the second worker's first model call is the summary call again.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { Inspect } from "@durable-agent/engine"
import { spawnNode } from "@durable-agent/engine/testing/ChildProcess"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"
import type { Wire } from "../src/index.ts"
import { fileLines } from "./support/child.ts"

const workerPath = fileURLToPath(new URL("./fixtures/compaction-worker.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "das-compaction-kill-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0

type Database = Effect.Effect<string, unknown, Scope.Scope>
const embedded: Database = Effect.sync(() => join(dir, `compaction-${++n}.db`))
const cluster: Database = withTestDatabase

interface ModelCall {
  readonly pid: number
  readonly kind: "summary" | "model"
  readonly newest: number
}

interface Result {
  readonly snapshot: Wire.AgentSnapshot
  readonly steps: ReadonlyArray<Inspect.StepExecution>
  readonly events: ReadonlyArray<{
    readonly type: string
    readonly stepExecutionId: string
    readonly attempt: number
    readonly payload: Record<string, unknown>
  }>
}

const TURNS = 16

const killSuite = (name: string, database: Database) =>
  describe(`SIGKILL during CompactContext (${name})`, () => {
    it.live(
      "the restarted worker reruns only the summary call",
      () =>
        Effect.gen(function* () {
          const db = yield* database
          const log = join(dir, `models-${++n}.log`)
          const first = yield* spawnNode(workerPath, [db, log, "run", "s-kill", String(TURNS)], { HANG_SUMMARY: "1" })
          yield* first.waitFor("SUMMARY_STARTED", 120_000)
          const before = fileLines(log).map((l) => JSON.parse(l) as ModelCall)
          // the summary call was made (and logged) before the marker
          assert.strictEqual(before.at(-1)?.kind, "summary")
          yield* first.kill()
          const second = yield* spawnNode(workerPath, [db, log, "await", "s-kill", String(TURNS)])
          const result: Result = JSON.parse(yield* second.waitFor("RESULT", 120_000))
          const calls = fileLines(log).map((l) => JSON.parse(l) as ModelCall)
          const after = calls.filter((c) => c.pid !== first.pid)
          // the first call of the restarted worker is the summary call again, for the same messages
          assert.strictEqual(after[0]?.kind, "summary")
          assert.strictEqual(after[0]?.newest, before.at(-1)?.newest)
          // no model call of the turn ran again: the killed worker's model calls plus the new ones are one per need
          const modelCalls = calls.filter((c) => c.kind === "model")
          assert.strictEqual(new Set(modelCalls.map((c) => `${c.newest}`)).size, modelCalls.length)
          // CompactContext: attempt 1 crashed, attempt 2 wrote the summary
          const compactions = result.steps.filter((s) => s.stepType === "CompactContext")
          assert.isAtLeast(compactions.length, 1)
          const killed = compactions[0]!
          assert.isAtLeast(killed.attempts.length, 2)
          const started = result.events.filter(
            (e) => e.type === "compaction_started" && e.stepExecutionId === killed.stepExecutionId
          )
          // the attempt that wrote the summary wrote compaction_started too (a crashed attempt's may be kept or not)
          const attempts = killed.attempts.map((a) => a.attempt)
          assert.include(
            started.map((e) => e.attempt),
            attempts.at(-1)
          )
          for (const e of started) assert.include(attempts, e.attempt)
          const finished = result.events.filter((e) => e.type === "compaction_finished")
          assert.deepStrictEqual(finished[0]?.payload, {
            generation: 1,
            throughSequence: started.at(-1)!.payload.throughSequence
          })
          assert.strictEqual(finished[0]?.stepExecutionId, killed.stepExecutionId)
          // the session went on: every turn answered, the summary stored
          assert.strictEqual(result.snapshot.state?.turnCount, TURNS)
          assert.isNull(result.snapshot.state?.lastTurnError)
          assert.strictEqual(result.snapshot.contextSummary?.generation, finished.length)
        }).pipe(Effect.scoped),
      300_000
    )
  })

killSuite("embedded", embedded)
killSuite("cluster", cluster)
