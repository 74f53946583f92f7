/**
 * The terminal: `node:readline` for input, and output that keeps the prompt (and what the person is
 * typing) below everything printed meanwhile. Lines carry a prefix: `you>`, `agent>` (streamed
 * text), `tool>`, `approve>` and `chat>` (the chat's own notes).
 */
import * as readline from "node:readline"
import { styleText } from "node:util"
import type { Inspect } from "@durable-agent/engine"
import { Wire } from "@durable-agent/session"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"

/** One input from the person: a line, Ctrl-C (`Interrupt`), or the end of input (Ctrl-D). */
export type Input =
  | { readonly _tag: "Line"; readonly text: string }
  | { readonly _tag: "Interrupt" }
  | { readonly _tag: "Quit" }

export interface ScreenShape {
  /** Prints whole lines above the prompt. */
  readonly print: (text: string) => Effect.Effect<void>
  /** Streams a piece of the agent's answer (`agent>` starts a new answer). */
  readonly agentText: (text: string) => Effect.Effect<void>
  /** Ends the streamed answer's line, if one is open. */
  readonly endAgentText: Effect.Effect<void>
  /** Shows a prompt (`null` hides it: the agent is working). */
  readonly setPrompt: (prompt: string | null) => Effect.Effect<void>
  /** The next line the person typed. */
  readonly input: Effect.Effect<Input>
}

/** The terminal of the chat. */
export class Screen extends Context.Service<Screen, ScreenShape>()("examples/chat/Screen") {
  /** The process's terminal (stdin and stdout); closes readline when the scope ends. */
  static readonly layer: Layer.Layer<Screen> = Layer.effect(
    Screen,
    Effect.gen(function* () {
      const out = process.stdout
      const tty = out.isTTY === true
      const inputs = yield* Queue.unbounded<Input>()
      const rl = yield* Effect.acquireRelease(
        Effect.sync(() => readline.createInterface({ input: process.stdin, output: out, terminal: tty })),
        (rl) => Effect.sync(() => rl.close())
      )
      /** The prompt on screen, or null. */
      let shown: string | null = null
      /** The prompt to show when the screen is not streaming. */
      let wanted: string | null = null
      /** A streamed answer's line is open. */
      let streaming = false
      /** The column a streamed answer reached. */
      let column = 0
      rl.on("line", (text) => {
        // a terminal echoes the line after the prompt; without one, write it so the output reads as a transcript
        if (!tty && shown !== null) out.write(`${text}\n`)
        shown = null
        Queue.offerUnsafe(inputs, { _tag: "Line", text })
      })
      /** readline was closed (end of input): no prompt any more. */
      let closed = false
      rl.on("close", () => {
        closed = true
        if (shown !== null) out.write("\n")
        shown = null
        Queue.offerUnsafe(inputs, { _tag: "Quit" })
      })
      // Ctrl-C cancels a running turn (the chat decides); it quits only when no turn runs
      rl.on("SIGINT", () => void Queue.offerUnsafe(inputs, { _tag: "Interrupt" }))

      const hidePrompt = () => {
        if (shown === null) return
        if (tty) {
          readline.cursorTo(out, 0)
          readline.clearLine(out, 0)
        } else {
          out.write("\n")
        }
        shown = null
      }
      const showPrompt = () => {
        if (closed || wanted === null || shown === wanted || streaming) return
        hidePrompt()
        rl.setPrompt(wanted)
        rl.prompt(true)
        shown = wanted
      }
      const endLine = () => {
        if (!streaming) return
        out.write("\n")
        streaming = false
      }
      const indent = " ".repeat("agent> ".length)

      return {
        print: (text) =>
          Effect.sync(() => {
            endLine()
            hidePrompt()
            out.write(`${text}\n`)
            showPrompt()
          }),
        agentText: (text) =>
          Effect.sync(() => {
            hidePrompt()
            if (!streaming) {
              out.write(styleText("cyan", "agent> "))
              streaming = true
              column = indent.length
              text = text.trimStart()
            }
            // wrap at word boundaries under the indentation, as the text streams in
            const width = tty ? Math.max(40, out.columns ?? 80) - 1 : Number.POSITIVE_INFINITY
            for (const piece of text.split(/(\n|[^\S\n]+)/)) {
              if (piece === "") continue
              if (piece === "\n") {
                out.write(`\n${indent}`)
                column = indent.length
              } else if (/^[^\S\n]+$/.test(piece)) {
                if (column > indent.length && column + piece.length <= width) {
                  out.write(piece)
                  column += piece.length
                }
              } else {
                if (column + piece.length > width && column > indent.length) {
                  out.write(`\n${indent}`)
                  column = indent.length
                }
                out.write(piece)
                column += piece.length
              }
            }
          }),
        endAgentText: Effect.sync(() => {
          endLine()
          showPrompt()
        }),
        setPrompt: (prompt) =>
          Effect.sync(() => {
            wanted = prompt
            if (prompt === null) hidePrompt()
            else showPrompt()
          }),
        input: Queue.take(inputs)
      } satisfies ScreenShape
    })
  )
}

