/**
 * UI stream benchmark (`npm run bench`), on embedded engines with scripted models, read through the Web handler
 * as the AI SDK UI message stream.
 *
 * One turn with 10,000 text deltas (the session merges a Step attempt's deltas into at most 20 writes a second,
 * so the turn holds far fewer `text_delta` events than model deltas; the reads below count the text, not the
 * chunks):
 *
 * - `ui-stream.replay_events_per_s`: AgentEvents per second of the ended turn's replay (read, translated,
 *   SSE-encoded and parsed again), median of 5 reads; baseline: the same events read through the engine client;
 * - `ui-stream.live_turn_ms`: POST to `finish` for a live 10,000-delta turn; baseline: the same turn with no
 *   stream (send, then `awaitTurn`);
 * - `ui-stream.reconnect_continue_ms`: an exact continuation from the token of the turn's `start` (tokens sit at
 *   the resumable points only): request to first part; baseline: the engine client's first event after the same
 *   position;
 * - `ui-stream.reconnect_replay_ms`: a replay after a reconnect: request until half of the turn's text is back;
 *   baseline: the engine client's read of the whole turn.
 *
 * Readers on a statement trace of the SQLite file (`Engine.layerEmbedded`'s `onStatement`;
 * `UI_STREAM_BENCH_ONLY=streams` runs only these two):
 *
 * - `ui-stream.idle_streams_writes_per_s`: {@link IDLE_STREAMS} open UI streams (each of the next turn of an idle
 *   session) for {@link IDLE_WINDOW_MS} ms: the write transactions per second on the file (target 0 more than the
 *   baseline). The streams wait for `Client.watchCommits` notices and read again after the fallback (1 s): reads,
 *   never writes. Baseline: the same sessions for the same time with no stream open.
 * - `ui-stream.event_to_stream_p50_ms`: a tool call's result, from the `COMMIT` of the tool Step's transition (the
 *   statement's start; the engine runs with `synchronous: "NORMAL"`, so a COMMIT is no fsync and its start is the
 *   commit) to its `tool-output-available` on an open UI stream
 *   that was waiting; {@link LATENCY_SAMPLES} samples, target <= 5 ms. Baseline: the same commits to the
 *   engine client's own following read of the session's events (`tool_call_finished`), read at the same time.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import * as BenchResults from "@durable-agent/engine/testing/BenchResults"
import { AgentSessionClient, AgentSessionFlow, ModelClient, Stepwise, ToolSource } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import * as Stream from "effect/Stream"
import { ChatHandler, ResumeToken } from "../src/index.ts"

const DELTAS = 10_000
const RUNS = 5
const deltas = Array.from({ length: DELTAS }, (_, i) => `w${i} `)
const TEXT = deltas.join("")
const script = [
  { text: TEXT, textDeltas: deltas },
  { text: TEXT, textDeltas: deltas },
  { text: TEXT, textDeltas: deltas }
]

/** Open UI streams of the idle-streams figure, and how long they are watched. */
const IDLE_STREAMS = 100
const IDLE_WINDOW_MS = 10_000
/** Tool results of the event-to-stream figure. */
const LATENCY_SAMPLES = 40
/** The event-to-stream target, in ms. */
const LATENCY_TARGET_MS = 5

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}
const progress = (line: string) => process.stderr.write(`${line}\n`)

interface Read {
  readonly parts: number
  readonly textDeltas: number
  /** The length of the text of every `text-delta` read. */
  readonly textChars: number
  readonly firstAt: number | undefined
  /** The token of the resumable point each part follows (the last `id:` seen). */
  readonly tokens: ReadonlyArray<string>
}

/**
 * Reads a UI SSE response: counts parts, text deltas and their characters, calls `onChunk` with each chunk and the
 * time it was parsed; stops (and cancels the body) once `until` says so.
 */
