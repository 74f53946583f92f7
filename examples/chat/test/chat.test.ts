// Drives the chat the way a person does: in a pseudo-terminal (tmux), typing lines and reading the screen.
// Each test runs `node --conditions=@durable-agent/source examples/chat/src/main.ts` with its own database (CHAT_DB) and a copy of the workspace
// (CHAT_WORKSPACE) in a temp folder, without OPENAI_API_KEY (the scripted demo model), on its own tmux server
// (`tmux -S <temp folder>/tmux.sock`).
import { execFileSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Engine } from "@durable-agent/engine"
import { nodeFlags } from "@durable-agent/engine/testing/ChildProcess"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { FLOW_TYPE } from "../src/agent.ts"

const TMUX = "/usr/bin/tmux"
const REPO = fileURLToPath(new URL("../../..", import.meta.url))
const SEED = fileURLToPath(new URL("../workspace", import.meta.url))
/**
 * The workspace's tracked seed files. A demo run (`npm start`) writes more files there (an approved
 * `summary.md`), which the tests must not copy: they expect the seed only.
 */
const SEED_FILES = ["notes.md", "todo.md"]

let counter = 0

/** One chat under test: its tmux server (socket) and session, database and workspace. */
interface Chat {
  readonly socket: string
  readonly name: string
  readonly db: string
  readonly workspace: string
}

