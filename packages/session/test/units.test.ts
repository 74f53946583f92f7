import { RecoveryError, WorkerLost } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { TestClock } from "effect/testing"
import {
  AgentSessionFlow,
  Errors,
  EventWriter,
  Heartbeat,
  ModelClient,
  Policy,
  type Runner,
  Stepwise,
  ToolSource,
  Wire
} from "../src/index.ts"
import { emitter, provideStepServices, type SessionConfig, withHeartbeats } from "../src/internal/session.ts"
import { oversize, sizeBound, storedBytes } from "../src/internal/sizes.ts"
import { makeEnv } from "./fake.ts"

const record = (fields: Partial<Wire.AgentToolCall> = {}): Wire.AgentToolCall => ({
  toolCallId: "t1",
  turnId: "turn-1",
  toolName: "tool",
  arguments: "{}",
  effect: "read",
  requiresApproval: false,
  status: "approved",
  output: null,
  error: null,
  rejectionMessage: null,
  deferralOrder: 0,
  toolSourceReference: null,
  traceContext: null,
  waitUntil: null,
  inputContinuation: null,
  inputAnswers: [],
  inputQuestion: null,
  inputChoices: [],
  inputAllowsFreeText: true,
  cancellationReason: null,
  taskId: null,
  taskPollIntervalSeconds: null,
  taskAnswerPending: false,
  ...fields
})

describe("policies", () => {
  it("resolves the effect and approval: policy, then framework metadata, then the session default", () => {
    assert.deepStrictEqual(Policy.resolveToolPolicy("x", {}), { effect: "unclassified", requiresApproval: true })
    assert.deepStrictEqual(Policy.resolveToolPolicy("x", { frameworkEffect: "read" }), {
      effect: "read",
      requiresApproval: false
    })
    assert.deepStrictEqual(Policy.resolveToolPolicy("x", { defaultToolEffect: "idempotent_write" }), {
      effect: "idempotent_write",
      requiresApproval: false
    })
    assert.deepStrictEqual(
      Policy.resolveToolPolicy("x", {
        toolPolicies: { x: { effect: "read", requiresApproval: true } },
        frameworkEffect: "unclassified"
      }),
      { effect: "read", requiresApproval: true }
    )
    assert.deepStrictEqual(Policy.resolveToolPolicy("x", { toolPolicies: { x: { effect: "non_idempotent_write" } } }), {
      effect: "non_idempotent_write",
      requiresApproval: true
    })
    assert.deepStrictEqual(Policy.resolveToolPolicy("toString", { toolPolicies: {} }), {
      effect: "unclassified",
      requiresApproval: true
    })
    assert.deepStrictEqual(
      Object.entries(Policy.EFFECT_TABLE).map(([effect, row]) => [effect, row.step, row.maxAttempts, row.exhausted]),
      [
        ["read", "CallTool", 3, "failed"],
        ["idempotent_write", "CallTool", 3, "outcome_unknown"],
        ["non_idempotent_write", "CallSingleAttemptTool", 1, "outcome_unknown"],
        ["unclassified", "CallSingleAttemptTool", 1, "outcome_unknown"]
      ]
    )
  })

  it("validates tool call IDs and strict JSON object arguments", () => {
    assert.isUndefined(Policy.toolCallIdProblem("call_1", new Set()))
    assert.include(Policy.toolCallIdProblem("", new Set()) ?? "", "empty")
    assert.include(Policy.toolCallIdProblem("a/b", new Set()) ?? "", '"/"')
    assert.include(Policy.toolCallIdProblem("c", new Set(["c"])) ?? "", "more than once")
    assert.deepStrictEqual(Policy.parseToolArguments('{"a":1}'), Option.some({ a: 1 }))
    for (const bad of ["[1]", "null", "1", '"x"', '{"a": NaN}', '{"a": Infinity}', "{", ""]) {
      assert.isTrue(Option.isNone(Policy.parseToolArguments(bad)), bad)
    }
  })
})

