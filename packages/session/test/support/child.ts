// The session worker (test/fixtures/session-worker.ts) as a child process in its own process group, killed with
// SIGKILL of the whole group, with the engine's kill-test helper.
import { fileURLToPath } from "node:url"
import type { Inspect } from "@durable-agent/engine"
import { type Child, fileLines, spawnNode } from "@durable-agent/engine/testing/ChildProcess"
import * as Effect from "effect/Effect"
import type { Wire } from "../../src/index.ts"

const workerPath = fileURLToPath(new URL("../fixtures/session-worker.ts", import.meta.url))

/** Starts `node session-worker.ts <db> <side> ...args` with `env` added; the scope kills it if it still runs. */
export const spawnSessionWorker = (
  options: { readonly db: string; readonly side: string; readonly env?: Readonly<Record<string, string>> },
  ...args: ReadonlyArray<string>
) => spawnNode(workerPath, [options.db, options.side, ...args], options.env)

/**
 * Waits for `marker` and SIGKILLs the worker's process group. The worker records its side effects before it
 * prints a marker, so they are in the side file when this returns.
 */
export const killAt = (child: Child, marker: string) => Effect.andThen(child.waitFor(marker), child.kill())

/** What the worker prints on its `RESULT` line: the session's snapshot, Step executions, history and events. */
export interface WorkerResult {
  readonly snapshot: Wire.AgentSnapshot
  readonly steps: ReadonlyArray<Inspect.StepExecution>
  readonly history: ReadonlyArray<Inspect.HistoryEvent>
  readonly events: ReadonlyArray<{
    readonly type: string
    readonly stepExecutionId: string
    readonly attempt: number
    readonly payload: Record<string, unknown>
  }>
}

/** Waits for the worker's `RESULT` line and parses it. */
export const workerResult = (child: Child) =>
  Effect.map(child.waitFor("RESULT"), (line): WorkerResult => JSON.parse(line))

export { fileLines }
