// Branches of the session that no other test reaches (issue 27, item 8), each pinned by a test that fails when
// the branch is removed: the ToolTaskStarted problem cases, a runner that returns new messages without an
// unfinished-turn builder, several agents (Flow types with their own runners) in one worker, RunModel ending
// a steered or a cancelled turn before its model call, a tool question whose interrupt ID another call of the
// turn uses, and the turn controls refused in a turn that lacks accepts_turn_control.

import { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AgentSessionClient, AgentSessionFlow, Persistence, Runner, ToolSource, Wire } from "../src/index.ts"
import * as SessionTesting from "../src/testing.ts"
import { allEvents, stepShape, toolResults } from "./support.ts"

const usage = { modelCalls: 1, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }

const message = (role: "user" | "assistant", text: string): Runner.FrameworkMessage => ({
  role,
  text,
  toolCallId: null,
  toolName: null,
  toolArguments: null,
  toolOutput: null,
  frameworkItem: JSON.stringify({ role, text })
})

/**
 * A runner whose first model call asks for `deploy` (of `effect`) and whose next one answers with what the
 * call's record says; its tool returns `started`.
 */
const taskRunner = (
  effect: Wire.ToolEffect,
  started: Runner.DeferredToolOutcome,
  seen: Array<Wire.AgentToolCall>,
  poll: boolean
): Runner.AgentFrameworkRunnerShape => ({
  name: "task-runner",
  buildUserMessage: (text) => message("user", text),
  runModelStep: (turn) =>
    Effect.sync(() => {
      if (turn.frameworkRunState === null) {
        return Runner.AgentTurnOutcome.toolCallsRequested({
          frameworkRunState: "{}",
          toolCalls: [
            {
              toolCallId: "d1",
              toolName: "deploy",
              arguments: "{}",
              policy: { effect, requiresApproval: false }
            }
          ],
          usage
        })
      }
      seen.push(...turn.toolCalls)
      return Runner.AgentTurnOutcome.turnCompleted({ newMessages: [message("assistant", "Noted.")], usage })
    }),
  executeDeferredToolCall: () => Effect.succeed(started),
  ...(poll
    ? { pollToolTask: () => Effect.succeed({ _tag: "ToolTaskPending" as const, pollIntervalSeconds: 3600 }) }
    : {})
})

const problems: ReadonlyArray<{
  readonly what: string
  readonly started: Runner.DeferredToolOutcome
  readonly poll: boolean
  readonly error: string
}> = [
  {
    what: "a runner that does not poll tasks",
    started: Runner.toolTaskStarted("task-1", 5),
    poll: false,
    error: "the tool started a task, but the runner does not poll tool tasks"
  },
  {
    what: "a blank task ID",
    started: Runner.toolTaskStarted("  ", 5),
    poll: true,
    error: "the tool started a task with a blank task ID"
  },
  {
    what: "a poll interval that is not a number",
    started: Runner.toolTaskStarted("task-1", Number.NaN),
    poll: true,
    error: "the tool started a task without a numeric poll interval"
  }
]

describe("ToolTaskStarted problem cases", () => {
  for (const { what, started, poll, error } of problems) {
    for (const [effect, status] of [
      ["read", "failed"],
      ["non_idempotent_write", "outcome_unknown"]
    ] as const) {
      it.live(`${what}: a ${effect} call records ${status} with the problem, and no task is polled`, () => {
        const seen: Array<Wire.AgentToolCall> = []
        return Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("p1", { initialMessage: "deploy" })
          yield* SessionTesting.awaitTurn("p1")
          assert.strictEqual(seen.length, 1)
          assert.deepStrictEqual([seen[0]!.status, seen[0]!.error], [status, error])
          assert.strictEqual(seen[0]!.taskId, null, "the record never waited for a task")
        }).pipe(
          Effect.provide(
            SessionTesting.layer({
              runner: Layer.succeed(Runner.AgentFrameworkRunner, taskRunner(effect, started, seen, poll))
            })
          )
        )
      })
    }
  }
})

