/**
 * The two engine bindings under test, each with its own throwaway storage (a temporary SQLite file, or a
 * fresh Postgres database) and a cleanup that removes it.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type * as Layer from "effect/Layer"
import { Engine, type EngineError } from "../src/index.ts"
import { freePort } from "../test/support/ports.ts"
import { createTestDatabase } from "../test/support/postgres.ts"

export type Mode = "embedded" | "cluster"

export interface Storage {
  readonly mode: Mode
  /** The SQLite file, or the Postgres URL. */
  readonly location: string
  /** Builds a fresh engine layer on this storage (cluster: on a free runner port). */
  readonly engine: () => Promise<Layer.Layer<Engine.EngineServices, EngineError>>
  /** Removes the file or drops the database. Idempotent. */
  readonly cleanup: () => Promise<void>
}

/** Task slots of a benchmark runner: the workloads run many Flows at once; the default (the CPU count) would
 * measure the slot limit instead of the engine. */
const BENCH_TASK_SLOTS = 1024

/** The engine layer on a SQLite file (WAL, synchronous=FULL) or a Postgres URL (a runner on a free port). */
export const engineFor = async (
  mode: Mode,
  location: string
): Promise<Layer.Layer<Engine.EngineServices, EngineError>> =>
  mode === "embedded"
    ? Engine.layerEmbedded({ filename: location, synchronous: "FULL", maxConcurrentTasks: BENCH_TASK_SLOTS })
    : Engine.layerCluster({ url: location, runnerPort: await freePort(), maxConcurrentTasks: BENCH_TASK_SLOTS })

/** A temporary SQLite file with the embedded engine's default durability (WAL, synchronous=FULL). */
export const embeddedStorage = (): Storage => {
  const dir = mkdtempSync(join(tmpdir(), "das-bench-"))
  const filename = join(dir, "engine.db")
  return {
    mode: "embedded",
    location: filename,
    engine: () => engineFor("embedded", filename),
    cleanup: async () => rmSync(dir, { recursive: true, force: true })
  }
}

/** A fresh database on the test Postgres server. */
export const clusterStorage = async (): Promise<Storage> => {
  const database = await createTestDatabase()
  return {
    mode: "cluster",
    location: database.url,
    engine: () => engineFor("cluster", database.url),
    cleanup: database.drop
  }
}

const pending = new Set<() => Promise<void>>()

/** Makes storage whose cleanup also runs from {@link cleanupAll} (e.g. on Ctrl-C). */
export const makeStorage = async (mode: Mode): Promise<Storage> => {
  const storage = mode === "embedded" ? embeddedStorage() : await clusterStorage()
  const cleanup = async () => {
    pending.delete(cleanup)
    await storage.cleanup()
  }
  pending.add(cleanup)
  return { ...storage, cleanup }
}

/** Removes every storage not cleaned up yet. */
export const cleanupAll = async (): Promise<void> => {
  await Promise.allSettled([...pending].map((cleanup) => cleanup()))
}
