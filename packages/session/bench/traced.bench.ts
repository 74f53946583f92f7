/**
 * Tracing's cost alone (part 6 of session.bench.ts, on its own for quick runs): on the embedded engine, rounds of
 * a few sessions with tracing off, then as many with it on (the OpenTelemetry SDK with an in-memory span
 * exporter), interleaved so load drifts hit both; the p50 turn cycle of each and their ratio (target <= 1.15x).
 * A turn is bench/agent.ts's: RunModel -> 3 parallel read tools -> ResumeTurn -> RunModel.
 *
 * `node --conditions=@durable-agent/source packages/session/bench/traced.bench.ts` (env `TRACED_ROUNDS`, default
 * 6; `TRACED_SESSIONS`, default 3 per round). Prints the figures and the load average; writes no file.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@durable-agent/engine"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as References from "effect/References"
import { AgentSessionClient, Persistence } from "../src/index.ts"
import * as OpenTelemetry from "../src/OpenTelemetry.ts"
import { cycles, engineFor, type TurnStarts, userText, workerLayer } from "./agent.ts"

const ROUNDS = Number(process.env.TRACED_ROUNDS ?? 6)
const SESSIONS = Number(process.env.TRACED_SESSIONS ?? 3)
const TURNS = 10
const SKIP = 2

const sessions = (prefix: string, count: number) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const engine = yield* Client.Client
    for (let s = 0; s < count; s++) {
      const id = `${prefix}-${s}`
      yield* client.startSession(id, { initialMessage: userText(id, 1) })
      for (let t = 2; t <= TURNS; t++) yield* client.sendUserMessage(id, userText(id, t))
      while (true) {
        const state = yield* engine.getAttribute(id, Persistence.AgentState)
        if (state._tag === "Some" && state.value.turnCount >= TURNS && state.value.activeTurnId === null) break
        yield* Effect.sleep("10 millis")
      }
    }
  })

const run = async (services: Layer.Layer<never> | undefined): Promise<Array<number>> => {
  const dir = mkdtempSync(join(tmpdir(), "das-traced-bench-"))
  try {
    const starts: TurnStarts = new Map()
    const engine = await engineFor("embedded", join(dir, "session.db"))
    await Effect.runPromise(
      Effect.gen(function* () {
        yield* sessions("warmup", 1)
        starts.clear()
        yield* sessions("seq", SESSIONS)
      }).pipe(
        Effect.provide(workerLayer(starts, engine, services)),
        Effect.scoped,
        Effect.provideService(References.MinimumLogLevel, "Warn")
      ) as Effect.Effect<void, unknown>
    )
    return cycles(starts, SKIP)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Keeps its spans when the layer shuts the provider down, so they can be counted after the run. */
class KeptSpans extends InMemorySpanExporter {
  override shutdown() {
    return Promise.resolve()
  }
}

const p50 = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")

const main = async () => {
  const loadAtStart = load()
  const off: Array<number> = []
  const on: Array<number> = []
  let spans = 0
  for (let round = 1; round <= ROUNDS; round++) {
    off.push(...(await run(undefined)))
    const exporter = new KeptSpans()
    const layer = OpenTelemetry.layer({ spanProcessors: [new SimpleSpanProcessor(exporter)] }) as Layer.Layer<never>
    const turns = await run(layer)
    on.push(...turns)
    spans += exporter.getFinishedSpans().length
    process.stderr.write(
      `round ${round}/${ROUNDS}: off p50 ${p50(off).toFixed(2)} ms, on p50 ${p50(on).toFixed(2)} ms, ratio ${(p50(on) / p50(off)).toFixed(3)}\n`
    )
  }
  process.stdout.write(
    `${JSON.stringify({
      metric: "session.embedded.turn_p50_ms_traced",
      traced_p50_ms: p50(on),
      untraced_p50_ms: p50(off),
      ratio: p50(on) / p50(off),
      target: 1.15,
      cycles: { on: on.length, off: off.length },
      rounds: ROUNDS,
      sessions_per_round: SESSIONS,
      spans_exported: spans,
      load_average_start: loadAtStart,
      load_average_end: load()
    })}\n`
  )
}

await main()
