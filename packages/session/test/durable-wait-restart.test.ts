// durable_wait survives a worker restart: the first worker starts the wait and stops (its scope closes), a
// second worker on the same storage (the SQLite file, or the Postgres database with a new runner) finishes
// the turn when the engine Timer fires. The model script of each worker starts from the top.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import { freePort } from "../../engine/test/support/ports.ts"
import { withTestDatabase } from "../../engine/test/support/postgres.ts"
import { AgentSessionClient } from "../src/index.ts"
import {
  awaitSnapshot,
  awaitTurns,
  type EngineFactory,
  eventTypes,
  stepShape,
  toolResults,
  withSession
} from "./support.ts"

const dir = mkdtempSync(join(tmpdir(), "das-durable-wait-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const restartSuite = (name: string, storage: Effect.Effect<EngineFactory, unknown, import("effect/Scope").Scope>) =>
  describe(`${name}: durable_wait across a worker restart`, () => {
    it.live(
      "the wait started by one worker completes on the next one",
      () =>
        Effect.gen(function* () {
          const engine = yield* storage
          const flow = { builtInTools: ["durable_wait" as const] }
          yield* withSession(
            {
              script: [
                { toolCalls: [{ id: "t1", name: "durable_wait", arguments: { seconds: 3, reason: "restart" } }] }
              ],
              flow,
              engine
            },
            () =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("s-restart", { initialMessage: "wait" })
                const waiting = yield* awaitSnapshot(
                  "s-restart",
                  (s) => s.toolCalls.some((c) => c.status === "waiting_for_timer"),
                  "the wait"
                )
                assert.isNotNull(waiting.toolCalls[0]!.waitUntil)
              })
          )
          // the first worker is gone; the second one finishes the turn when the Timer fires
          yield* withSession({ script: [{ text: "Waited." }], flow, engine }, (kit) =>
            Effect.gen(function* () {
              const done = yield* awaitTurns("s-restart", 1)
              assert.strictEqual(done.messages.at(-1)?.text, "Waited.")
              const result = JSON.parse(toolResults(kit.requests[0]!).t1!) as Record<string, unknown>
              assert.strictEqual(result.status, "completed")
              assert.strictEqual(result.reason, "restart")
              assert.deepStrictEqual(yield* stepShape("s-restart"), [
                "StartAgentSession",
                "RunModel",
                "AwaitTimer",
                "ResumeTurn",
                "RunModel",
                "AwaitUserMessage"
              ])
              const types = yield* eventTypes("s-restart")
              assert.strictEqual(types.filter((t) => t === "timer_started").length, 1)
            })
          )
        }).pipe(Effect.scoped),
      90_000
    )
  })

let n = 0
restartSuite(
  "embedded",
  Effect.sync((): EngineFactory => {
    const filename = join(dir, `restart-${++n}.db`)
    return () => Engine.layerEmbedded({ filename, pollInterval: "50 millis" })
  })
)
restartSuite(
  "cluster",
  Effect.map(
    withTestDatabase,
    (url): EngineFactory =>
      () =>
        Layer.unwrap(
          Effect.map(Effect.promise(freePort), (runnerPort) =>
            Engine.layerCluster({ url, runnerPort, pollInterval: "50 millis" })
          )
        ).pipe(Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn")))
  )
)
