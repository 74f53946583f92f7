// The run inspector page (`durable-engine inspect`) in Debian's Chromium: a real session on a SQLite file (a
// turn whose first model call fails and is retried, then two parallel reads; a second session whose model call
// fails every attempt, so its turn takes the failure route), the worker closed, then the page served read-only
// on 127.0.0.1 over that file. The test opens the Flows, checks the timeline bars (the retried RunModel attempt,
// the parallel CallTool executions, the failure route), the tool calls with effect class and status, the
// messages and the events, a large input cut and secrets redacted, and saves screenshots in test-output/.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Engine } from "@durable-agent/engine"
import * as InspectCommand from "@durable-agent/engine/InspectCommand"
import * as InspectPage from "@durable-agent/engine/InspectPage"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { HttpServer } from "effect/http"
import * as Layer from "effect/Layer"
import { chromium } from "playwright-core"
import { awaitTurns, type Kit, startAndAwait, weatherTool, withSession } from "./support.ts"

const here = dirname(fileURLToPath(import.meta.url))
const output = join(here, "..", "test-output")
const dir = mkdtempSync(join(tmpdir(), "das-inspect-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const script = [
  { fail: "the provider timed out" },
  {
    toolCalls: [
      { id: "r1", name: "get_weather", arguments: { city: "Paris", api_key: "sk-live-0123456789abcdef" } },
      { id: "r2", name: "get_weather", arguments: { city: "Oslo" } }
    ]
  },
  { text: "Sunny in both." },
  // the second session: its RunModel fails every attempt, so the turn goes to its failure route
  { fail: "the provider timed out" },
  { fail: "the provider timed out" },
  { fail: "the provider timed out" }
]

/** The second session's message: longer than the page shows, quoting a token in its text. */
const LONG_MESSAGE = `use the key Bearer abc.def-123 please ${"x".repeat(3000)}`

describe("the run inspector page in Chromium", () => {
  it.live(
    "a session's timeline: the retried RunModel attempt, parallel tool Steps, tool calls, messages and events",
    () =>
      Effect.gen(function* () {
        const filename = join(dir, "sessions.db")
        const engine = () => Engine.layerEmbedded({ filename, pollInterval: "50 millis", maxConcurrentTasks: 64 })
        yield* withSession({ script, tools: (kit: Kit) => [weatherTool(kit)], engine }, () =>
          Effect.gen(function* () {
            yield* startAndAwait(
              "s-inspect",
              "weather in Paris and Oslo?",
              (s) => (s.state?.turnCount ?? 0) >= 1,
              "turn"
            )
            yield* awaitTurns("s-inspect", 1)
            yield* startAndAwait(
              "s-failing",
              LONG_MESSAGE,
              (s) => (s.state?.turnCount ?? 0) >= 1 && s.state?.activeTurnId === null,
              "the failed turn"
            )
          })
        )
        // the worker is closed: the page reads the file read-only
        const context = yield* Layer.build(
          InspectPage.layer({ port: 0 }).pipe(Layer.provide(InspectCommand.database(filename)))
        )
        const address = Context.get(context, HttpServer.HttpServer).address
        const url = `http://127.0.0.1:${(address as { port: number }).port}/`
        mkdirSync(output, { recursive: true })
        const browser = yield* Effect.acquireRelease(
          Effect.promise(() =>
            chromium.launch({
              executablePath: "/usr/bin/chromium",
              headless: true,
              args: ["--no-sandbox", "--disable-gpu"]
            })
          ),
          (b) => Effect.promise(() => b.close())
        )
        yield* Effect.promise(async () => {
          const page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
          await page.goto(url)
          await page.waitForSelector('body[data-ready="true"]')
          const row = page.locator('[data-testid="flow-row"][data-flow-id="s-inspect"]')
          assert.strictEqual(await row.count(), 1, "the Flow is listed")
          await row.locator("a").click()
          await page.waitForSelector('[data-testid="timeline"]')
          assert.strictEqual(await page.getByTestId("flow-title").textContent(), "s-inspect (TestAgent)")
          // one row per Step execution, in scheduling order
          const steps = await page
            .locator('[data-testid="step-row"]')
            .evaluateAll((rows) =>
              rows.map((r) => [r.getAttribute("data-step"), Number(r.getAttribute("data-attempts"))])
            )
          assert.deepStrictEqual(steps, [
            ["StartAgentSession-1", 1],
            ["RunModel-1", 2],
            ["CallTool-1", 1],
            ["CallTool-2", 1],
            ["ResumeTurn-1", 1],
            ["RunModel-2", 1],
            ["AwaitUserMessage-1", 0]
          ])
          const bars = await page.locator('[data-testid="attempt-bar"]').evaluateAll((els) =>
            els.map((e) => {
              const box = e.getBoundingClientRect()
              return {
                step: e.getAttribute("data-step"),
                attempt: Number(e.getAttribute("data-attempt")),
                outcome: e.getAttribute("data-outcome"),
                left: box.left,
                right: box.right,
                width: box.width
              }
            })
          )
          const of = (step: string) => bars.filter((b) => b.step === step)
          // the retried attempt: a failed bar, then a succeeded one after it
          assert.deepStrictEqual(
            of("RunModel-1").map((b) => [b.attempt, b.outcome]),
            [
              [1, "failure"],
              [2, "success"]
            ]
          )
          assert.isAtMost(
            of("RunModel-1")[0]!.right,
            of("RunModel-1")[1]!.left + 1,
            "the retry comes after the failure"
          )
          // the parallel tool Steps: both succeeded, both start after the model call that asked for them
          for (const step of ["CallTool-1", "CallTool-2"]) {
            assert.deepStrictEqual(
              of(step).map((b) => b.outcome),
              ["success"]
            )
            assert.isAtLeast(of(step)[0]!.left + 1, of("RunModel-1")[1]!.left)
            assert.isAtMost(of(step)[0]!.left, of("ResumeTurn-1")[0]!.right)
            assert.isAbove(of(step)[0]!.width, 0)
          }
          assert.isAtLeast(await page.locator('[data-testid="wait-bar"]').count(), 1, "the waits are drawn")
          // the tool calls with effect class and status, the messages, the events
          const calls = await page
            .locator('[data-testid="tool-call"]')
            .evaluateAll((rows) => rows.map((r) => Array.from(r.querySelectorAll("td")).map((td) => td.textContent)))
          assert.deepStrictEqual(
            calls.map((c) => c.slice(0, 4)),
            [
              ["r1", "get_weather", "read", "succeeded"],
              ["r2", "get_weather", "read", "succeeded"]
            ]
          )
          const messages = (await page.getByTestId("messages").textContent()) ?? ""
          assert.include(messages, "weather in Paris and Oslo?")
          assert.include(messages, "Sunny in both.")
          const events = (await page.getByTestId("events").textContent()) ?? ""
          for (const type of ["turn_started", "tool_call_deferred", "tool_call_finished", "turn_completed"]) {
            assert.include(events, type)
          }
          // secrets are redacted wherever they appear
          const html = await page.content()
          assert.notInclude(html, "sk-live-0123456789abcdef")
          assert.include(html, "[redacted]")
          // the selected Step's input and the decision that scheduled it
          await page.locator('[data-testid="step-row"][data-step="CallTool-2"]').click()
          const detail = (await page.getByTestId("step-detail").textContent()) ?? ""
          assert.include(detail, "scheduled by: RunModel-1")
          assert.include(detail, "r2")
          await page.screenshot({ path: join(output, "inspect-timeline.png") })
          await page.screenshot({ path: join(output, "inspect-page.png"), fullPage: true })
          // a failure route: RunModel's three failed attempts, then RecordTurnFailure marked as the route it is
          await page.goto(`${url}#flow=s-failing`)
          await page.waitForFunction(() =>
            document.querySelector('[data-testid="flow-title"]')?.textContent?.startsWith("s-failing")
          )
          const failing = await page
            .locator('[data-testid="step-row"]')
            .evaluateAll((rows) =>
              rows.map((r) => [
                r.getAttribute("data-step"),
                Number(r.getAttribute("data-attempts")),
                r.querySelector('[data-testid="failure-route"]')?.textContent ?? null
              ])
            )
          assert.deepStrictEqual(failing.slice(0, 3), [
            ["StartAgentSession-1", 1, null],
            ["RunModel-1", 3, null],
            ["RecordTurnFailure-1", 1, "failure route (ModelCallError)"]
          ])
          assert.deepStrictEqual(
            await page
              .locator('[data-testid="attempt-bar"][data-step="RunModel-1"]')
              .evaluateAll((els) => els.map((e) => e.getAttribute("data-outcome"))),
            ["failure", "failure", "failure"]
          )
          await page.locator('[data-testid="step-row"][data-step="RecordTurnFailure-1"]').click()
          assert.include((await page.getByTestId("step-recovery").textContent()) ?? "", "ModelCallError")
          // a large input is cut with a note; a token inside a text is redacted
          await page.locator('[data-testid="step-row"][data-step="StartAgentSession-1"]').click()
          const input = (await page.getByTestId("step-input").textContent()) ?? ""
          assert.match(input, /… \(\d+ more characters\)$/)
          assert.isBelow(input.length, 2100)
          // the long message keeps its turn and role, its text cut
          const first = await page
            .locator('[data-testid="message"]')
            .first()
            .evaluate((r) => Array.from(r.querySelectorAll("td")).map((td) => td.textContent ?? ""))
          assert.deepStrictEqual(first.slice(0, 3), ["1", "turn-1", "user"])
          assert.match(first[3]!, /^use the key \[redacted\] please x+… \(\d+ more characters\)$/)
          const failingHtml = await page.content()
          assert.notInclude(failingHtml, "abc.def-123")
          assert.include(failingHtml, "use the key [redacted] please")
          await page.screenshot({ path: join(output, "inspect-failure-route.png") })
          // read-only: the page offers nothing that writes, and the API answers only GET
          const post = await page.request.post(`${url}api/flows/s-inspect`)
          assert.strictEqual(post.status(), 404)
        })
      }).pipe(Effect.scoped),
    120_000
  )
})