// ---------------------------------------------------------------------------------------------------------
// formatting
// ---------------------------------------------------------------------------------------------------------

export const YOU_PROMPT = `${styleText("green", "you>")} `

export const chatLine = (text: string) => `${styleText("dim", "chat>")} ${text}`
export const errorLine = (text: string) => `${styleText("red", "chat>")} ${text}`
export const toolLine = (text: string) => `${styleText("magenta", "tool>")} ${text}`
export const approveLine = (text: string) => `${styleText("yellow", "approve>")} ${text}`

/** Shortens a one-line text. */
const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

/** A tool call as `name(path: "notes.md")`, from its JSON arguments. */
export const describeCall = (toolName: string, args: string | undefined) => {
  let shown = ""
  try {
    const parsed: unknown = JSON.parse(args ?? "{}")
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
      shown = Object.entries(parsed)
        .filter(([key]) => key !== "content")
        .map(([key, value]) => `${key}: ${clip(JSON.stringify(value), 60)}`)
        .join(", ")
    }
  } catch {
    shown = clip(args ?? "", 60)
  }
  return `${toolName}(${shown})`
}

/** What a finished call returned, on one line. */
export const describeResult = (call: Wire.AgentToolCall | undefined) => {
  if (call === undefined) return ""
  switch (call.status) {
    case "succeeded": {
      const output = (call.output ?? "").replace(/\n+$/, "")
      const lines = output.split("\n").length
      return lines > 1 ? `${lines} lines` : clip(output, 80)
    }
    case "failed":
      return clip(call.error ?? "", 100)
    case "rejected":
      return clip(call.rejectionMessage ?? "rejected by the user", 100)
    default:
      return ""
  }
}

const STATUS_MARK: Record<string, string> = {
  succeeded: styleText("green", "✓"),
  failed: styleText("red", "✗"),
  rejected: styleText("yellow", "✗"),
  outcome_unknown: styleText("red", "?")
}

/** `tool> ✓ read_file(path: "notes.md") succeeded: 6 lines`. */
export const finishedLine = (toolName: string, status: string, call: Wire.AgentToolCall | undefined) => {
  const result = describeResult(call)
  return toolLine(
    `${STATUS_MARK[status] ?? "·"} ${describeCall(toolName, call?.arguments)} ${status}${result ? `: ${result}` : ""}`
  )
}

/** The approval request: the call, and the content it would write (first lines). */
export const approvalLines = (interrupt: Wire.AgentInterrupt): string => {
  const lines = [approveLine(`${describeCall(interrupt.toolName, interrupt.arguments)} needs your approval`)]
  try {
    const parsed: unknown = JSON.parse(interrupt.arguments)
    const content =
      typeof parsed === "object" && parsed !== null && "content" in parsed && typeof parsed.content === "string"
        ? parsed.content
        : undefined
    if (content !== undefined) {
      const body = content.replace(/\n+$/, "").split("\n")
      for (const line of body.slice(0, 12)) lines.push(`         ${styleText("dim", "│")} ${line}`)
      if (body.length > 12) lines.push(`         ${styleText("dim", `│ … ${body.length - 12} more lines`)}`)
    }
  } catch {
    // arguments that are not JSON are shown by describeCall already
  }
  return lines.join("\n")
}

export const approvalPrompt = (interrupt: Wire.AgentInterrupt) =>
  interrupt.kind === "question"
    ? `${styleText("yellow", "answer>")} `
    : `${styleText("yellow", "approve>")} run ${interrupt.toolName}? [y/n] `