describe("the Flow definition", () => {
  it("has the spec's Steps, options, failure routes and RPCs", () => {
    const flow = AgentSessionFlow.make({ flowType: "Defs" })
    assert.deepStrictEqual(
      flow.steps.map((s) => s.type),
      [
        "StartAgentSession",
        "AwaitUserMessage",
        "RunModel",
        "RecordTurnFailure",
        "CompactContext",
        "CallTool",
        "CallSingleAttemptTool",
        "AwaitToolApproval",
        "RecordToolFailure",
        "RecordToolOutcomeUnknown",
        "PollToolTask",
        "ResumeTurn",
        "ApplyTurnControl",
        "FinishTurnCancellation",
        "CancelToolTask",
        "AwaitQuestionAnswer",
        "AwaitTimer"
      ]
    )
    const {
      RunModel,
      CallTool,
      CallSingleAttemptTool,
      RecordTurnFailure,
      RecordToolFailure,
      RecordToolOutcomeUnknown,
      PollToolTask
    } = flow.session.steps
    assert.strictEqual(RunModel.options?.execute?.timeout, "15 minutes")
    assert.strictEqual(RunModel.options?.heartbeatTimeout, "2 minutes")
    assert.strictEqual(RunModel.options?.execute?.retry?.maxAttempts, 3)
    assert.strictEqual(RunModel.options?.execute?.retry?.totalDuration, "30 minutes")
    assert.strictEqual(RunModel.options?.onExecuteFailure, RecordTurnFailure)
    // CompactContext: RunModel's options and failure route
    const { CompactContext } = flow.session.steps
    assert.deepStrictEqual(CompactContext.options?.execute, RunModel.options?.execute)
    assert.strictEqual(CompactContext.options?.heartbeatTimeout, "2 minutes")
    assert.strictEqual(CompactContext.options?.onExecuteFailure, RecordTurnFailure)
    assert.strictEqual(CallTool.options?.execute?.retry?.maxAttempts, 3)
    assert.strictEqual(CallTool.options?.onExecuteFailure, RecordToolFailure)
    assert.strictEqual(CallSingleAttemptTool.options?.execute?.retry?.maxAttempts, 1)
    assert.strictEqual(CallSingleAttemptTool.options?.onExecuteFailure, RecordToolOutcomeUnknown)
    // RecordToolFailure records by effect: failed for a read, outcome_unknown for any write
    assert.strictEqual(PollToolTask.options?.execute?.retry?.maxAttempts, 3)
    assert.strictEqual(PollToolTask.options?.onExecuteFailure, RecordToolFailure)
    const { CancelToolTask, ApplyTurnControl, FinishTurnCancellation } = flow.session.steps
    assert.strictEqual(CancelToolTask.options?.execute?.timeout, "30 seconds")
    assert.strictEqual(CancelToolTask.options?.execute?.retry?.maxAttempts, 3)
    assert.strictEqual(CancelToolTask.options?.onExecuteFailure, RecordToolOutcomeUnknown)
    assert.deepStrictEqual(
      ApplyTurnControl.options?.execute?.locks?.map((l) => ("name" in l ? l.name : l.map.name)),
      ["TurnCancellationRequest"]
    )
    assert.deepStrictEqual(
      FinishTurnCancellation.options?.execute?.locks?.map((l) => ("name" in l ? l.name : l.map.name)),
      ["TurnCancellationRequest", "PendingInterrupts"]
    )
    assert.deepStrictEqual(
      flow.session.steps.AwaitUserMessage.options?.execute?.locks?.map((l) => ("name" in l ? l.name : l.map.name)),
      ["TurnCancellationRequest", "PendingPlanExecution"]
    )
    for (const step of flow.steps) {
      assert.strictEqual(step.options?.execute?.durability, "sync", step.type)
      assert.strictEqual(step.options?.waitFor?.durability, "sync", step.type)
    }
    assert.deepStrictEqual(
      flow.rpcs.map((r) => [r.name, r.locks?.map((l) => ("name" in l ? l.name : l.map.name)) ?? []]),
      [
        ["send_user_message", []],
        ["resolve_interrupt", ["PendingInterrupts"]],
        ["answer_question", ["PendingInterrupts"]],
        ["cancel_turn", ["TurnCancellationRequest", "PendingInterrupts"]],
        ["steer_user_message", []],
        ["delete_queued_message", []],
        ["execute_plan", ["PendingPlanExecution"]],
        ["get_agent_snapshot", []],
        ["list_agent_messages", []],
        ["update_session_settings", []]
      ]
    )
    assert.deepStrictEqual(
      flow.streams.map((s) => [s.name, s.capacityBytes]),
      [["AgentEvents", 10 * 1024 * 1024]]
    )
  })

  it("refuses invalid options", () => {
    for (const options of [
      { flowType: "" },
      { flowType: "a/b" },
      { flowType: "X", defaultToolEffect: "dangerous" as never },
      { flowType: "X", toolPolicies: { t: { effect: "nope" as never } } },
      { flowType: "X", interruptDeadline: -5 }
    ]) {
      assert.throws(() => AgentSessionFlow.make(options), Errors.AgentSessionDefinitionError)
    }
  })
})

