// With tracing off nothing OpenTelemetry is loaded (spec "Tracing": without it, or with tracing disabled, a core
// never loads it): a session worker process (test/fixtures/session-worker.ts) runs a turn with a Node module
// hook preloaded (test/fixtures/module-log.ts) that logs every module the process resolves, required or
// imported. Without SPAN_LOG (no Tracer) the log holds the session and the engine and no OpenTelemetry package;
// the same worker with SPAN_LOG (the Tracer on the OpenTelemetry SDK) logs them, so the hook sees them.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { fileLines, spawnSessionWorker, workerResult } from "./support/child.ts"

const dir = mkdtempSync(join(tmpdir(), "das-tracing-off-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const preload = fileURLToPath(new URL("./fixtures/module-log.ts", import.meta.url))

const OPENTELEMETRY = /\/node_modules\/(@opentelemetry|@effect\/opentelemetry)\//

/** The modules a worker process resolved while it ran one turn of a session; `env` added to its environment. */
const modulesOfTurn = (name: string, env: Readonly<Record<string, string>>) =>
  Effect.gen(function* () {
    const log = join(dir, `${name}.modules`)
    const child = yield* spawnSessionWorker(
      {
        db: join(dir, `${name}.db`),
        side: join(dir, `${name}.side`),
        env: {
          ...env,
          MODULE_LOG: log,
          NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import=${preload}`.trim()
        }
      },
      "run",
      name,
      "hello",
      "1"
    )
    const result = yield* workerResult(child)
    assert.strictEqual(result.snapshot.state?.turnCount, 1)
    // "run" exits after RESULT; the log is written on exit
    yield* Effect.promise(() => child.exited)
    return fileLines(log)
  })

describe("tracing off", () => {
  it.live(
    "a worker without a Tracer loads no OpenTelemetry module; with one it does",
    () =>
      Effect.gen(function* () {
        // the two workers run at once (own files each)
        const [off, on] = yield* Effect.all(
          [modulesOfTurn("off", {}), modulesOfTurn("on", { SPAN_LOG: join(dir, "on.spans") })],
          { concurrency: 2 }
        )
        assert.isTrue(
          off.some((url) => url.includes("/packages/session/src/AgentSessionFlow.ts")),
          "the hook saw the session's own modules"
        )
        assert.isTrue(
          off.some((url) => url.includes("/node_modules/effect/")),
          "and effect's"
        )
        assert.deepStrictEqual(
          off.filter((url) => OPENTELEMETRY.test(url) || url.includes("/packages/session/src/OpenTelemetry.ts")),
          [],
          "no OpenTelemetry module without tracing"
        )
        assert.isTrue(
          on.some((url) => url.includes("/node_modules/@opentelemetry/sdk-trace-base/")),
          "with tracing the hook sees OpenTelemetry"
        )
        assert.isTrue(on.some((url) => url.includes("/node_modules/@effect/opentelemetry/")))
        assert.isTrue(fileLines(join(dir, "on.spans")).length > 0, "and the traced worker exported spans")
      }).pipe(Effect.scoped),
    120_000
  )
})
