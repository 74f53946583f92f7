// The cluster example in CI: its failover script on a fresh Postgres database (created and dropped here):
// three runner processes, 20 sessions, SIGKILL of the runner of a running model call, SIGTERM of the others.
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { nodeFlags } from "@durable-agent/engine/testing/ChildProcess"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { withTestDatabase } from "../../../packages/engine/test/support/postgres.ts"

const script = fileURLToPath(new URL("../src/failover.ts", import.meta.url))

interface Report {
  readonly sessions: number
  readonly completed: number
  readonly killedPid: number
  readonly survivorPids: ReadonlyArray<number>
  readonly moved: ReadonlyArray<{ readonly session: string; readonly from: number; readonly reply: string | null }>
  readonly survivorExitCodes: ReadonlyArray<number | null>
  readonly answeredBy: ReadonlyArray<string | null>
}

const runScript = (url: string) =>
  Effect.callback<{ code: number | null; stdout: string; stderr: string }>((resume) => {
    const child = spawn(process.execPath, [...nodeFlags, script], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, DATABASE_URL: url, SESSIONS: "20" }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString("utf8")
    })
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString("utf8")
    })
    child.once("exit", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("examples/cluster", () => {
  it.live(
    "three runners on Postgres, 20 sessions, one runner killed mid-turn: every session finishes on a survivor",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const run = yield* runScript(url)
        assert.strictEqual(run.code, 0, `${run.stdout}\n${run.stderr.slice(-4000)}`)
        const line = run.stdout.split("\n").find((l) => l.startsWith("FAILOVER "))
        assert.isDefined(line, run.stdout)
        const report: Report = JSON.parse(line!.slice("FAILOVER ".length))
        assert.strictEqual(report.sessions, 20)
        assert.strictEqual(report.completed, 20, run.stdout)
        // at least the session whose model call was running when its runner died moved to a survivor
        assert.isAtLeast(report.moved.length, 1)
        for (const m of report.moved) {
          assert.isTrue(
            report.survivorPids.some((pid) => m.reply === `runner ${pid} answered ${m.session}`),
            `${m.session} was answered by a surviving runner: ${m.reply}`
          )
        }
        for (const reply of report.answeredBy) assert.match(reply ?? "", /^runner \d+ answered /)
        assert.deepStrictEqual(report.survivorExitCodes, [0, 0], "SIGTERM drains the survivors and they exit 0")
      }),
    300_000
  )
})