describe("failure routes", () => {
  const run = (
    step: "RecordToolFailure" | "RecordToolOutcomeUnknown",
    rec: Wire.AgentToolCall,
    progress: RecoveryError["attemptProgress"]
  ) =>
    Effect.gen(function* () {
      const flow = AgentSessionFlow.make({ flowType: "Routes" })
      const env = makeEnv({
        stepExecutionId: `${step}-1`,
        recoveryError: RecoveryError.make(new WorkerLost({ detail: "worker gone" }), progress)
      })
      env.ctx.setAt({ _tag: "AttributeMap", name: "AgentToolCalls" } as never, rec.toolCallId, rec)
      const decision = yield* flow.session.steps[step].execute(env.ctx, rec.toolCallId)
      return { decision, env, after: env.ctx.getAt({ _tag: "AttributeMap", name: "AgentToolCalls" } as never, "t1") }
    })

  it.effect("a call whose tool never ran (not_started, still approved) records failed with the not-run prefix", () =>
    Effect.gen(function* () {
      for (const step of ["RecordToolFailure", "RecordToolOutcomeUnknown"] as const) {
        for (const effect of ["read", "idempotent_write", "non_idempotent_write", "unclassified"] as const) {
          const { decision, env, after } = yield* run(step, record({ effect }), "not_started")
          assert.strictEqual(decision._tag, "DeadEnd")
          const value = Option.getOrThrow(after) as Wire.AgentToolCall
          assert.strictEqual(value.status, "failed")
          assert.strictEqual(value.error, Wire.toolCallNotRunError("worker gone"))
          assert.isTrue(value.error?.startsWith(`${Wire.TOOL_CALL_NOT_RUN_ERROR_PREFIX}: `))
          assert.deepStrictEqual(env.published, [["ToolCallResults", { toolCallId: "t1" }]])
          assert.deepStrictEqual(
            env.emitted.map((e) => [e.type, e.stepExecutionId, e.turnId]),
            [["tool_call_finished", `${step}-1`, "turn-1"]]
          )
        }
      }
    })
  )

  it.effect("not_completed and unspecified keep the status of the call's effect", () =>
    Effect.gen(function* () {
      const cases = [
        ["RecordToolFailure", "read", "not_completed", "failed"],
        ["RecordToolFailure", "idempotent_write", "not_completed", "outcome_unknown"],
        ["RecordToolFailure", "read", "unspecified", "failed"],
        ["RecordToolOutcomeUnknown", "non_idempotent_write", "not_completed", "outcome_unknown"],
        ["RecordToolOutcomeUnknown", "unclassified", "unspecified", "outcome_unknown"]
      ] as const
      for (const [step, effect, progress, status] of cases) {
        const { after } = yield* run(step, record({ effect }), progress)
        const value = Option.getOrThrow(after) as Wire.AgentToolCall
        assert.strictEqual(value.status, status, `${step} ${effect} ${progress}`)
        assert.strictEqual(value.error, "worker gone")
      }
      // a question the tool asked means it ran: not_started does not apply
      const asked = record({
        effect: "idempotent_write",
        inputAnswers: [{ interruptId: "t1-input-1", question: "q", answer: "a", resolution: "answered" }]
      })
      const { after } = yield* run("RecordToolFailure", asked, "not_started")
      assert.strictEqual((Option.getOrThrow(after) as Wire.AgentToolCall).status, "outcome_unknown")
    })
  )

  it.effect("a record that is already final is left alone and publishes nothing", () =>
    Effect.gen(function* () {
      const { decision, env, after } = yield* run(
        "RecordToolFailure",
        record({ status: "succeeded", output: "done" }),
        "not_completed"
      )
      assert.strictEqual(decision._tag, "DeadEnd")
      assert.strictEqual((Option.getOrThrow(after) as Wire.AgentToolCall).status, "succeeded")
      assert.deepStrictEqual(env.published, [])
      assert.deepStrictEqual(env.emitted, [])
    })
  )
})

