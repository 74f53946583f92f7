import { assert, describe, it } from "@effect/vitest"
import type { ModelMessage } from "ai"
import * as Effect from "effect/Effect"
import { AiSdkModelClient, ScriptedModel } from "../src/index.ts"
import { fromStoredMessages, toFrameworkMessages, toJsonSafe } from "../src/internal/convert.ts"

describe("AI SDK message storage", () => {
  it.effect("messages survive storage part by part, providerOptions and parallel tool calls included", () =>
    Effect.sync(() => {
      const messages: Array<ModelMessage> = [
        { role: "user", content: "read both files" },
        {
          role: "assistant",
          content: [
            { type: "reasoning", text: "thinking", providerOptions: { anthropic: { signature: "sig-1" } } },
            { type: "text", text: "Reading." },
            {
              type: "tool-call",
              toolCallId: "c1",
              toolName: "read",
              input: { path: "a" },
              providerOptions: { openai: { itemId: "i1" } }
            },
            { type: "tool-call", toolCallId: "c2", toolName: "read", input: { path: "b" } }
          ]
        },
        {
          role: "tool",
          content: [
            { type: "tool-result", toolCallId: "c1", toolName: "read", output: { type: "text", value: "A" } },
            { type: "tool-result", toolCallId: "c2", toolName: "read", output: { type: "json", value: { b: 1 } } }
          ]
        },
        { role: "assistant", content: [{ type: "text", text: "Done." }] }
      ]
      const stored = toFrameworkMessages(messages, (i) => `turn-1/${i}`)
      assert.deepStrictEqual(
        stored.map((m) => [m.role, m.text, m.toolCallId, m.toolOutput]),
        [
          ["user", "read both files", null, null],
          ["assistant", null, null, null],
          ["assistant", "Reading.", null, null],
          ["assistant", null, "c1", null],
          ["assistant", null, "c2", null],
          ["tool", null, "c1", "A"],
          ["tool", null, "c2", '{"b":1}'],
          ["assistant", "Done.", null, null]
        ]
      )
      assert.strictEqual(stored[3]!.toolArguments, '{"path":"a"}')
      // through JSON, as the session stores them
      const rebuilt = fromStoredMessages(JSON.parse(JSON.stringify(stored)))
      assert.deepStrictEqual(rebuilt, messages)
    })
  )

  it.effect(
    "a longer list of the same stored messages is rebuilt as a whole list would be, the earlier result unchanged",
    () =>
      Effect.sync(() => {
        const messages: Array<ModelMessage> = [
          { role: "user", content: "read it" },
          {
            role: "assistant",
            content: [
              { type: "text", text: "Reading." },
              { type: "tool-call", toolCallId: "c1", toolName: "read", input: { path: "a" } }
            ]
          },
          {
            role: "tool",
            content: [{ type: "tool-result", toolCallId: "c1", toolName: "read", output: { type: "text", value: "A" } }]
          }
        ]
        const stored = JSON.parse(JSON.stringify(toFrameworkMessages(messages, (i) => `turn-1/${i}`)))
        // the list ends inside the assistant message (its text part only), then grows by its tool call and more
        const short = fromStoredMessages(stored.slice(0, 2))
        const shortCopy = JSON.parse(JSON.stringify(short))
        const whole = fromStoredMessages(stored)
        assert.deepStrictEqual(whole, messages)
        assert.deepStrictEqual(short, shortCopy)
        // the same list again, and a different one of the same first message
        assert.deepStrictEqual(fromStoredMessages([...stored]), messages)
        assert.deepStrictEqual(fromStoredMessages([stored[0], stored[3]]), [messages[0], messages[2]])
      })
  )

  it.effect("binary file data becomes base64 text", () =>
    Effect.sync(() => {
      assert.deepStrictEqual(toJsonSafe({ data: new Uint8Array([1, 2, 3]), url: new URL("https://x.test/a") }), {
        data: "AQID",
        url: "https://x.test/a"
      })
    })
  )

  it.effect("messages stored by someone else are rebuilt from their projection", () =>
    Effect.sync(() => {
      const rebuilt = fromStoredMessages([
        {
          role: "user",
          text: "hi",
          toolCallId: null,
          toolName: null,
          toolArguments: null,
          toolOutput: null,
          frameworkItem: "{}"
        }
      ])
      assert.deepStrictEqual(rebuilt, [{ role: "user", content: "hi" }])
    })
  )
})

describe("AiSdkModelClient", () => {
  it.live("one streamText call: deltas stream, tool calls come back without running, usage is counted", () =>
    Effect.gen(function* () {
      const model = ScriptedModel.make([
        {
          text: "Let me look.",
          textDeltas: ["Let ", "me ", "look."],
          toolCalls: [
            { id: "c1", name: "read", arguments: { path: "a" } },
            { id: "c2", name: "read", arguments: { path: "b" } }
          ],
          usage: { inputTokens: 10, outputTokens: 5 }
        }
      ])
      const deltas: Array<string> = []
      const client = AiSdkModelClient.make(model)
      const response = yield* client.generate({
        instructions: "be brief",
        messages: [{ role: "user", text: "read a and b" }],
        tools: [
          {
            name: "read",
            description: "read a file",
            parameters: { type: "object", properties: { path: { type: "string" } } }
          }
        ],
        onTextDelta: (t) => Effect.sync(() => void deltas.push(t))
      })
      assert.strictEqual(response.text, "Let me look.")
      assert.strictEqual(deltas.join(""), "Let me look.")
      assert.deepStrictEqual(response.toolCalls, [
        { toolCallId: "c1", toolName: "read", arguments: '{"path":"a"}' },
        { toolCallId: "c2", toolName: "read", arguments: '{"path":"b"}' }
      ])
      assert.strictEqual(response.usage.inputTokens, 10)
      assert.strictEqual(response.usage.outputTokens, 5)
      assert.strictEqual(model.doStreamCalls.length, 1)
      assert.deepStrictEqual(
        model.doStreamCalls[0]!.tools?.map((t: any) => t.name),
        ["read"]
      )
    })
  )

  it.live("toolChoice reaches the provider call: a named tool, or the default auto", () =>
    Effect.gen(function* () {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "p1", name: "write_todos", arguments: { todos: [] } }] },
        { text: "ok" }
      ])
      const client = AiSdkModelClient.make(model)
      const tools = [{ name: "write_todos", description: "plan", parameters: { type: "object" } }]
      const messages = [{ role: "user" as const, text: "plan" }]
      yield* client.generate({ instructions: "", messages, tools, toolChoice: { tool: "write_todos" } })
      yield* client.generate({ instructions: "", messages, tools })
      assert.deepStrictEqual(model.doStreamCalls[0]!.toolChoice, { type: "tool", toolName: "write_todos" })
      assert.deepStrictEqual(model.doStreamCalls[1]!.toolChoice, { type: "auto" })
    })
  )

  it.live("a failing model call is a ModelCallError", () =>
    Effect.gen(function* () {
      const client = AiSdkModelClient.make(ScriptedModel.make([{ fail: "503 from provider" }]))
      const error = yield* Effect.flip(
        client.generate({ instructions: "", messages: [{ role: "user", text: "hi" }], tools: [] })
      )
      assert.strictEqual(error._tag, "ModelCallError")
      assert.include(error.message, "503 from provider")
    })
  )
})
