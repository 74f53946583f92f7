// Worker processes of the engine's process tests: the fixtures (fixtures/*-worker.ts) as child processes, the
// scratch files they share with the parent, and the steps every such test repeats (start and wait for a marker
// line, SIGTERM and wait for the exit code, kill on a marker, read the closed Flow a worker prints).
//
// The kill rule: a worker records its side effect in its file BEFORE it prints the marker the parent kills on,
// so whatever the parent reads after the kill says whether the effect happened.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { type Child, spawnNode } from "../../src/testing/ChildProcess.ts"
import { freePort } from "./ports.ts"
import { withTestDatabase } from "./postgres.ts"

/** A worker process of one fixture, started with the same environment every time. */
export interface Worker {
  /** Starts `node fixtures/<file> ...args`, in its own process group; the scope kills it. */
  readonly spawn: (args: ReadonlyArray<string>) => Effect.Effect<Child, never, Scope.Scope>
  /** Starts the worker and waits for a stdout line starting with `marker` (60 s by default). */
  readonly startUntil: (
    args: ReadonlyArray<string>,
    marker: string,
    timeoutMs?: number
  ) => Effect.Effect<Child, Error, Scope.Scope>
}

/** The worker of `fixtures/<file>`, with `env` added to its environment. */
export const fixtureWorker = (file: string, env?: Readonly<Record<string, string>>): Worker => {
  const script = fileURLToPath(new URL(`../fixtures/${file}`, import.meta.url))
  const spawn = (args: ReadonlyArray<string>) => spawnNode(script, args, env)
  return {
    spawn,
    startUntil: (args, marker, timeoutMs = 60_000) =>
      Effect.tap(spawn(args), (child) => child.waitFor(marker, timeoutMs))
  }
}

const killWorker = fixtureWorker("kill-worker.ts")

/** Starts `node kill-worker.ts ...args` in its own process group; the scope kills it. */
export const spawnWorker = (...args: ReadonlyArray<string>) => killWorker.spawn(args)

/**
 * Waits for `marker` and SIGKILLs the child's process group. The worker records its side effect before it
 * prints the marker, so the record is there when this returns.
 */
export const killAt = (child: Child, marker: string) => Effect.andThen(child.waitFor(marker), child.kill())

/** Sends SIGTERM to the child and returns its exit code once it exited. */
export const sigterm = (child: Child) =>
  Effect.promise(() => {
    process.kill(child.pid, "SIGTERM")
    return child.exited
  })

/** The closed Flow a worker prints on its `CLOSED` line: the Flow and its Step executions. */
export interface Closed {
  readonly flow: { readonly status: string; readonly output: unknown }
  readonly steps: ReadonlyArray<{
    readonly stepType: string
    readonly attempts: ReadonlyArray<{
      readonly attempt: number
      readonly outcome: string | null
      readonly errorType: string | null
    }>
  }>
}

/** Waits for the child's `CLOSED` line and parses it. */
export const closedFlow = (child: Child, timeoutMs?: number) =>
  Effect.map(child.waitFor("CLOSED", timeoutMs), (line): Closed => JSON.parse(line))

/**
 * Scratch files of one test file: a temporary directory removed after the file's tests, and per test a fresh
 * database file and side-effect log in it (`<prefix>-<n>.db`, `side-<n>.log`).
 */
export const scratchFiles = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), `das-${prefix}-`))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  let n = 0
  return () => {
    n++
    return { db: join(dir, `${prefix}-${n}.db`), side: join(dir, `side-${n}.log`) }
  }
}

/** A GET to a runner process's HTTP port: the status and the body. */
export const httpGet = (port: number, path: string) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`)
    return { status: response.status, body: await response.text() }
  })

/** How a test starts a runner process: the arguments that select its engine layer. */
export type EngineArgs = Effect.Effect<ReadonlyArray<string>, unknown, Scope.Scope>

/**
 * Registers one scenario of a runner process on both engine layers: `embedded <db>`, and `cluster <url> <port>`
 * on a fresh test database. `scenario` gets the engine arguments and the test's side-effect log.
 */
export const onBothEngines = (
  what: string,
  title: string,
  timeoutMs: number,
  files: () => { readonly db: string; readonly side: string },
  scenario: (engineArgs: EngineArgs, side: string) => Effect.Effect<void, unknown, Scope.Scope>
) => {
  describe(`embedded engine: ${what}`, () => {
    it.live(
      title,
      () => {
        const { db, side } = files()
        return scenario(Effect.succeed(["embedded", db]), side)
      },
      timeoutMs
    )
  })

  describe(`cluster engine: ${what}`, () => {
    it.live(
      title,
      () => {
        const { side } = files()
        return scenario(
          Effect.gen(function* () {
            const url = yield* withTestDatabase
            return ["cluster", url, String(yield* Effect.promise(freePort))]
          }),
          side
        )
      },
      timeoutMs
    )
  })
}
