// Rollover's chunk boundaries ("Message storage", Rollover): a chunk closes before the next message would take
// its encoded size past `messageChunkMaxBytes`, and one commit moves at most MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT
// bytes unless its first chunk alone is larger. rollOver decides with an upper bound of each size while that is
// below the limits and measures exactly only near them; these tests check its chunks against the rule applied
// to the exact encoded sizes.
import { assert, describe, it } from "@effect/vitest"
import * as Option from "effect/Option"
import { Wire } from "../src/index.ts"
import { type MessageStorageOptions, storeMessages } from "../src/internal/messages.ts"
import { storedBytes } from "../src/internal/sizes.ts"
import * as P from "../src/Persistence.ts"
import { makeEnv } from "./fake.ts"

const EMPTY_CHUNK_BYTES = 15

const message = (sequence: number, text: string): Wire.AgentMessage => ({
  sequence,
  turnId: "turn-1",
  role: "user",
  text,
  toolCallId: null,
  toolName: null,
  toolArguments: null,
  toolOutput: null,
  frameworkItem: JSON.stringify({ type: "user", text }),
  createdAt: "2026-12-03T18:00:00.000Z"
})

/** The chunks the rule gives for the oldest window messages, by their exact encoded sizes. */
const expectedChunks = (
  window: ReadonlyArray<Wire.AgentMessage>,
  options: MessageStorageOptions
): Array<readonly [number, number]> => {
  const out: Array<readonly [number, number]> = []
  let excess = window.length - options.messageWindowSize
  let next = 0
  let moved = 0
  while (excess > 0 && out.length < Wire.MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT) {
    const chunk: Array<Wire.AgentMessage> = []
    let bytes = EMPTY_CHUNK_BYTES
    while (next < window.length && chunk.length < options.messageChunkSize) {
      const m = window[next]!
      const size = storedBytes(Wire.AgentMessage, m) + (chunk.length === 0 ? 0 : 1)
      if (chunk.length > 0 && bytes + size > options.messageChunkMaxBytes) break
      chunk.push(m)
      bytes += size
      next++
    }
    if (chunk.length === 0) break
    if (out.length > 0 && moved + bytes > Wire.MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT) break
    out.push([chunk[0]!.sequence, chunk.at(-1)!.sequence])
    moved += bytes
    excess -= chunk.length
  }
  return out
}

const storedChunks = (options: MessageStorageOptions, messages: ReadonlyArray<Wire.AgentMessage>) => {
  const env = makeEnv({ stepExecutionId: "RunModel-1" })
  storeMessages(env.ctx, options, messages)
  return Option.match(env.ctx.get(P.AgentMessageIndex), {
    onNone: () => [],
    onSome: (index) => index.chunks.map((c) => [c.firstSequence, c.lastSequence] as const)
  })
}

describe("rollover", () => {
  const texts = Array.from({ length: 40 }, (_, i) => `message ${i} ${"é".repeat((i * 37) % 200)}`)
  const messages = texts.map((t, i) => message(i + 1, t))
  const sizes = messages.map((m) => storedBytes(Wire.AgentMessage, m))

  it("closes each chunk where the exact sizes close it, at limits around the messages' sizes", () => {
    // from the largest message's chunk of its own (no message skips the window) to several messages: the bound
    // alone decides far below a limit, the exact sizes near it
    const largest = Math.max(...sizes) + EMPTY_CHUNK_BYTES
    const limits = [largest, largest + 150, 2 * largest, 3 * largest + 7, 5_000, 20_000]
    for (const messageChunkMaxBytes of limits) {
      const options: MessageStorageOptions = {
        messageWindowSize: 4,
        messageChunkSize: 8,
        messageChunkMaxBytes,
        retainedMessageLimit: null
      }
      assert.deepStrictEqual(
        storedChunks(options, messages),
        expectedChunks(messages, options),
        `messageChunkMaxBytes ${messageChunkMaxBytes}`
      )
    }
  })
})