describe("new messages without an unfinished-turn builder", () => {
  it.live("ToolCallsRequested with newMessages and no buildUnfinishedTurnMessages fails the turn", () => {
    let toolRuns = 0
    const runner: Runner.AgentFrameworkRunnerShape = {
      name: "incremental",
      buildUserMessage: (text) => message("user", text),
      runModelStep: () =>
        Effect.succeed(
          Runner.AgentTurnOutcome.toolCallsRequested({
            frameworkRunState: "{}",
            newMessages: [message("assistant", "Let me look.")],
            toolCalls: [
              {
                toolCallId: "r1",
                toolName: "read",
                arguments: "{}",
                policy: { effect: "read", requiresApproval: false }
              }
            ],
            usage
          })
        ),
      executeDeferredToolCall: () =>
        Effect.sync(() => {
          toolRuns++
          return { output: "x" }
        })
    }
    return Effect.gen(function* () {
      const client = yield* AgentSessionClient.AgentSessionClient
      yield* client.startSession("u1", { initialMessage: "look" })
      const done = yield* SessionTesting.awaitTurn("u1")
      assert.strictEqual(done.state?.lastTurnError, Wire.UNFINISHED_TURN_MESSAGES_REQUIRED_ERROR)
      assert.strictEqual(toolRuns, 0, "no call of the refused outcome ran")
      assert.notInclude(
        done.messages.map((m) => m.text),
        "Let me look.",
        "the refused outcome's messages were not stored"
      )
    }).pipe(Effect.provide(SessionTesting.layer({ runner: Layer.succeed(Runner.AgentFrameworkRunner, runner) })))
  })
})

class RunnerA extends Context.Service<RunnerA, Runner.AgentFrameworkRunnerShape>()("test/RunnerA") {}
class RunnerB extends Context.Service<RunnerB, Runner.AgentFrameworkRunnerShape>()("test/RunnerB") {}

const answering = (name: string): Runner.AgentFrameworkRunnerShape => ({
  name,
  buildUserMessage: (text) => message("user", text),
  runModelStep: (turn) =>
    Effect.succeed(
      Runner.AgentTurnOutcome.turnCompleted({
        newMessages: [message("assistant", `${name} answers ${turn.messages.at(-1)?.text ?? ""}`)],
        usage
      })
    ),
  executeDeferredToolCall: () => Effect.succeed({ output: "unused" })
})

describe("several agents in one worker", () => {
  it.live("two session Flow types, each with its own runner key, run side by side in one worker", () => {
    const flowA = AgentSessionFlow.make({ flowType: "AgentA", runner: RunnerA })
    const flowB = AgentSessionFlow.make({ flowType: "AgentB", runner: RunnerB })
    const worker = AgentSessionFlow.layerWorker(flowA, flowB).pipe(
      Layer.provide(Layer.mergeAll(Layer.succeed(RunnerA, answering("A")), Layer.succeed(RunnerB, answering("B"))))
    )
    return Effect.gen(function* () {
      const a = yield* AgentSessionClient.makeAgentSessionClient("AgentA")
      const b = yield* AgentSessionClient.makeAgentSessionClient("AgentB")
      yield* a.startSession("s-a", { initialMessage: "hi A" })
      yield* b.startSession("s-b", { initialMessage: "hi B" })
      const doneA = yield* a.awaitTurn("s-a", { turn: 1, pollInterval: "20 millis" })
      const doneB = yield* b.awaitTurn("s-b", { turn: 1, pollInterval: "20 millis" })
      assert.strictEqual(doneA.messages.at(-1)?.text, "A answers hi A")
      assert.strictEqual(doneB.messages.at(-1)?.text, "B answers hi B")
      // each Flow type knows only its own sessions
      assert.isTrue(yield* a.sendUserMessage("s-a", "again"))
      const again = yield* a.awaitTurn("s-a", { turn: 2, pollInterval: "20 millis" })
      assert.strictEqual(again.messages.at(-1)?.text, "A answers again")
    }).pipe(Effect.provide(worker.pipe(Layer.provideMerge(SessionTesting.layerEngine({})))))
  })
})

describe("RunModel in a steered turn", () => {
  it.live("a RunModel that starts after a steer ends the turn before its model call; the steered turn starts", () => {
    const calls: Array<{ readonly turnId: string; readonly last: string | null; readonly continued: boolean }> = []
    return Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const runner: Runner.AgentFrameworkRunnerShape = {
        name: "continuing",
        buildUserMessage: (text) => message("user", text),
        runModelStep: (turn) =>
          Effect.gen(function* () {
            calls.push({
              turnId: turn.turnId,
              last: turn.messages.at(-1)?.text ?? null,
              continued: turn.frameworkRunState !== null
            })
            if (calls.length === 1) {
              // the first call waits until the test steered, then asks for another model call in the turn
              yield* Deferred.await(gate)
              return Runner.AgentTurnOutcome.turnContinued({ frameworkRunState: "{}", newMessages: [], usage })
            }
            return Runner.AgentTurnOutcome.turnCompleted({ newMessages: [message("assistant", "On it.")], usage })
          }),
        executeDeferredToolCall: () => Effect.succeed({ output: "unused" })
      }
      yield* Effect.gen(function* () {
        const client = yield* AgentSessionClient.AgentSessionClient
        yield* client.startSession("st1", { initialMessage: "go" })
        yield* SessionTesting.awaitSnapshot("st1", () => calls.length === 1)
        assert.isTrue(yield* client.steerUserMessage("st1", { text: "new direction" }))
        yield* Deferred.succeed(gate, undefined)
        const done = yield* SessionTesting.awaitTurn("st1", { turn: 2 })
        // the continued RunModel of the steered turn made no model call: the next call is the steered turn's
        assert.strictEqual(calls.length, 2)
        assert.isFalse(calls[1]!.continued)
        assert.notStrictEqual(calls[1]!.turnId, calls[0]!.turnId)
        assert.strictEqual(calls[1]!.last, "new direction")
        assert.strictEqual(done.messages.at(-1)?.text, "On it.")
        const shape = yield* stepShape("st1")
        const at = shape.indexOf("ApplyTurnControl")
        assert.deepStrictEqual(shape.slice(at - 2, at + 1), ["RunModel", "RunModel", "ApplyTurnControl"])
        const steered = (yield* allEvents("st1")).filter((e) => e.event.type === "turn_steered")
        assert.strictEqual(steered.length, 1)
        assert.strictEqual(steered[0]!.event.stepExecutionId, "RunModel-2")
      }).pipe(Effect.provide(SessionTesting.layer({ runner: Layer.succeed(Runner.AgentFrameworkRunner, runner) })))
    })
  })
})

