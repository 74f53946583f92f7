/**
 * End to end in Debian's Chromium: `npm run web`'s server as a child process (its own process group, killed with
 * SIGKILL), the page driven with playwright-core. Screenshots go to examples/web/test-output (git-ignored).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { nodeFlags } from "@durable-agent/engine/testing/ChildProcess"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest"

const here = dirname(fileURLToPath(import.meta.url))
const serverFile = join(here, "..", "src", "server.ts")
const output = join(here, "..", "test-output")
const CHROMIUM = "/usr/bin/chromium"

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

let dir = ""
let port = 0
let server: ChildProcess | undefined
let browser: BrowserContext | undefined

/** Starts the web chat and waits for its "web chat on" line. */
const startServer = (skipBuild: boolean) =>
  new Promise<ChildProcess>((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeFlags, serverFile], {
      env: {
        ...process.env,
        PORT: String(port),
        WEB_DB: join(dir, "web.db"),
        WEB_WORD_DELAY_MS: "70",
        ...(skipBuild ? { WEB_SKIP_BUILD: "1" } : {})
      },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let log = ""
    const timer = setTimeout(() => reject(new Error(`the server did not start:\n${log}`)), 120_000)
    const onData = (chunk: Buffer) => {
      log += chunk.toString()
      if (log.includes("web chat on")) {
        clearTimeout(timer)
        resolve(child)
      }
    }
    child.stdout?.on("data", onData)
    child.stderr?.on("data", onData)
    child.once("exit", (code) => {
      clearTimeout(timer)
      if (!log.includes("web chat on")) reject(new Error(`the server exited (${code}):\n${log}`))
    })
  })

const killServer = async (child: ChildProcess) => {
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
  await exited
}

const shot = (page: Page, name: string) => page.screenshot({ path: join(output, `${name}.png`), fullPage: true })

/** The text of the last assistant message on the page. */
const lastAnswer = (page: Page) =>
  page.locator('[data-testid="message-assistant"]').last().locator('[data-testid="text"]')

/** Sends a message once the previous turn's stream has ended. */
const send = async (page: Page, text: string) => {
  await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 60_000 }).toBe("ready")
  await page.getByTestId("input").fill(text)
  await page.getByTestId("send").click()
}

/** The session's snapshot, read with the page's cookie. */
const snapshot = async (page: Page) => {
  const me = (await (await page.request.get(`http://127.0.0.1:${port}/api/me`)).json()) as { sessionId: string }
  const response = await page.request.get(`http://127.0.0.1:${port}/api/chat/${me.sessionId}/snapshot`)
  return (await response.json()) as {
    snapshot: {
      state: { active_turn_id: string | null; turn_count: number }
      messages: Array<{ role: string; text: string | null; turn_id: string }>
    }
  }
}

const LONG_END = "That is all."

beforeAll(async () => {
  mkdirSync(output, { recursive: true })
  dir = mkdtempSync(join(tmpdir(), "das-web-e2e-"))
  port = await freePort()
  server = await startServer(false)
  // a fresh profile directory per run
  browser = await chromium.launchPersistentContext(join(dir, "chromium-profile"), {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run"
    ]
  })
}, 180_000)

afterAll(async () => {
  await browser?.close()
  if (server !== undefined && server.exitCode === null && server.signalCode === null) await killServer(server)
  rmSync(dir, { recursive: true, force: true })
})

