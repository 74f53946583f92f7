import { Errors, Policy, type Runner, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import { BuiltIns, DeltaBuffer, EffectClass, Replay, RunState, ToolCall, ToolRetryableError } from "../src/index.ts"

const record = (
  toolCallId: string,
  status: Wire.AgentToolCallStatus,
  output: string | null = null
): Wire.AgentToolCall => ({
  toolCallId,
  turnId: "t1",
  toolName: "read",
  arguments: "{}",
  effect: "read",
  requiresApproval: false,
  status,
  output,
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
  taskAnswerPending: false
})

const execution = (args: string, attempt = 1): Runner.DeferredToolExecution => ({
  flowId: "f",
  turnId: "t1",
  toolCall: { ...record("c1", "approved"), arguments: args },
  idempotencyKey: "f/t1/c1",
  attempt,
  heartbeatCheckpoint: Option.none()
})

describe("DeltaBuffer", () => {
  it.effect("merges deltas up to 1,024 characters or 100 ms, and flushes the rest", () =>
    Effect.gen(function* () {
      const out: Array<string> = []
      const buffer = DeltaBuffer.make((t) => Effect.sync(() => void out.push(t)))
      yield* buffer.push("a")
      yield* buffer.push("b")
      assert.deepStrictEqual(out, [])
      yield* TestClock.adjust("150 millis")
      yield* buffer.push("c")
      assert.deepStrictEqual(out, ["abc"])
      yield* buffer.push("x".repeat(1100))
      assert.deepStrictEqual(out, ["abc", "x".repeat(1100)])
      yield* buffer.push("tail")
      yield* buffer.flush
      assert.deepStrictEqual(out, ["abc", "x".repeat(1100), "tail"])
    })
  )
})

describe("ToolCall.run", () => {
  it.effect("passes the parsed input, the idempotency key and the attempt; output is text or JSON", () =>
    Effect.gen(function* () {
      const seen: Array<unknown> = []
      const result = yield* ToolCall.run(execution('{"path":"a"}', 2), {
        execute: (input, options) => {
          seen.push(input, options.idempotencyKey, options.attempt, options.toolCallId)
          return { ok: true }
        }
      })
      assert.deepStrictEqual(seen, [{ path: "a" }, "f/t1/c1", 2, "c1"])
      assert.strictEqual(result.output, '{"ok":true}')
      const text = yield* ToolCall.run(execution("{}"), { execute: async () => "plain" })
      assert.strictEqual(text.output, "plain")
    })
  )

  it.effect("arguments that are not a JSON object fail the call before the tool runs", () =>
    Effect.gen(function* () {
      let ran = 0
      for (const args of ["[1]", "not json", "3", "NaN"]) {
        const exit = yield* Effect.exit(ToolCall.run(execution(args), { execute: () => ran++ }))
        assert.deepStrictEqual(
          exit,
          Exit.fail(new Errors.ToolExecutionError({ message: "arguments must be a JSON object" }))
        )
      }
      assert.strictEqual(ran, 0)
    })
  )

  it.effect("a ToolRetryableError fails the attempt; any other throw fails the call with its message", () =>
    Effect.gen(function* () {
      const retry = yield* Effect.flip(
        ToolCall.run(execution("{}"), {
          execute: () => {
            throw new ToolRetryableError("503")
          }
        })
      )
      assert.strictEqual(retry._tag, "ToolAttemptError")
      assert.strictEqual(retry.message, "503")
      const failed = yield* Effect.flip(
        ToolCall.run(execution("{}"), { execute: () => Promise.reject(new Error("no such file")) })
      )
      assert.strictEqual(failed._tag, "ToolExecutionError")
      assert.strictEqual(failed.message, "no such file")
    })
  )

  it.effect("validate and output hooks decide the input and the model-visible text", () =>
    Effect.gen(function* () {
      const refused = yield* Effect.flip(
        ToolCall.run(execution('{"n":"x"}'), {
          validate: () => Effect.fail(new Errors.ToolExecutionError({ message: "invalid read arguments: n" })),
          execute: () => "never"
        })
      )
      assert.strictEqual(refused.message, "invalid read arguments: n")
      const shown = yield* ToolCall.run(execution('{"n":2}'), {
        validate: (raw) => Effect.succeed(Number(raw.n) * 10),
        execute: (n) => n + 1,
        output: (value) => Effect.succeed(`got ${String(value)}`)
      })
      assert.strictEqual(shown.output, "got 21")
    })
  )
})

describe("Replay", () => {
  it("a final record gives its model-visible result; one that is not final, or none, the unknown text", () => {
    const records = [record("c1", "succeeded", "file a"), record("c2", "approved")]
    assert.strictEqual(Replay.resultText(records, "c1"), "file a")
    assert.strictEqual(Replay.resultText(records, "c2"), Wire.OUTCOME_UNKNOWN_TEXT)
    assert.strictEqual(Replay.resultText(records, "missing"), Wire.OUTCOME_UNKNOWN_TEXT)
    const replayed = Replay.replay({ toolCalls: records }, [
      { toolCallId: "c1", toolName: "read" },
      { toolCallId: "c2", toolName: "read" }
    ])
    assert.deepStrictEqual(
      replayed.map((r) => r.text),
      ["file a", Wire.OUTCOME_UNKNOWN_TEXT]
    )
    assert.strictEqual(Replay.finalRecord(records, "c2"), undefined)
  })
})

describe("RunState", () => {
  it("round-trips the pending state; foreign or broken text decodes to undefined", () => {
    const codec = RunState.pending<{ role: string }>()
    const state = {
      v: 1 as const,
      messages: [{ role: "assistant" }],
      pending: [{ toolCallId: "c1", toolName: "read" }]
    }
    assert.deepStrictEqual(codec.decode(codec.encode(state)), state)
    for (const text of [
      null,
      undefined,
      "",
      "{",
      '{"v":2,"messages":[],"pending":[]}',
      '{"v":1,"messages":[]}',
      "[]"
    ]) {
      assert.strictEqual(codec.decode(text), undefined)
    }
  })

  it("a codec over any Schema refuses values of the wrong shape", () => {
    const codec = RunState.make(Schema.Struct({ v: Schema.Literal(1), agent: Schema.String }))
    assert.deepStrictEqual(codec.decode('{"v":1,"agent":"a"}'), { v: 1, agent: "a" })
    assert.strictEqual(codec.decode('{"v":1,"agent":3}'), undefined)
  })
})

describe("EffectClass", () => {
  it("is the session's table, and hints map as the spec says", () => {
    assert.strictEqual(EffectClass.table, Policy.EFFECT_TABLE)
    assert.strictEqual(EffectClass.fromHints({ readOnlyHint: true, idempotentHint: false }), "read")
    assert.strictEqual(EffectClass.fromHints({ idempotentHint: true, destructiveHint: true }), "idempotent_write")
    assert.strictEqual(EffectClass.fromHints({ destructiveHint: true }), undefined)
    assert.strictEqual(EffectClass.fromHints(undefined), undefined)
    for (const effect of ["read", "idempotent_write"] as const) {
      assert.strictEqual(EffectClass.fromHints(EffectClass.toHints(effect)), effect)
    }
    assert.strictEqual(EffectClass.fromHints(EffectClass.toHints("non_idempotent_write")), undefined)
    assert.deepStrictEqual(
      (["read", "idempotent_write", "non_idempotent_write", "unclassified"] as const).map((e) => [
        EffectClass.isRetried(e),
        EffectClass.exhaustedStatus(e)
      ]),
      [
        [true, "failed"],
        [true, "outcome_unknown"],
        [false, "outcome_unknown"],
        [false, "outcome_unknown"]
      ]
    )
  })

  it("resolve: the tool's effect, else its hints, under the session's policies", () => {
    const turn = {
      resolveToolPolicy: (name: string, frameworkEffect?: Wire.ToolEffect) =>
        Policy.resolveToolPolicy(name, {
          toolPolicies: { pinned: { effect: "non_idempotent_write" } },
          frameworkEffect
        })
    }
    assert.deepStrictEqual(EffectClass.resolve(turn, "a", { hints: { readOnlyHint: true } }), {
      effect: "read",
      requiresApproval: false
    })
    assert.deepStrictEqual(
      EffectClass.resolve(turn, "a", { effect: "idempotent_write", hints: { readOnlyHint: true } }),
      {
        effect: "idempotent_write",
        requiresApproval: false
      }
    )
    assert.deepStrictEqual(EffectClass.resolve(turn, "pinned", { hints: { readOnlyHint: true } }), {
      effect: "non_idempotent_write",
      requiresApproval: true
    })
    assert.deepStrictEqual(EffectClass.resolve(turn, "b"), { effect: "unclassified", requiresApproval: true })
  })
})

describe("BuiltIns", () => {
  it("the Toolkit holds every built-in with its JSON Schema; enabled follows the turn", () => {
    assert.deepStrictEqual(Object.keys(BuiltIns.toolkit.tools).sort(), ["ask_user", "durable_wait", "write_todos"])
    const turn = { enabledBuiltInTools: ["write_todos", "ask_user"] as const }
    assert.deepStrictEqual(
      BuiltIns.enabled(turn).map((d) => d.name),
      ["ask_user", "write_todos"]
    )
    assert.deepStrictEqual(Object.keys(BuiltIns.enabledToolkit(turn).tools).sort(), ["ask_user", "write_todos"])
    assert.isTrue(BuiltIns.isEnabled(turn, "ask_user"))
    assert.isFalse(BuiltIns.isEnabled(turn, "durable_wait"))
    assert.isFalse(BuiltIns.isEnabled({}, "ask_user"))
    assert.deepStrictEqual(BuiltIns.enabled({}), [])
  })
})