describe("heartbeats", () => {
  it.effect("RunModel and tool Steps heartbeat every interval while they work", () =>
    Effect.gen(function* () {
      const env = makeEnv({ stepExecutionId: "CallTool-1" })
      const work = Effect.sleep("65 seconds").pipe(Effect.as("done"))
      const fiber = yield* Effect.forkChild(withHeartbeats(env.ctx, Duration.seconds(20))(work))
      yield* TestClock.adjust("65 seconds")
      assert.strictEqual(yield* Fiber.join(fiber), "done")
      assert.strictEqual(env.heartbeats(), 3)
      yield* TestClock.adjust("60 seconds")
      assert.strictEqual(env.heartbeats(), 3, "the beats stop with the work")
    })
  )
})

describe("the delta buffer", () => {
  const flow = AgentSessionFlow.make({ flowType: "Deltas" })
  // the event code reads only the stream of the configuration
  const config = { events: flow.session.events } as unknown as SessionConfig
  const texts = (env: ReturnType<typeof makeEnv>) =>
    env.emitted.map((e) => [e.type, (JSON.parse(e.payload) as { text?: string }).text ?? null])

  it.effect("a model call that returns within the hold writes its deltas with the Step's commit, no heartbeat", () =>
    Effect.gen(function* () {
      const env = makeEnv({ stepExecutionId: "RunModel-1" })
      const call = Effect.gen(function* () {
        const writer = yield* EventWriter.EventWriter
        yield* writer.textDelta("He")
        yield* writer.textDelta("l")
        yield* writer.textDelta("lo")
        // a runner's own structural event, written between the deltas
        yield* writer.write({ type: "stepwise.note", payload: { n: 1 } })
        yield* writer.textDelta("!")
      })
      // the test clock never moves: the call returns before the hold ends
      yield* provideStepServices(env.ctx, config, "turn-1")(call)
      yield* emitter(env.ctx, config, "turn-1").usageRecorded({
        recorded: { modelCalls: 1, inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 },
        session: { modelCalls: 1, inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 }
      })
      assert.strictEqual(env.heartbeats(), 0, "no durable heartbeat of its own")
      // staged in the order readers saw before: the deltas (the first one as written, the later ones merged),
      // then the structural events
      assert.deepStrictEqual(texts(env), [
        ["text_delta", "He"],
        ["text_delta", "llo!"],
        ["stepwise.note", null],
        ["usage_recorded", null]
      ])
    })
  )

  it.effect(
    "a model call that runs past the hold writes its first delta with a durable heartbeat before it returns",
    () =>
      Effect.gen(function* () {
        const env = makeEnv({ stepExecutionId: "RunModel-1" })
        const gate = yield* Deferred.make<void>()
        const call = Effect.gen(function* () {
          const writer = yield* EventWriter.EventWriter
          yield* writer.textDelta("He")
          yield* Deferred.await(gate)
          yield* writer.textDelta("llo")
        })
        const fiber = yield* Effect.forkChild(provideStepServices(env.ctx, config, "turn-1")(call))
        yield* TestClock.adjust("10 millis")
        assert.deepStrictEqual(env.emitted, [], "held while the call may still return")
        yield* TestClock.adjust("1 second")
        assert.strictEqual(env.heartbeats(), 1)
        assert.deepStrictEqual(texts(env), [["text_delta", "He"]], "visible while the call runs")
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(fiber)
        assert.strictEqual(env.heartbeats(), 1)
        assert.deepStrictEqual(texts(env), [
          ["text_delta", "He"],
          ["text_delta", "llo"]
        ])
      })
  )

  it.effect("a model call that fails within the hold writes its deltas with a durable heartbeat as it fails", () =>
    Effect.gen(function* () {
      const env = makeEnv({ stepExecutionId: "RunModel-1" })
      const call = Effect.gen(function* () {
        const writer = yield* EventWriter.EventWriter
        yield* writer.textDelta("first try")
        return yield* Effect.fail("the provider hung up")
      })
      const exit = yield* Effect.exit(provideStepServices(env.ctx, config, "turn-1")(call))
      assert.isTrue(exit._tag === "Failure")
      // the attempt may never commit: its text is visible now, and the retry's supersedes it
      assert.strictEqual(env.heartbeats(), 1)
      assert.deepStrictEqual(texts(env), [["text_delta", "first try"]])
    })
  )

  it.effect("tool_call_started is never held: it goes with a durable heartbeat at once, after the held deltas", () =>
    Effect.gen(function* () {
      const env = makeEnv({ stepExecutionId: "CallTool-1" })
      const seen: Array<number> = []
      const call = Effect.gen(function* () {
        const writer = yield* EventWriter.EventWriter
        yield* writer.textDelta("a")
        yield* writer.write({
          type: "tool_call_started",
          payload: { tool_call_id: "t1", tool_name: "tool", effect: "read", attempt: 1 }
        })
        seen.push(env.heartbeats(), env.emitted.length)
      })
      yield* provideStepServices(env.ctx, config, "turn-1")(call)
      assert.deepStrictEqual(seen, [1, 2], "durable before the tool goes on")
      assert.deepStrictEqual(
        env.emitted.map((e) => e.type),
        ["text_delta", "tool_call_started"]
      )
    })
  )
})

