/**
 * Memory of a worker holding waiting Flows: one child process (`rss-child.ts`) per measurement, each on its
 * own throwaway storage, so the readings start from a clean heap.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { nodeFlags } from "../src/testing/ChildProcess.ts"
import type { MemoryReading } from "./rss-child.ts"
import { type Mode, makeStorage } from "./targets.ts"

export type { MemoryReading }

export interface MemoryResult {
  readonly mode: Mode
  readonly flows: number
  /** Once every Flow is waiting on its channel. */
  readonly waiting: MemoryReading
  /** After `idleMs` more without traffic (idle entities expired), when requested. */
  readonly idle: MemoryReading | undefined
}

const childPath = fileURLToPath(new URL("./rss-child.ts", import.meta.url))

/** Runs one child and parses its `MEMORY` lines. */
const runChild = async (mode: Mode, flows: number, idleMs: number): Promise<MemoryResult> => {
  const storage = await makeStorage(mode)
  try {
    const lines: Array<string> = []
    let stderr = ""
    const child = spawn(
      process.execPath,
      [...nodeFlags, "--expose-gc", childPath, mode, String(flows), storage.location, String(idleMs)],
      { stdio: ["ignore", "pipe", "pipe"] }
    )
    let buffer = ""
    child.stdout.on("data", (chunk: Buffer) => {
      buffer += chunk.toString("utf8")
      const parts = buffer.split("\n")
      buffer = parts.pop()!
      lines.push(...parts)
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    const timeout = setTimeout(() => child.kill("SIGKILL"), idleMs + 180_000)
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
    clearTimeout(timeout)
    const reading = (kind: string): MemoryReading | undefined => {
      const line = lines.find((l) => l.startsWith(`MEMORY ${kind} `))
      return line === undefined ? undefined : (JSON.parse(line.slice(`MEMORY ${kind} `.length)) as MemoryReading)
    }
    const waiting = reading("waiting")
    if (code !== 0 || waiting === undefined) {
      const error = lines.find((l) => l.startsWith("ERROR")) ?? stderr.trim().split("\n").slice(-5).join(" | ")
      throw new Error(`memory child (${mode}, ${flows} Flows) exited with ${code}: ${error}`)
    }
    return { mode, flows, waiting, idle: reading("idle") }
  } finally {
    await storage.cleanup()
  }
}

/** All measurements at once (they are separate processes on separate storage). */
export const measureMemory = (
  modes: ReadonlyArray<Mode>,
  counts: ReadonlyArray<number>,
  idleMs: number
): Promise<Array<MemoryResult>> =>
  Promise.all(modes.flatMap((mode) => counts.map((flows) => runChild(mode, flows, idleMs))))
