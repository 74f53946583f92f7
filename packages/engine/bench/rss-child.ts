/**
 * One memory measurement in a clean process:
 *
 *   node --expose-gc rss-child.ts <embedded|cluster> <flows> <sqlite file | postgres url> [idle ms]
 *
 * Starts an engine with a worker for the benchmark Flows, starts `<flows>` Flows that wait on a channel,
 * polls until all of them are waiting, collects garbage (when `gc` is exposed) and prints
 * `MEMORY waiting <json>`. With an idle time it then sleeps (letting idle entities expire), collects
 * again and prints `MEMORY idle <json>`. Exits 0 on success, 1 with `ERROR <message>` otherwise.
 */
import { setTimeout as sleep } from "node:timers/promises"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Worker } from "../src/index.ts"
import { allFlows } from "./flows.ts"
import { engineFor, type Mode } from "./targets.ts"
import { startWaitingFlows } from "./workloads.ts"

export interface MemoryReading {
  readonly flows: number
  readonly rss: number
  readonly heapUsed: number
  readonly external: number
  readonly gcExposed: boolean
  /** Since the engine layer started building (ms). */
  readonly elapsedMs: number
}

const [mode, countText, location, idleText] = process.argv.slice(2)
if ((mode !== "embedded" && mode !== "cluster") || countText === undefined || location === undefined) {
  process.stdout.write("ERROR usage: rss-child.ts <embedded|cluster> <flows> <location> [idle ms]\n")
  process.exit(1)
}
const count = Number(countText)
const idleMs = Number(idleText ?? 0)
const t0 = performance.now()

const read = async (): Promise<MemoryReading> => {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.()
    await sleep(50)
  }
  const usage = process.memoryUsage()
  return {
    flows: count,
    rss: usage.rss,
    heapUsed: usage.heapUsed,
    external: usage.external,
    gcExposed: typeof globalThis.gc === "function",
    elapsedMs: performance.now() - t0
  }
}

const program = Effect.gen(function* () {
  yield* startWaitingFlows(count, "mem")
  process.stdout.write(`MEMORY waiting ${JSON.stringify(yield* Effect.promise(read))}\n`)
  if (idleMs > 0) {
    yield* Effect.promise(() => sleep(idleMs))
    process.stdout.write(`MEMORY idle ${JSON.stringify(yield* Effect.promise(read))}\n`)
  }
})

try {
  const engine = await engineFor(mode as Mode, location)
  await Effect.runPromise(
    program.pipe(
      Effect.provide(Worker.layer(...allFlows).pipe(Layer.provideMerge(engine))),
      Effect.scoped
    ) as Effect.Effect<void, unknown>
  )
  process.exit(0)
} catch (error) {
  process.stdout.write(`ERROR ${String(error).split("\n").join(" | ")}\n`)
  process.exit(1)
}
