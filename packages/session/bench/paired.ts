/**
 * Code against code on a machine whose speed moves: runs 100 sessions × 20 turns (bench/concurrent-child.ts,
 * embedded) from two checkouts of this repository at the same moment, one worker process per core, each on its
 * own SQLite file, and prints each pair's CPU per turn and its ratio (B / A), then the median ratio:
 *
 *   node --conditions=@durable-agent/source packages/session/bench/paired.ts <checkout A> <checkout B> [pairs]
 *
 * Runs one after another on this project's 2-core machine read 5.3 to 8.5 ms of CPU a turn for the same code
 * within minutes; two processes started together see the same machine, so their ratio holds (three pairs of the
 * same code: 0.94-1.04×). `PAIRED_KIND=engine` compares the bare engine Flows of the turn's shape instead;
 * `PAIRED_SESSIONS` and `PAIRED_TURNS` change the shape. Each checkout needs its own `node_modules` (a hard-linked
 * copy of this one's will do). A second worktree of a branch: `git worktree add /tmp/base main`.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import type { ConcurrentResult } from "./concurrent-child.ts"

const [a, b, pairsText] = process.argv.slice(2)
if (a === undefined || b === undefined) {
  process.stderr.write("usage: paired.ts <checkout A> <checkout B> [pairs]\n")
  process.exit(2)
}
for (const checkout of [a, b]) {
  if (!existsSync(join(resolve(checkout), "packages/session/bench/concurrent-child.ts"))) {
    process.stderr.write(`paired.ts: ${checkout} is not a checkout of this repository\n`)
    process.exit(2)
  }
}
const pairs = Number(pairsText ?? 3)
if (!Number.isInteger(pairs) || pairs < 1) {
  process.stderr.write(`paired.ts: pairs must be a positive integer, got ${pairsText}\n`)
  process.exit(2)
}
const kind = process.env.PAIRED_KIND === "engine" ? "engine" : "session"
const sessions = process.env.PAIRED_SESSIONS ?? "100"
const turns = process.env.PAIRED_TURNS ?? "20"
const dir = mkdtempSync(join(tmpdir(), "das-paired-"))

/** One concurrent child of `checkout` on its own SQLite file. */
const run = (checkout: string, file: string) =>
  new Promise<ConcurrentResult>((done, fail) => {
    const child = spawn(
      process.execPath,
      [
        "--conditions=@durable-agent/source",
        "--expose-gc",
        join(resolve(checkout), "packages/session/bench/concurrent-child.ts"),
        "embedded",
        join(dir, file),
        sessions,
        turns,
        kind
      ],
      { cwd: resolve(checkout), stdio: ["ignore", "pipe", "inherit"] }
    )
    let out = ""
    child.once("error", fail)
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
    })
    child.once("exit", (code) => {
      const line = out.split("\n").find((l) => l.startsWith("RESULT "))
      if (code === 0 && line !== undefined) done(JSON.parse(line.slice("RESULT ".length)) as ConcurrentResult)
      else fail(new Error(`${checkout}: exited with ${code}: ${out.trim().split("\n").at(-1) ?? ""}`))
    })
  })

try {
  const ratios: Array<number> = []
  for (let i = 1; i <= pairs; i++) {
    // both children run to their end before a failure is reported (the directory goes only after both)
    const [sa, sb] = await Promise.allSettled([run(a, `a-${i}.db`), run(b, `b-${i}.db`)])
    if (sa.status === "rejected") throw sa.reason
    if (sb.status === "rejected") throw sb.reason
    const ra = sa.value
    const rb = sb.value
    const ratio = rb.cpuMsPerTurn / ra.cpuMsPerTurn
    ratios.push(ratio)
    process.stdout.write(
      `pair ${i}: A ${ra.cpuMsPerTurn.toFixed(2)} ms CPU/turn (${ra.turnsPerSecond.toFixed(0)}/s), B ${rb.cpuMsPerTurn.toFixed(2)} ms (${rb.turnsPerSecond.toFixed(0)}/s): B/A ${ratio.toFixed(3)}\n`
    )
  }
  const sorted = [...ratios].sort((x, y) => x - y)
  const mid = sorted.length / 2
  const median = sorted.length % 2 === 1 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  process.stdout.write(`median B/A CPU per turn: ${median.toFixed(3)} (${kind})\n`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
