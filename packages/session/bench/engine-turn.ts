/**
 * The baseline of the session turn: a bare engine Flow of the turn's shape, with no session code. A turn is
 * AwaitMessage (waits for one queued message) -> Model -> 3 parallel Tool Steps + a Join that waits for
 * their 3 results -> Model -> AwaitMessage, as the session's AwaitUserMessage -> RunModel -> 3 x CallTool ->
 * ResumeTurn -> RunModel. Each Step writes one small attribute, as the session's Steps write their state.
 * Turn cycles are measured as in the session bench: consecutive starts of a Flow's first Model Step of a
 * turn, with every message queued at once.
 */
import {
  Attribute,
  Channel,
  Client,
  Flow,
  Step,
  StepDecision,
  type StepDef,
  StepMovement,
  Wait
} from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** The channel of the turn's user messages. */
export const Messages = Channel("Messages", Schema.String)
const Results = Channel("Results", Schema.String)
const Last = Attribute("Last", Schema.String)

/** When each turn's first Model Step started, per Flow (ms, `performance.now()`). */
export const engineTurnStarts = new Map<string, Array<number>>()

/** How many turns of each Flow ended (its second Model Step ran), per Flow. */
export const engineTurnsEnded = new Map<string, number>()

const AwaitMessage: StepDef<null> = Step({
  type: "AwaitMessage",
  input: Schema.Null,
  waitFor: () => Wait.anyOf(Messages.forOne()),
  execute: (ctx) =>
    Effect.sync(() => {
      ctx.set(Last, "message")
      return StepDecision.goTo(Model, 0)
    })
})

const Model: StepDef<number> = Step({
  type: "Model",
  input: Schema.Number,
  execute: (ctx, round) =>
    Effect.sync(() => {
      if (round === 0) {
        const list = engineTurnStarts.get(ctx.flowId) ?? []
        list.push(performance.now())
        engineTurnStarts.set(ctx.flowId, list)
        ctx.set(Last, "tool calls")
        return StepDecision.goToMany(
          StepMovement.of(Tool, "a"),
          StepMovement.of(Tool, "b"),
          StepMovement.of(Tool, "c"),
          StepMovement.of(Join, null)
        )
      }
      ctx.set(Last, "answer")
      engineTurnsEnded.set(ctx.flowId, (engineTurnsEnded.get(ctx.flowId) ?? 0) + 1)
      return StepDecision.goTo(AwaitMessage, null)
    })
})

const Tool: StepDef<string> = Step({
  type: "Tool",
  input: Schema.String,
  execute: (ctx, name) =>
    Effect.sync(() => {
      ctx.publish(Results, name)
      return StepDecision.deadEnd()
    })
})

const Join: StepDef<null> = Step({
  type: "Join",
  input: Schema.Null,
  waitFor: () => Wait.anyOf(Results.forN(3)),
  execute: () => Effect.succeed(StepDecision.goTo(Model, 1))
})

/** The bare engine Flow of the session turn's shape. */
export const TurnShapeFlow = Flow({
  type: "BenchTurnShape",
  start: AwaitMessage,
  steps: [Model, Tool, Join],
  attributes: [Last],
  channels: [Messages, Results]
})

/** Runs `flows` Flows one after another, each with `turns` messages queued at once; waits for the last turn. */
export const engineTurns = (prefix: string, flows: number, turns: number) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    for (let f = 0; f < flows; f++) {
      const id = `${prefix}-${f}`
      yield* client.startFlow(TurnShapeFlow, id, null)
      for (let t = 1; t <= turns; t++) yield* client.publish(id, Messages, `turn ${t}`)
      const t0 = performance.now()
      while ((engineTurnStarts.get(id)?.length ?? 0) < turns) {
        if (performance.now() - t0 > 120_000) return yield* Effect.die(new Error(`Flow ${id} did not finish`))
        yield* Effect.sleep("5 millis")
      }
    }
  })
