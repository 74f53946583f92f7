// The Step rules Mastra would break on its own, each shown twice: Mastra alone doing it, and the runner's
// guard catching it. Also the runner's plumbing that needs no engine: text deltas reach the EventWriter, and
// interrupting RunModel aborts the model call.

import { Client } from "@durable-agent/engine"
import { ScriptedModel } from "@durable-agent/runner-ai-sdk"
import {
  AgentSessionClient,
  Errors,
  EventWriter,
  Heartbeat,
  Policy,
  type Runner,
  type Wire
} from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@mastra/core/agent"
import type { MastraModelConfig } from "@mastra/core/llm"
import { noopLogger } from "@mastra/core/logger"
import type { OutputProcessor } from "@mastra/core/processors"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { MastraRunner } from "../src/index.ts"
import * as Guard from "../src/internal/guard.ts"
import { awaitTurns, embeddedEngine, promptShape, withMastraSession } from "./support.ts"

/** A prompt without Mastra's per-part creation times (a new run stamps new ones on new parts). */
const withoutTimes = (prompt: unknown) =>
  JSON.parse(JSON.stringify(prompt, (key, value) => (key === "createdAt" ? undefined : value)))

/** An output processor that asks Mastra to retry the first response: Mastra's way to a second model call. */
const retryOnce: OutputProcessor = {
  id: "retry-once",
  processOutputStep: ({ abort, retryCount, messages }) => {
    if (retryCount === 0) abort("try again", { retry: true })
    return messages
  }
}

/** An output processor that blocks every response (a guardrail tripwire). */
const blockAll: OutputProcessor = {
  id: "block-all",
  processOutputStep: ({ abort }) => abort("blocked by policy")
}

const message = (
  sequence: number,
  fields: Omit<Wire.AgentMessage, "sequence" | "turnId" | "createdAt" | "frameworkItem"> & { frameworkItem?: string }
): Wire.AgentMessage =>
  ({
    sequence,
    turnId: "t1",
    createdAt: new Date(0).toISOString(),
    frameworkItem: fields.frameworkItem ?? "{}",
    ...fields
  }) as Wire.AgentMessage

/** A RunModel context for a turn whose stored messages are `messages`. */
const turnContext = (
  messages: ReadonlyArray<Wire.AgentMessage>,
  frameworkRunState: string | null = null
): Runner.AgentTurnContext => ({
  flowId: "s1",
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
  resolveToolPolicy: (toolName, frameworkEffect) => Policy.resolveToolPolicy(toolName, { frameworkEffect })
})

const runner = (model: ReturnType<typeof ScriptedModel.make>, agent?: Partial<MastraRunner.MastraAgent>) =>
  MastraRunner.make({ name: "guards", model, instructions: "Test.", ...agent })

const userTurn = (r: ReturnType<typeof runner>, text: string) =>
  turnContext([{ ...message(1, r.buildUserMessage(text)) }])

const runStep = (
  r: ReturnType<typeof runner>,
  turn: Runner.AgentTurnContext,
  events: Array<EventWriter.WrittenEvent> = []
): Effect.Effect<Runner.AgentTurnOutcome, unknown> =>
  r.runModelStep(turn).pipe(Effect.provide(Layer.mergeAll(EventWriter.layerTest(events), Heartbeat.layerNoop)))

const mastraAlone = (model: ReturnType<typeof ScriptedModel.make>, processors?: Array<OutputProcessor>) => {
  const agent = new Agent({
    id: "alone",
    name: "alone",
    instructions: "Test.",
    model: model as unknown as MastraModelConfig,
    ...(processors ? { outputProcessors: processors, maxProcessorRetries: 1 } : {})
  })
  agent.__setLogger(noopLogger)
  return agent
}