describe("RunModel in a cancelled turn", () => {
  // cancel_turn's own commit cancels every RunModel it finds, so the branch is reached by a cancellation that
  // committed without that (a direct write of the Attribute, as a worker of an earlier version could leave it)
  // while a RunModel of the turn is about to be scheduled.
  it.live("a RunModel that starts after a committed cancellation ends the turn cancelled before its model call", () => {
    const calls: Array<{ readonly turnId: string; readonly last: string | null; readonly continued: boolean }> = []
    return Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const runner: Runner.AgentFrameworkRunnerShape = {
        name: "continuing",
        buildUserMessage: (text) => message("user", text),
        runModelStep: (turn) =>
          Effect.gen(function* () {
            calls.push({
              turnId: turn.turnId,
              last: turn.messages.at(-1)?.text ?? null,
              continued: turn.frameworkRunState !== null
            })
            if (calls.length === 1) {
              // the first call waits until the cancellation committed, then asks for another model call
              yield* Deferred.await(gate)
              return Runner.AgentTurnOutcome.turnContinued({ frameworkRunState: "{}", newMessages: [], usage })
            }
            return Runner.AgentTurnOutcome.turnCompleted({ newMessages: [message("assistant", "Next.")], usage })
          }),
        executeDeferredToolCall: () => Effect.succeed({ output: "unused" })
      }
      yield* Effect.gen(function* () {
        const client = yield* AgentSessionClient.AgentSessionClient
        const engine = yield* Client.Client
        yield* client.startSession("ct1", { initialMessage: "go" })
        yield* SessionTesting.awaitSnapshot("ct1", () => calls.length === 1)
        const turnId = calls[0]!.turnId
        yield* engine.setAttribute("ct1", Persistence.TurnCancellationRequest, {
          turnId,
          requestedAt: new Date().toISOString()
        })
        yield* Deferred.succeed(gate, undefined)
        const cancelled = yield* SessionTesting.awaitTurn("ct1", { turn: 1 })
        // the continued RunModel of the cancelled turn made no model call
        assert.strictEqual(calls.length, 1)
        assert.strictEqual(cancelled.state?.activeTurnId, null)
        assert.strictEqual(cancelled.state?.status, "waiting_for_user_message")
        assert.strictEqual(cancelled.state?.turnCount, 1)
        assert.strictEqual(cancelled.state?.lastTurnError, null)
        const shape = yield* stepShape("ct1")
        const at = shape.indexOf("ApplyTurnControl")
        assert.deepStrictEqual(shape.slice(at - 2, at + 1), ["RunModel", "RunModel", "ApplyTurnControl"])
        const events = (yield* allEvents("ct1")).map((e) => e.event)
        const ended = events.filter((e) => e.type === "turn_cancelled")
        assert.strictEqual(ended.length, 1)
        assert.strictEqual(ended[0]!.stepExecutionId, "RunModel-2")
        assert.strictEqual(ended[0]!.turnId, turnId)
        assert.notInclude(
          events.map((e) => e.type),
          "turn_steered"
        )
        // the session stays open and answers the next message in a new turn
        assert.isTrue(yield* client.sendUserMessage("ct1", "next"))
        const done = yield* SessionTesting.awaitTurn("ct1", { turn: 2 })
        assert.strictEqual(calls.length, 2)
        assert.isFalse(calls[1]!.continued)
        assert.notStrictEqual(calls[1]!.turnId, turnId)
        assert.strictEqual(calls[1]!.last, "next")
        assert.strictEqual(done.messages.at(-1)?.text, "Next.")
      }).pipe(Effect.provide(SessionTesting.layer({ runner: Layer.succeed(Runner.AgentFrameworkRunner, runner) })))
    })
  })
})

