// The conversions between Mastra messages and the session's stored messages, without an engine.
import type { Runner, Wire } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import { toFrameworkMessages as fromAiSdk } from "../../runner-ai-sdk/src/internal/convert.ts"
import {
  type DbMessage,
  fromStoredMessages,
  invocationOf,
  markNewRounds,
  partCounts,
  toFrameworkMessages,
  toolCallIds
} from "../src/internal/messages.ts"

const stored = (messages: ReadonlyArray<Runner.FrameworkMessage>): Array<Wire.AgentMessage> =>
  messages.map((m, i) => ({ ...m, sequence: i + 1, turnId: "t1", createdAt: new Date(0).toISOString() }))

const invocation = (toolCallId: string, state: string, result?: string) => ({
  type: "tool-invocation",
  toolInvocation: { state, toolCallId, toolName: "lookup", args: { q: toolCallId }, ...(result ? { result } : {}) }
})

const assistant: DbMessage = {
  id: "a1",
  role: "assistant",
  content: {
    format: 2,
    parts: [
      { type: "text", text: "Looking." },
      invocation("c1", "result", "r1"),
      invocation("c2", "result", "r2"),
      { type: "step-start" },
      { type: "reasoning", reasoning: "", details: [] },
      { type: "text", text: "Done." }
    ],
    metadata: { provider: "p" }
  }
}

describe("Mastra messages as stored messages", () => {
  it("splits a message into one stored message per part, results after the calls of their step", () => {
    const projected = toFrameworkMessages([assistant])
    assert.deepStrictEqual(
      projected.map((m) => [m.role, m.text, m.toolCallId, m.toolArguments, m.toolOutput]),
      [
        ["assistant", "Looking.", null, null, null],
        ["assistant", null, "c1", '{"q":"c1"}', null],
        ["assistant", null, "c2", '{"q":"c2"}', null],
        ["tool", null, "c1", null, "r1"],
        ["tool", null, "c2", null, "r2"],
        ["assistant", null, null, null, null],
        ["assistant", "Done.", null, null, null]
      ]
    )
  })

  it("rebuilds the same message, parts, step starts and metadata included", () => {
    const [rebuilt] = fromStoredMessages(stored(toFrameworkMessages([assistant])))
    assert.deepStrictEqual(rebuilt!.content.parts, assistant.content.parts)
    assert.deepStrictEqual(rebuilt!.content.metadata, { provider: "p" })
    assert.strictEqual(rebuilt!.id, "a1")
  })

  it("rebuilds messages it did not write from their projection, a result joining its call", () => {
    const base = {
      text: null,
      toolCallId: null,
      toolName: null,
      toolArguments: null,
      toolOutput: null,
      frameworkItem: "{}"
    }
    const rebuilt = fromStoredMessages(
      stored([
        { ...base, role: "user", text: "hi" },
        { ...base, role: "assistant", toolCallId: "x1", toolName: "lookup", toolArguments: '{"q":1}' },
        { ...base, role: "tool", toolCallId: "x1", toolName: "lookup", toolOutput: "found" },
        { ...base, role: "assistant", text: "Found it." }
      ])
    )
    assert.deepStrictEqual(
      rebuilt.map((m) => [m.role, m.content.parts]),
      [
        ["user", [{ type: "text", text: "hi" }]],
        [
          "assistant",
          [
            {
              type: "tool-invocation",
              toolInvocation: { state: "result", toolCallId: "x1", toolName: "lookup", args: { q: 1 }, result: "found" }
            },
            // the answer after the result is the next model call of the same assistant message, as Mastra merges it
            { type: "step-start" },
            { type: "text", text: "Found it." }
          ]
        ]
      ]
    )
  })

  it("reads a turn the AI SDK runner stored (the chat's other runner) from its projection", () => {
    const aiSdkTurn = fromAiSdk(
      [
        { role: "user", content: "hi" },
        { role: "assistant", content: [{ type: "tool-call", toolCallId: "k1", toolName: "lookup", input: { q: 2 } }] },
        {
          role: "tool",
          content: [
            { type: "tool-result", toolCallId: "k1", toolName: "lookup", output: { type: "text", value: "ok" } }
          ]
        },
        { role: "assistant", content: [{ type: "text", text: "Done." }] }
      ],
      (i) => `m${i}`
    )
    const rebuilt = fromStoredMessages(stored(aiSdkTurn))
    assert.deepStrictEqual(
      rebuilt.map((m) => [m.role, m.content.parts.map((p) => p.toolInvocation ?? p.text)]),
      [
        ["user", ["hi"]],
        [
          "assistant",
          [{ state: "result", toolCallId: "k1", toolName: "lookup", args: { q: 2 }, result: "ok" }, undefined, "Done."]
        ]
      ]
    )
  })

  it("merges another runner's adjacent assistant messages as Mastra would: a step start only after results", () => {
    const base = {
      text: null,
      toolCallId: null,
      toolName: null,
      toolArguments: null,
      toolOutput: null,
      frameworkItem: "{}"
    }
    const rebuilt = fromStoredMessages(
      stored([
        { ...base, role: "user", text: "hi" },
        { ...base, role: "assistant", text: "Looking." },
        { ...base, role: "assistant", toolCallId: "p1", toolName: "lookup", toolArguments: "{}" },
        { ...base, role: "assistant", toolCallId: "p2", toolName: "lookup", toolArguments: "{}" },
        { ...base, role: "tool", toolCallId: "p1", toolName: "lookup", toolOutput: "r1" },
        { ...base, role: "tool", toolCallId: "p2", toolName: "lookup", toolOutput: "r2" },
        { ...base, role: "assistant", toolCallId: "p3", toolName: "lookup", toolArguments: "{}" },
        { ...base, role: "tool", toolCallId: "p3", toolName: "lookup", toolOutput: "r3" },
        { ...base, role: "assistant", text: "Done." },
        { ...base, role: "user", text: "more" }
      ])
    )
    assert.deepStrictEqual(
      rebuilt.map((m) => [m.id, m.role, m.content.parts.map((p) => invocationOf(p)?.toolCallId ?? p.type)]),
      [
        ["stored-0", "user", ["text"]],
        ["stored-1", "assistant", ["text", "p1", "p2", "step-start", "p3", "step-start", "text"]],
        ["stored-9", "user", ["text"]]
      ]
    )
    assert.deepStrictEqual(toolCallIds(rebuilt, "result"), ["p1", "p2", "p3"])
  })

  it("marks where a model call's parts begin in a message it continued, once", () => {
    const before = partCounts([
      { ...assistant, content: { ...assistant.content, parts: assistant.content.parts.slice(0, 3) } }
    ])
    const continued: DbMessage = {
      ...assistant,
      content: { ...assistant.content, parts: [...assistant.content.parts.slice(0, 3), invocation("c3", "call")] }
    }
    markNewRounds([continued], before)
    assert.deepStrictEqual(
      continued.content.parts.map((p) => p.type),
      ["text", "tool-invocation", "tool-invocation", "step-start", "tool-invocation"]
    )
    markNewRounds([continued], before)
    assert.strictEqual(continued.content.parts.length, 5, "a marked boundary is not marked again")
  })
})
