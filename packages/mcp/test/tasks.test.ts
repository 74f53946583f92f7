// MCP tasks (protocol 2025-11-25) of a server without protocol sessions: the tool Step saves the task's handle
// as its heartbeat checkpoint and returns ToolTaskStarted, PollToolTask Steps poll it with tasks/get, and a
// retried attempt returns the same task. The server is written with the SDK (test/fixtures/task-server.ts).
import { Client } from "@durable-agent/engine"
import { AgentSessionClient, EventWriter, Heartbeat, Runner, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { McpToolSource } from "../src/index.ts"
import { serveTaskServer, type TaskServer } from "./fixtures/task-server.ts"
import { awaitSnapshot, awaitTurns, sessionEvents, toolCallOutcomes, toolResults, withMcpSession } from "./support.ts"

const taskServer = Effect.acquireRelease(Effect.promise(serveTaskServer), (s) => Effect.promise(() => s.close()))

/** Waits until the server has seen `n` polls (polls are the server's own record; no clock involved). */
const awaitPolls = (server: TaskServer, n: number) =>
  Effect.sync(() => server.polls.length).pipe(
    Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (count) => count >= n }),
    Effect.timeoutOrElse({ duration: "60 seconds", orElse: () => Effect.die(new Error(`no ${n} polls`)) })
  )

/** The services a tool Step provides: a heartbeat that records checkpoints (starting from `checkpoint`). */
const stepServices = (saved: Array<unknown>, checkpoint?: unknown) =>
  Layer.mergeAll(Heartbeat.layerTest(saved, checkpoint), EventWriter.layerNoop)

const request = (toolName: string, checkpointed: boolean) => ({
  flowId: "f",
  turnId: "t",
  toolCallId: "c",
  toolName,
  arguments: {},
  argumentsText: "{}",
  idempotencyKey: "f/t/c",
  attempt: checkpointed ? 2 : 1,
  toolSourceReference: null,
  supportsToolTasks: true
})

