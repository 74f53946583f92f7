// The session worker (test/fixtures/session-worker.ts) as a child process in its own process group, killed with
// SIGKILL of the whole group, with the engine's kill-test helper.
import { fileURLToPath } from "node:url"
import { fileLines, spawnNode } from "@durable-agent/engine/testing/ChildProcess"

const workerPath = fileURLToPath(new URL("../fixtures/session-worker.ts", import.meta.url))

/** Starts `node session-worker.ts <db> <side> ...args` with `env` added; the scope kills it if it still runs. */
export const spawnSessionWorker = (
  options: { readonly db: string; readonly side: string; readonly env?: Readonly<Record<string, string>> },
  ...args: ReadonlyArray<string>
) => spawnNode(workerPath, [options.db, options.side, ...args], options.env)

export { fileLines }
