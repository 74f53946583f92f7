/**
 * Benchmark figures in a machine-readable file: every benchmark of `npm run bench` records its figures
 * here by a stable name, each with the baseline it was measured against in the same run, so runs can be
 * compared without parsing tables. The file is `bench-results.json` in the directory `npm run bench`
 * was started from (the repository root); it is not committed.
 *
 * @since 0.1.0
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/**
 * One measured figure.
 *
 * @category models
 * @since 0.1.0
 */
export interface Figure {
  readonly value: number
  readonly unit: string
  /** The baseline this figure is compared with, measured in the same run. */
  readonly baseline?: { readonly name: string; readonly value: number; readonly unit: string } | undefined
  /** The target, as text (for example `<= 3x`), and whether the figure met it. */
  readonly target?: string | undefined
  readonly met?: boolean | undefined
  /** What the figure measures, where its name does not say it all. */
  readonly note?: string | undefined
}

/**
 * The file the figures go to.
 *
 * @category files
 * @since 0.1.0
 */
export const file = (): string => join(process.env.INIT_CWD ?? process.cwd(), "bench-results.json")

/**
 * Merges figures (by name) into the results file, with the time and Node version of the run.
 *
 * @category files
 * @since 0.1.0
 */
export const record = (figures: Readonly<Record<string, Figure>>): void => {
  const path = file()
  let current: { figures?: Record<string, unknown> } = {}
  if (existsSync(path)) {
    try {
      current = JSON.parse(readFileSync(path, "utf8"))
    } catch {
      current = {}
    }
  }
  const at = new Date().toISOString()
  const merged = { ...(current.figures ?? {}) }
  for (const [name, figure] of Object.entries(figures)) merged[name] = { ...figure, at, node: process.version }
  writeFileSync(path, `${JSON.stringify({ figures: merged }, null, 2)}\n`)
}
