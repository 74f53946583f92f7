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

/** The open conversation's session ID (the page's URL hash). */
const sessionIdOf = async (page: Page) => decodeURIComponent(new URL(page.url()).hash.slice(1))

/** The open conversation's snapshot, read with the page's cookie. */
const snapshot = async (page: Page) => {
  const sessionId = await sessionIdOf(page)
  const response = await page.request.get(`http://127.0.0.1:${port}/api/chat/${sessionId}/snapshot`)
  return (await response.json()) as {
    snapshot: {
      state: { active_turn_id: string | null; turn_count: number }
      messages: Array<{ role: string; text: string | null; turn_id: string }>
    }
  }
}

const DESKTOP = { width: 1280, height: 800 }
const PHONE = { width: 360, height: 740 }

/** Screenshots at desktop and at phone width (the viewport is put back). */
const shots = async (page: Page, name: string) => {
  await shot(page, `${name}-desktop`)
  await page.setViewportSize(PHONE)
  await page.waitForTimeout(100)
  await shot(page, `${name}-phone`)
  await page.setViewportSize(DESKTOP)
}

/** Whether the page is wider than its viewport (a horizontal scroll bar). */
const overflows = (page: Page) =>
  page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth)

/** Whether the message list shows its end, and the input sits inside the viewport. */
const atBottom = async (page: Page) => {
  const scrolled = await page
    .getByTestId("scroller")
    .evaluate((e) => e.scrollHeight - e.scrollTop - e.clientHeight < 48)
  const box = await page.getByTestId("input").boundingBox()
  const viewport = page.viewportSize()
  return scrolled && box !== null && viewport !== null && box.y + box.height <= viewport.height
}

const LONG_END = "That is all."

/** How much of the long answer to `message` the last assistant message shows (0 before it starts). */
const streamedOf = async (page: Page, message: string) => {
  const text = (await lastAnswer(page).allTextContents()).join("")
  const start = `You said "${message}".`
  return text.startsWith(start) ? text.length - start.length : 0
}

beforeAll(async () => {
  mkdirSync(output, { recursive: true })
  dir = mkdtempSync(join(tmpdir(), "das-web-e2e-"))
  port = await freePort()
  server = await startServer(false)
  browser = await launch()
}, 180_000)

/** Chromium on the run's own profile directory (a relaunch keeps its cookies, as a closed browser does). */
const launch = () =>
  chromium.launchPersistentContext(join(dir, "chromium-profile"), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: DESKTOP,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run"
    ]
  })

afterAll(async () => {
  await browser?.close()
  if (server !== undefined && server.exitCode === null && server.signalCode === null) await killServer(server)
  rmSync(dir, { recursive: true, force: true })
})

