// `/history` shows a Step's wait before its first attempt, and a wait that a restart interrupted.
import type { Inspect } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import { stepLines } from "../src/ui.ts"

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
