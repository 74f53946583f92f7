// Runs one Pi AgentTool call the way Pi's agent loop does (prepareArguments, then validateToolArguments
// against the TypeBox schema, then execute), inside a tool Step: the Step's abort signal, the durable call in
// an AsyncLocalStorage, partial results as events, thrown errors as the session's tool errors.
import { AsyncLocalStorage } from "node:async_hooks"
import { ToolRetryableError } from "@durable-agent/runner-ai-sdk"
import { Errors, EventWriter, Policy } from "@durable-agent/session"
import type { AgentTool, AgentToolResult } from "@mariozechner/pi-agent-core"
import { type ToolCall, validateToolArguments } from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { blocksText } from "./messages.ts"

/** The durable call a tool's `execute` runs in. */
export interface DurableToolCall {
  readonly toolCallId: string
  /** `<flowId>/<turnId>/<toolCallId>`: the same on every attempt; pass it to the system you write to. */
  readonly idempotencyKey: string
  readonly attempt: number
}

export const durableCalls = new AsyncLocalStorage<DurableToolCall>()

/** One call as a tool Step hands it over. */
export interface ToolRun {
  readonly toolCallId: string
  readonly toolName: string
  readonly argumentsText: string
  readonly idempotencyKey: string
  readonly attempt: number
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/**
 * Runs `tool` once. Arguments that are not a JSON object or fail the schema, a thrown error, and a result
 * with `isError` fail the call with `ToolExecutionError` (the model sees it); a thrown
 * `ToolRetryableError` fails the attempt (`ToolAttemptError`), and the effect class decides what follows.
 * The output is the result's text blocks (images as `[image <mime type>]`).
 */
export const runTool = (
  tool: AgentTool<any> | undefined,
  run: ToolRun
): Effect.Effect<
  { readonly output: string },
  Errors.ToolExecutionError | Errors.ToolAttemptError,
  EventWriter.EventWriter
> =>
  Effect.gen(function* () {
    if (tool === undefined) return yield* new Errors.ToolExecutionError({ message: `unknown tool ${run.toolName}` })
    const parsed = Policy.parseToolArguments(run.argumentsText)
    if (Option.isNone(parsed)) {
      return yield* new Errors.ToolExecutionError({ message: "arguments must be a JSON object" })
    }
    const call: ToolCall = {
      type: "toolCall",
      id: run.toolCallId,
      name: run.toolName,
      arguments: parsed.value as ToolCall["arguments"]
    }
    const args = yield* Effect.try({
      try: () => {
        const prepared: ToolCall =
          tool.prepareArguments === undefined
            ? call
            : { ...call, arguments: tool.prepareArguments(call.arguments) as ToolCall["arguments"] }
        return validateToolArguments(tool, prepared) as unknown
      },
      catch: (error) =>
        new Errors.ToolExecutionError({ message: `invalid ${run.toolName} arguments: ${message(error)}` })
    })
    const events = yield* EventWriter.EventWriter
    const durable: DurableToolCall = {
      toolCallId: run.toolCallId,
      idempotencyKey: run.idempotencyKey,
      attempt: run.attempt
    }
    const onUpdate = (partial: AgentToolResult<unknown>) =>
      void Effect.runFork(
        events.write({
          type: "pi.tool_update",
          payload: { tool_call_id: run.toolCallId, tool_name: run.toolName, text: blocksText(partial.content ?? []) }
        })
      )
    const result = yield* Effect.tryPromise({
      try: (signal) => durableCalls.run(durable, () => tool.execute(run.toolCallId, args, signal, onUpdate)),
      catch: (error) =>
        error instanceof ToolRetryableError
          ? new Errors.ToolAttemptError({ message: error.message })
          : new Errors.ToolExecutionError({ message: message(error) })
    })
    const output = blocksText(result?.content ?? [])
    // a later pi-agent-core marks a failure in the result; this version only throws, but honour it
    if ((result as { isError?: unknown } | undefined)?.isError === true) {
      return yield* new Errors.ToolExecutionError({ message: output })
    }
    return { output }
  })
