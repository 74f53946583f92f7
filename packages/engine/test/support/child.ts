// The engine's kill-test worker (fixtures/kill-worker.ts) as a child process.
import { fileURLToPath } from "node:url"
import { spawnNode } from "../../src/testing/ChildProcess.ts"

const workerPath = fileURLToPath(new URL("../fixtures/kill-worker.ts", import.meta.url))

/** Starts `node kill-worker.ts ...args` in its own process group; the scope kills it. */
export const spawnWorker = (...args: ReadonlyArray<string>) => spawnNode(workerPath, args)