describe("Mastra runner: the Step-rule guards", () => {
  it.live("a second model call in one run: Mastra makes one on a processor retry; the guard refuses it", () =>
    Effect.gen(function* () {
      // Mastra alone, allowed two steps: the retry is a second model call in the same run
      const alone = ScriptedModel.make([{ text: "first" }, { text: "second" }])
      const text = yield* Effect.promise(async () => {
        const output = await mastraAlone(alone, [retryOnce]).stream("hi", { maxSteps: 2 })
        return (await output.getFullOutput()).text
      })
      assert.strictEqual(alone.doStreamCalls.length, 2, "Mastra made two model calls in one run")
      assert.strictEqual(text, "second")

      // the same run through the runner's guard: the second call never reaches the provider
      const model = ScriptedModel.make([{ text: "first" }, { text: "second" }])
      const guard = Guard.make(model, [])
      yield* Effect.promise(async () => {
        const output = await mastraAlone(guard.model as never, [retryOnce]).stream("hi", { maxSteps: 2 })
        await output.getFullOutput().catch(() => undefined)
      })
      assert.strictEqual(model.doStreamCalls.length, 1)
      assert.strictEqual(guard.calls(), 1)
      assert.include(guard.violation() ?? "", "second model call")
    })
  )

  it.live(
    "a processor retry within one step: Mastra ends the run with no answer; the runner fails the attempt so the Step retries",
    () =>
      Effect.gen(function* () {
        const alone = ScriptedModel.make([{ text: "first" }])
        const full = yield* Effect.promise(async () =>
          (await mastraAlone(alone, [retryOnce]).stream("hi", { maxSteps: 1 })).getFullOutput()
        )
        assert.deepStrictEqual([full.finishReason, full.text], ["retry", ""], "the response was dropped silently")

        // through the session: a guardrail rejects the first response; the RunModel Step's second attempt answers
        const rejectRude: OutputProcessor = {
          id: "reject-rude",
          processOutputStep: ({ abort, text: answer, messages }) => {
            if (answer?.includes("rude")) abort("be polite", { retry: true })
            return messages
          }
        }
        yield* withMastraSession(
          [{ text: "a rude answer" }, { text: "A polite answer." }],
          { engine: embeddedEngine, agent: { outputProcessors: [rejectRude], maxProcessorRetries: 1 } },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("g1", { initialMessage: "hi" })
              const snapshot = yield* awaitTurns("g1", 1)
              assert.deepStrictEqual(
                snapshot.messages.map((m) => [m.role, m.text]),
                [
                  ["user", "hi"],
                  ["assistant", "A polite answer."]
                ]
              )
              assert.strictEqual(kit.model.doStreamCalls.length, 2)
              const engine = yield* Client.Client
              const runModel = (yield* engine.stepExecutions("g1")).find((e) => e.stepType === "RunModel")!
              assert.deepStrictEqual(
                runModel.attempts.map((a) => a.outcome),
                ["failure", "success"],
                "one model call per attempt"
              )
            })
        )
      })
  )

  it.live("a call without a result: Mastra alone drops it from the prompt; the runner refuses the model call", () =>
    Effect.gen(function* () {
      const alone = ScriptedModel.make([{ text: "ok" }])
      const dangling = [
        { role: "user", content: "hi" },
        { role: "assistant", content: [{ type: "tool-call", toolCallId: "x1", toolName: "lookup", input: {} }] }
      ]
      yield* Effect.promise(async () =>
        (await mastraAlone(alone).stream(dangling as never, { maxSteps: 1 })).getFullOutput()
      )
      assert.deepStrictEqual(promptShape(alone.doStreamCalls[0]!.prompt as never), ["system", "user"], "x1 vanished")

      // a run state whose earlier round holds a call the pending list does not name: Mastra would drop it
      const model = ScriptedModel.make([{ text: "never" }])
      const r = runner(model)
      const state = {
        v: 1,
        messages: [
          {
            id: "a1",
            role: "assistant",
            content: {
              format: 2,
              parts: [
                { type: "tool-invocation", toolInvocation: { state: "call", toolCallId: "x1", toolName: "lookup" } }
              ]
            }
          }
        ],
        pending: []
      }
      const outcome = yield* runStep(r, { ...userTurn(r, "hi"), frameworkRunState: JSON.stringify(state) })
      assert.strictEqual(model.doStreamCalls.length, 0, "no model call was made")
      assert.include(outcome._tag === "TurnCompleted" ? outcome.turnError : "", "tool call x1")
    })
  )

  it.live("input mutation: Mastra alone writes into the messages it is given; the runner's input is untouched", () =>
    Effect.gen(function* () {
      const script: ReadonlyArray<ScriptedModel.Step> = [
        { toolCalls: [{ id: "c1", name: "lookup", arguments: {} }] },
        { text: "done" },
        { text: "done" }
      ]
      const alone = ScriptedModel.make(script)
      const agent = mastraAlone(alone)
      const first = yield* Effect.promise(async () => (await agent.stream("hi", { maxSteps: 1 })).getFullOutput())
      const input = JSON.parse(JSON.stringify(first.messages)) as Array<{ content: { parts: Array<unknown> } }>
      const before = JSON.stringify(input)
      const results = [
        { type: "tool-result", toolCallId: "c1", toolName: "lookup", output: { type: "text", value: "r" } }
      ]
      yield* Effect.promise(async () =>
        (await agent.stream([...input, { role: "tool", content: results }] as never, { maxSteps: 1 })).getFullOutput()
      )
      assert.notStrictEqual(JSON.stringify(input), before, "Mastra changed the caller's messages")

      // the runner: the same RunModel attempt twice (a retry) sees the same turn and sends the same prompt
      const model = ScriptedModel.make(script)
      const r = runner(model)
      const requested = yield* runStep(r, userTurn(r, "hi"))
      assert.strictEqual(requested._tag, "ToolCallsRequested")
      const resume = {
        ...userTurn(r, "hi"),
        frameworkRunState: requested._tag === "ToolCallsRequested" ? requested.frameworkRunState : null,
        toolCalls: []
      }
      const frozen = JSON.stringify(resume)
      const a = yield* runStep(r, resume)
      const b = yield* runStep(r, resume)
      assert.strictEqual(JSON.stringify(resume), frozen, "the turn context is unchanged")
      assert.deepStrictEqual(withoutTimes(model.doStreamCalls[1]!.prompt), withoutTimes(model.doStreamCalls[2]!.prompt))
      assert.deepStrictEqual(a.usage, b.usage)
      assert.deepStrictEqual(
        promptShape(model.doStreamCalls[2]!.prompt as never),
        ["system", "user", "assistant[c1]", "tool[c1]"],
        "the retry's prompt holds the call once, with its result"
      )
    })
  )

  it.live("a processor tripwire ends the turn with its reason", () =>
    Effect.gen(function* () {
      const model = ScriptedModel.make([{ text: "something it should not say" }])
      const r = runner(model, { outputProcessors: [blockAll] })
      const outcome = yield* runStep(r, userTurn(r, "hi"))
      assert.include(outcome._tag === "TurnCompleted" ? outcome.turnError : "", "blocked by policy")
    })
  )
})

