/**
 * UI stream benchmark (`npm run bench`): one turn with 10,000 text deltas on an embedded engine with a scripted
 * model, read through the Web handler as the AI SDK UI message stream.
 *
 * - `ui-stream.replay_events_per_s`: AgentEvents per second of the ended turn's replay (read, translated,
 *   SSE-encoded and parsed again), median of 5 reads;
 * - `ui-stream.live_turn_ms`: POST to `finish` for a live 10,000-delta turn;
 * - `ui-stream.reconnect_continue_ms`: an exact continuation from the token after part 5,000: request to first part;
 * - `ui-stream.reconnect_replay_ms`: a replay after a reconnect: request until the 5,000 deltas seen before the
 *   drop are back.
 */

import * as BenchResults from "@durable-agent/engine/testing/BenchResults"
import { AgentSessionClient } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { ChatHandler, ResumeToken } from "../src/index.ts"

const DELTAS = 10_000
const RUNS = 5
const deltas = Array.from({ length: DELTAS }, (_, i) => `w${i} `)
const script = [
  { text: deltas.join(""), textDeltas: deltas },
  { text: deltas.join(""), textDeltas: deltas }
]

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** Reads a UI SSE response; counts parts and text deltas; stops once `until` says so. */
const read = async (response: Response, until?: (deltas: number) => boolean) => {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  let parts = 0
  let textDeltas = 0
  let firstAt: number | undefined
  let lastToken = ""
  const tokens: Array<string> = []
  while (true) {
    const { done, value } = await reader.read()
    if (done) break
    buffer += value
    let index = buffer.indexOf("\n\n")
    while (index >= 0) {
      const block = buffer.slice(0, index)
      buffer = buffer.slice(index + 2)
      index = buffer.indexOf("\n\n")
      const data = block
        .split("\n")
        .find((l) => l.startsWith("data: "))
        ?.slice(6)
      if (data === undefined || data === "[DONE]") continue
      const chunk = JSON.parse(data) as { type: string }
      firstAt ??= performance.now()
      parts++
      lastToken =
        block
          .split("\n")
          .find((l) => l.startsWith("id: "))
          ?.slice(4) ?? lastToken
      tokens.push(lastToken)
      if (chunk.type === "text-delta") textDeltas++
    }
    if (until?.(textDeltas)) {
      await reader.cancel()
      break
    }
  }
  return { parts, textDeltas, firstAt, tokens }
}

const program = Effect.gen(function* () {
  const handler = yield* ChatHandler.make({ authorize: () => true })
  const sessions = yield* AgentSessionClient.AgentSessionClient
  const base = "http://bench.local/api/chat"
  yield* sessions.startSession("bench-1", { initialMessage: "go" })
  yield* SessionTesting.awaitTurn("bench-1", { turn: 1, timeout: "10 minutes" })
  const events = yield* Stream.runCount(sessions.events("bench-1"))
  const replayToken = ResumeToken.encode({
    v: 1,
    s: "bench-1",
    t: "turn-1",
    a: null,
    p: null,
    k: 0,
    o: ResumeToken.emptyOpenParts()
  })

  // replay throughput
  const replays: Array<number> = []
  let tokens: Array<string> = []
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now()
    const result = yield* Effect.promise(async () =>
      read(await handler(new Request(`${base}/bench-1/stream?token=${encodeURIComponent(replayToken)}`)))
    )
    replays.push(performance.now() - start)
    if (result.textDeltas !== DELTAS) throw new Error(`replay sent ${result.textDeltas} deltas`)
    tokens = result.tokens
  }
  const replayMs = median(replays)

  // reconnects
  const middle = tokens.findIndex((_, i) => i > DELTAS / 2)
  const continues: Array<number> = []
  const catchUps: Array<number> = []
  for (let i = 0; i < RUNS; i++) {
    let start = performance.now()
    const cont = yield* Effect.promise(async () =>
      read(
        await handler(new Request(`${base}/bench-1/stream?mode=continue&token=${encodeURIComponent(tokens[middle]!)}`)),
        () => true
      )
    )
    continues.push((cont.firstAt ?? performance.now()) - start)
    start = performance.now()
    yield* Effect.promise(async () =>
      read(
        await handler(new Request(`${base}/bench-1/stream?token=${encodeURIComponent(tokens[middle]!)}`)),
        (n) => n >= DELTAS / 2
      )
    )
    catchUps.push(performance.now() - start)
  }

  // a live turn
  const liveStart = performance.now()
  const live = yield* Effect.promise(async () =>
    read(
      await handler(
        new Request(base, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            id: "bench-1",
            messages: [{ id: "u2", role: "user", parts: [{ type: "text", text: "again" }] }]
          })
        })
      )
    )
  )
  const liveMs = performance.now() - liveStart
  if (live.textDeltas !== DELTAS) throw new Error(`the live turn sent ${live.textDeltas} deltas`)

  const eventsPerSecond = Math.round(events / (replayMs / 1000))
  console.log(`UI stream, one turn with ${DELTAS} text deltas (${events} AgentEvents):`)
  console.log(`  replay: ${replayMs.toFixed(0)} ms median of ${RUNS} → ${eventsPerSecond} events/s`)
  console.log(`  live turn, POST to finish: ${liveMs.toFixed(0)} ms`)
  console.log(`  reconnect, exact continuation to first part: ${median(continues).toFixed(1)} ms`)
  console.log(`  reconnect, replay until the ${DELTAS / 2} deltas are back: ${median(catchUps).toFixed(0)} ms`)
  BenchResults.record({
    "ui-stream.replay_events_per_s": {
      value: eventsPerSecond,
      unit: "events/s",
      note: `replay of a ${DELTAS}-delta turn`
    },
    "ui-stream.live_turn_ms": { value: Math.round(liveMs), unit: "ms", note: `POST to finish, ${DELTAS} deltas` },
    "ui-stream.reconnect_continue_ms": {
      value: Number(median(continues).toFixed(1)),
      unit: "ms",
      note: "to first part"
    },
    "ui-stream.reconnect_replay_ms": {
      value: Math.round(median(catchUps)),
      unit: "ms",
      note: `until ${DELTAS / 2} deltas are back`
    }
  })
}).pipe(Effect.provide(SessionTesting.layer({ model: script })))

Effect.runPromise(program).then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
