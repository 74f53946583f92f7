// The failover demo: starts three runner processes on one Postgres database, starts SESSIONS (default 20)
// sessions from a client-only member, SIGKILLs the runner of the first model call while that call runs
// (mid-turn), waits until every session's first turn ended, prints where each interrupted session finished
// and how long it took, then stops the surviving runners with SIGTERM (they drain and exit 0).
//
//   DATABASE_URL=postgres://... node --conditions=@durable-agent/source src/failover.ts
//
// It prints `FAILOVER <json>` last, which the example's test reads.
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import { clientLayer, runSessions } from "./client.ts"

const url = process.env.DATABASE_URL
if (url === undefined) {
  process.stderr.write("DATABASE_URL is required\n")
  process.exit(2)
}
const sessions = Number(process.env.SESSIONS ?? "20")
const dir = mkdtempSync(join(tmpdir(), "cluster-example-"))
const modelLog = join(dir, "model.log")
const runnerScript = fileURLToPath(new URL("./runner.ts", import.meta.url))

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

interface Runner {
  readonly name: string
  readonly child: ChildProcess
  readonly healthPort: number
  readonly lines: Array<string>
  readonly exited: Promise<number | null>
}

const startRunner = async (name: string): Promise<Runner> => {
  const healthPort = await freePort()
  const child = spawn(process.execPath, [...process.execArgv, runnerScript], {
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      DATABASE_URL: url,
      RUNNER_PORT: String(await freePort()),
      HEALTH_PORT: String(healthPort),
      MODEL_LOG: modelLog,
      MODEL_DELAY_MS: process.env.MODEL_DELAY_MS ?? "3000",
      DRAIN_TIMEOUT_MS: "10000"
    }
  })
  const lines: Array<string> = []
  let buffer = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    buffer += chunk.toString("utf8")
    const parts = buffer.split("\n")
    buffer = parts.pop()!
    lines.push(...parts)
  })
  let stderr = ""
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8")
  })
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => {
      if (code !== 0 && code !== null) process.stderr.write(`${name} exited ${code}: ${stderr.slice(-2000)}\n`)
      resolve(code)
    })
  )
  return { name, child, healthPort, lines, exited }
}

const until = async (what: string, check: () => boolean, timeoutMs = 120_000) => {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const main = async () => {
  const runners = await Promise.all(["runner-a", "runner-b", "runner-c"].map(startRunner))
  await until("three ready runners", () => runners.every((r) => r.lines.some((l) => l.startsWith("READY"))))
  for (const r of runners) {
    const ready = await fetch(`http://127.0.0.1:${r.healthPort}/readyz`)
    console.log(`${r.name} (pid ${r.child.pid}) ready: /readyz ${ready.status}`)
  }
  const prefix = `s${Date.now().toString(36)}`
  const work = Effect.runPromise(runSessions(prefix, sessions).pipe(Effect.provide(clientLayer(url)), Effect.scoped))
  // the first model call that starts: kill its runner while the call runs (mid-turn)
  let victim: Runner | undefined
  await until("a model call", () => {
    victim = runners.find((r) => r.lines.some((l) => l.startsWith("MODEL_CALL")))
    return victim !== undefined
  })
  const killed = victim!
  const killedAt = Date.now()
  killed.child.kill("SIGKILL")
  await killed.exited
  const killedPid = killed.child.pid!
  console.log(`killed ${killed.name} (pid ${killedPid}) with SIGKILL during a model call`)
  const results = await work
  const doneAt = Date.now()
  // sessions whose model call the killed runner started and never ended
  const log = readFileSync(modelLog, "utf8")
    .split("\n")
    .filter((l) => l !== "")
  const interrupted = [
    ...new Set(
      log
        .filter((l) => l.startsWith("start ") && l.endsWith(` ${killedPid}`))
        .map((l) => l.split(" ")[1]!)
        .filter((s) => !log.includes(`end ${s} ${killedPid}`))
    )
  ]
  const moved = interrupted.map((session) => {
    const result = results.find((r) => r.session === session)
    return { session, from: killedPid, reply: result?.reply ?? null }
  })
  for (const m of moved) console.log(`${m.session}: cut off on pid ${m.from}, then "${m.reply}"`)
  const completed = results.filter((r) => r.reply !== null && r.status !== "failed").length
  console.log(
    `${completed}/${results.length} sessions finished their first turn; the last ${doneAt - killedAt} ms after the kill`
  )
  // a graceful stop of the survivors: SIGTERM drains them, they exit 0
  const survivors = runners.filter((r) => r !== killed)
  for (const r of survivors) r.child.kill("SIGTERM")
  const codes = await Promise.all(survivors.map((r) => r.exited))
  console.log(`survivors stopped with SIGTERM, exit codes ${codes.join(", ")}`)
  console.log(
    `FAILOVER ${JSON.stringify({
      sessions: results.length,
      completed,
      statuses: [...new Set(results.map((r) => r.status))],
      killedPid,
      survivorPids: survivors.map((r) => r.child.pid),
      moved,
      survivorExitCodes: codes,
      answeredBy: results.map((r) => r.reply)
    })}`
  )
}

main().then(
  () => {
    rmSync(dir, { recursive: true, force: true })
    process.exit(0)
  },
  (error) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`)
    rmSync(dir, { recursive: true, force: true })
    process.exit(1)
  }
)
