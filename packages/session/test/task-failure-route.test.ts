// PollToolTask's failure route by effect (the spec's PollToolTask options: RecordToolFailure for read and
// idempotent_write calls, RecordToolOutcomeUnknown otherwise): a started task whose polls keep failing their
// attempts ends in the failure route its call's effect names, and records what that effect records.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentSessionClient, Errors, Runner, type ToolSource, type Wire } from "../src/index.ts"
import { allEvents, awaitTurns, stepExecutions, withSession } from "./support.ts"

/** A source whose `deploy` starts a task that no poll can reach (every poll fails its attempt). */
const unreachableTask = (effect: Wire.ToolEffect, polls: { count: number }): ToolSource.ToolSourceShape => ({
  tools: [{ name: "deploy", description: "Deploy in a remote task.", parameters: { type: "object" }, effect }],
  call: () => Effect.succeed(Runner.toolTaskStarted("task-1", 1)),
  pollToolTask: () =>
    Effect.suspend(() => {
      polls.count++
      return Effect.fail(new Errors.ToolAttemptError({ message: "the task server is unreachable" }))
    })
})

const cases: ReadonlyArray<{
  readonly effect: Wire.ToolEffect
  readonly route: "RecordToolFailure" | "RecordToolOutcomeUnknown"
  readonly status: "failed" | "outcome_unknown"
}> = [
  { effect: "read", route: "RecordToolFailure", status: "failed" },
  { effect: "idempotent_write", route: "RecordToolFailure", status: "outcome_unknown" },
  { effect: "non_idempotent_write", route: "RecordToolOutcomeUnknown", status: "outcome_unknown" },
  { effect: "unclassified", route: "RecordToolOutcomeUnknown", status: "outcome_unknown" }
]

describe("PollToolTask: the failure route by effect", () => {
  for (const { effect, route, status } of cases) {
    it.live(`a ${effect} call whose task polls run out of attempts goes to ${route} and records ${status}`, () => {
      const polls = { count: 0 }
      return withSession(
        {
          script: [{ toolCalls: [{ id: "d1", name: "deploy", arguments: {} }] }, { text: "Noted." }],
          toolSource: () => unreachableTask(effect, polls),
          flow: { toolPolicies: { deploy: { effect, requiresApproval: false } } }
        },
        () =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("t1", { initialMessage: "deploy" })
            yield* awaitTurns("t1", 1)
            const steps = (yield* stepExecutions("t1")).map((s) => s.stepType)
            assert.include(steps, "PollToolTask")
            assert.include(steps, route)
            assert.notInclude(
              steps,
              route === "RecordToolFailure" ? "RecordToolOutcomeUnknown" : "RecordToolFailure",
              "the other route is not taken"
            )
            const poll = (yield* stepExecutions("t1")).find((s) => s.stepType === "PollToolTask")!
            assert.strictEqual(poll.attempts.length, 3, "PollToolTask retries 3 attempts")
            assert.strictEqual(polls.count, 3)
            const finished = (yield* allEvents("t1")).filter((e) => e.event.type === "tool_call_finished")
            assert.strictEqual(finished.length, 1)
            assert.strictEqual(finished[0]!.event.stepExecutionId, `${route}-1`)
            assert.strictEqual((finished[0]!.event.payload as { readonly status: string }).status, status)
          })
      )
    })
  }
})
