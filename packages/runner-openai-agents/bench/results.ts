// The runner benchmarks' figures in bench-results.json, through the engine's BenchResults (one format for
// every benchmark of `npm run bench`).
import * as BenchResults from "@durable-agent/engine/testing/BenchResults"

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

/** Records `figures` over the entries of the same names; returns the file's path. */
export const mergeResults = (figures: Readonly<Record<string, BenchFigure>>): string => {
  BenchResults.record(
    Object.fromEntries(
      Object.entries(figures).map(([name, f]) => [
        name,
        {
          value: f.value,
          unit: f.unit,
          baseline: { name: f.baseline_name, value: f.baseline, unit: f.unit },
          target: f.target,
          met: f.pass,
          note: f.note
        }
      ])
    )
  )
  return BenchResults.file()
}
