import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { evaluateWait, type StoredWait, storeWait } from "../src/internal/state.ts"

const queues = (q: Record<string, ReadonlyArray<string>>) => (channel: string, key: string) =>
  q[key === "" ? channel : `${channel}[${key}]`] ?? []

const channel = (name: string, min: number, max: number | null, key = "") =>
  ({ _tag: "Channel", channel: name, key, min, max }) as const
const timer = (deadline: number, skipped = false) => ({ _tag: "Timer", seconds: 1, deadline, skipped }) as const

describe("wait selection (pure)", () => {
  it.effect("anyOf: a fired timer wins over ready channels and consumes nothing", () =>
    Effect.sync(() => {
      const wait: StoredWait = { kind: "AnyOf", conditions: [channel("a", 1, 1), timer(1000)] }
      assert.deepStrictEqual(evaluateWait(wait, 1000, queues({ a: ["1"] })), { timers: [true], consumed: {} })
      assert.deepStrictEqual(evaluateWait(wait, 999, queues({ a: ["1"] })), {
        timers: [false],
        consumed: { "a\u0000": ["1"] }
      })
    })
  )

  it.effect("anyOf: channels in argument order, the first feasible one wins", () =>
    Effect.sync(() => {
      const wait: StoredWait = { kind: "AnyOf", conditions: [channel("a", 2, 2), channel("b", 1, 1)] }
      assert.deepStrictEqual(evaluateWait(wait, 0, queues({ a: ["1"], b: ["x"] }))?.consumed, { "b\u0000": ["x"] })
      assert.deepStrictEqual(evaluateWait(wait, 0, queues({ a: ["1", "2", "3"], b: ["x"] }))?.consumed, {
        "a\u0000": ["1", "2"]
      })
      assert.isUndefined(evaluateWait(wait, 0, queues({ a: ["1"] })))
    })
  )

  it.effect("bounds: atMost never blocks; atLeast takes everything; forRange caps at its maximum", () =>
    Effect.sync(() => {
      const at = (c: ReturnType<typeof channel>, q: ReadonlyArray<string>) =>
        evaluateWait({ kind: "AnyOf", conditions: [c] }, 0, queues({ c: q }))?.consumed["c\u0000"]
      assert.deepStrictEqual(at(channel("c", 0, 2), []), [])
      assert.deepStrictEqual(at(channel("c", 0, 2), ["1", "2", "3"]), ["1", "2"])
      assert.deepStrictEqual(at(channel("c", 1, null), ["1", "2", "3"]), ["1", "2", "3"])
      assert.deepStrictEqual(at(channel("c", 1, 3), ["1", "2", "3", "4"]), ["1", "2", "3"])
    })
  )

  it.effect("allOf: every timer must fire; shared channels reserve minima, then extras in order", () =>
    Effect.sync(() => {
      const wait: StoredWait = {
        kind: "AllOf",
        conditions: [channel("c", 0, 2), channel("c", 2, 2), timer(500)]
      }
      assert.isUndefined(evaluateWait(wait, 499, queues({ c: ["1", "2", "3"] })))
      assert.isUndefined(evaluateWait(wait, 500, queues({ c: ["1"] })))
      const r = evaluateWait(wait, 500, queues({ c: ["1", "2", "3"] }))
      assert.deepStrictEqual(r, { timers: [true], consumed: { "c\u0000": ["1", "2", "3"] } })
      const skipped = evaluateWait({ kind: "AllOf", conditions: [timer(10_000, true)] }, 0, queues({}))
      assert.deepStrictEqual(skipped, { timers: [true], consumed: {} })
    })
  )

  it.effect("ChannelMap instances are separate queues", () =>
    Effect.sync(() => {
      const wait: StoredWait = { kind: "AnyOf", conditions: [channel("m", 1, 1, "k2")] }
      assert.isUndefined(evaluateWait(wait, 0, queues({ "m[k1]": ["x"] })))
      assert.deepStrictEqual(evaluateWait(wait, 0, queues({ "m[k2]": ["y"] }))?.consumed, { "m\u0000k2": ["y"] })
    })
  )

  it.effect("timer deadlines are rounded up to whole seconds; a zero timer is ready at once", () =>
    Effect.sync(() => {
      const stored = storeWait(
        {
          _tag: "AnyOf",
          conditions: [
            { _tag: "Timer", seconds: 1 },
            { _tag: "Timer", seconds: 0 }
          ]
        },
        10_250
      )
      assert.deepStrictEqual(
        stored.conditions.map((c) => (c._tag === "Timer" ? c.deadline : -1)),
        [12_000, 10_250]
      )
    })
  )
})
