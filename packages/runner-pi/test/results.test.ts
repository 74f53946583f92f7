// What a Pi tool Step records for a result, and what the next RunModel reads back from it.
import { assert, describe, it } from "@effect/vitest"
import { decodeResult, encodeResult } from "../src/internal/tools.ts"

describe("recorded Pi tool results", () => {
  it("text without details is recorded as its text; images and details as the pi_tool_result JSON, read back whole", () => {
    assert.strictEqual(encodeResult({ content: [{ type: "text", text: "a" }], details: {} }), "a")
    assert.strictEqual(encodeResult({ content: [{ type: "text", text: "a" }], details: null }), "a")
    assert.strictEqual(decodeResult("a"), undefined)
    const image = { content: [{ type: "image" as const, data: "AAAA", mimeType: "image/png" }] }
    assert.deepStrictEqual(decodeResult(encodeResult(image)), image)
    const detailed = { content: [{ type: "text" as const, text: "diff" }], details: { lines: [1, 2] } }
    assert.strictEqual(
      encodeResult(detailed),
      '{"pi_tool_result":{"content":[{"type":"text","text":"diff"}],"details":{"lines":[1,2]}}}'
    )
    assert.deepStrictEqual(decodeResult(encodeResult(detailed)), detailed)
  })

  it("details JSON cannot write are left out; text that only looks like a recorded result stays text", () => {
    const cyclic: { self?: unknown } = {}
    cyclic.self = cyclic
    const content = [{ type: "image" as const, data: "AAAA", mimeType: "image/png" }]
    assert.deepStrictEqual(decodeResult(encodeResult({ content, details: cyclic })), { content })
    assert.strictEqual(decodeResult('{"pi_tool_result":'), undefined)
    assert.strictEqual(decodeResult('{"pi_tool_result":{"content":[{"type":"video"}]}}'), undefined)
    assert.strictEqual(decodeResult(null), undefined)
  })
})
