// Tracing across a worker crash, on both engine layers: the session worker (test/fixtures/session-worker.ts,
// with SPAN_LOG) finishes a turn, is killed with SIGKILL of its process group, and a second worker process
// serves the next activation. Its invoke_agent root links to the first worker's root, read from the
// AgentTraceContext the first worker committed; both processes append their spans to one file.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"
import { fileLines, killAt, spawnSessionWorker, workerResult } from "./support/child.ts"

const dir = mkdtempSync(join(tmpdir(), "das-tracing-kill-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let n = 0

interface LoggedSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | null
  readonly links: ReadonlyArray<string>
  readonly attributes: Record<string, unknown>
}

const suite = (engineName: string, database: Effect.Effect<string, unknown, Scope.Scope>) =>
  describe(`${engineName}: tracing across a SIGKILL`, () => {
    it.live(
      "a worker killed between activations: the restarted worker's root links to the killed worker's root",
      () =>
        Effect.gen(function* () {
          const db = yield* database
          n++
          const side = join(dir, `side-${n}.log`)
          const spans = join(dir, `spans-${n}.log`)
          const env = { SPAN_LOG: spans }
          const first = yield* spawnSessionWorker({ db, side, env }, "runserve", "kt", "hello", "1")
          // RESULT comes once turn 1 ended: the session waits in AwaitUserMessage, between two activations
          yield* killAt(first, "RESULT")
          const second = yield* spawnSessionWorker({ db, side, env }, "chat", "kt", "again", "2")
          const result = yield* workerResult(second)
          assert.strictEqual(result.snapshot.state?.turnCount, 2)

          const logged = fileLines(spans).map((l) => JSON.parse(l) as LoggedSpan)
          const roots = logged.filter((s) => s.name.startsWith("invoke_agent"))
          assert.deepStrictEqual(
            roots.map((r) => [r.name, r.attributes["dex.step.type"], r.attributes["dex.agent.turn.id"]]),
            [
              ["invoke_agent process-agent", "StartAgentSession", "turn-1"],
              ["invoke_agent process-agent", "AwaitUserMessage", "turn-2"]
            ],
            "one root per activation, none duplicated by the restart"
          )
          const [root1, root2] = roots as [LoggedSpan, LoggedSpan]
          assert.deepStrictEqual(root1.links, [])
          assert.deepStrictEqual(root2.links, [root1.spanId], "the link chain survives the kill")
          assert.notStrictEqual(root2.traceId, root1.traceId, "each activation is its own trace")
          const chats = logged.filter((s) => s.name.startsWith("chat"))
          assert.deepStrictEqual(
            chats.map((c) => [c.attributes["dex.agent.turn.id"], c.parentSpanId, c.traceId]),
            [
              ["turn-1", root1.spanId, root1.traceId],
              ["turn-2", root2.spanId, root2.traceId]
            ]
          )
          for (const span of logged) assert.strictEqual(span.attributes["dex.flow.id"], "kt")
        }).pipe(Effect.scoped),
      120_000
    )
  })

suite(
  "embedded",
  Effect.sync(() => join(dir, `kill-${++n}.db`))
)
suite("cluster", withTestDatabase)
