// One worker process of the soak (see soak.ts): a runner of the session Flow with a scripted model and a tool of
// every effect class, plus a driver that keeps its sessions busy until the send deadline.
//
//   node soak-worker.ts <db file | postgres url> <ledger file> <sessions> <send until, epoch ms>
//
// The model is scripted by the request, not by a counter, so any process answers the same way: the user message
// "turn <t>" asks for the tools of pattern t % 4 (IDs <tool>-<t>), and a request that ends with tool results gets
// "done <t>" in two text deltas.
//
// Each tool appends one JSON line per real execution to the ledger file (appendFileSync opens it O_APPEND, so
// the lines of concurrent processes never interleave), before it sleeps up to 300 ms, so a kill lands inside
// tools too. The ledger is outside every worker: a killed process's executions stay counted.
//
// The driver is stateless, so a restarted or resumed worker just goes on: every 100 ms it reads each session's
// snapshot, approves pending interrupts (requestId `approve/<interruptId>`), and sends "turn <t>" to an idle
// session (requestId `turn/<t>`, t = turns ended + 1) until the send deadline. Several drivers (one per runner)
// race on the same sessions; the keys make their repeats replays. Sends and approvals that returned are appended
// to the ledger too. Prints PROGRESS <json> every 2 s, ALL_SETTLED <turns> when every session is settled after
// the deadline, and UNSETTLED <turns> when one of them is not any more.
import { appendFileSync } from "node:fs"
import { Client } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import { AgentSessionClient, AgentSessionFlow, ModelClient, Stepwise, ToolSource, type Wire } from "../src/index.ts"
import { engineFor } from "../test/support/engine-target.ts"
import { sessionIds, TOOL_EFFECTS, TURN_TOOLS } from "./scenario.ts"

const [target, ledger, sessionsArg, untilArg] = process.argv.slice(2)
const sessionCount = Number(sessionsArg)
const sendUntil = Number(untilArg)

const append = (line: Record<string, unknown>) =>
  Effect.sync(() => appendFileSync(ledger!, `${JSON.stringify({ ...line, pid: process.pid, at: Date.now() })}\n`))

const print = (line: string) => Effect.sync(() => void process.stdout.write(`${line}\n`))

const usage = { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 }

const model = ModelClient.layer((request) =>
  Effect.gen(function* () {
    yield* Effect.sleep(`${20 + Math.floor(Math.random() * 120)} millis`)
    const last = request.messages[request.messages.length - 1]
    const users = request.messages.flatMap((m) => (m.role === "user" ? [m.text] : []))
    const t = Number((users[users.length - 1] ?? "turn 0").slice(5))
    if (last?.role === "tool") {
      for (const delta of ["done ", String(t)]) if (request.onTextDelta) yield* request.onTextDelta(delta)
      return { text: `done ${t}`, reasoning: null, toolCalls: [], usage }
    }
    const toolCalls = TURN_TOOLS[t % 4]!.map((name) => ({
      toolCallId: `${name}-${t}`,
      toolName: name,
      arguments: JSON.stringify({ turn: t })
    }))
    return { text: null, reasoning: null, toolCalls, usage }
  })
)

const tool = (name: string) =>
  ToolSource.tool({
    name,
    description: `${name} (soak tool, ${TOOL_EFFECTS[name]})`,
    effect: TOOL_EFFECTS[name]!,
    handler: (_args, request) =>
      Effect.gen(function* () {
        yield* append({
          kind: "exec",
          session: request.flowId,
          toolCallId: request.toolCallId,
          attempt: request.attempt,
          tool: name
        })
        yield* Effect.sleep(`${Math.floor(Math.random() * 300)} millis`)
        return `${name} ok`
      })
  })

const flow = AgentSessionFlow.make({
  flowType: "SoakAgent",
  retryInitialInterval: "200 millis",
  heartbeatInterval: "1 second",
  // the checks read every event: a long soak must not trim the stream (10 MiB by default, about 11,000 events,
  // filled by 10 sessions in 30 minutes, after which the oldest events were gone and counted as missing)
  eventsCapacityBytes: 512 * 1024 * 1024,
  toolPolicies: {
    charge: { effect: "non_idempotent_write", requiresApproval: false },
    deploy: { effect: "unclassified", requiresApproval: true }
  }
})

const engine = engineFor(target!)

