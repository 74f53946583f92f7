// "A session in a few lines" of the README: a typed effect/ai tool, a scripted model, a worker and a client
// on the embedded engine. Run it twice: the second run continues the same session.
//
//   node --conditions=@durable-agent/source examples/basics/src/quickstart.ts [sessions.db]
//
// Without an argument the file is ~/.local/state/durable-agent-session/quickstart/sessions.db ($XDG_STATE_HOME
// instead of ~/.local/state when set), so a run leaves nothing in the repository.
import { mkdirSync } from "node:fs"
import { homedir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import { AgentSessionClient, AgentSessionFlow, ModelClient, Stepwise, ToolkitSource } from "@durable-agent/session"
import { Effect, Layer, Schema } from "effect"
import { Tool, Toolkit } from "effect/ai"

const defaultFile = () => {
  const dir = join(
    process.env.XDG_STATE_HOME?.trim() || join(homedir(), ".local", "state"),
    "durable-agent-session",
    "quickstart"
  )
  mkdirSync(dir, { recursive: true })
  return join(dir, "sessions.db")
}

const GetWeather = Tool.make("get_weather", {
  description: "The weather of a city.",
  parameters: Schema.Struct({ city: Schema.String }),
  success: Schema.Struct({ city: Schema.String, temperature: Schema.Number })
}).annotate(Tool.Readonly, true) // read: retried up to 3 times, no approval

const Tools = Toolkit.make(GetWeather)
const handlers = Tools.toLayer({ get_weather: ({ city }) => Effect.succeed({ city, temperature: 21 }) })

// A scripted model. For a real one:
//   import { openai } from "@ai-sdk/openai"
//   import { AiSdkModelClient } from "@durable-agent/runner-ai-sdk"
//   const model = AiSdkModelClient.layer(openai("gpt-4.1-mini"))
const model = ModelClient.layerScripted([
  { toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }] },
  { text: "It is 21 degrees in Paris." }
])

const flow = AgentSessionFlow.make({ flowType: "Assistant" })

const worker = AgentSessionFlow.layerWorker(flow).pipe(
  Layer.provide(Stepwise.layer({ name: "assistant", instructions: "You are terse." })),
  Layer.provide(Layer.mergeAll(model, ToolkitSource.layer(Tools).pipe(Layer.provide(handlers))))
)

const program = Effect.gen(function* () {
  const sessions = yield* AgentSessionClient.AgentSessionClient
  // the first run starts the session; a later run sends the question to the session it finds
  yield* sessions
    .startSession("session-1", { initialMessage: "Weather in Paris?" })
    .pipe(Effect.catchTag("FlowAlreadyStarted", () => sessions.sendUserMessage("session-1", "Weather in Paris?")))
  const snapshot = yield* sessions.awaitTurn("session-1")
  console.log(snapshot.messages.at(-1)?.text)
})

program.pipe(
  Effect.provide(
    Layer.mergeAll(worker, AgentSessionClient.layer(flow.type)).pipe(
      Layer.provideMerge(Engine.layerEmbedded({ filename: process.argv[2] ?? defaultFile(), maxConcurrentTasks: 32 }))
    )
  ),
  Effect.runPromise
)