const read = async (
  response: Response,
  until?: (read: Read) => boolean,
  onChunk?: (chunk: { readonly type: string; readonly [key: string]: unknown }, at: number) => void
): Promise<Read> => {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  let parts = 0
  let textDeltas = 0
  let textChars = 0
  let firstAt: number | undefined
  let lastToken = ""
  const tokens: Array<string> = []
  const now = (): Read => ({ parts, textDeltas, textChars, firstAt, tokens })
  while (true) {
    const { done, value } = await reader.read()
    if (done) break
    buffer += value
    let index = buffer.indexOf("\n\n")
    while (index >= 0) {
      const block = buffer.slice(0, index)
      buffer = buffer.slice(index + 2)
      index = buffer.indexOf("\n\n")
      const lines = block.split("\n")
      const data = lines.find((l) => l.startsWith("data: "))?.slice(6)
      if (data === undefined || data === "[DONE]") continue
      const chunk = JSON.parse(data) as { type: string; delta?: string }
      const at = performance.now()
      firstAt ??= at
      parts++
      lastToken = lines.find((l) => l.startsWith("id: "))?.slice(4) ?? lastToken
      tokens.push(lastToken)
      if (chunk.type === "text-delta") {
        textDeltas++
        textChars += chunk.delta?.length ?? 0
      }
      onChunk?.(chunk, at)
    }
    if (until?.(now())) {
      await reader.cancel()
      break
    }
  }
  return now()
}

const base = "http://bench.local/api/chat"

