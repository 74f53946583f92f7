// The session worker (test/fixtures/session-worker.ts) as a child process in its own process group, killed with
// SIGKILL of the whole group, as the engine's kill tests do (packages/engine/test/support/child.ts).
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"

export interface Child {
  readonly process: ChildProcess
  readonly pid: number
  /** Waits for a stdout line starting with `prefix` and returns the rest of it. */
  readonly waitFor: (prefix: string, timeoutMs?: number) => Effect.Effect<string, Error>
  /** SIGKILL of the child's process group; resolves once the child exited. */
  readonly kill: () => Effect.Effect<void>
  readonly exited: Promise<number | null>
  readonly stderr: () => string
}

const workerPath = fileURLToPath(new URL("../fixtures/session-worker.ts", import.meta.url))

/**
 * Starts `node session-worker.ts <db> <side> ...args` with `env` added to this process's environment, detached
 * (its own process group); the scope kills it if it is still running.
 */
export const spawnSessionWorker = (
  options: { readonly db: string; readonly side: string; readonly env?: Readonly<Record<string, string>> },
  ...args: ReadonlyArray<string>
) =>
  Effect.acquireRelease(
    Effect.sync((): Child => {
      const child = spawn(process.execPath, [workerPath, options.db, options.side, ...args], {
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, ...options.env }
      })
      const lines: Array<string> = []
      const waiters = new Set<() => void>()
      let buffer = ""
      let err = ""
      child.stdout!.on("data", (chunk: Buffer) => {
        buffer += chunk.toString("utf8")
        let i = buffer.indexOf("\n")
        while (i >= 0) {
          lines.push(buffer.slice(0, i))
          buffer = buffer.slice(i + 1)
          i = buffer.indexOf("\n")
        }
        for (const w of waiters) w()
      })
      child.stderr!.on("data", (chunk: Buffer) => {
        err += chunk.toString("utf8")
      })
      const exited = new Promise<number | null>((resolve) =>
        child.once("exit", (code) => {
          for (const w of waiters) w()
          resolve(code)
        })
      )
      const waitFor = (prefix: string, timeoutMs = 30_000) =>
        Effect.callback<string, Error>((resume) => {
          const check = () => {
            const line = lines.find((l) => l.startsWith(prefix))
            if (line !== undefined) {
              waiters.delete(check)
              clearTimeout(timer)
              resume(Effect.succeed(line.slice(prefix.length).trim()))
            } else if (child.exitCode !== null || child.signalCode !== null) {
              waiters.delete(check)
              clearTimeout(timer)
              resume(Effect.fail(new Error(`worker exited before "${prefix}": ${lines.join("\n")}\n${err}`)))
            }
          }
          const timer = setTimeout(() => {
            waiters.delete(check)
            resume(
              Effect.fail(new Error(`timed out waiting for "${prefix}"; stdout:\n${lines.join("\n")}\nstderr:\n${err}`))
            )
          }, timeoutMs)
          waiters.add(check)
          check()
        })
      const kill = () =>
        Effect.promise(() => {
          if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
          try {
            process.kill(-child.pid!, "SIGKILL")
          } catch {
            // the group is already gone
          }
          return exited.then(() => undefined)
        })
      return { process: child, pid: child.pid!, waitFor, kill, exited, stderr: () => err }
    }),
    (child) => child.kill()
  )

/** The lines of a file that may not exist yet. */
export const fileLines = (file: string): Array<string> =>
  existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.length > 0)
    : []