describe("the scripted model", () => {
  it.effect("answers in script order: text, deltas, parallel tool calls, usage, failures, exhaustion", () =>
    Effect.gen(function* () {
      const deltas: Array<string> = []
      const model = ModelClient.scripted([
        { text: "Hello", textDeltas: ["He", "llo"], usage: { inputTokens: 3 } },
        {
          toolCalls: [
            { id: "a", name: "x", arguments: { n: 1 } },
            { id: "b", name: "y", arguments: "raw text" }
          ]
        },
        { fail: "rate limited" },
        (request) => ({ text: `saw ${request.messages.length}` })
      ])
      const request = {
        instructions: "",
        messages: [{ role: "user" as const, text: "hi" }],
        tools: [],
        onTextDelta: (t: string) => Effect.sync(() => void deltas.push(t))
      }
      const first = yield* model.generate(request)
      assert.strictEqual(first.text, "Hello")
      assert.deepStrictEqual(deltas, ["He", "llo"])
      assert.deepStrictEqual(first.usage, { inputTokens: 3, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 })
      const second = yield* model.generate(request)
      assert.deepStrictEqual(second.toolCalls, [
        { toolCallId: "a", toolName: "x", arguments: '{"n":1}' },
        { toolCallId: "b", toolName: "y", arguments: "raw text" }
      ])
      const third = yield* Effect.flip(model.generate(request))
      assert.instanceOf(third, Errors.ModelCallError)
      assert.strictEqual(third.message, "rate limited")
      assert.strictEqual((yield* model.generate(request)).text, "saw 1")
      const exhausted = yield* Effect.flip(model.generate(request))
      assert.include(exhausted.message, "script exhausted")
    })
  )
})

describe("Stepwise conversions", () => {
  it("groups assistant text and tool calls into one model message and reads foreign messages by projection", () => {
    const items: Array<Stepwise.StepwiseItem> = [
      { type: "user", text: "hi" },
      { type: "assistant_text", text: "Let me check." },
      { type: "tool_call", tool_call_id: "c1", tool_name: "w", arguments: "{}" },
      { type: "tool_call", tool_call_id: "c2", tool_name: "w", arguments: "{}" },
      { type: "tool_result", tool_call_id: "c1", tool_name: "w", output: "1" },
      { type: "tool_result", tool_call_id: "c2", tool_name: "w", output: Wire.OUTCOME_UNKNOWN_TEXT }
    ]
    assert.deepStrictEqual(
      Stepwise.toModelMessages(items).map((m) =>
        m.role === "assistant" ? [m.role, m.text, m.toolCalls.length] : [m.role]
      ),
      [["user"], ["assistant", "Let me check.", 2], ["tool"], ["tool"]]
    )
    const stored = items.map((item, i) => ({
      ...Stepwise.toFrameworkMessage(item),
      sequence: i + 1,
      turnId: "turn-1",
      createdAt: "2026-01-01T00:00:00.000Z"
    }))
    assert.deepStrictEqual(stored.map(Stepwise.fromStoredMessage), items)
    // a message another runner stored, with a framework item Stepwise does not know
    const foreign = { ...stored[2]!, frameworkItem: '{"kind":"function_call"}' }
    assert.deepStrictEqual(Stepwise.fromStoredMessage(foreign), items[2])
  })
})

