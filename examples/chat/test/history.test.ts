// `/history` shows a Step's wait before its first attempt, and a wait that a restart interrupted.
import type { Inspect } from "@durable-agent/engine"
import { Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { isUserText, type ScreenShape, showMessage, stepLines } from "../src/ui.ts"

const step = (id: string, createdAt: number, startedAt: number, finishedAt: number): Inspect.StepExecution => ({
  stepExecutionId: id,
  stepType: id.replace(/-\d+$/, ""),
  status: "completed",
  fromStepExecutionId: null,
  createdAt,
  attempts: [
    {
      attempt: 1,
      startedAt,
      outputAt: null,
      finishedAt,
      outcome: "success",
      errorType: null,
      detail: null,
      runner: null,
      epoch: null
    }
  ]
})

describe("/history", () => {
  it("an approval that waited 8 s across a restart shows the wait and the restart, not only a 10 ms success", () => {
    const t0 = 1_000_000
    const lines = stepLines(
      [step("RunModel-1", t0 - 500, t0 - 500, t0 - 20), step("AwaitToolApproval-1", t0, t0 + 8000, t0 + 8010)],
      t0 + 5000
    ).split("\n")
    assert.match(lines[0]!, /RunModel-1\s+completed\s+#1 success 480 ms$/)
    assert.match(lines[1]!, /AwaitToolApproval-1\s+completed\s+waited 8\.0 s across a restart, then #1 success 10 ms$/)
  })

  it("a wait within one process shows no restart", () => {
    const lines = stepLines([step("AwaitUserMessage-1", 0, 2500, 2510)], 0)
    assert.include(lines, "waited 2.5 s, then #1 success 10 ms")
    assert.notInclude(lines, "restart")
  })
})

describe("a resumed conversation", () => {
  const message = (sequence: number, turnId: string, role: "user" | "assistant", text: string): Wire.AgentMessage => ({
    sequence,
    turnId,
    role,
    text,
    toolCallId: null,
    toolName: null,
    toolArguments: null,
    toolOutput: null,
    frameworkItem: "{}",
    createdAt: "2026-01-01T00:00:00Z"
  })
  const note = `${Wire.TURN_CANCELLED_NOTE_HEADER}\n${Array.from({ length: 19 }, (_, i) => `- read_file {"path":"f${i}"} -> succeeded: ok`).join("\n")}`

  it.effect("a stopped turn's note shows as one line, not as 20 lines of you>", () =>
    Effect.gen(function* () {
      const printed: Array<string> = []
      const screen = {
        print: (text: string) => Effect.sync(() => void printed.push(text)),
        agentText: (text: string) => Effect.sync(() => void printed.push(`agent> ${text}`)),
        endAgentText: Effect.void
      } as unknown as ScreenShape
      yield* showMessage(screen, message(2, "turn-1", "user", note))
      assert.strictEqual(printed.length, 1)
      assert.notInclude(printed[0]!, "you>")
      assert.include(printed[0]!, "(the turn was stopped)")
    })
  )

  it("a continuation's message and a note are not the user's", () => {
    const messages = [
      message(1, "turn-1", "user", "write it"),
      message(2, "turn-1", "assistant", "Draft."),
      message(3, "turn-1", "user", "Check your draft."),
      message(4, "turn-2", "user", note),
      message(5, "turn-3", "user", "next")
    ]
    assert.deepStrictEqual(
      messages.filter((m) => isUserText(messages, m)).map((m) => m.text),
      ["write it", "next"]
    )
  })
})
