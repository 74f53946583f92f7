/**
 * The chat on the built-in Stepwise runner (`npm start -- --runner stepwise`), the runner with plan mode:
 * the same tools and instructions, the same model through `AiSdkModelClient`, and a session Flow with
 * `write_todos` and plan mode enabled. `/plan <text>` asks for a plan (a planning turn, in which the model
 * may only write the plan), and `/execute` approves the current revision, which starts an executing turn.
 *
 * MCP tools (`--mcp`) are AI SDK tools of the other runner and are not offered here.
 */
import { AiSdkModelClient, type AiSdkTool, ToolRetryableError } from "@durable-agent/runner-ai-sdk"
import { AgentSessionFlow, Errors, type Runner, Stepwise, ToolSource, type Wire } from "@durable-agent/session"
import type { LanguageModel } from "ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { z } from "zod"
import { FLOW_TYPE, INSTRUCTIONS, makeTools } from "./agent.ts"
import type { ChatConfig } from "./config.ts"

/** The session Flow of the Stepwise chat: the same Flow type, with `write_todos` and plan mode. */
export const planFlow = AgentSessionFlow.make({
  flowType: FLOW_TYPE,
  builtInTools: ["write_todos"],
  planModeEnabled: true
})

const message = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** An AI SDK tool of the chat as a `ToolSource` tool with the same JSON Schema, effect and function. */
const fromAiSdkTool = (name: string, t: AiSdkTool) =>
  ToolSource.tool({
    name,
    description: t.description ?? name,
    effect: t.effect as Wire.ToolEffect,
    // the chat's tools declare zod object schemas
    parameters: z.toJSONSchema(t.inputSchema as z.ZodType) as { readonly [key: string]: unknown },
    handler: (args, request) => {
      const input = (t.inputSchema as z.ZodType).safeParse(args)
      if (!input.success) {
        return Effect.fail(
          new Errors.ToolExecutionError({ message: `invalid arguments for ${name}: ${input.error.message}` })
        )
      }
      return Effect.tryPromise({
        try: (signal) =>
          Promise.resolve(
            t.execute(input.data, {
              toolCallId: request.toolCallId,
              idempotencyKey: request.idempotencyKey,
              attempt: request.attempt,
              abortSignal: signal
            })
          ),
        catch: (error) =>
          error instanceof ToolRetryableError
            ? new Errors.ToolAttemptError({ message: error.message })
            : new Errors.ToolExecutionError({ message: message(error) })
      }).pipe(Effect.map((output) => (typeof output === "string" ? output : JSON.stringify(output))))
    }
  })

/** The Stepwise runner over the chat's model and tools. */
export const stepwiseRunner = (config: ChatConfig, model: LanguageModel): Layer.Layer<Runner.AgentFrameworkRunner> =>
  Stepwise.layer({ name: "chat", instructions: INSTRUCTIONS }).pipe(
    Layer.provide(AiSdkModelClient.layer(model)),
    Layer.provide(
      ToolSource.layer(Object.entries(makeTools(config.workspace)).map(([name, t]) => fromAiSdkTool(name, t)))
    )
  )