describe("MCP tasks any connection can poll", () => {
  it("the next poll interval: the server's in whole seconds, or double the last up to a minute", () => {
    assert.strictEqual(McpToolSource.nextPollSeconds(1000, 1), 2)
    assert.strictEqual(McpToolSource.nextPollSeconds(2500, 1), 3)
    assert.strictEqual(McpToolSource.nextPollSeconds(undefined, 4), 8)
    assert.strictEqual(McpToolSource.nextPollSeconds(1000, 40), 60)
    assert.strictEqual(McpToolSource.nextPollSeconds(120_000, 40), 120)
  })

  it.live(
    "the handle is saved before the call returns, a retried attempt returns the same task, cancel sends tasks/cancel",
    () =>
      Effect.gen(function* () {
        const server = yield* taskServer
        const source = yield* McpToolSource.make({ servers: { own: { url: server.url } } })
        assert.strictEqual(source.tools[0]!.taskSupport, "required")
        const saved: Array<unknown> = []
        const first = yield* source.call(request("own__job", false)).pipe(Effect.provide(stepServices(saved)))
        assert.isTrue(Runner.isToolTaskStarted(first))
        assert.strictEqual(server.created.length, 1)
        const task = server.created[0]!
        assert.deepStrictEqual([task.key, task.ttl], ["f/t/c", 24 * 60 * 60 * 1000])
        assert.strictEqual(saved.length, 1)
        // a retried attempt reads the checkpoint and calls nothing
        const again = yield* source.call(request("own__job", true)).pipe(Effect.provide(stepServices([], saved[0])))
        assert.isTrue(Runner.isToolTaskStarted(again) && again.taskId === task.taskId)
        assert.strictEqual(server.calls.length, 1)
        // a checkpoint another writer saved reads as none: the call goes out
        yield* source.call(request("own__job", true)).pipe(Effect.provide(stepServices([], { other: "thing" })))
        assert.strictEqual(server.calls.length, 2)
        const taskRequest = {
          flowId: "f",
          turnId: "t",
          toolCallId: "c",
          toolName: "own__job",
          taskId: task.taskId,
          pollIntervalSeconds: 1,
          continuation: null,
          toolSourceReference: null,
          idempotencyKey: "f/t/c",
          attempt: 1
        }
        const services = Layer.mergeAll(Heartbeat.layerNoop, EventWriter.layerNoop)
        const pending = yield* source.pollToolTask!(taskRequest).pipe(Effect.provide(services))
        assert.deepStrictEqual(pending, {
          _tag: "ToolTaskPending",
          pollIntervalSeconds: 2,
          continuation: JSON.stringify({ status: "working" })
        })
        yield* source.cancelToolTask!(taskRequest).pipe(Effect.provide(services))
        assert.deepStrictEqual(server.cancels, [task.taskId])
        // cancelling again is done too (the server answers with an error for a task already cancelled)
        yield* source.cancelToolTask!(taskRequest).pipe(Effect.provide(services))
        const cancelled = yield* Effect.flip(source.pollToolTask!(taskRequest).pipe(Effect.provide(services)))
        assert.strictEqual(cancelled._tag, "ToolExecutionError")
        // a task the server does not know fails the attempt (the call's failure route decides by effect)
        const unknown = yield* Effect.flip(
          source.pollToolTask!({ ...taskRequest, taskId: "no-such-task" }).pipe(Effect.provide(services))
        )
        assert.strictEqual(unknown._tag, "ToolAttemptError")
      }).pipe(Effect.scoped)
  )

  it.live("a task that asks for input is cancelled, and the call fails with text naming the input", () =>
    Effect.gen(function* () {
      const server = yield* taskServer
      const source = yield* McpToolSource.make({ servers: { own: { url: server.url } } })
      const started = yield* source.call(request("own__job", false)).pipe(Effect.provide(stepServices([])))
      assert.isTrue(Runner.isToolTaskStarted(started))
      const taskId = server.created[0]!.taskId
      yield* Effect.promise(() => server.askInput(taskId, "which region?"))
      const events: Array<EventWriter.WrittenEvent> = []
      const failure = yield* Effect.flip(
        source.pollToolTask!({
          flowId: "f",
          turnId: "t",
          toolCallId: "c",
          toolName: "own__job",
          taskId,
          pollIntervalSeconds: 1,
          continuation: null,
          toolSourceReference: null,
          idempotencyKey: "f/t/c",
          attempt: 1
        }).pipe(Effect.provide(Layer.mergeAll(Heartbeat.layerNoop, EventWriter.layerTest(events))))
      )
      assert.strictEqual(failure._tag, "ToolExecutionError")
      assert.include(failure.message, "which region?")
      assert.deepStrictEqual(server.cancels, [taskId])
      assert.deepStrictEqual(events, [
        {
          type: "mcp.task_status",
          payload: { task_id: taskId, status: "input_required", status_message: "which region?" }
        }
      ])
    }).pipe(Effect.scoped)
  )

  it.live(
    "through a session: waiting_for_task, PollToolTask Steps until the task completes, then the turn goes on",
    () =>
      Effect.gen(function* () {
        const server = yield* taskServer
        yield* withMcpSession(
          {
            source: { servers: { own: { url: server.url } } },
            script: [{ toolCalls: [{ id: "j1", name: "own__job", arguments: { size: 3 } }] }, { text: "done" }]
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("t1", { initialMessage: "run the job" })
              const waiting = yield* awaitSnapshot("t1", (s) => s.toolCalls[0]?.status === "waiting_for_task")
              const record = waiting.toolCalls[0]!
              assert.strictEqual(record.taskId, server.created[0]!.taskId)
              assert.strictEqual(record.taskPollIntervalSeconds, 1)
              yield* awaitPolls(server, 2)
              yield* Effect.promise(() => server.finish(record.taskId!, "job finished"))
              yield* awaitTurns("t1", 1)
              assert.strictEqual(toolResults(kit.requests[1]!).j1, "job finished")
              assert.strictEqual(server.calls.length, 1)
              const outcomes = yield* toolCallOutcomes("t1")
              assert.deepStrictEqual(outcomes.j1, {
                effect: "idempotent_write",
                requiresApproval: false,
                status: "succeeded"
              })
              const events = yield* sessionEvents("t1")
              const started = events.find((e) => e.type === "tool_task_started")
              assert.deepStrictEqual(started?.payload, {
                toolCallId: "j1",
                toolName: "own__job",
                taskId: record.taskId
              })
              // the status event is written when the status changes, not on every poll
              const statuses = events.filter((e) => e.type === "mcp.task_status").map((e) => e.payload.status)
              assert.deepStrictEqual(statuses, ["completed"])
              const steps = yield* Effect.flatMap(Client.Client, (c) => c.stepExecutions("t1"))
              const polls = steps.filter((s) => s.stepType === "PollToolTask")
              assert.strictEqual(polls.length, server.polls.length)
              assert.deepStrictEqual(
                steps.filter((s) => s.stepType === "CallTool").map((s) => s.attempts.length),
                [1]
              )
            })
        )
      }).pipe(Effect.scoped)
  )

  it.live(
    "a cancelled turn cancels its task: CancelToolTask sends tasks/cancel, the call is outcome_unknown, the session goes on",
    () =>
      Effect.gen(function* () {
        const server = yield* taskServer
        yield* withMcpSession(
          {
            source: { servers: { own: { url: server.url } } },
            script: [{ toolCalls: [{ id: "j1", name: "own__job", arguments: { size: 3 } }] }, { text: "next answer" }]
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("c1", { initialMessage: "run the job" })
              const waiting = yield* awaitSnapshot("c1", (s) => s.toolCalls[0]?.status === "waiting_for_task")
              const taskId = waiting.toolCalls[0]!.taskId!
              yield* awaitPolls(server, 1)
              assert.isTrue(yield* client.cancelTurn("c1"))
              yield* awaitTurns("c1", 1)
              // the server was told, once, and the record says the task may have taken effect
              assert.deepStrictEqual(server.cancels, [taskId])
              const outcomes = yield* toolCallOutcomes("c1")
              assert.strictEqual(outcomes.j1!.status, "outcome_unknown")
              const steps = yield* Effect.flatMap(Client.Client, (c) => c.stepExecutions("c1"))
              const types = steps.map((s) => s.stepType)
              assert.includeMembers(types, ["FinishTurnCancellation", "CancelToolTask"])
              assert.strictEqual(types.filter((t) => t === "CancelToolTask").length, 1)
              const events = yield* sessionEvents("c1")
              assert.isTrue(events.some((e) => e.type === "turn_cancelled"))
              // the model was not called again in the cancelled turn, and no second task was created
              assert.strictEqual(kit.requests.length, 1)
              assert.strictEqual(server.created.length, 1)
              // cancelling a turn leaves the session open: the next message gets an answer
              assert.isTrue(yield* client.sendUserMessage("c1", "and now?"))
              const after = yield* awaitTurns("c1", 2)
              assert.strictEqual(after.messages.at(-1)?.text, "next answer")
            })
        )
      }).pipe(Effect.scoped)
  )

  it.live("a task whose server is gone: three poll attempts fail, and the call is recorded by its effect", () =>
    Effect.gen(function* () {
      const server = yield* taskServer
      yield* withMcpSession(
        {
          source: { servers: { own: { url: server.url } } },
          script: [{ toolCalls: [{ id: "j1", name: "own__job" }] }, { text: "done" }]
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("g1", { initialMessage: "run the job" })
            yield* awaitSnapshot("g1", (s) => s.toolCalls[0]?.status === "waiting_for_task")
            yield* Effect.promise(() => server.close())
            yield* awaitTurns("g1", 1)
            // an idempotent write whose task may have run: outcome_unknown, not failed
            assert.strictEqual(toolResults(kit.requests[1]!).j1, Wire.OUTCOME_UNKNOWN_TEXT)
            const outcomes = yield* toolCallOutcomes("g1")
            assert.strictEqual(outcomes.j1!.status, "outcome_unknown")
            const steps = yield* Effect.flatMap(Client.Client, (c) => c.stepExecutions("g1"))
            const poll = steps.filter((s) => s.stepType === "PollToolTask")
            assert.deepStrictEqual(
              poll.map((s) => s.attempts.map((a) => a.outcome)),
              [["failure", "failure", "failure"]]
            )
            assert.deepStrictEqual(
              steps.map((s) => s.stepType).filter((t) => t.startsWith("Record")),
              ["RecordToolFailure"]
            )
          })
      )
    }).pipe(Effect.scoped)
  )
})
