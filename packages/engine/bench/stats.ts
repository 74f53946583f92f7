/** Small statistics and formatting helpers for the benchmark. */

/** Nearest-rank percentile (`p` in 0..100) of unsorted samples; NaN when there are none. */
export const percentile = (samples: ReadonlyArray<number>, p: number): number => {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.ceil((p / 100) * sorted.length)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!
}

export interface Summary {
  readonly n: number
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly mean: number
}

export const summarize = (samples: ReadonlyArray<number>): Summary => ({
  n: samples.length,
  p50: percentile(samples, 50),
  p99: percentile(samples, 99),
  max: samples.length === 0 ? Number.NaN : Math.max(...samples),
  mean: samples.length === 0 ? Number.NaN : samples.reduce((a, b) => a + b, 0) / samples.length
})

/** Differences between consecutive values. */
export const deltas = (values: ReadonlyArray<number>): Array<number> => values.slice(1).map((v, i) => v - values[i]!)

/** `12.3 ms` / `1.23 s`. */
export const fmtMs = (ms: number): string => {
  if (!Number.isFinite(ms)) return "n/a"
  if (Math.abs(ms) >= 1000) return `${(ms / 1000).toFixed(2)} s`
  if (Math.abs(ms) >= 100) return `${ms.toFixed(0)} ms`
  return `${ms.toFixed(2)} ms`
}

export const fmtBytes = (bytes: number): string => {
  if (!Number.isFinite(bytes)) return "n/a"
  const sign = bytes < 0 ? "-" : ""
  const abs = Math.abs(bytes)
  if (abs >= 1024 * 1024) return `${sign}${(abs / (1024 * 1024)).toFixed(1)} MiB`
  if (abs >= 1024) return `${sign}${(abs / 1024).toFixed(1)} KiB`
  return `${sign}${abs.toFixed(0)} B`
}

export const fmtRatio = (ratio: number): string => (Number.isFinite(ratio) ? `${ratio.toFixed(1)}×` : "n/a")

export const fmtRate = (perSecond: number): string => (Number.isFinite(perSecond) ? `${perSecond.toFixed(0)}/s` : "n/a")
