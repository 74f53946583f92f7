/**
 * The baseline of the session turn: a bare engine Flow of the turn's shape, with no session code. A turn is
 * AwaitMessage (waits for one queued message) -> Model -> 3 parallel Tool Steps + a Join that waits for
 * their 3 results -> Model -> AwaitMessage, as the session's AwaitUserMessage -> RunModel -> 3 x CallTool ->
 * ResumeTurn -> RunModel. Each Step writes one small attribute, as the session's Steps write their state.
 * Turn cycles are measured as in the session bench: consecutive starts of a Flow's first Model Step of a
 * turn, with every message queued at once.
 *
 * {@link AnnouncedTurnShapeFlow} is the same shape with the one durable write the contract adds to a tool Step
 * (docs: "Before a tool Step calls execute_deferred_tool_call, it writes tool_call_started and awaits a
 * heartbeat"): each Tool Step writes one stream message with a durable heartbeat before its work, as the
 * session's tool Steps write `tool_call_started`. It is not the baseline of the session figures; the bench
 * reports it beside them, to show how much of the session turn's cost over the bare Flow that write is.
 */
import {
  Attribute,
  Channel,
  Client,
  type ExecuteContext,
  Flow,
  FlowStream,
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

/** What each announcing Tool Step writes before its work, as a session tool Step writes `tool_call_started`. */
const Started = FlowStream("Started", Schema.Struct({ tool: Schema.String }))

const makeTurnShape = (type: string, announce: boolean) => {
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

  const publishResult = (ctx: ExecuteContext, name: string) =>
    Effect.sync(() => {
      ctx.publish(Results, name)
      return StepDecision.deadEnd()
    })

  const Tool: StepDef<string> = Step({
    type: "Tool",
    input: Schema.String,
    execute: (ctx, name) =>
      announce
        ? Effect.andThen(ctx.heartbeatWith(Started, [{ tool: name }]), publishResult(ctx, name))
        : publishResult(ctx, name)
  })

  const Join: StepDef<null> = Step({
    type: "Join",
    input: Schema.Null,
    waitFor: () => Wait.anyOf(Results.forN(3)),
    execute: () => Effect.succeed(StepDecision.goTo(Model, 1))
  })

  return Flow({
    type,
    start: AwaitMessage,
    steps: [Model, Tool, Join],
    attributes: [Last],
    channels: [Messages, Results],
    ...(announce ? { streams: [Started] } : {})
  })
}

/** The bare engine Flow of the session turn's shape. */
export const TurnShapeFlow = makeTurnShape("BenchTurnShape", false)

/** The same shape whose Tool Steps each write one stream message with a durable heartbeat before their work. */
export const AnnouncedTurnShapeFlow = makeTurnShape("BenchTurnShapeAnnounced", true)

/** Runs `flows` Flows one after another, each with `turns` messages queued at once; waits for the last turn. */
export const engineTurns = (prefix: string, flows: number, turns: number, flow: typeof TurnShapeFlow = TurnShapeFlow) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    for (let f = 0; f < flows; f++) {
      const id = `${prefix}-${f}`
      yield* client.startFlow(flow, id, null)
      for (let t = 1; t <= turns; t++) yield* client.publish(id, Messages, `turn ${t}`)
      const t0 = performance.now()
      while ((engineTurnStarts.get(id)?.length ?? 0) < turns) {
        if (performance.now() - t0 > 120_000) return yield* Effect.die(new Error(`Flow ${id} did not finish`))
        yield* Effect.sleep("5 millis")
      }
    }
  })