describe("Mastra runner: streaming and cancellation", () => {
  it.live("text and reasoning deltas reach the EventWriter as text_delta and reasoning_delta events", () =>
    Effect.gen(function* () {
      const model = ScriptedModel.make([
        { reasoning: "The user greets me.", text: "Hello there.", textDeltas: ["Hel", "lo ", "there."] }
      ])
      const r = runner(model)
      const events: Array<EventWriter.WrittenEvent> = []
      const outcome = yield* runStep(r, userTurn(r, "hi"), events)
      const streamed = events.filter((e) => e.type === "text_delta").map((e) => e.payload.text)
      assert.strictEqual(streamed.join(""), "Hello there.")
      assert.isAtLeast(streamed.length, 1)
      const reasoning = events.filter((e) => e.type === "reasoning_delta").map((e) => e.payload.text)
      assert.strictEqual(reasoning.join(""), "The user greets me.")
      // the reasoning part is stored for the model (no projection text), then the answer
      assert.deepStrictEqual(outcome._tag === "TurnCompleted" ? outcome.newMessages.map((m) => [m.role, m.text]) : [], [
        ["assistant", null],
        ["assistant", "Hello there."]
      ])
    })
  )

  it.live("interrupting RunModel aborts the model call's signal", () =>
    Effect.gen(function* () {
      const model = ScriptedModel.make([{ text: "slow", delay: "1 minute" }])
      const r = runner(model)
      const fiber = yield* Effect.forkChild(runStep(r, userTurn(r, "hi")))
      while (model.doStreamCalls.length === 0) yield* Effect.yieldNow
      const signal = model.doStreamCalls[0]!.abortSignal
      assert.isFalse(signal?.aborted ?? true)
      yield* Fiber.interrupt(fiber)
      assert.isTrue(signal?.aborted, "the provider request was aborted")
    })
  )

  it.live("the turn's cancellationSignal alone aborts the model call, with no fiber interruption", () =>
    Effect.gen(function* () {
      const model = ScriptedModel.make([{ text: "slow", delay: "1 minute" }])
      const r = runner(model)
      const controller = new AbortController()
      const fiber = yield* Effect.forkChild(
        Effect.flip(runStep(r, { ...userTurn(r, "hi"), cancellationSignal: controller.signal }))
      )
      while (model.doStreamCalls.length === 0) yield* Effect.yieldNow
      controller.abort(new Error("the turn was cancelled"))
      const error = yield* Fiber.join(fiber)
      assert.instanceOf(error, Errors.ModelCallError)
      assert.deepStrictEqual(model.abortedCalls, [0], "the scripted provider saw the abort")
    })
  )
})