/** Part 1: the 10,000-delta turn. */
const deltaTurn = Effect.gen(function* () {
  const handler = yield* ChatHandler.make({ authorize: () => true })
  const sessions = yield* AgentSessionClient.AgentSessionClient
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
  let tokens: ReadonlyArray<string> = []
  let replayDeltas = 0
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now()
    const result = yield* Effect.promise(async () =>
      read(await handler(new Request(`${base}/bench-1/stream?token=${encodeURIComponent(replayToken)}`)))
    )
    replays.push(performance.now() - start)
    if (result.textChars !== TEXT.length) throw new Error(`the replay sent ${result.textChars} of ${TEXT.length} chars`)
    tokens = result.tokens
    replayDeltas = result.textDeltas
  }
  const replayMs = median(replays)
  // the baseline: the same events read through the engine client alone
  const rawReads: Array<number> = []
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now()
    yield* Stream.runCount(sessions.events("bench-1"))
    rawReads.push(performance.now() - start)
  }
  const rawMs = median(rawReads)

  // reconnects: from the token of `start`, the first resumable point
  const startToken = tokens[0]!
  const startPosition = (yield* ResumeToken.decode(startToken)).p
  const rawFirsts: Array<number> = []
  const continues: Array<number> = []
  const catchUps: Array<number> = []
  for (let i = 0; i < RUNS; i++) {
    let start = performance.now()
    const cont = yield* Effect.promise(async () =>
      read(
        await handler(new Request(`${base}/bench-1/stream?mode=continue&token=${encodeURIComponent(startToken)}`)),
        () => true
      )
    )
    continues.push((cont.firstAt ?? performance.now()) - start)
    // the baseline: the engine client's first event after the same position
    start = performance.now()
    yield* sessions
      .events("bench-1", { from: startPosition === null ? "oldest" : { after: startPosition } })
      .pipe(Stream.take(1), Stream.runDrain)
    rawFirsts.push(performance.now() - start)
    start = performance.now()
    yield* Effect.promise(async () =>
      read(
        await handler(new Request(`${base}/bench-1/stream?token=${encodeURIComponent(startToken)}`)),
        (r) => r.textChars >= TEXT.length / 2
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
  if (live.textChars !== TEXT.length) throw new Error(`the live turn sent ${live.textChars} of ${TEXT.length} chars`)
  // the baseline: the same turn with no stream (send, then wait for its end)
  const bareStart = performance.now()
  yield* sessions.sendUserMessage("bench-1", "once more")
  yield* SessionTesting.awaitTurn("bench-1", { turn: 3, timeout: "10 minutes" })
  const bareMs = performance.now() - bareStart

  const eventsPerSecond = Math.round(events / (replayMs / 1000))
  console.log(
    `UI stream, one turn with ${DELTAS} model text deltas (${events} AgentEvents, ${replayDeltas} text-delta chunks):`
  )
  const rawPerSecond = Math.round(events / (rawMs / 1000))
  console.log(
    `  replay: ${replayMs.toFixed(1)} ms median of ${RUNS} → ${eventsPerSecond} events/s (the engine client's read alone: ${rawMs.toFixed(1)} ms, ${rawPerSecond} events/s)`
  )
  console.log(
    `  live turn, POST to finish: ${liveMs.toFixed(0)} ms (${live.textDeltas} text-delta chunks); the same turn with no stream: ${bareMs.toFixed(0)} ms`
  )
  console.log(
    `  reconnect, exact continuation to first part: ${median(continues).toFixed(1)} ms (the engine client's first event: ${median(rawFirsts).toFixed(1)} ms)`
  )
  console.log(
    `  reconnect, replay until half the text is back: ${median(catchUps).toFixed(1)} ms (the engine client's read of the whole turn: ${rawMs.toFixed(1)} ms)`
  )
  BenchResults.record({
    "ui-stream.replay_events_per_s": {
      value: eventsPerSecond,
      unit: "events/s",
      baseline: { name: "the same events read through the engine client alone", value: rawPerSecond, unit: "events/s" },
      note: `replay of a ${DELTAS}-delta turn (${events} AgentEvents: the session merges deltas)`
    },
    "ui-stream.live_turn_ms": {
      value: Math.round(liveMs),
      unit: "ms",
      baseline: { name: "the same turn with no stream: send, then awaitTurn", value: Math.round(bareMs), unit: "ms" },
      note: `POST to finish, ${DELTAS} deltas`
    },
    "ui-stream.reconnect_continue_ms": {
      value: Number(median(continues).toFixed(1)),
      unit: "ms",
      baseline: {
        name: "the engine client's first event after the same position",
        value: Number(median(rawFirsts).toFixed(1)),
        unit: "ms"
      },
      note: "from the token of start, to the first part"
    },
    "ui-stream.reconnect_replay_ms": {
      value: Number(median(catchUps).toFixed(1)),
      unit: "ms",
      baseline: { name: "the engine client's read of the whole turn", value: Number(rawMs.toFixed(1)), unit: "ms" },
      note: "until half of the turn's text is back"
    }
  })
}).pipe(Effect.provide(SessionTesting.layer({ model: script })))

/** A statement of the trace, with the time it was issued. */
interface Statement {
  readonly at: number
  readonly sql: string
}

/** A transaction of the trace (or one statement outside any): when its COMMIT was issued, and what it wrote. */
interface Transaction {
  readonly committedAt: number
  readonly writes: boolean
  readonly writesEvents: boolean
}

/** The committed transactions of a statement trace (a write outside BEGIN … COMMIT is one too). */
const transactionsOf = (log: ReadonlyArray<Statement>): Array<Transaction> => {
  const out: Array<Transaction> = []
  let open: { writes: boolean; writesEvents: boolean } | undefined
  for (const s of log) {
    const text = s.sql.trim()
    const verb = text.split(/\s+/)[0]!.toUpperCase()
    const writes = verb === "INSERT" || verb === "UPDATE" || verb === "DELETE" || verb === "REPLACE"
    const writesEvents = /^INSERT INTO dex_stream[\s(]/i.test(text)
    if (verb === "BEGIN") open = { writes: false, writesEvents: false }
    else if (verb === "COMMIT" || verb === "END") {
      if (open !== undefined) out.push({ committedAt: s.at, ...open })
      open = undefined
    } else if (verb === "ROLLBACK") open = undefined
    else if (open !== undefined) {
      open.writes ||= writes
      open.writesEvents ||= writesEvents
    } else if (writes) out.push({ committedAt: s.at, writes, writesEvents })
  }
  return out
}

const usage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }

/** Releases the running gate tool call (set while one waits). */
let releaseGate: ((releasedAt: number) => void) | undefined

/**
 * The model of parts 2 and 3: "gate" calls the gate tool until {@link LATENCY_SAMPLES} results are in, then
 * answers; anything else is answered at once.
 */
const model = Layer.succeed(ModelClient.ModelClient, {
  generate: (request) =>
    Effect.sync(() => {
      const first = request.messages.find((m) => m.role === "user")
      const results = request.messages.filter((m) => m.role === "tool").length
      const gate = first?.role === "user" && first.text === "gate" && results < LATENCY_SAMPLES
      return {
        text: gate ? "" : "ok",
        reasoning: null,
        toolCalls: gate ? [{ toolCallId: `g-${results + 1}`, toolName: "gate", arguments: "{}" }] : [],
        usage,
        metadata: { requestModel: "bench", responseModel: "bench", providerName: "scripted" }
      }
    })
})

/** A read tool that returns when the bench releases it. */
const gate = ToolSource.tool({
  name: "gate",
  description: "Waits for the bench.",
  effect: "read",
  handler: () =>
    Effect.promise(
      () =>
        new Promise<string>((resolve) => {
          releaseGate = () => resolve("open")
        })
    )
})

/** Parts 2 and 3: idle streams and commit-to-stream, on an engine whose statements are traced. */
const traced = (log: Array<Statement>, dir: string) => {
  const flow = AgentSessionFlow.make({ flowType: "BenchAgent" })
  const runner = Stepwise.layer({ name: "bench-agent", instructions: "Bench." }).pipe(
    Layer.provide(Layer.mergeAll(model, ToolSource.layer([gate])))
  )
  return Layer.mergeAll(
    AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(runner)),
    AgentSessionClient.layer(flow.type)
  ).pipe(
    Layer.provideMerge(
      Engine.layerEmbedded({
        filename: join(dir, "bench.db"),
        // a COMMIT without an fsync: the figure is the stream's, not the disk's
        synchronous: "NORMAL",
        maxConcurrentTasks: 64,
        drainTimeout: "1 second",
        onStatement: (sql) => void log.push({ at: performance.now(), sql })
      })
    )
  )
}

