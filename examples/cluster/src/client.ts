// A client process: starts SESSIONS (default 20) sessions on the cluster, each with a first message, waits
// for every first turn and prints which runner answered each. It runs no Flow itself (a client-only member).
//
//   DATABASE_URL=postgres://... node --conditions=@durable-agent/source src/client.ts
import { Engine } from "@durable-agent/engine"
import { AgentSessionClient } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { client } from "./agent.ts"

/** Starts `count` sessions named `<prefix>-<i>` and waits for each one's first turn. */
export const runSessions = (prefix: string, count: number) =>
  Effect.gen(function* () {
    const sessions = yield* AgentSessionClient.AgentSessionClient
    const ids = Array.from({ length: count }, (_, i) => `${prefix}-${i + 1}`)
    yield* Effect.forEach(ids, (id) => sessions.startSession(id, { initialMessage: `hello from ${id}` }), {
      concurrency: 5,
      discard: true
    })
    process.stdout.write(`STARTED ${count}\n`)
    return yield* Effect.forEach(
      ids,
      (id) =>
        Effect.map(sessions.awaitTurn(id, { turn: 1, timeout: "180 seconds" }), (snapshot) => {
          const reply = [...snapshot.messages].reverse().find((m) => m.role === "assistant")
          return { session: id, status: snapshot.state?.status ?? null, reply: reply?.text ?? null }
        }),
      { concurrency: 10 }
    )
  })

/** The client-only engine and the session client. */
export const clientLayer = (url: string) => client.pipe(Layer.provideMerge(Engine.layerClusterClient({ url })))

if (import.meta.main) {
  const url = process.env.DATABASE_URL
  if (url === undefined) {
    process.stderr.write("DATABASE_URL is required\n")
    process.exit(2)
  }
  const count = Number(process.env.SESSIONS ?? "20")
  Effect.runPromise(
    runSessions(`session-${Date.now()}`, count).pipe(Effect.provide(clientLayer(url)), Effect.scoped)
  ).then(
    (results) => {
      for (const r of results) process.stdout.write(`${r.session}: ${r.status} ${r.reply}\n`)
      process.exit(0)
    },
    (error) => {
      process.stderr.write(`${String(error)}\n`)
      process.exit(1)
    }
  )
}