describe("Stepwise continuations", () => {
  const runState = (outcome: Runner.AgentTurnOutcome) =>
    outcome._tag === "TurnCompleted" ? undefined : (JSON.parse(outcome.frameworkRunState) as Record<string, unknown>)

  it.effect("the run state carries consecutive_continuations only after a continuation", () =>
    Effect.gen(function* () {
      const requests: Array<ModelClient.ModelRequest> = []
      const seen: Array<number> = []
      const runner = yield* Stepwise.make({
        name: "unit",
        instructions: "",
        decideTurnContinuation: (context) => {
          seen.push(context.consecutiveContinuations)
          return context.after === "tool_calls" && context.consecutiveContinuations === 0
            ? { message: "go on" }
            : undefined
        }
      }).pipe(
        Effect.provide(
          Layer.mergeAll(
            ModelClient.layerScripted(
              [
                { toolCalls: [{ id: "r1", name: "w", arguments: {} }] },
                { toolCalls: [{ id: "r2", name: "w", arguments: {} }] },
                { text: "done" }
              ],
              { onRequest: (request) => void requests.push(request) }
            ),
            ToolSource.layerEmpty
          )
        )
      )
      const user = { ...Stepwise.toFrameworkMessage({ type: "user", text: "hi" }), sequence: 1, turnId: "turn-1" }
      const turn = (
        frameworkRunState: string | null,
        toolCalls: ReadonlyArray<Wire.AgentToolCall>
      ): Runner.AgentTurnContext => ({
        flowId: "f",
        turnId: "turn-1",
        stepExecutionId: "RunModel-1",
        attempt: 1,
        messages: [{ ...user, createdAt: "2026-01-01T00:00:00.000Z" }],
        frameworkRunState,
        toolCalls,
        sessionSettings: {},
        interactionMode: "chat",
        toolPolicies: {},
        defaultToolEffect: "read",
        resolveToolPolicy: () => ({ effect: "read", requiresApproval: false })
      })
      const run = (context: Runner.AgentTurnContext) =>
        runner.runModelStep(context).pipe(Effect.provide(Layer.merge(EventWriter.layerNoop, Heartbeat.layerNoop)))
      const done = (id: string, output: string) =>
        record({ toolCallId: id, toolName: "w", status: "succeeded", output, deferralOrder: id === "r1" ? 0 : 1 })

      const first = yield* run(turn(null, []))
      assert.notProperty(runState(first), "consecutive_continuations")
      const second = yield* run(turn((first as Runner.ToolCallsRequested).frameworkRunState, [done("r1", "one")]))
      assert.strictEqual(runState(second)?.consecutive_continuations, 1)
      assert.deepStrictEqual(
        requests[1]!.messages.slice(-2).map((m) => (m.role === "tool" ? m.output : m.role === "user" ? m.text : "")),
        ["one", "go on"]
      )
      // a steered turn here keeps every item, each stored call with its result
      const unfinished = yield* runner.buildUnfinishedTurnMessages!(
        turn((second as Runner.ToolCallsRequested).frameworkRunState, [done("r1", "one"), done("r2", "two")])
      )
      assert.deepStrictEqual(
        unfinished.map((m) => [m.role, m.toolCallId, m.text ?? m.toolOutput]),
        [
          ["assistant", "r1", null],
          ["tool", "r1", "one"],
          ["user", null, "go on"],
          ["assistant", "r2", null],
          ["tool", "r2", "two"]
        ]
      )
      const third = yield* run(
        turn((second as Runner.ToolCallsRequested).frameworkRunState, [done("r1", "one"), done("r2", "two")])
      )
      assert.strictEqual(third._tag, "TurnCompleted")
      assert.strictEqual(third.newMessages?.length, 6)
      assert.deepStrictEqual(seen, [0, 1, 0], "a decision without a continuation resets the count")
    })
  )
})

describe("sizes: the bound that spares a value's encoding", () => {
  it("is never below the stored size of the session's values, whatever their texts hold", () => {
    const texts = ["", "plain", 'quotes " and \\ backslashes', "\u0000\u001f control", "é ü ß", "😀 emoji 𝄞", "日本語"]
    for (const text of texts) {
      const message: Wire.AgentMessage = {
        sequence: 12,
        turnId: "turn-0001",
        role: "assistant",
        text,
        toolCallId: null,
        toolName: null,
        toolArguments: null,
        toolOutput: text,
        frameworkItem: JSON.stringify({ text }),
        createdAt: "2026-11-01T12:00:00+00:00"
      }
      assert.isAtLeast(sizeBound(message), storedBytes(Wire.AgentMessage, message), text)
      const call = record({ arguments: JSON.stringify({ text }), output: text, error: text })
      assert.isAtLeast(sizeBound(call), storedBytes(Wire.AgentToolCall, call), text)
      assert.isAtLeast(sizeBound(text), storedBytes(Schema.String, text), text)
    }
    // no bound for what is not plain JSON data: the exact size is measured
    assert.strictEqual(sizeBound(new Date()), Number.POSITIVE_INFINITY)
    assert.strictEqual(oversize("v", Schema.String, "x".repeat(100), 50), "Value v is 102 bytes, over the limit of 50")
    assert.isUndefined(oversize("v", Schema.String, "x".repeat(100), 1000))
  })
})
