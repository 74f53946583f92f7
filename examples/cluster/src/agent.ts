// The agent every runner of the example registers: the session Flow with the built-in Stepwise loop, a demo
// model and one read tool. Every process that starts sessions or calls their RPCs builds the same Flow.
//
// The demo model stands in for a provider (swap `demoModel` for a real `ModelClient` layer, such as the
// AI SDK one of `@durable-agent/runner-ai-sdk`): it waits MODEL_DELAY_MS (default 1500 ms) like a network
// call and answers with the runner's process ID, so the failover demo shows who answered. With MODEL_LOG
// set, each call appends `start <session> <pid>` before it waits and `end <session> <pid>` after.
import { appendFileSync } from "node:fs"
import { AgentSessionClient, AgentSessionFlow, ModelClient, Stepwise, ToolSource } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The session Flow of the example (its type must stay stable across deploys). */
export const flow = AgentSessionFlow.make({ flowType: "ClusterAgent" })

const delayMs = Number(process.env.MODEL_DELAY_MS ?? "1500")
const modelLog = process.env.MODEL_LOG

/** The session ID the client writes into each first message (`hello from <session>`). */
const sessionOf = (text: string) => text.match(/from (\S+)/)?.[1] ?? "?"

/** A demo model: a fixed delay, then a text answer naming this process. */
export const demoModel = ModelClient.layer((request) =>
  Effect.gen(function* () {
    const lastUser = [...request.messages].reverse().find((m) => m.role === "user")
    const session = sessionOf(lastUser?.role === "user" ? lastUser.text : "")
    if (modelLog !== undefined) appendFileSync(modelLog, `start ${session} ${process.pid}\n`)
    process.stdout.write(`MODEL_CALL ${session} ${process.pid}\n`)
    yield* Effect.sleep(`${delayMs} millis`)
    if (modelLog !== undefined) appendFileSync(modelLog, `end ${session} ${process.pid}\n`)
    return {
      text: `runner ${process.pid} answered ${session}`,
      reasoning: null,
      toolCalls: [],
      usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 }
    }
  })
)

/** One read tool, so the agent has something to call. */
export const tools = ToolSource.layer([
  ToolSource.tool({
    name: "runner_info",
    description: "Which runner process handles this call.",
    effect: "read",
    handler: () => Effect.succeed(`runner ${process.pid}`)
  })
])

/** The worker of a runner: the session Flow's Steps and RPCs with the agent's services. */
export const worker = AgentSessionFlow.layerWorker(flow).pipe(
  Layer.provide(Stepwise.layer({ name: "cluster-agent", instructions: "A demo agent." })),
  Layer.provide(Layer.mergeAll(demoModel, tools))
)

/** The session client for this Flow type. */
export const client = AgentSessionClient.layer(flow.type)
