// Fault injection for the engine's pause tests: a named point in the write path where a runner stops to be
// paused (SIGSTOP) by its parent. Off unless `DURABLE_ENGINE_PAUSE_AT` names the point; then the first time
// this process reaches it, it prints `PAUSED <point> <pid>` on stdout and waits until the file
// `DURABLE_ENGINE_PAUSE_RELEASE` exists (the parent creates it after the SIGCONT), then goes on. With
// `DURABLE_ENGINE_PAUSE_DETAIL` set, only a point whose detail contains it stops (e.g. one RPC's `reply`).
//
// Points: `heartbeat` (an attempt's heartbeat, before its fenced write), `emit` (a stream write, before its
// transaction), `commit` (a Step completion's transaction, after its writes and before COMMIT), `reply` (a
// request's transition committed, its answer not sent yet: the retry tests SIGKILL the owner there).
import { existsSync } from "node:fs"
import * as Effect from "effect/Effect"

/** The points the pause tests name. */
export type PausePoint = "heartbeat" | "emit" | "commit" | "reply"

const wanted = process.env.DURABLE_ENGINE_PAUSE_AT
const release = process.env.DURABLE_ENGINE_PAUSE_RELEASE
const only = process.env.DURABLE_ENGINE_PAUSE_DETAIL
let reached = false

/** Stops here when the environment names this point (once per process); a no-op otherwise. */
export const pausePoint = (point: PausePoint, detail: string): Effect.Effect<void> =>
  wanted !== point || release === undefined || (only !== undefined && !detail.includes(only))
    ? Effect.void
    : Effect.suspend(() => {
        if (reached) return Effect.void
        reached = true
        process.stdout.write(`PAUSED ${point} ${process.pid} ${detail}\n`)
        return Effect.gen(function* () {
          while (!existsSync(release)) yield* Effect.sleep("20 millis")
        })
      })
