// The runner's rebuild of Pi's messages from the stored history, with and without its cache: the cache reuses
// the Pi messages of the stored messages it rebuilt before and gives what a fresh rebuild gives, for a history
// that grows, one whose first messages changed, and projected messages another runner wrote.
import { assert, describe, it } from "@effect/vitest"
import type { AssistantMessage, Message } from "@mariozechner/pi-ai"
import {
  fromStoredMessages,
  historyCache,
  type StoredMessageView,
  toFrameworkMessages
} from "../src/internal/messages.ts"

const assistant = (content: AssistantMessage["content"]): AssistantMessage => ({
  role: "assistant",
  content,
  api: "openai-completions",
  provider: "openai",
  model: "gpt",
  usage: {
    input: 1,
    output: 2,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 3,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }
  },
  stopReason: content.some((b) => b.type === "toolCall") ? "toolUse" : "stop",
  timestamp: 1
})

const turn = (n: number): Array<Message> => [
  { role: "user", content: `question ${n}`, timestamp: n },
  assistant([
    { type: "text", text: "let me look" },
    { type: "toolCall", id: `c${n}a`, name: "read", arguments: { path: "a" } },
    { type: "toolCall", id: `c${n}b`, name: "read", arguments: { path: "b" } }
  ]),
  {
    role: "toolResult",
    toolCallId: `c${n}a`,
    toolName: "read",
    content: [{ type: "text", text: "A" }],
    isError: false,
    timestamp: n
  },
  {
    role: "toolResult",
    toolCallId: `c${n}b`,
    toolName: "read",
    content: [{ type: "text", text: "B" }],
    isError: false,
    timestamp: n
  },
  assistant([{ type: "text", text: `answer ${n}` }])
]

/** The stored messages of `turns` turns, numbered from 1. */
const stored = (turns: number): Array<StoredMessageView> =>
  Array.from({ length: turns }, (_, n) => toFrameworkMessages(turn(n), (i) => `t${n}/${i}`))
    .flat()
    .map((m, i) => ({ ...m, sequence: i + 1 }))

describe("the history rebuild", () => {
  it("the cache gives what a fresh rebuild gives as the history grows, and Pi's messages come back whole", () => {
    const cache = historyCache()
    for (const turns of [1, 2, 3, 5]) {
      const history = stored(turns)
      assert.deepStrictEqual(cache.rebuild("s1", history), fromStoredMessages(history))
    }
    assert.deepStrictEqual(
      cache.rebuild("s1", stored(2)),
      [...turn(0), ...turn(1)],
      "a shorter history rebuilds afresh"
    )
  })

  it("a changed message (a compacted history, another session under the same ID) rebuilds afresh", () => {
    const cache = historyCache()
    cache.rebuild("s2", stored(3))
    const changed = stored(3).map((m, i) =>
      i === 0 ? { ...m, frameworkItem: toFrameworkMessages([turn(9)[0]!], () => "x")[0]!.frameworkItem } : m
    )
    const rebuilt = cache.rebuild("s2", changed)
    assert.deepStrictEqual(rebuilt, fromStoredMessages(changed))
    assert.strictEqual((rebuilt[0] as { content: string }).content, "question 9")
  })

  it("messages another runner wrote are rebuilt from their projection; the cached ones are never extended", () => {
    const cache = historyCache()
    const projected = (sequence: number, toolCallId: string): StoredMessageView => ({
      role: "assistant",
      text: null,
      toolCallId,
      toolName: "read",
      toolArguments: '{"path":"a"}',
      toolOutput: null,
      frameworkItem: "{}",
      sequence
    })
    const first = [projected(1, "p1")]
    // the message a model call was given (the cache's array itself is extended by the next rebuild)
    const once = cache.rebuild("s3", first)[0] as AssistantMessage
    assert.strictEqual(once.content.length, 1)
    // the next projected call groups with the cached one (one response's parallel calls) in a copy
    const both = cache.rebuild("s3", [...first, projected(2, "p2")])
    assert.deepStrictEqual(both, fromStoredMessages([...first, projected(2, "p2")]))
    assert.strictEqual((both[0] as AssistantMessage).content.length, 2)
    assert.strictEqual(once.content.length, 1, "the message of the earlier rebuild is untouched")
  })

  it("the items the runner wrote are found by their text, and equal their parse", () => {
    const cache = historyCache()
    const write = cache.writing("s4")
    const messages = toFrameworkMessages(turn(0), (i) => `t0/${i}`, write).map((m, i) => ({ ...m, sequence: i + 1 }))
    assert.deepStrictEqual(cache.rebuild("s4", messages), fromStoredMessages(messages))
  })
})
