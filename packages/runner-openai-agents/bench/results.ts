// Merges benchmark figures into bench-results.json at the repository root, by stable names, keeping every
// entry other benchmarks wrote.
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

/** One figure with the baseline it is compared to. */
export interface BenchFigure {
  readonly value: number
  readonly unit: string
  readonly baseline: number
  readonly baseline_name: string
  readonly target?: string | undefined
  readonly pass?: boolean | undefined
  readonly note?: string | undefined
}

const file = fileURLToPath(new URL("../../../bench-results.json", import.meta.url))

/** Writes `figures` over the entries of the same names; returns the file's path. */
export const mergeResults = (figures: Readonly<Record<string, BenchFigure>>): string => {
  let existing: Record<string, unknown> = {}
  if (existsSync(file)) {
    try {
      const parsed: unknown = JSON.parse(readFileSync(file, "utf8"))
      if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) {
        existing = parsed as Record<string, unknown>
      }
    } catch {
      // an unreadable file is replaced
    }
  }
  const measuredAt = new Date().toISOString()
  const stamped = Object.fromEntries(
    Object.entries(figures).map(([name, f]) => [name, { ...f, measured_at: measuredAt, node: process.version }])
  )
  const merged = { ...existing, ...stamped }
  const sorted = Object.fromEntries(
    Object.keys(merged)
      .sort()
      .map((k) => [k, merged[k]])
  )
  writeFileSync(file, `${JSON.stringify(sorted, null, 2)}\n`)
  return file
}