const tmux = (chat: Chat, ...args: ReadonlyArray<string>) =>
  execFileSync(TMUX, ["-S", chat.socket, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

const quote = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`

/** A fresh database and workspace, removed (with the tmux server) when the test ends. */
const makeChat = Effect.acquireRelease(
  Effect.sync((): Chat => {
    const dir = mkdtempSync(join(tmpdir(), "chat-example-"))
    const workspace = join(dir, "workspace")
    mkdirSync(workspace, { recursive: true })
    for (const file of SEED_FILES) cpSync(join(SEED, file), join(workspace, file))
    // the tmux server's socket lives in the temp folder too, so nothing is left behind
    return { socket: join(dir, "tmux.sock"), name: `chat-${++counter}`, db: join(dir, "chat.db"), workspace }
  }),
  (chat) =>
    Effect.sync(() => {
      try {
        tmux(chat, "kill-server")
      } catch {
        // the server is gone already
      }
      rmSync(join(chat.db, ".."), { recursive: true, force: true })
    })
)

/** Starts `node --conditions=@durable-agent/source examples/chat/src/main.ts` (with `args`) in a 160x50 tmux pane. */
const start = (chat: Chat, args: ReadonlyArray<string> = []) =>
  Effect.sync(() => {
    const command = [
      "exec env -u OPENAI_API_KEY",
      `CHAT_DB=${quote(chat.db)}`,
      `CHAT_WORKSPACE=${quote(chat.workspace)}`,
      quote(process.execPath),
      ...nodeFlags,
      "examples/chat/src/main.ts",
      ...args.map(quote)
    ].join(" ")
    tmux(chat, "new-session", "-d", "-s", chat.name, "-x", "160", "-y", "50", "-c", REPO, command)
  })

/**
 * The whole pane, scrollback included, wrapped lines joined: the terminal's (`-J`) and the chat's own, which
 * wraps an answer under its `agent> ` indentation (7 spaces).
 */
const screen = (chat: Chat) =>
  Effect.sync(() => tmux(chat, "capture-pane", "-p", "-J", "-S", "-", "-t", chat.name).replace(/ *\n {7}(?=\S)/g, " "))

const lastLine = (text: string) =>
  text
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => l.length > 0)
    .at(-1) ?? ""

/** Polls the screen until `predicate` holds (60 s at most: a start from source on a busy machine); fails with the screen. */
const waitFor = (chat: Chat, what: string, predicate: (screen: string) => boolean = (s) => s.includes(what)) =>
  screen(chat).pipe(
    Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: predicate }),
    Effect.timeoutOrElse({
      duration: "60 seconds",
      orElse: () =>
        Effect.flatMap(screen(chat), (s) => Effect.die(new Error(`timed out waiting for ${what}; the screen:\n${s}`)))
    })
  )

/** Waits for a prompt (`you>` or an approval question) on the last line. */
const waitForPrompt = (chat: Chat, prompt: string) =>
  waitFor(chat, `the prompt ${prompt}`, (s) => lastLine(s) === prompt.trimEnd())

/** Types a line and presses Enter. */
const type = (chat: Chat, line: string) =>
  Effect.sync(() => {
    tmux(chat, "send-keys", "-t", chat.name, "-l", line)
    tmux(chat, "send-keys", "-t", chat.name, "Enter")
  })

const isRunning = (chat: Chat) =>
  Effect.sync(() => {
    try {
      tmux(chat, "has-session", "-t", chat.name)
      return true
    } catch {
      return false
    }
  })

/** Waits until the chat process is gone (its pane, session and tmux server close with it). */
const waitForExit = (chat: Chat) =>
  isRunning(chat).pipe(
    Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (running) => !running }),
    Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die(new Error("the chat did not exit")) })
  )

/** SIGKILLs the process in the pane (`exec` makes it node itself). */
const kill = (chat: Chat) =>
  Effect.gen(function* () {
    const pid = Number(tmux(chat, "display-message", "-p", "-t", chat.name, "#{pane_pid}").trim())
    assert.match(readFileSync(`/proc/${pid}/cmdline`, "utf8"), /examples\/chat\/src\/main\.ts/)
    process.kill(pid, "SIGKILL")
    yield* waitForExit(chat)
  })

const summary = (chat: Chat) => join(chat.workspace, "summary.md")

const APPROVAL = "approve> run write_file? [y/n]"
const FINAL = "3 items are still open in todo.md."

/** The chat's events of one Step, read from its database once the chat exited. */
const textDeltasOf = (chat: Chat, sessionId: string, stepExecutionId: string) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const events = yield* Stream.runCollect(client.events(sessionId))
    return Array.from(events).filter(
      (e) => e.event.type === "text_delta" && e.event.stepExecutionId === stepExecutionId
    ).length
  }).pipe(
    Effect.provide(AgentSessionClient.layer(FLOW_TYPE)),
    Effect.provide(Engine.layerEmbedded({ filename: chat.db, maxConcurrentTasks: 64 }))
  )

/**
 * Answers `y` to the pending write_file approval, waits for the write, the final answer and the prompt, checks
 * summary.md, and opens /history: the write ran once. Returns the history screen.
 */
const approveTheWrite = (chat: Chat) =>
  Effect.gen(function* () {
    yield* type(chat, "y")
    yield* waitFor(chat, "approve> write_file: approved")
    yield* waitFor(chat, 'tool> ✓ write_file(path: "summary.md") succeeded')
    yield* waitFor(chat, FINAL)
    yield* waitForPrompt(chat, "you>")
    assert.include(readFileSync(summary(chat), "utf8"), "# Summary")
    yield* type(chat, "/history")
    const history = yield* waitFor(chat, "the history", (s) => s.includes("AwaitUserMessage-2"))
    assert.match(history, /CallSingleAttemptTool-1\s+completed\s+#1 success/)
    assert.notInclude(history, "CallSingleAttemptTool-2", "the write ran once")
    return history
  })
describe("the terminal chat", () => {
  it.live(
    "streams the answer, runs two reads in parallel, asks before the write, and shows the Step history",
    () =>
      Effect.gen(function* () {
        const chat = yield* makeChat
        yield* start(chat)
        yield* waitFor(chat, "the greeting", (s) => s.includes("Durable chat") && s.includes("demo (scripted"))
        yield* waitFor(chat, "chat> Session chat-1 (new). Try: summarize the notes")
        yield* waitForPrompt(chat, "you>")

        yield* type(chat, "summarize the notes")
        yield* waitFor(chat, "you> summarize the notes")
        yield* waitFor(chat, "agent> Let me read the notes and the to-do list first.")
        yield* waitFor(chat, 'tool> … read_file(path: "notes.md") started')
        yield* waitFor(chat, 'tool> … read_file(path: "todo.md") started')
        yield* waitFor(chat, 'tool> ✓ read_file(path: "notes.md") succeeded: 6 lines')
        yield* waitFor(chat, 'tool> ✓ read_file(path: "todo.md") succeeded: 6 lines')
        yield* waitFor(chat, "agent> I've read both files. I'll save a summary to summary.md")
        yield* waitFor(chat, 'approve> write_file(path: "summary.md") needs your approval')
        const asking = yield* waitForPrompt(chat, APPROVAL)
        assert.include(asking, "│ Still open in todo.md:", "the approval shows what would be written")
        yield* waitFor(chat, "tool> ✓ list_files() succeeded")
        assert.isFalse(existsSync(summary(chat)), "nothing is written before the approval")

        yield* type(chat, "y")
        yield* waitFor(chat, `${APPROVAL} y`)
        yield* waitFor(chat, "approve> write_file: approved")
        yield* waitFor(chat, 'tool> ✓ write_file(path: "summary.md") succeeded: wrote')
        yield* waitFor(chat, "agent> Done: I wrote")
        yield* waitFor(chat, "The workspace now holds notes.md, summary.md, todo.md.")
        yield* waitFor(chat, FINAL)
        yield* waitForPrompt(chat, "you>")
        const written = readFileSync(summary(chat), "utf8")
        assert.include(written, "# Summary")
        assert.include(written, "- Approve the write of summary.md")

        yield* type(chat, "/history")
        const history = yield* waitFor(chat, "the history", (s) => s.includes("AwaitUserMessage-2"))
        assert.include(history, "Steps of session chat-1")
        for (const step of [
          "StartAgentSession-1",
          "RunModel-1",
          "CallTool-1",
          "CallTool-2",
          "ResumeTurn-1",
          "RunModel-2",
          "AwaitToolApproval-1",
          "CallTool-3",
          "CallSingleAttemptTool-1",
          "ResumeTurn-2",
          "RunModel-3"
        ]) {
          // a Step that waited (ResumeTurn, the approval) shows "waited <n> s, then" before its attempt
          assert.match(history, new RegExp(`${step}\\s+completed\\s+(waited [\\d.]+ m?s, then )?#1 success`), step)
        }

        yield* type(chat, "/sessions")
        yield* waitFor(chat, "the session list", (s) => /\* chat-1\s+waiting for a message\s+1 turn\b/.test(s))

        yield* type(chat, "/quit")
        yield* waitForExit(chat)
        const deltas = yield* textDeltasOf(chat, "chat-1", "RunModel-3")
        assert.isAtLeast(deltas, 3, "the final answer streamed in several text_delta events")
      }),
    180_000
  )

  it.live(
    "Ctrl-C cancels the running turn and /steer redirects one; the chat and the session stay open",
    () =>
      Effect.gen(function* () {
        const chat = yield* makeChat
        yield* start(chat)
        yield* waitForPrompt(chat, "you>")
        yield* type(chat, "summarize the notes")
        yield* waitForPrompt(chat, APPROVAL)

        yield* Effect.sync(() => tmux(chat, "send-keys", "-t", chat.name, "C-c"))
        yield* waitFor(chat, "approve> write_file: abandoned (turn cancelled)")
        yield* waitFor(chat, "the turn was cancelled")
        yield* waitForPrompt(chat, "you>")
        assert.isTrue(yield* isRunning(chat), "Ctrl-C during a turn does not end the chat")
        assert.isFalse(existsSync(summary(chat)), "the cancelled write never ran")

        yield* type(chat, "summarize the notes")
        yield* waitFor(chat, "the second approval", (s) => s.split("needs your approval").length === 3)
        yield* waitForPrompt(chat, APPROVAL)
        yield* type(chat, "/steer hello instead")
        yield* waitFor(chat, "approve> write_file: abandoned (steered)")
        yield* waitFor(chat, "the turn was steered by a newer message")
        yield* waitFor(chat, "agent> Hello! I'm the scripted demo model.")
        yield* waitForPrompt(chat, "you>")
        assert.isFalse(existsSync(summary(chat)), "the abandoned write never ran")

        yield* type(chat, "/cancel")
        yield* waitFor(chat, "no turn is running")
        yield* type(chat, "/quit")
        yield* waitForExit(chat)

        // a restart shows the conversation's end: the stopped turn's note (the next turn's first user message
        // for the model) is one dim line, never the user's words
        yield* start(chat)
        const resumed = yield* waitFor(chat, "chat> Session chat-1 (")
        yield* waitForPrompt(chat, "you>")
        assert.notInclude(resumed, "you> [Dex]")
        assert.include(resumed, "(the turn was steered)")
        assert.include(resumed, "agent> Hello! I'm the scripted demo model.")
        yield* type(chat, "/quit")
        yield* waitForExit(chat)
      }),
    180_000
  )

  it.live(
    "/plan writes a plan and runs no tool; /execute carries it out and keeps its tasks current (--runner stepwise)",
    () =>
      Effect.gen(function* () {
        const chat = yield* makeChat
        yield* start(chat, ["--runner", "stepwise"])
        yield* waitForPrompt(chat, "you>")
        yield* type(chat, "/plan summarize the notes")
        yield* waitFor(chat, "plan revision 1 (draft):")
        yield* waitFor(chat, "That is the plan. /execute runs it")
        yield* waitForPrompt(chat, "you>")
        assert.isFalse(existsSync(summary(chat)), "a planning turn writes nothing")

        yield* type(chat, "/execute")
        yield* waitFor(chat, "executing plan revision 1")
        yield* waitForPrompt(chat, APPROVAL)
        yield* type(chat, "y")
        yield* waitFor(chat, "plan revision 4 (completed):")
        yield* waitFor(chat, FINAL)
        yield* waitForPrompt(chat, "you>")
        assert.isTrue(existsSync(summary(chat)), "the executing turn wrote the summary")

        yield* type(chat, "/execute")
        yield* waitFor(chat, "there is no plan to execute")
        yield* type(chat, "/quit")
        yield* waitForExit(chat)
      }),
    180_000
  )

  it.live(
    "killed while it asks for an approval, it resumes the turn on restart; the write runs after the approval",
    () =>
      Effect.gen(function* () {
        const chat = yield* makeChat
        yield* start(chat)
        yield* waitForPrompt(chat, "you>")
        yield* type(chat, "summarize the notes")
        yield* waitForPrompt(chat, APPROVAL)
        yield* waitFor(chat, "tool> ✓ list_files() succeeded")

        yield* kill(chat)
        assert.isFalse(existsSync(summary(chat)))

        yield* start(chat)
        yield* waitFor(
          chat,
          "chat> Resuming session chat-1: the turn that was running continues where it was; it waits for your approval."
        )
        const resumed = yield* waitForPrompt(chat, APPROVAL)
        assert.include(resumed, "you> summarize the notes", "the turn's user message is shown again")
        assert.include(resumed, 'tool> ✓ read_file(path: "notes.md") succeeded', "and what the turn did so far")
        assert.include(resumed, 'approve> write_file(path: "summary.md") needs your approval')
        assert.isFalse(existsSync(summary(chat)))

        const history = yield* approveTheWrite(chat)
        assert.match(history, /AwaitToolApproval-1\s+completed\s+waited [\d.]+ m?s across a restart, then #1 success/)

        yield* type(chat, "/quit")
        yield* waitForExit(chat)
      }),
    180_000
  )

  it.live(
    "--runner pi: the same turn on the Pi runner, killed while it asks for an approval, resumes on restart",
    () =>
      Effect.gen(function* () {
        const chat = yield* makeChat
        yield* start(chat, ["--runner", "pi"])
        yield* waitFor(chat, "the greeting", (s) => s.includes("Durable chat") && s.includes("Pi runner"))
        yield* waitForPrompt(chat, "you>")
        yield* type(chat, "summarize the notes")
        yield* waitFor(chat, "agent> Let me read the notes and the to-do list first.")
        yield* waitFor(chat, 'tool> ✓ read_file(path: "notes.md") succeeded: 6 lines')
        yield* waitFor(chat, 'tool> ✓ read_file(path: "todo.md") succeeded: 6 lines')
        yield* waitForPrompt(chat, APPROVAL)
        yield* waitFor(chat, "tool> ✓ list_files() succeeded")

        yield* kill(chat)
        assert.isFalse(existsSync(summary(chat)))

        yield* start(chat, ["--runner", "pi"])
        yield* waitFor(chat, "the resumed turn", (s) => s.includes("Resuming session chat-1"))
        yield* waitForPrompt(chat, APPROVAL)
        const history = yield* approveTheWrite(chat)
        assert.match(history, /RunModel-3\s+completed/)
        assert.notInclude(history, "RunModel-4", "one model call per RunModel")

        yield* type(chat, "/quit")
        yield* waitForExit(chat)
      }),
    180_000
  )
})
