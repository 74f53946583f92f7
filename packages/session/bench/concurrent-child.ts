/**
 * Many sessions running turns at once, in a clean worker process:
 *
 *   node --expose-gc concurrent-child.ts <embedded|cluster> <sqlite file | postgres url> <sessions> <turns> [engine|engine-announced]
 *
 * Starts an engine with the benchmark session worker, then `<sessions>` sessions at once, each with `<turns>`
 * user messages (the first as the initial message, the rest queued at once), and checks every 50 ms until every
 * session ended its turns. With `engine`, the same with the bare engine Flow of the turn's shape (engine-turn.ts)
 * in place of each session: the baseline of the session figure; with `engine-announced`, the bare Flow whose tool
 * Steps write a durable heartbeat with a stream message first (the one write the contract adds to a tool Step;
 * not a baseline). It samples the process RSS every 50 ms and prints
 * `RESULT <json>`: turns per second, the turn cycles under load, and RSS before, at peak and after (with garbage
 * collected when `gc` is exposed).
 *
 * Both sides see the end of a turn the same way: a counter in memory bumped by the turn's last Step as it runs
 * (the bare Flow's second Model Step, `engineTurnsEnded`; the benchmark model's answer call in the session's
 * second RunModel, `turnsEnded`). The session side used to read every pending session's `AgentState` from the
 * engine every 50 ms (2,000 reads/s at 100 sessions, on the CPU the turns run on) where the bare Flow side read
 * the counter, which charged the session figure with the poll's cost.
 */
import { setTimeout as sleep } from "node:timers/promises"
import { Client, Worker } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import { AgentSessionClient } from "../src/index.ts"
import { cycles, engineFor, type Mode, type TurnStarts, type TurnsEnded, userText, workerLayer } from "./agent.ts"
import { AnnouncedTurnShapeFlow, engineTurnStarts, engineTurnsEnded, Messages, TurnShapeFlow } from "./engine-turn.ts"

export interface ConcurrentResult {
  readonly sessions: number
  readonly turnsPerSession: number
  readonly turns: number
  /** From the first start to the poll that saw the last session done (ms). */
  readonly wallMs: number
  readonly turnsPerSecond: number
  /** The process's CPU time (user + system, every thread) from the first start to the end, per turn (ms). */
  readonly cpuMsPerTurn: number
  /** Turn cycles of all sessions under load (ms), the first of each session skipped. */
  readonly cycles: ReadonlyArray<number>
  readonly rssBefore: number
  readonly rssPeak: number
  readonly rssAfter: number
  readonly heapAfter: number
  readonly gcExposed: boolean
}

const [mode, location, sessionsText, turnsText, kind] = process.argv.slice(2)
if (
  (mode !== "embedded" && mode !== "cluster") ||
  location === undefined ||
  (kind !== undefined && kind !== "session" && kind !== "engine" && kind !== "engine-announced")
) {
  process.stdout.write(
    "ERROR usage: concurrent-child.ts <embedded|cluster> <location> <sessions> <turns> [session|engine|engine-announced]\n"
  )
  process.exit(1)
}
const sessions = Number(sessionsText ?? 100)
const bareFlow = kind === "engine-announced" ? AnnouncedTurnShapeFlow : kind === "engine" ? TurnShapeFlow : undefined
const turns = Number(turnsText ?? 5)

const collect = async () => {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.()
    await sleep(50)
  }
  return process.memoryUsage()
}

const starts: TurnStarts = new Map()
const turnsEnded: TurnsEnded = new Map()

/** Starts every session, each with its turns queued, and checks the in-memory count until each ended them. */
const sessionTurns = (ids: ReadonlyArray<string>, t0: number) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    yield* Effect.forEach(
      ids,
      (id) =>
        Effect.gen(function* () {
          yield* client.startSession(id, { initialMessage: userText(id, 1) })
          for (let t = 2; t <= turns; t++) yield* client.sendUserMessage(id, userText(id, t))
        }),
      { concurrency: "unbounded", discard: true }
    )
    while (ids.some((id) => (turnsEnded.get(id) ?? 0) < turns)) {
      yield* Effect.sleep("50 millis")
      if (performance.now() - t0 > 240_000) return yield* Effect.die(new Error("sessions unfinished"))
    }
  })

/** The same with the bare engine Flow of the turn's shape: its turns end in memory, checked the same way. */
const engineFlowTurns = (flow: typeof TurnShapeFlow) => (ids: ReadonlyArray<string>, t0: number) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    yield* Effect.forEach(
      ids,
      (id) =>
        Effect.gen(function* () {
          yield* client.startFlow(flow, id, null)
          for (let t = 1; t <= turns; t++) yield* client.publish(id, Messages, `turn ${t}`)
        }),
      { concurrency: "unbounded", discard: true }
    )
    while (ids.some((id) => (engineTurnsEnded.get(id) ?? 0) < turns)) {
      yield* Effect.sleep("50 millis")
      if (performance.now() - t0 > 240_000) return yield* Effect.die(new Error("Flows unfinished"))
    }
  })

const program = <E, R>(work: (ids: ReadonlyArray<string>, t0: number) => Effect.Effect<void, E, R>) =>
  Effect.gen(function* () {
    const before = yield* Effect.promise(collect)
    let peak = before.rss
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage.rss())
    }, 50)
    const ids = Array.from({ length: sessions }, (_, i) => `c-${i}`)
    const t0 = performance.now()
    const cpu0 = process.cpuUsage()
    yield* work(ids, t0)
    const wallMs = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)
    clearInterval(sampler)
    peak = Math.max(peak, process.memoryUsage.rss())
    const after = yield* Effect.promise(collect)
    return {
      sessions,
      turnsPerSession: turns,
      turns: sessions * turns,
      wallMs,
      turnsPerSecond: (sessions * turns) / (wallMs / 1000),
      cpuMsPerTurn: (cpu.user + cpu.system) / 1000 / (sessions * turns),
      cycles: cycles(bareFlow !== undefined ? engineTurnStarts : starts, 1),
      rssBefore: before.rss,
      rssPeak: peak,
      rssAfter: after.rss,
      heapAfter: after.heapUsed,
      gcExposed: typeof globalThis.gc === "function"
    } satisfies ConcurrentResult
  })

try {
  const engine = await engineFor(mode as Mode, location)
  const measured =
    bareFlow !== undefined
      ? program(engineFlowTurns(bareFlow)).pipe(Effect.provide(Worker.layer(bareFlow).pipe(Layer.provideMerge(engine))))
      : program(sessionTurns).pipe(Effect.provide(workerLayer(starts, engine, Layer.empty, turnsEnded)))
  const result = await Effect.runPromise(
    (measured as Effect.Effect<ConcurrentResult, unknown>).pipe(
      Effect.scoped,
      Effect.provideService(References.MinimumLogLevel, "Warn")
    ) as Effect.Effect<ConcurrentResult, unknown>
  )
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
  process.exit(0)
} catch (error) {
  process.stdout.write(`ERROR ${String(error).split("\n").join(" | ")}\n`)
  process.exit(1)
}