describe("web chat in Chromium", () => {
  it("a small product: streams, reloads, markdown, approvals, stop, a killed server, questions, plans, conversations, a phone", async () => {
    expect(existsSync(CHROMIUM)).toBe(true)
    let page = await browser!.newPage()
    const consoleLog: Array<string> = []
    const watch = (p: Page) => {
      p.on("console", (m) => consoleLog.push(`${m.type()}: ${m.text()}`))
      p.on("pageerror", (e) => consoleLog.push(`pageerror: ${e.message}`))
    }
    watch(page)
    onTestFailed(async () => {
      await shot(page, "failure")
      writeFileSync(join(output, "failure-console.txt"), consoleLog.join("\n"))
    })
    await page.goto(`http://127.0.0.1:${port}/`)
    await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 }).toBe("ready")
    expect(await page.getByTestId("conversation").count()).toBe(1)
    expect(await page.getByTestId("chat-title").textContent()).toBe("New chat")

    // the user cookie outlives the browser session (Max-Age), so closing the browser keeps the conversations
    const uid = (await browser!.cookies()).find((c) => c.name === "uid")
    expect(uid?.expires ?? -1).toBeGreaterThan(Date.now() / 1000 + 300 * 24 * 3600)

    // 1. streamed text: the answer grows while the status says streaming; the conversation takes its title
    await send(page, "hello there")
    await expect.poll(async () => streamedOf(page, "hello there"), { timeout: 30_000 }).toBeGreaterThan(20)
    expect(await page.getByTestId("status").textContent()).toBe("streaming")
    const partial = (await lastAnswer(page).allTextContents()).join("")
    expect(partial.endsWith(LONG_END)).toBe(false)
    await expect.poll(() => page.getByTestId("chat-title").textContent(), { timeout: 10_000 }).toBe("hello there")
    await shot(page, "1-streaming")

    // 2. reload in the middle of the turn: the page replays it and the turn continues to its end
    await page.reload()
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join(""), { timeout: 60_000 })
      .toContain(LONG_END)
    const first = await snapshot(page)
    const stored = first.snapshot.messages.filter((m) => m.role === "assistant").at(-1)?.text
    expect((await lastAnswer(page).allTextContents()).join("")).toBe(stored)
    // auto-scroll: the newest message is in view, and the input is pinned below it
    await expect.poll(() => atBottom(page), { timeout: 10_000 }).toBe(true)
    await shot(page, "2-after-reload")

    // 3. markdown: bold text and a code block
    await send(page, "show code")
    const code = page.locator('[data-testid="message-assistant"]').last().locator("pre code")
    await code.waitFor({ timeout: 60_000 })
    await expect.poll(() => code.textContent(), { timeout: 60_000 }).toContain('console.log(greet("web"))')
    expect(await page.locator('[data-testid="message-assistant"]').last().locator("strong").textContent()).toBe(
      "TypeScript"
    )
    await expect.poll(() => atBottom(page), { timeout: 10_000 }).toBe(true)
    await shots(page, "3-markdown")

    // 4. a write waits for approval in a styled card: the status says so, Stop works, the input waits
    await send(page, "save buy milk")
    await page.getByTestId("approve").waitFor({ timeout: 60_000 })
    const write = page.locator('[data-tool="save_note"]')
    expect(await write.getAttribute("data-state")).toBe("approval-requested")
    expect(await write.getByTestId("effect").textContent()).toBe("non_idempotent_write")
    expect(await page.locator('[data-tool="read_notes"]').getByTestId("effect").textContent()).toBe("read")
    await expect
      .poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 })
      .toBe("waiting for your approval")
    expect(await page.getByTestId("stop").isEnabled()).toBe(true)
    expect(await page.getByTestId("input").isEnabled()).toBe(false)
    expect(await page.getByTestId("send").isEnabled()).toBe(false)
    await shots(page, "4-approval")
    await page.getByTestId("approve").click()
    await expect.poll(() => write.getAttribute("data-state"), { timeout: 60_000 }).toBe("output-available")
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join(""), { timeout: 60_000 })
      .toContain("read_notes →")
    expect(readFileSync(join(dir, "notes.md"), "utf8")).toBe("save buy milk\n")
    await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 }).toBe("ready")
    // no stray "." line: every paragraph and list item of the answer has words
    const lines = await page
      .locator('[data-testid="message-assistant"]')
      .last()
      .locator(".markdown p, .markdown li")
      .allTextContents()
    expect(lines.every((l) => /\w/.test(l))).toBe(true)
    await shot(page, "4-approved")
    // a reload keeps the effect classes and the output
    await page.reload()
    await page.locator('[data-tool="save_note"]').waitFor({ timeout: 30_000 })
    expect(await page.locator('[data-tool="save_note"]').getByTestId("effect").textContent()).toBe(
      "non_idempotent_write"
    )
    expect(await page.locator('[data-tool="read_notes"]').getByTestId("effect").textContent()).toBe("read")
    expect(await page.locator('[data-tool="save_note"] .output').textContent()).toBe("saved: save buy milk")

    // 4b. a message from a second tab while an approval waits: refused (409) with a notice and nothing sent; the
    // tab then shows the waiting approval too. Stop while the approval waits: the turn ends "Stopped", the write
    // never runs
    const other = await browser!.newPage()
    watch(other)
    await other.goto(page.url())
    await expect.poll(() => other.getByTestId("status").textContent(), { timeout: 30_000 }).toBe("ready")
    await send(page, "save eggs")
    await page.getByTestId("approve").waitFor({ timeout: 60_000 })
    await other.getByTestId("input").fill("hello from the other tab")
    await other.getByTestId("send").click()
    await other.getByTestId("notice").waitFor({ timeout: 30_000 })
    expect(await other.getByTestId("notice").textContent()).toContain("waits for your approval")
    await other.getByTestId("approve").waitFor({ timeout: 60_000 })
    await expect
      .poll(() => other.getByTestId("status").textContent(), { timeout: 30_000 })
      .toBe("waiting for your approval")
    expect(await other.getByTestId("input").isEnabled()).toBe(false)
    expect(await other.getByText("hello from the other tab").count()).toBe(0)
    await shots(other, "4b-other-tab-refused")
    await page.getByTestId("stop").click()
    const stoppedApproval = page.locator('[data-testid="message-assistant"]').last()
    await stoppedApproval.getByTestId("stopped").waitFor({ timeout: 30_000 })
    expect(await page.getByTestId("approve").count()).toBe(0)
    await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 }).toBe("ready")
    const afterStop = await snapshot(page)
    expect(afterStop.snapshot.state.active_turn_id).toBeNull()
    expect(afterStop.snapshot.messages.some((m) => m.text === "hello from the other tab")).toBe(false)
    expect(readFileSync(join(dir, "notes.md"), "utf8")).toBe("save buy milk\n")
    await shot(page, "4b-stopped-approval")
    // the second tab still shows the approval it was given; its Approve is refused (the turn is over), says so, and
    // the tab then shows the stopped turn
    await other.getByTestId("approve").click()
    await expect
      .poll(() => other.getByTestId("notice").textContent(), { timeout: 30_000 })
      .toContain("already answered, or the turn stopped")
    await other.locator('[data-testid="message-assistant"]').last().getByTestId("stopped").waitFor({ timeout: 30_000 })
    expect(await other.getByTestId("approve").count()).toBe(0)
    expect(await other.getByTestId("status").textContent()).toBe("ready")
    expect(readFileSync(join(dir, "notes.md"), "utf8")).toBe("save buy milk\n")
    await other.close()

    // 5. stop: a durable cancel_turn ends the turn; the answer keeps its words and says "Stopped", also after a reload
    await send(page, "tell me a story")
    await expect.poll(async () => streamedOf(page, "tell me a story"), { timeout: 30_000 }).toBeGreaterThan(10)
    await page.getByTestId("stop").click()
    await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 }).toBe("ready")
    await expect.poll(async () => (await snapshot(page)).snapshot.state.active_turn_id, { timeout: 30_000 }).toBeNull()
    const stoppedMessage = page.locator('[data-testid="message-assistant"]').last()
    await stoppedMessage.getByTestId("stopped").waitFor({ timeout: 30_000 })
    const seen = (await lastAnswer(page).allTextContents()).join("")
    expect(seen.length).toBeGreaterThan(0)
    expect(seen.includes(LONG_END)).toBe(false)
    await shot(page, "5-stopped")
    await page.reload()
    await page.locator('[data-testid="message-assistant"]').last().getByTestId("stopped").waitFor({ timeout: 30_000 })
    expect((await lastAnswer(page).allTextContents()).join("")).toBe(seen)

    // 6. kill the server (the worker) with SIGKILL mid-turn, start it again: the page recovers and the turn ends
    await send(page, "one more long answer")
    await expect.poll(async () => streamedOf(page, "one more long answer"), { timeout: 30_000 }).toBeGreaterThan(10)
    await killServer(server!)
    await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 }).toBe("reconnecting…")
    await shot(page, "6-server-killed")
    server = await startServer(true)
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join(""), { timeout: 90_000 })
      .toContain(LONG_END)
    const last = await snapshot(page)
    expect(last.snapshot.state.active_turn_id).toBeNull()
    expect(last.snapshot.messages.at(-1)?.text).toContain("one more long answer")
    await shot(page, "6-recovered")

    // 7. a question (ask_user) shows once, as its card; a click answers it and the turn goes on with the answer
    await send(page, "ask me something")
    const question = page.getByTestId("question").last()
    await question.waitFor({ timeout: 60_000 })
    expect(await question.getAttribute("data-status")).toBe("pending")
    expect(await question.getByTestId("choice").allTextContents()).toEqual(["red", "blue"])
    const asked = page.locator('[data-testid="message-assistant"]').last()
    expect(await asked.locator('[data-tool="ask_user"]').count()).toBe(0)
    expect(await asked.getByTestId("question").count()).toBe(1)
    await expect
      .poll(() => page.getByTestId("status").textContent(), { timeout: 30_000 })
      .toBe("waiting for your answer")
    await shots(page, "7-question")
    await question.getByTestId("choice").filter({ hasText: "blue" }).click()
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join(""), { timeout: 60_000 })
      .toContain("ask_user →")
    await expect.poll(() => question.getAttribute("data-status"), { timeout: 30_000 }).toBe("answered")
    expect(await question.getByTestId("question-state").textContent()).toBe("answered: blue")
    expect(await asked.getByTestId("question").count()).toBe(1)
    await expect.poll(async () => (await snapshot(page)).snapshot.state.active_turn_id, { timeout: 30_000 }).toBeNull()
    await shot(page, "7-answered")

    // 8. a plan (write_todos): the plan card shows its tasks
    await send(page, "make a plan")
    const plan = page.getByTestId("plan").last()
    await plan.waitFor({ timeout: 60_000 })
    expect(await plan.getAttribute("data-revision")).toBe("1")
    expect(await plan.locator("li").count()).toBe(3)
    expect(await plan.locator("li").nth(1).getAttribute("data-status")).toBe("in_progress")
    await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 60_000 }).toBe("ready")
    await expect.poll(() => atBottom(page), { timeout: 10_000 }).toBe(true)
    await shots(page, "8-plan")

    // 9. at 360 px nothing overflows, the input stays pinned, and the menu opens the conversation list
    await page.setViewportSize(PHONE)
    await page.getByTestId("scroller").evaluate((e) => e.scrollTo(0, e.scrollHeight))
    expect(await overflows(page)).toBe(false)
    expect(await atBottom(page)).toBe(true)
    await page.getByTestId("menu").click()
    await page.getByTestId("new-chat").waitFor({ state: "visible" })
    await shot(page, "9-phone-menu")
    await page.getByTestId("close-menu").click()
    await page.setViewportSize(DESKTOP)

    // 10. conversations: new, switch, rename, delete
    const firstId = await sessionIdOf(page)
    await page.getByTestId("new-chat").click()
    await expect.poll(() => page.getByTestId("conversation").count(), { timeout: 10_000 }).toBe(2)
    await expect.poll(() => sessionIdOf(page)).not.toBe(firstId)
    const secondId = await sessionIdOf(page)
    expect(await page.locator('[data-testid="message-user"]').count()).toBe(0)
    await send(page, "a second conversation")
    await expect
      .poll(async () => (await lastAnswer(page).allTextContents()).join(""), { timeout: 60_000 })
      .toContain(LONG_END)
    const item = (id: string) => page.locator(`[data-testid="conversation"][data-id="${id}"]`)
    await expect
      .poll(() => item(secondId).getByTestId("conversation-title").textContent())
      .toBe("a second conversation")
    // switch back: the first conversation's messages
    await item(firstId).getByTestId("conversation-title").click()
    await expect.poll(() => sessionIdOf(page)).toBe(firstId)
    await expect.poll(() => page.getByTestId("plan").count(), { timeout: 30_000 }).toBe(1)
    expect(await page.locator('[data-testid="message-user"]').first().textContent()).toBe("hello there")
    // rename
    await item(firstId).getByTestId("rename").click()
    await item(firstId).getByTestId("rename-input").fill("Groceries and stories")
    await item(firstId).getByTestId("rename-input").press("Enter")
    await expect.poll(() => item(firstId).getByTestId("conversation-title").textContent()).toBe("Groceries and stories")
    await expect.poll(() => page.getByTestId("chat-title").textContent()).toBe("Groceries and stories")
    await shots(page, "10-conversations")
    // delete the second: the list has one, and its session is gone for good
    await item(secondId).getByTestId("delete").click()
    await expect.poll(() => page.getByTestId("conversation").count(), { timeout: 10_000 }).toBe(1)
    const gone = await page.request.get(`http://127.0.0.1:${port}/api/chat/${secondId}/snapshot`)
    expect(gone.status()).toBe(403)

    // 11. close the browser and open it again: the conversation is still there (the cookie has Max-Age)
    await browser!.close()
    browser = await launch()
    page = await browser.newPage()
    watch(page)
    await page.goto(`http://127.0.0.1:${port}/`)
    await expect
      .poll(() => page.getByTestId("chat-title").textContent(), { timeout: 30_000 })
      .toBe("Groceries and stories")
    await expect.poll(() => page.getByTestId("plan").count(), { timeout: 30_000 }).toBe(1)
    await shot(page, "11-browser-reopened")
  }, 420_000)

  it("a port in use: the server says so and exits 1, no empty ServeError", async () => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", () => resolve()))
    const address = taken.address()
    const busy = typeof address === "object" && address !== null ? address.port : 0
    try {
      const child = spawn(process.execPath, [...nodeFlags, serverFile], {
        env: { ...process.env, PORT: String(busy), WEB_DB: join(dir, "busy.db"), WEB_SKIP_BUILD: "1" },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stderr = ""
      child.stderr?.on("data", (chunk: Buffer) => {
        stderr += chunk.toString()
      })
      const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)))
      expect(code).toBe(1)
      expect(stderr).toContain(`web chat: cannot listen on 127.0.0.1:${busy}: the port is in use`)
      expect(stderr).not.toContain("ServeError")
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()))
    }
  }, 120_000)
})
