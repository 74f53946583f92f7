// A test on a scripted model, as an application writes one with @durable-agent/session/testing: the shop's
// toolkit and its Inventory service, a script for the model, `it.live`, and awaitTurn.
import { AgentSessionClient, ToolkitSource } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Inventory, ShopHandlers, ShopTools, script } from "../src/worker.ts"

const tools = ToolkitSource.layer(ShopTools).pipe(Layer.provide(ShopHandlers), Layer.provide(Inventory.layer))

describe("the shop agent on a scripted model", () => {
  it.live("checks the stock, reserves once, and answers with the reservation", () =>
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("order-1", { initialMessage: "Two packs of tea, please." })
      const snapshot = yield* SessionTesting.awaitTurn("order-1")
      assert.strictEqual(snapshot.messages.at(-1)?.text, "Reserved: R-1")
      assert.deepStrictEqual(
        snapshot.messages.filter((m) => m.role === "tool").map((m) => [m.toolName, m.toolOutput]),
        [
          ["check_stock", "12"],
          ["reserve", "R-1"]
        ]
      )
    }).pipe(Effect.provide(SessionTesting.layer({ model: script, tools })))
  )

  it.live("a reservation over the stock is a failure the model sees", () =>
    Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("order-2", { initialMessage: "Fifty packs of tea." })
      const snapshot = yield* SessionTesting.awaitTurn("order-2")
      assert.strictEqual(
        snapshot.messages.at(-1)?.text,
        'Reserved: The tool call failed: {"reason":"not enough stock"}'
      )
    }).pipe(
      Effect.provide(
        SessionTesting.layer({
          model: [{ toolCalls: [{ id: "c1", name: "reserve", arguments: { sku: "tea", quantity: 50 } }] }, script[2]!],
          tools
        })
      )
    )
  )
})
