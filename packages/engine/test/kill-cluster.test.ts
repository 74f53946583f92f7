import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { Inspect } from "../src/index.ts"
import { sideEffects } from "./fixtures/kill-flow.ts"
import { spawnWorker } from "./support/child.ts"
import { freePort } from "./support/ports.ts"
import { withTestDatabase } from "./support/postgres.ts"

const dir = mkdtempSync(join(tmpdir(), "das-failover-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("cluster engine: SIGKILL of the runner that owns a Flow's Step", () => {
  it.live(
    "the surviving runner finishes the Flow",
    () =>
      Effect.gen(function* () {
        const url = yield* withTestDatabase
        const side = join(dir, "side.log")
        const [portA, portB] = [yield* Effect.promise(freePort), yield* Effect.promise(freePort)]
        const a = yield* spawnWorker("cluster", url, String(portA), "serve", "-")
        const b = yield* spawnWorker("cluster", url, String(portB), "serve", "-")
        yield* a.waitFor("READY")
        yield* b.waitFor("READY")
        const starter = yield* spawnWorker(
          "cluster",
          url,
          String(yield* Effect.promise(freePort)),
          "start",
          "f",
          "failover",
          side
        )
        yield* starter.waitFor("STARTED", 60_000)
        // whichever runner got the Step prints RUNNING; kill that one
        const running = yield* Effect.raceFirst(
          Effect.map(a.waitFor("RUNNING", 60_000), () => a),
          Effect.raceFirst(
            Effect.map(b.waitFor("RUNNING", 60_000), () => b),
            Effect.map(starter.waitFor("RUNNING", 60_000), () => starter)
          )
        )
        const killedAt = Date.now()
        yield* running.kill()
        const flow = yield* Inspect.describeFlow("f").pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (d) => d.status !== "running" }),
          Effect.timeout("90 seconds"),
          Effect.provide(PgClient.layer({ url: Redacted.make(url) }))
        )
        const failoverMs = Date.now() - killedAt
        assert.strictEqual(flow.status, "completed")
        assert.deepStrictEqual(flow.output, { attempt: 2, channel: [] })
        const runs = sideEffects(side).filter((l) => l.startsWith("run "))
        assert.strictEqual(runs.length, 2, runs.join("\n"))
        assert.include(runs[0]!, `pid ${running.pid}`)
        assert.notInclude(runs[1]!, `pid ${running.pid}`)
        console.log(`failover: the Flow completed ${failoverMs} ms after SIGKILL of runner ${running.pid}`)
      }),
    180_000
  )
})
