/**
 * Worker processes for kill tests: a script started with Node in its own process group, read line by
 * line, and killed with SIGKILL of the whole group (the way an operator's `kill -9` or an OOM kill
 * ends a worker). Used by this repository's kill tests; exported for bindings that run the same kind
 * of tests.
 *
 * @since 0.1.0
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/**
 * The Node flags a child process needs to load this repository's packages the way the current process
 * does: while this module runs from its TypeScript source (this repository's tests and benchmarks), the
 * `@durable-agent/source` export condition, so the child resolves every `@durable-agent/*` import to its
 * source and never to a build in `dist/` (stale or missing); from a built package, none.
 */
export const nodeFlags: ReadonlyArray<string> = import.meta.url.endsWith(".ts")
  ? ["--conditions=@durable-agent/source"]
  : []

/** A running worker process. */
export interface Child {
  readonly process: ChildProcess
  readonly pid: number
  /** Waits for a stdout line starting with `prefix` and returns the rest of it (30 s by default). */
  readonly waitFor: (prefix: string, timeoutMs?: number) => Effect.Effect<string, Error>
  /** SIGKILL of the child's process group; resolves once the child exited. */
  readonly kill: () => Effect.Effect<void>
  readonly exited: Promise<number | null>
  readonly stderr: () => string
  /** Every complete stdout line so far. */
  readonly lines: () => ReadonlyArray<string>
}

/**
 * Starts `node <script> ...args` (with {@link nodeFlags}) with `env` added to this process's environment, detached (its own
 * process group). The scope kills it if it is still running.
 */
export const spawnNode = (
  script: string,
  args: ReadonlyArray<string>,
  env?: Readonly<Record<string, string>>
): Effect.Effect<Child, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): Child => {
      const child = spawn(process.execPath, [...nodeFlags, script, ...args], {
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, ...env }
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
      return { process: child, pid: child.pid!, waitFor, kill, exited, stderr: () => err, lines: () => [...lines] }
    }),
    (child) => child.kill()
  )

/** The non-empty lines of a file that may not exist yet (side-effect logs). */
export const fileLines = (file: string): Array<string> =>
  existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l !== "")
    : []
