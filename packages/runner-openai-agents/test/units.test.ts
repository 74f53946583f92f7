// The runner without an engine: the agent graph it accepts, the stored-message conversions, and one
// RunModel driven by hand (run state contents, usage, errors).

import { approvedRecord } from "@durable-agent/runner-kit/Bench"
import { EventWriter, Heartbeat, Policy, type Runner, type Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { Agent, tool, Usage } from "@openai/agents"
import { assistantMessage, functionCall, modelStreamResponder, ScriptedModel } from "@openai/agents/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { z } from "zod"
import { OpenAiAgentsRunner, openAiAgentsTool } from "../src/index.ts"
import { fromStoredMessage, toFrameworkMessage } from "../src/internal/items.ts"

const lookup = openAiAgentsTool({
  name: "lookup",
  description: "Looks a word up.",
  parameters: z.object({ word: z.string() }),
  effect: "read",
  execute: ({ word }) => `${word}: a word`
})

const stored = (message: ReturnType<typeof toFrameworkMessage>, sequence: number): Wire.AgentMessage => ({
  ...message,
  sequence,
  turnId: "t1",
  createdAt: "2026-01-01T00:00:00.000Z"
})

const turn = (
  messages: ReadonlyArray<Wire.AgentMessage>,
  frameworkRunState: string | null = null
): Runner.AgentTurnContext => ({
  flowId: "f",
  turnId: "t1",
  stepExecutionId: "RunModel-1",
  attempt: 1,
  messages,
  frameworkRunState,
  toolCalls: [],
  sessionSettings: {},
  interactionMode: "chat",
  toolPolicies: {},
  defaultToolEffect: "unclassified",
  resolveToolPolicy: (name, frameworkEffect) => Policy.resolveToolPolicy(name, { frameworkEffect })
})

describe("OpenAI Agents runner: units", () => {
  it("refuses a function tool that is not gated, and two agents of one name", () => {
    const plain = tool({
      name: "plain",
      description: "runs inside the SDK",
      parameters: z.object({}),
      execute: () => "x"
    })
    assert.throws(
      () => OpenAiAgentsRunner.make({ agent: new Agent({ name: "a", tools: [plain] }) }),
      /plain of agent a must be made with openAiAgentsTool/
    )
    const twin = new Agent({ name: "a" })
    assert.throws(
      () => OpenAiAgentsRunner.make({ agent: new Agent({ name: "a", handoffs: [twin] }) }),
      /two agents are named a/
    )
  })

  it("projects SDK items onto stored messages and reads them back unchanged", () => {
    const items = [
      { role: "user" as const, content: "hi" },
      assistantMessage("Hello."),
      functionCall("lookup", { word: "x" }, { callId: "c1" }),
      {
        type: "function_call_result" as const,
        name: "lookup",
        callId: "c1",
        status: "completed" as const,
        output: { type: "text" as const, text: "x: a word" }
      }
    ]
    const messages = items.map(toFrameworkMessage)
    assert.deepStrictEqual(
      messages.map((m) => [m.role, m.text, m.toolCallId, m.toolName, m.toolArguments, m.toolOutput]),
      [
        ["user", "hi", null, null, null, null],
        ["assistant", "Hello.", null, null, null, null],
        ["assistant", null, "c1", "lookup", '{"word":"x"}', null],
        ["tool", null, "c1", "lookup", null, "x: a word"]
      ]
    )
    assert.deepStrictEqual(
      messages.map((m, i) => fromStoredMessage(stored(m, i + 1))),
      JSON.parse(JSON.stringify(items))
    )
  })

  it("rebuilds SDK items from the projection of a message another runner stored", () => {
    const foreign = (fields: Partial<Wire.AgentMessage>): Wire.AgentMessage => ({
      sequence: 1,
      turnId: "t0",
      createdAt: "2026-01-01T00:00:00.000Z",
      role: "user",
      text: null,
      toolCallId: null,
      toolName: null,
      toolArguments: null,
      toolOutput: null,
      frameworkItem: '{"v":1,"message_id":"m","role":"user","content":"x"}',
      ...fields
    })
    assert.deepStrictEqual(fromStoredMessage(foreign({ role: "user", text: "earlier" })), {
      role: "user",
      content: "earlier"
    })
    assert.deepStrictEqual(
      fromStoredMessage(foreign({ role: "assistant", toolCallId: "k", toolName: "lookup", toolArguments: "{}" })),
      { type: "function_call", callId: "k", name: "lookup", arguments: "{}" }
    )
    assert.deepStrictEqual(
      fromStoredMessage(foreign({ role: "tool", toolCallId: "k", toolName: "lookup", toolOutput: "done" })),
      {
        type: "function_call_result",
        callId: "k",
        name: "lookup",
        status: "completed",
        output: { type: "text", text: "done" }
      }
    )
  })

  it.effect("a RunModel that asks for tools: one model call, the run state without the stored messages", () =>
    Effect.gen(function* () {
      const model = new ScriptedModel([
        {
          type: "response",
          response: {
            usage: new Usage({
              inputTokens: 12,
              outputTokens: 4,
              inputTokensDetails: { cached_tokens: 5 },
              outputTokensDetails: { reasoning_tokens: 2 }
            }),
            output: [functionCall("lookup", { word: "x" }, { callId: "c1" })],
            responseId: "resp_1"
          }
        }
      ])
      const runner = OpenAiAgentsRunner.make({
        agent: new Agent({ name: "words", model, tools: [lookup] })
      })
      const history = [
        stored(runner.buildUserMessage("earlier question"), 1),
        stored(toFrameworkMessage(assistantMessage("earlier answer")), 2),
        stored(runner.buildUserMessage("look x up"), 3)
      ]
      const outcome = yield* runner.runModelStep(turn(history))
      assert.strictEqual(outcome._tag, "ToolCallsRequested")
      if (outcome._tag !== "ToolCallsRequested") return
      assert.deepStrictEqual(
        outcome.toolCalls.map((c) => [c.toolCallId, c.toolName, c.arguments, c.policy.effect]),
        [["c1", "lookup", '{"word":"x"}', "read"]]
      )
      assert.deepStrictEqual(outcome.usage, {
        modelCalls: 1,
        inputTokens: 12,
        outputTokens: 4,
        cachedInputTokens: 5,
        reasoningTokens: 2
      })
      assert.strictEqual(outcome.modelCallMetadata?.responseId, "resp_1")
      const state = JSON.parse(outcome.frameworkRunState)
      assert.strictEqual(state.kind, "run_state")
      assert.strictEqual(state.stored, 3)
      assert.deepStrictEqual(state.runState.originalInput, [], "the stored messages are not repeated")
      assert.strictEqual(model.calls.length, 1)
      // the model saw the whole conversation
      assert.strictEqual((model.calls[0]!.request.input as ReadonlyArray<unknown>).length, 3)
      const result = yield* runner
        .executeDeferredToolCall({
          flowId: "f",
          turnId: "t1",
          toolCall: approvedRecord("t1", { toolCallId: "c1", toolName: "lookup", arguments: '{"word":3}' }),
          idempotencyKey: "f/t1/c1",
          attempt: 1,
          heartbeatCheckpoint: Option.none()
        })
        .pipe(Effect.flip)
      assert.strictEqual(result._tag, "ToolExecutionError")
      assert.match(result.message, /^invalid lookup arguments: /)
    }).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))
  )

  it.effect("a model error fails the RunModel attempt with ModelCallError; text streams as text_delta", () =>
    Effect.gen(function* () {
      const model = new ScriptedModel([
        { type: "error", error: new Error("rate limited") },
        [assistantMessage("Fine.")]
      ])
      const runner = OpenAiAgentsRunner.make({ agent: new Agent({ name: "words", model, tools: [lookup] }) })
      const history = [stored(runner.buildUserMessage("hi"), 1)]
      const failure = yield* Effect.flip(runner.runModelStep(turn(history)))
      assert.strictEqual(failure._tag, "ModelCallError")
      assert.include(failure.message, "rate limited")
      const events: Array<EventWriter.WrittenEvent> = []
      const outcome = yield* runner.runModelStep(turn(history)).pipe(Effect.provide(EventWriter.layerTest(events)))
      assert.strictEqual(outcome._tag, "TurnCompleted")
      assert.deepStrictEqual(events, [{ type: "text_delta", payload: { text: "Fine." } }])
    }).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))
  )

  it.live("the turn's cancellationSignal alone aborts the SDK run's model call, with no fiber interruption", () =>
    Effect.gen(function* () {
      const model = new ScriptedModel([
        modelStreamResponder(
          (call) =>
            new Promise<Array<never>>((resolve) => {
              const timer = setTimeout(() => resolve([]), 600_000)
              call.request.signal?.addEventListener("abort", () => {
                clearTimeout(timer)
                resolve([])
              })
            })
        )
      ])
      const runner = OpenAiAgentsRunner.make({ agent: new Agent({ name: "words", model, tools: [lookup] }) })
      const controller = new AbortController()
      const fiber = yield* Effect.forkChild(
        Effect.flip(
          runner.runModelStep({
            ...turn([stored(runner.buildUserMessage("hi"), 1)]),
            cancellationSignal: controller.signal
          })
        )
      )
      while (model.calls.length === 0) yield* Effect.yieldNow
      controller.abort(new Error("the turn was cancelled"))
      const failure = yield* Fiber.join(fiber)
      assert.strictEqual(failure._tag, "ModelCallError")
      assert.isTrue(model.calls[0]!.request.signal?.aborted, "the scripted model call saw the abort")
    }).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)))
  )
})