describe("web chat in Chromium", () => {
  it("streams, survives a reload, approves a write, stops a turn, recovers from a killed server, answers a question and shows a plan", async () => {
    expect(existsSync(CHROMIUM)).toBe(true)
    const page = await browser!.newPage()
    const consoleLog: Array<string> = []
    page.on("console", (m) => consoleLog.push(`${m.type()}: ${m.text()}`))
    page.on("pageerror", (e) => consoleLog.push(`pageerror: ${e.message}`))
    onTestFailed(async () => {
      await shot(page, "failure")
      writeFileSync(join(output, "failure-console.txt"), consoleLog.join("\n"))
    })
    await page.goto(`http://127.0.0.1:${port}/`)
    await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 }).toBe("ready")

    // 1. streamed text: the answer grows while the status says streaming
    await send(page, "hello there")
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join("").length, { timeout: 30_000 })
      .toBeGreaterThan(20)
    expect(await page.getByTestId("status").textContent()).toBe("streaming")
    const partial = (await lastAnswer(page).allTextContents()).join("")
    expect(partial.endsWith(LONG_END)).toBe(false)
    await shot(page, "1-streaming")

    // 2. reload in the middle of the turn: the page replays it and the turn continues to its end
    await page.reload()
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join(""), { timeout: 60_000 })
      .toContain(LONG_END)
    const first = await snapshot(page)
    const stored = first.snapshot.messages.filter((m) => m.role === "assistant").at(-1)?.text
    expect((await lastAnswer(page).allTextContents()).join("")).toBe(stored)
    await shot(page, "2-after-reload")

    // 3. a write waits for approval; approving runs it once and the turn ends
    await send(page, "save buy milk")
    await page.getByTestId("approve").waitFor({ timeout: 60_000 })
    const write = page.locator('[data-tool="save_note"]')
    expect(await write.getAttribute("data-state")).toBe("approval-requested")
    expect(await write.locator(".effect").textContent()).toBe("non_idempotent_write")
    await shot(page, "3-approval")
    await page.getByTestId("approve").click()
    await expect.poll(() => write.getAttribute("data-state"), { timeout: 60_000 }).toBe("output-available")
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join(""), { timeout: 60_000 })
      .toContain("read_notes →")
    expect(readFileSync(join(dir, "notes.md"), "utf8")).toBe("save buy milk\n")
    await shot(page, "3-approved")

    // 4. stop: a durable cancel_turn ends the turn before the model finished
    await send(page, "tell me a story")
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join("").length, { timeout: 30_000 })
      .toBeGreaterThan(10)
    await page.getByTestId("stop").click()
    await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 }).toBe("ready")
    await expect.poll(async () => (await snapshot(page)).snapshot.state.active_turn_id, { timeout: 30_000 }).toBeNull()
    const afterStop = await snapshot(page)
    const stoppedTurn = afterStop.snapshot.messages.filter((m) => m.role === "user").at(-1)!.turn_id
    const stoppedAnswers = afterStop.snapshot.messages.filter(
      (m) => m.turn_id === stoppedTurn && m.role === "assistant"
    )
    expect(stoppedAnswers.some((m) => m.text?.includes(LONG_END))).toBe(false)
    expect((await lastAnswer(page).allTextContents()).join("").includes(LONG_END)).toBe(false)
    await shot(page, "4-stopped")

    // 5. kill the server (the worker) with SIGKILL mid-turn, start it again: the page recovers and the turn ends
    await send(page, "one more long answer")
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join("").length, { timeout: 30_000 })
      .toBeGreaterThan(10)
    await killServer(server!)
    await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 }).toBe("reconnecting…")
    await shot(page, "5-server-killed")
    server = await startServer(true)
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join(""), { timeout: 90_000 })
      .toContain(LONG_END)
    const last = await snapshot(page)
    expect(last.snapshot.state.active_turn_id).toBeNull()
    expect(last.snapshot.messages.at(-1)?.text).toContain("one more long answer")
    await shot(page, "5-recovered")

    // 6. a question (ask_user): its choices show, a click answers it, and the turn goes on with the answer
    await send(page, "ask me something")
    const question = page.getByTestId("question").last()
    await question.waitFor({ timeout: 60_000 })
    expect(await question.getAttribute("data-status")).toBe("pending")
    expect(await question.getByTestId("choice").allTextContents()).toEqual(["red", "blue"])
    const asked = page.locator('[data-testid="message-assistant"]').last().locator('[data-tool="ask_user"]')
    expect(await asked.count()).toBe(1)
    await shot(page, "6-question")
    await question.getByTestId("choice").filter({ hasText: "blue" }).click()
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join(""), { timeout: 60_000 })
      .toContain("ask_user →")
    await expect.poll(() => question.getAttribute("data-status"), { timeout: 30_000 }).toBe("answered")
    expect(await question.getByTestId("question-state").textContent()).toBe("answered: blue")
    expect(await asked.count()).toBe(1)
    expect(await asked.getAttribute("data-state")).toBe("output-available")
    await expect.poll(async () => (await snapshot(page)).snapshot.state.active_turn_id, { timeout: 30_000 }).toBeNull()
    await shot(page, "6-answered")

    // 7. a plan (write_todos): the plan part shows its tasks
    await send(page, "make a plan")
    const plan = page.getByTestId("plan").last()
    await plan.waitFor({ timeout: 60_000 })
    expect(await plan.getAttribute("data-revision")).toBe("1")
    expect(await plan.locator("li").count()).toBe(3)
    expect(await plan.locator("li").nth(1).getAttribute("data-status")).toBe("in_progress")
    await shot(page, "7-plan")
  }, 300_000)
})
