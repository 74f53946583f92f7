// The spec's TypeScript names beside ours (issue 27, item 5): toolCallNotRunErrorPrefix, the outcome `kind`
// (`turn_continued` and the others), `deadline` on the contexts, `cancellationSignal` on ToolTaskCancellation,
// and the `…Ms` options.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AgentSessionClient, AgentSessionFlow, Runner, ToolSource, Wire } from "../src/index.ts"
import * as SessionTesting from "../src/testing.ts"

const usage = { modelCalls: 1, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }

const assistant = (turnId: string, text: string): Runner.FrameworkMessage => ({
  role: "assistant",
  text,
  toolCallId: null,
  toolName: null,
  toolArguments: null,
  toolOutput: null,
  frameworkItem: JSON.stringify({ turnId, text })
})

const userMessage = (text: string): Runner.FrameworkMessage => ({
  role: "user",
  text,
  toolCallId: null,
  toolName: null,
  toolArguments: null,
  toolOutput: null,
  frameworkItem: JSON.stringify({ user: text })
})

describe("the spec's TypeScript names", () => {
  it("toolCallNotRunErrorPrefix and the outcome kinds", () => {
    assert.strictEqual(Wire.toolCallNotRunErrorPrefix, Wire.TOOL_CALL_NOT_RUN_ERROR_PREFIX)
    const continued = Runner.AgentTurnOutcome.turnContinued({ frameworkRunState: "{}", newMessages: [], usage })
    assert.deepStrictEqual([continued._tag, continued.kind], ["TurnContinued", "turn_continued"])
    assert.strictEqual(Runner.AgentTurnOutcome.turnCompleted({ newMessages: [], usage }).kind, "turn_completed")
    assert.strictEqual(
      Runner.AgentTurnOutcome.toolCallsRequested({ frameworkRunState: "{}", toolCalls: [], usage }).kind,
      "tool_calls_requested"
    )
    const byKind = Runner.normalizeOutcome({ kind: "turn_continued", frameworkRunState: "{}", newMessages: [], usage })
    assert.deepStrictEqual([byKind._tag, byKind.kind], ["TurnContinued", "turn_continued"])
  })

  it.live(
    "a runner that names its outcomes by `kind` alone runs a turn; RunModel's context carries its deadline",
    () => {
      const seen: Array<{ readonly deadline: number; readonly now: number; readonly signal: boolean }> = []
      const runner: Runner.AgentFrameworkRunnerShape = {
        name: "by-kind",
        buildUserMessage: userMessage,
        runModelStep: (turn) =>
          Effect.sync(() => {
            seen.push({
              deadline: turn.deadline?.getTime() ?? 0,
              now: Date.now(),
              signal: turn.cancellationSignal instanceof AbortSignal
            })
            // the spec's form: `kind`, no `_tag`
            return (turn.frameworkRunState === null
              ? { kind: "turn_continued", frameworkRunState: "{}", newMessages: [], usage }
              : {
                  kind: "turn_completed",
                  newMessages: [assistant(turn.turnId, "Done.")],
                  usage
                }) as unknown as Runner.AgentTurnOutcome
          }),
        executeDeferredToolCall: () => Effect.succeed({ output: "unused" })
      }
      return Effect.gen(function* () {
        const client = yield* AgentSessionClient.AgentSessionClient
        yield* client.startSession("k1", { initialMessage: "go" })
        const done = yield* SessionTesting.awaitTurn("k1")
        assert.strictEqual(done.messages.at(-1)?.text, "Done.")
        assert.strictEqual(seen.length, 2, "turn_continued moved to RunModel again")
        for (const s of seen) {
          assert.isTrue(s.signal)
          // RunModel's method timeout is 15 minutes from the attempt's start
          assert.isAtLeast(s.deadline - s.now, 14 * 60 * 1000)
          assert.isAtMost(s.deadline - s.now, 15 * 60 * 1000)
        }
      }).pipe(Effect.provide(SessionTesting.layer({ runner: Layer.succeed(Runner.AgentFrameworkRunner, runner) })))
    }
  )

  it.live("CancelToolTask hands the runner a cancellationSignal and its deadline", () => {
    const cancellations: Array<Runner.ToolTaskCancellation> = []
    const runner: Runner.AgentFrameworkRunnerShape = {
      name: "tasks",
      buildUserMessage: userMessage,
      runModelStep: (turn) =>
        Effect.succeed(
          Runner.AgentTurnOutcome.toolCallsRequested({
            frameworkRunState: "{}",
            toolCalls: [
              {
                toolCallId: "d1",
                toolName: "deploy",
                arguments: "{}",
                policy: turn.resolveToolPolicy("deploy", "read")
              }
            ],
            usage
          })
        ),
      executeDeferredToolCall: () => Effect.succeed(Runner.toolTaskStarted("task-1", 3600)),
      pollToolTask: () => Effect.succeed({ _tag: "ToolTaskPending", pollIntervalSeconds: 3600 }),
      cancelToolTask: (cancellation) => Effect.sync(() => void cancellations.push(cancellation))
    }
    return Effect.gen(function* () {
      const client = yield* AgentSessionClient.AgentSessionClient
      yield* client.startSession("k2", { initialMessage: "deploy" })
      yield* SessionTesting.awaitSnapshot("k2", (s) => s.toolCalls.some((c) => c.status === "waiting_for_task"))
      assert.isTrue(yield* client.cancelTurn("k2"))
      yield* SessionTesting.awaitTurn("k2")
      assert.strictEqual(cancellations.length, 1)
      const c = cancellations[0]!
      assert.instanceOf(c.cancellationSignal, AbortSignal)
      assert.isFalse(c.cancellationSignal!.aborted, "a cancellation that ran to its end was not aborted")
      assert.isAbove(c.deadline!.getTime(), Date.now())
      assert.isAtMost(c.deadline!.getTime() - Date.now(), 30_000)
    }).pipe(Effect.provide(SessionTesting.layer({ runner: Layer.succeed(Runner.AgentFrameworkRunner, runner) })))
  })

  it("interruptDeadlineMs and maxDurableWaitMs are the millisecond forms of interruptDeadline and maxDurableWait", () => {
    assert.throws(() => AgentSessionFlow.make({ flowType: "T", maxDurableWaitMs: 500 }), /at least 1 second/)
    assert.throws(() => AgentSessionFlow.make({ flowType: "T", interruptDeadlineMs: -1 }), /must not be negative/)
    AgentSessionFlow.make({ flowType: "T", maxDurableWaitMs: 2000, interruptDeadlineMs: 1000 })
  })

  it.live("interruptDeadlineMs rejects a waiting approval when it passes", () =>
    Effect.gen(function* () {
      const client = yield* AgentSessionClient.AgentSessionClient
      yield* client.startSession("k3", { initialMessage: "email ann" })
      const done = yield* SessionTesting.awaitTurn("k3")
      assert.strictEqual(done.messages.at(-1)?.text, "Too late.")
      assert.isFalse(yield* client.resolveInterrupt("k3", { interruptId: "w1", approved: true }))
    }).pipe(
      Effect.provide(
        SessionTesting.layer({
          model: [{ toolCalls: [{ id: "w1", name: "send_email", arguments: {} }] }, { text: "Too late." }],
          tools: [
            ToolSource.tool({
              name: "send_email",
              description: "Sends an email.",
              effect: "non_idempotent_write",
              handler: () => Effect.succeed("sent")
            })
          ],
          flow: { interruptDeadlineMs: 1000 }
        })
      )
    )
  )
})
