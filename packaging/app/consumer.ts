// A strict TypeScript application of the published packages (the packaging test type-checks it against the
// installed tarballs, with `moduleResolution` nodenext and bundler): a session worker on the AI SDK runner, its
// client, the ui-stream routes and the browser's UIMessages.
import { Engine } from "@durable-agent/engine"
import { AiSdkRunner, aiSdkTool, ScriptedModel } from "@durable-agent/runner-ai-sdk"
import { AgentSessionClient, AgentSessionFlow } from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { type AgentEvent, AgentSnapshot } from "@durable-agent/session/wire"
import { type ChatHandler, HttpChat } from "@durable-agent/ui-stream"
import * as UiMessages from "@durable-agent/ui-stream/UiMessages"
import { jsonSchema, type UIMessage } from "ai"
import { Effect, Layer, Schema } from "effect"

const agent = AiSdkRunner.layer({
  name: "files",
  model: ScriptedModel.make([{ text: "Hello!" }]),
  instructions: "You help with files.",
  tools: {
    read_file: aiSdkTool({
      description: "Reads a file.",
      inputSchema: jsonSchema<{ path: string }>({
        type: "object",
        properties: { path: { type: "string" } },
        required: ["path"]
      }),
      effect: "read",
      execute: ({ path }) => Promise.resolve(`the contents of ${path}`)
    })
  }
})

const flow = AgentSessionFlow.make({ flowType: "FilesAgent" })

export const app = Layer.mergeAll(
  AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(agent)),
  AgentSessionClient.layer(flow.type)
).pipe(Layer.provideMerge(Engine.layerEmbedded({ filename: "files-agent.db" })))

const authorize: ChatHandler.Authorize = ({ sessionId, access }) => access === "read" || sessionId.startsWith("u-")
export const routes = HttpChat.layer({ authorize })

/** The last message's text: the snapshot's types come from the wire codecs. */
export const lastText = (snapshot: typeof AgentSnapshot.Type): string | null => snapshot.messages.at(-1)?.text ?? null

export const eventTypes = (events: ReadonlyArray<AgentEvent>): Array<string> => events.map((e) => e.type)

export const program: Effect.Effect<{ readonly text: string | null; readonly ui: ReadonlyArray<UIMessage> }, unknown> =
  Effect.gen(function* () {
    const sessions = yield* AgentSessionClient.AgentSessionClient
    yield* sessions.startSession("u-1", { initialMessage: "What is in notes.txt?" })
    const snapshot = yield* sessions.awaitTurn("u-1")
    const wire = Schema.encodeSync(AgentSnapshot)(snapshot)
    return { text: lastText(snapshot), ui: UiMessages.fromSnapshot(Schema.decodeUnknownSync(AgentSnapshot)(wire)) }
  }).pipe(Effect.provide(app))

export const testLayer = SessionTesting.layer({ model: [{ text: "Hello!" }] })

// The types are real, not `any`: each of these must be an error.
// @ts-expect-error a session ID is a string
export const wrongId = Effect.flatMap(AgentSessionClient.AgentSessionClient, (s) => s.awaitTurn(42))
// @ts-expect-error an effect class is one of the four
aiSdkTool({ description: "x", inputSchema: jsonSchema<{ a: string }>({}), effect: "maybe", execute: () => "" })