const idleAndLatency = (log: ReadonlyArray<Statement>) =>
  Effect.gen(function* () {
    const handler = yield* ChatHandler.make({ authorize: () => true })
    const sessions = yield* AgentSessionClient.AgentSessionClient

    // part 2: idle sessions, then the same with an open UI stream on each
    progress(`ui-stream bench: ${IDLE_STREAMS} idle sessions`)
    const ids = Array.from({ length: IDLE_STREAMS }, (_, i) => `idle-${i + 1}`)
    yield* Effect.forEach(ids, (id) => sessions.startSession(id, { initialMessage: "hi" }), { concurrency: 10 })
    yield* Effect.forEach(ids, (id) => SessionTesting.awaitTurn(id, { turn: 1, timeout: "5 minutes" }), {
      concurrency: 10
    })
    yield* Effect.sleep("2 seconds")
    const window = (from: number, to: number) => {
      const statements = log.filter((s) => s.at >= from && s.at < to)
      const writes = transactionsOf(statements).filter((t) => t.writes).length
      return { writes, statements: statements.length, seconds: (to - from) / 1000 }
    }
    progress(`ui-stream bench: ${IDLE_WINDOW_MS} ms with no stream open`)
    const baselineFrom = performance.now()
    yield* Effect.sleep(`${IDLE_WINDOW_MS} millis`)
    const baseline = window(baselineFrom, performance.now())

    progress(`ui-stream bench: ${IDLE_WINDOW_MS} ms with ${IDLE_STREAMS} open UI streams`)
    const controller = new AbortController()
    let opened = 0
    let received = 0
    const readers = ids.map(async (id) => {
      // the stream of the session's next turn: it waits on the session's commit notices until that turn starts
      const token = ResumeToken.encode({
        v: 1,
        s: id,
        t: "turn-2",
        a: null,
        p: null,
        k: 0,
        o: ResumeToken.emptyOpenParts()
      })
      const response = await handler(new Request(`${base}/${id}/stream?token=${encodeURIComponent(token)}`))
      if (response.status !== 200) throw new Error(`${id}: the stream answered ${response.status}`)
      opened++
      const reader = response.body!.getReader()
      controller.signal.addEventListener("abort", () => void reader.cancel())
      while (true) {
        const { done, value } = await reader.read().catch(() => ({ done: true as const, value: undefined }))
        if (done) return
        received += value.byteLength
      }
    })
    while (opened < IDLE_STREAMS) yield* Effect.sleep("50 millis")
    // every stream has read the session once and waits for a notice
    yield* Effect.sleep("1500 millis")
    const streamsFrom = performance.now()
    yield* Effect.sleep(`${IDLE_WINDOW_MS} millis`)
    const streams = window(streamsFrom, performance.now())
    controller.abort()
    yield* Effect.promise(() => Promise.all(readers))
    const idleWrites = streams.writes / streams.seconds
    const baselineWrites = baseline.writes / baseline.seconds
    console.log(`${IDLE_STREAMS} open UI streams on idle sessions, ${streams.seconds.toFixed(1)} s:`)
    console.log(
      `  write transactions: ${streams.writes} (${idleWrites.toFixed(2)}/s); statements ${streams.statements} (${(streams.statements / streams.seconds).toFixed(0)}/s, the fallback reads); ${received} bytes sent`
    )
    console.log(
      `  baseline, no stream open, ${baseline.seconds.toFixed(1)} s: ${baseline.writes} write transactions (${baselineWrites.toFixed(2)}/s), ${baseline.statements} statements`
    )

    // part 3: a tool result's commit to the open UI stream, and to the engine client's own read
    progress(`ui-stream bench: ${LATENCY_SAMPLES} tool results, commit to the open stream`)
    const streamAt = new Map<string, number>()
    const clientAt = new Map<string, number>()
    let running: string | undefined
    const response = yield* Effect.promise(() =>
      handler(
        new Request(base, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            id: "lat-1",
            messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "gate" }] }]
          })
        })
      )
    )
    // the session exists now: the engine client's own following read of its events, from the oldest
    const following = yield* sessions.events("lat-1", { from: "oldest", follow: true }).pipe(
      Stream.runForEach((e) =>
        Effect.sync(() => {
          if (e.event.type === "tool_call_finished") clientAt.set(e.event.payload.toolCallId, performance.now())
        })
      ),
      Effect.forkChild
    )
    progress("ui-stream bench: the gate turn's stream is open")
    const turn = Effect.runPromise(
      Effect.promise(() =>
        read(response, undefined, (chunk, at) => {
          if (chunk.type === "tool-output-available") streamAt.set(String(chunk.toolCallId), at)
          if (chunk.type === "data-tool-status") running = String((chunk.data as { toolCallId: string }).toolCallId)
        })
      )
    )
    const released: Array<{ readonly toolCallId: string; readonly at: number }> = []
    for (let i = 1; i <= LATENCY_SAMPLES; i++) {
      const toolCallId = `g-${i}`
      // the call runs and the stream has shown it: the stream waits for the next commit
      const waitFrom = performance.now()
      while (running !== toolCallId || releaseGate === undefined) {
        if (performance.now() - waitFrom > 60_000) {
          return yield* Effect.die(
            new Error(`${toolCallId} did not run (running: ${running}, gate: ${releaseGate !== undefined})`)
          )
        }
        yield* Effect.sleep("5 millis")
      }
      yield* Effect.sleep("30 millis")
      const release = releaseGate
      releaseGate = undefined
      const at = performance.now()
      released.push({ toolCallId, at })
      release(at)
      while (!streamAt.has(toolCallId) || !clientAt.has(toolCallId)) {
        if (performance.now() - at > 60_000) {
          return yield* Effect.die(
            new Error(
              `the result of ${toolCallId} did not arrive (stream: ${streamAt.has(toolCallId)}, client: ${clientAt.has(toolCallId)})`
            )
          )
        }
        yield* Effect.sleep("2 millis")
      }
    }
    yield* Effect.promise(() => turn)
    yield* Fiber.interrupt(following)
    const transactions = transactionsOf(log)
    const toStream: Array<number> = []
    const toClient: Array<number> = []
    for (const { toolCallId, at } of released) {
      const commit = transactions.find((t) => t.writesEvents && t.committedAt >= at)
      if (commit === undefined) throw new Error(`no commit with events after ${toolCallId} was released`)
      toStream.push(streamAt.get(toolCallId)! - commit.committedAt)
      toClient.push(clientAt.get(toolCallId)! - commit.committedAt)
    }
    const p50 = percentile(toStream, 50)
    const baseP50 = percentile(toClient, 50)
    console.log(`commit to the open stream, ${LATENCY_SAMPLES} tool results (embedded):`)
    console.log(
      `  UI stream: p50 ${p50.toFixed(2)} ms, p90 ${percentile(toStream, 90).toFixed(2)} ms, max ${Math.max(...toStream).toFixed(2)} ms (target <= ${LATENCY_TARGET_MS} ms: ${p50 <= LATENCY_TARGET_MS ? "PASS" : "MISS"})`
    )
    console.log(
      `  engine client's following read: p50 ${baseP50.toFixed(2)} ms, p90 ${percentile(toClient, 90).toFixed(2)} ms`
    )
    console.log(
      `  load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`
    )
    BenchResults.record({
      "ui-stream.idle_streams_writes_per_s": {
        value: Number(idleWrites.toFixed(2)),
        unit: "write transactions/s",
        baseline: {
          name: `the same ${IDLE_STREAMS} idle sessions with no stream open`,
          value: Number(baselineWrites.toFixed(2)),
          unit: "write transactions/s"
        },
        target: "0 more than the baseline",
        met: streams.writes <= baseline.writes,
        note: `${IDLE_STREAMS} open UI streams for ${IDLE_WINDOW_MS / 1000} s, statement trace of the SQLite file; ${(streams.statements / streams.seconds).toFixed(0)} statements/s (reads)`
      },
      "ui-stream.event_to_stream_p50_ms": {
        value: Number(p50.toFixed(2)),
        unit: "ms",
        baseline: {
          name: "the same commits to the engine client's following events read, p50",
          value: Number(baseP50.toFixed(2)),
          unit: "ms"
        },
        target: `<= ${LATENCY_TARGET_MS} ms`,
        met: p50 <= LATENCY_TARGET_MS,
        note: `embedded; from the COMMIT of a tool Step's transition to its tool-output-available, ${LATENCY_SAMPLES} samples`
      }
    })
  })

const partTwoAndThree = Effect.suspend(() => {
  const dir = mkdtempSync(join(tmpdir(), "das-ui-stream-bench-"))
  const log: Array<Statement> = []
  return idleAndLatency(log).pipe(
    Effect.provide(traced(log, dir)),
    Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  )
})

/** `UI_STREAM_BENCH_ONLY=streams`: only the idle streams and the commit-to-stream figures. */
const only = process.env.UI_STREAM_BENCH_ONLY

Effect.runPromise(
  (only === "streams" ? partTwoAndThree : Effect.andThen(deltaTurn, partTwoAndThree)).pipe(
    Effect.provideService(References.MinimumLogLevel, "Warn")
  )
).then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