/** A question the agent or one of its tools asks: the question and its choices. */
export const questionLines = (interrupt: Wire.AgentInterrupt): string => {
  const lines = [approveLine(`${interrupt.toolName} asks: ${interrupt.question ?? ""}`)]
  if (interrupt.choices.length > 0) {
    lines.push(
      `         ${styleText("dim", `choices: ${interrupt.choices.join(" | ")}${interrupt.allowsFreeText ? " (or your own words)" : ""}`)}`
    )
  }
  lines.push(`         ${styleText("dim", "type the answer; /skip declines")}`)
  return lines.join("\n")
}

/** The notes a stopped, steered or failed turn ends with (user messages for the model), and how they show. */
const turnNotes: ReadonlyArray<readonly [string, string]> = [
  [Wire.TURN_CANCELLED_NOTE_HEADER, "(the turn was stopped)"],
  [Wire.TURN_STEERED_NOTE_HEADER, "(the turn was steered)"],
  [Wire.TURN_FAILURE_NOTE_HEADER, "(the turn failed)"]
]

/**
 * The user messages that are the user's: a turn note, or a continuation's message (a user text after the turn's
 * first model output), is not.
 */
export const isUserText = (messages: ReadonlyArray<Wire.AgentMessage>, message: Wire.AgentMessage): boolean =>
  message.role === "user" &&
  !turnNotes.some(([header]) => (message.text ?? "").startsWith(header)) &&
  !messages.some((m) => m.turnId === message.turnId && m.role !== "user" && m.sequence < message.sequence)

/**
 * Shows a stored message of the conversation (for `/resume`): `you>` or `agent>` text; a turn's note as one dim
 * line, not as the user's words.
 */
export const showMessage = (screen: ScreenShape, message: Wire.AgentMessage): Effect.Effect<void> => {
  if (message.text === null || message.text.length === 0) return Effect.void
  const note = turnNotes.find(([header]) => message.text!.startsWith(header))
  if (message.role === "user" && note !== undefined) return screen.print(styleText("dim", note[1]))
  if (message.role === "user") return screen.print(`${styleText("green", "you>")} ${message.text}`)
  if (message.role === "assistant") return Effect.andThen(screen.agentText(message.text), screen.endAgentText)
  return Effect.void
}

const time = (at: number) => new Date(at).toLocaleTimeString("en-GB", { hour12: false })

const ms = (from: number, to: number | null) => (to === null ? "" : `${Math.max(0, to - from)} ms`)

/** A wait in words: milliseconds below a second, else seconds with one decimal. */
const waited = (millis: number) => (millis < 1000 ? `${millis} ms` : `${(millis / 1000).toFixed(1)} s`)

/**
 * `/history`: one line per Step execution, and one more per further attempt. A Step that waited before its
 * first attempt (an approval, a queued message) shows the wait, and `across a restart` when this process
 * started during it (`processStartedAt`), so a wait that a crash interrupted does not read as a quick success.
 */
export const stepLines = (
  steps: ReadonlyArray<Inspect.StepExecution>,
  processStartedAt: number = Date.now()
): string => {
  const width = Math.max(10, ...steps.map((s) => s.stepExecutionId.length))
  const lines = steps.flatMap((s) => {
    const attempts = s.attempts.map((a) => {
      const outcome = a.outcome ?? (a.finishedAt === null ? "running" : "?")
      const error = a.errorType ? ` ${a.errorType}${a.detail ? `: ${clip(a.detail, 70)}` : ""}` : ""
      return `#${a.attempt} ${outcome}${error} ${ms(a.startedAt, a.finishedAt)}`.trimEnd()
    })
    const first = s.attempts[0]
    const wait = first === undefined ? 0 : first.startedAt - s.createdAt
    const restart = first !== undefined && s.createdAt < processStartedAt && processStartedAt <= first.startedAt
    if (first !== undefined && (wait >= 1000 || restart)) {
      attempts[0] = `waited ${waited(wait)}${restart ? " across a restart" : ""}, then ${attempts[0]}`
    }
    const head = `  ${time(s.createdAt)}  ${s.stepExecutionId.padEnd(width)}  ${s.status.padEnd(9)}`
    const pad = " ".repeat(head.length)
    return [`${head}  ${attempts[0] ?? ""}`.trimEnd(), ...attempts.slice(1).map((a) => `${pad}  ${a}`)]
  })
  return lines.join("\n")
}
