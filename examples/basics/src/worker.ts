// A worker composed from layers: an effect/ai Toolkit whose handlers need their own service (Inventory), the
// Stepwise runner, a model, and the engine. `node --conditions=@durable-agent/source examples/basics/src/worker.ts [file.db]` runs one turn.
import { Engine } from "@durable-agent/engine"
import {
  AgentSessionClient,
  AgentSessionFlow,
  EventWriter,
  ModelClient,
  Stepwise,
  ToolkitSource
} from "@durable-agent/session"
import { Context, Effect, Layer, Schema } from "effect"
import { Tool, Toolkit } from "effect/ai"

/** The application's own service, which the tool handlers use. */
export class Inventory extends Context.Service<
  Inventory,
  {
    readonly stock: (sku: string) => Effect.Effect<number>
    readonly reserve: (sku: string, quantity: number, key: string) => Effect.Effect<string>
  }
>()("example/Inventory") {
  static readonly layer = Layer.sync(Inventory, () => {
    const stock = new Map([["tea", 12]])
    const reservations = new Map<string, string>()
    return {
      stock: (sku) => Effect.sync(() => stock.get(sku) ?? 0),
      // idempotent by key: a retried call returns the first reservation
      reserve: (sku, quantity, key) =>
        Effect.sync(() => {
          const existing = reservations.get(key)
          if (existing !== undefined) return existing
          const id = `R-${reservations.size + 1}`
          reservations.set(key, id)
          stock.set(sku, (stock.get(sku) ?? 0) - quantity)
          return id
        })
    }
  })
}

export const CheckStock = Tool.make("check_stock", {
  description: "How many units of a product are in stock.",
  parameters: Schema.Struct({ sku: Schema.String }),
  success: Schema.Number
}).annotate(Tool.Readonly, true)

export const Reserve = Tool.make("reserve", {
  description: "Reserves units of a product.",
  parameters: Schema.Struct({ sku: Schema.String, quantity: Schema.Int }),
  success: Schema.String,
  failure: Schema.Struct({ reason: Schema.String }),
  dependencies: [EventWriter.EventWriter]
}).annotate(Tool.Idempotent, true)

export const ShopTools = Toolkit.make(CheckStock, Reserve)

/** The handlers: they get typed arguments and use Inventory, which the layer requires. */
export const ShopHandlers = ShopTools.toLayer(
  Effect.gen(function* () {
    const inventory = yield* Inventory
    return ShopTools.of({
      check_stock: ({ sku }) => inventory.stock(sku),
      reserve: ({ sku, quantity }, { toolCallId }) =>
        Effect.gen(function* () {
          if (quantity > (yield* inventory.stock(sku))) return yield* Effect.fail({ reason: "not enough stock" })
          const events = yield* EventWriter.EventWriter
          yield* events.write({ type: "shop.reserving", payload: { sku, quantity } })
          return yield* inventory.reserve(sku, quantity, toolCallId ?? sku)
        })
    })
  })
)

export const flow = AgentSessionFlow.make({ flowType: "Shop" })

/** The worker: the Flow, Stepwise over the model and the toolkit, the toolkit's handlers and their service. */
export const layerWorker = (model: Layer.Layer<ModelClient.ModelClient>) =>
  AgentSessionFlow.layerWorker(flow).pipe(
    Layer.provide(Stepwise.layer({ name: "shop", instructions: "You help with orders." })),
    Layer.provide(Layer.mergeAll(model, ToolkitSource.layer(ShopTools))),
    Layer.provide(ShopHandlers),
    Layer.provide(Inventory.layer)
  )

/** A scripted conversation: check the stock, reserve, answer. */
export const script: ReadonlyArray<ModelClient.ScriptedStep> = [
  { toolCalls: [{ id: "c1", name: "check_stock", arguments: { sku: "tea" } }] },
  { toolCalls: [{ id: "c2", name: "reserve", arguments: { sku: "tea", quantity: 2 } }] },
  (request) => {
    const last = request.messages.at(-1)
    return { text: `Reserved: ${last?.role === "tool" ? last.output : "?"}` }
  }
]

if (import.meta.main) {
  const program = Effect.gen(function* () {
    const sessions = yield* AgentSessionClient.AgentSessionClient
    yield* sessions
      .startSession("order-1", { initialMessage: "Two packs of tea, please." })
      .pipe(Effect.catchTag("FlowAlreadyStarted", () => sessions.sendUserMessage("order-1", "Two more, please.")))
    const snapshot = yield* sessions.awaitTurn("order-1")
    console.log(snapshot.messages.at(-1)?.text)
  })
  program.pipe(
    Effect.provide(
      Layer.mergeAll(layerWorker(ModelClient.layerScripted(script)), AgentSessionClient.layer(flow.type)).pipe(
        Layer.provideMerge(Engine.layerEmbedded({ filename: process.argv[2] ?? "shop.db", maxConcurrentTasks: 32 }))
      )
    ),
    Effect.runPromise
  )
}