const layer = Layer.mergeAll(
  AgentSessionFlow.layerWorker(flow).pipe(
    Layer.provide(Stepwise.layer({ name: "soak-agent", instructions: "Soak agent." })),
    Layer.provide(Layer.mergeAll(model, ToolSource.layer(Object.keys(TOOL_EFFECTS).map(tool))))
  ),
  AgentSessionClient.layer(flow.type)
).pipe(
  Layer.provideMerge(engine),
  // warnings too (a refused write, a failed commit, a claim without the shard lock): soak.ts keeps each worker's
  // output in worker-<slot>.log
  Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn"))
)

/** A call that may meet a paused or dead owner: bounded, and its failure only logged (the next round retries). */
const bounded = <A, E>(effect: Effect.Effect<A, E>) =>
  effect.pipe(
    Effect.timeout("10 seconds"),
    Effect.map((a) => a as A | undefined),
    Effect.catch(() => Effect.succeed(undefined))
  )

const settled = (s: Wire.AgentSnapshot) =>
  s.state !== null &&
  s.state.activeTurnId === null &&
  s.queuedMessageCount === 0 &&
  s.pendingInterrupts.length === 0 &&
  s.steeredMessages.length === 0

const program = Effect.gen(function* () {
  const client = yield* AgentSessionClient.AgentSessionClient
  const engineClient = yield* Client.Client
  const ids = sessionIds(sessionCount)
  // a message taken off the queue whose turn has not started shows as a ready or running AwaitUserMessage only
  const stepsIdle = (id: string) =>
    Effect.map(
      bounded(engineClient.stepExecutions(id)),
      (steps) =>
        steps?.every(
          (s) =>
            s.status === "completed" ||
            s.status === "failed" ||
            s.status === "cancelled" ||
            (s.status === "waiting" && s.stepType === "AwaitUserMessage")
        ) === true
    )
  yield* print(`READY ${process.pid}`)
  yield* Effect.forEach(ids, (id) => bounded(client.startSession(id, { requestId: `start/${id}` })), {
    concurrency: 4,
    discard: true
  })
  const turns = new Map<string, number>()
  const done = new Set<string>()
  let announced = false
  let lastPrint = 0
  const round = Effect.forEach(
    ids,
    (id) =>
      Effect.gen(function* () {
        const s = yield* bounded(client.getSnapshot(id))
        if (s === undefined || s.state === null) return
        turns.set(id, s.state.turnCount)
        for (const i of s.pendingInterrupts) {
          const ok = yield* bounded(
            client.resolveInterrupt(
              id,
              { interruptId: i.interruptId, approved: true },
              { requestId: `approve/${i.interruptId}` }
            )
          )
          if (ok !== undefined) yield* append({ kind: "approved", session: id, interruptId: i.interruptId, ok })
        }
        if (settled(s)) {
          if (Date.now() >= sendUntil) {
            if (yield* stepsIdle(id)) done.add(id)
            else done.delete(id)
            return
          }
          const t = s.state.turnCount + 1
          const ok = yield* bounded(client.sendUserMessage(id, `turn ${t}`, { requestId: `turn/${t}` }))
          if (ok !== undefined) yield* append({ kind: "sent", session: id, turn: t, ok })
        } else done.delete(id)
      }),
    { concurrency: 8, discard: true }
  )
  while (true) {
    yield* round
    const total = [...turns.values()].reduce((a, b) => a + b, 0)
    if (Date.now() - lastPrint > 2000) {
      lastPrint = Date.now()
      yield* print(`PROGRESS ${JSON.stringify({ turns: total, settled: done.size, sessions: ids.length })}`)
    }
    // the state is printed on each change, not once: a send that another driver had in flight across the
    // deadline (its process paused by a SIGSTOP) can start a turn after this driver saw every session settled
    const allSettled = done.size === ids.length
    if (allSettled !== announced) {
      announced = allSettled
      yield* print(`${allSettled ? "ALL_SETTLED" : "UNSETTLED"} ${total}`)
    }
    yield* Effect.sleep("100 millis")
  }
})

if (import.meta.main) {
  Effect.runPromise(program.pipe(Effect.provide(layer), Effect.scoped) as Effect.Effect<unknown, unknown>).then(
    () => process.exit(0),
    (error) => {
      process.stdout.write(`ERROR ${String(error)}\n`)
      process.exit(1)
    }
  )
}