describe("a tool question whose interrupt ID another call uses", () => {
  it.live("a call that asks with the ID of another call's record is recorded failed and asks nothing", () => {
    let asked = 0
    let read = 0
    return Effect.gen(function* () {
      const client = yield* AgentSessionClient.AgentSessionClient
      yield* client.startSession("q1", { initialMessage: "deploy" })
      const done = yield* SessionTesting.awaitTurn("q1")
      assert.strictEqual(asked, 1)
      assert.strictEqual(read, 1)
      assert.deepStrictEqual(done.pendingInterrupts, [], "no question was raised")
      // the model sees the refusal as the call's failure
      const seen = JSON.parse(done.messages.at(-1)?.text ?? "{}") as Record<string, string>
      assert.strictEqual(seen.a, `${Wire.TOOL_CALL_FAILED_PREFIX}${Wire.interruptIdInUseError("a-input-1")}`)
      const finished = (yield* allEvents("q1"))
        .filter((e) => e.event.type === "tool_call_finished")
        .map((e) => e.event.payload as { readonly toolCallId: string; readonly status: string })
      assert.deepStrictEqual(finished.map((p) => [p.toolCallId, p.status]).sort(), [
        ["a", "failed"],
        ["a-input-1", "succeeded"]
      ])
      // AwaitQuestionAnswer found the collision and recorded the call instead of raising the question
      assert.include(yield* stepShape("q1"), "AwaitQuestionAnswer")
    }).pipe(
      Effect.provide(
        SessionTesting.layer({
          model: [
            {
              toolCalls: [
                { id: "a", name: "deploy", arguments: {} },
                // this call's ID is the interrupt ID the question of "a" would take
                { id: "a-input-1", name: "lookup", arguments: {} }
              ]
            },
            (request) => ({ text: JSON.stringify(toolResults(request)) })
          ],
          tools: [
            ToolSource.tool({
              name: "deploy",
              description: "Deploy; asks where first.",
              effect: "read",
              handler: () =>
                Effect.sync(() => {
                  asked++
                  return Runner.toolInputRequested({ question: "Which environment?", continuation: "env" })
                })
            }),
            ToolSource.tool({
              name: "lookup",
              description: "A read.",
              effect: "read",
              handler: () =>
                Effect.sync(() => {
                  read++
                  return "looked up"
                })
            })
          ]
        })
      )
    )
  })
})

describe("a turn without accepts_turn_control", () => {
  it.live("cancel_turn and steer_user_message are refused; the turn runs to its end", () => {
    let calls = 0
    return Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const runner: Runner.AgentFrameworkRunnerShape = {
        name: "gated",
        buildUserMessage: (text) => message("user", text),
        runModelStep: () =>
          Effect.gen(function* () {
            calls++
            yield* Deferred.await(gate)
            return Runner.AgentTurnOutcome.turnCompleted({ newMessages: [message("assistant", "Finished.")], usage })
          }),
        executeDeferredToolCall: () => Effect.succeed({ output: "unused" })
      }
      yield* Effect.gen(function* () {
        const client = yield* AgentSessionClient.AgentSessionClient
        const engine = yield* Client.Client
        yield* client.startSession("tc1", { initialMessage: "work" })
        yield* SessionTesting.awaitSnapshot("tc1", () => calls === 1)
        // a turn as a worker that does not apply turn controls started it (the field's default)
        const state = yield* engine.getAttribute("tc1", Persistence.AgentState)
        assert.isTrue(state._tag === "Some" && state.value.acceptsTurnControl)
        if (state._tag === "Some") {
          yield* engine.setAttribute("tc1", Persistence.AgentState, { ...state.value, acceptsTurnControl: false })
        }
        assert.isFalse(yield* client.cancelTurn("tc1"), "cancel_turn is refused")
        assert.isFalse(yield* client.steerUserMessage("tc1", { text: "change of plan" }), "steering is refused")
        yield* Deferred.succeed(gate, undefined)
        const done = yield* SessionTesting.awaitTurn("tc1")
        assert.strictEqual(done.messages.at(-1)?.text, "Finished.")
        const types = (yield* allEvents("tc1")).map((e) => e.event.type)
        assert.notInclude(types, "turn_cancelled")
        assert.notInclude(types, "turn_steered")
        assert.strictEqual(calls, 1)
      }).pipe(Effect.provide(SessionTesting.layer({ runner: Layer.succeed(Runner.AgentFrameworkRunner, runner) })))
    })
  })
})
