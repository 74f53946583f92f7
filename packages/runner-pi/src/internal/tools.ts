// Runs one Pi AgentTool call the way Pi's agent loop does (prepareArguments, then validateToolArguments
// against the TypeBox schema, then execute), inside a tool Step: the Step's abort signal, the durable call in
// an AsyncLocalStorage, partial results as events, thrown errors mapped by the runner kit.
import { AsyncLocalStorage } from "node:async_hooks"
import { ToolCall as KitToolCall } from "@durable-agent/runner-kit"
import { Errors, EventWriter, type Runner } from "@durable-agent/session"
import type { AgentTool, AgentToolResult } from "@mariozechner/pi-agent-core"
import { type ToolCall, validateToolArguments } from "@mariozechner/pi-ai"
import * as Effect from "effect/Effect"
import { blocksText } from "./messages.ts"

/** The durable call a tool's `execute` runs in. */
export interface DurableToolCall {
  readonly toolCallId: string
  /** `<flowId>/<turnId>/<toolCallId>`: the same on every attempt; pass it to the system you write to. */
  readonly idempotencyKey: string
  readonly attempt: number
}

export const durableCalls = new AsyncLocalStorage<DurableToolCall>()

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/**
 * Runs `tool` once on arguments already parsed as a JSON object. Arguments that fail the schema, a thrown
 * error, and a result with `isError` fail the call with `ToolExecutionError` (the model sees it); a thrown
 * `ToolRetryableError` fails the attempt (`ToolAttemptError`), and the effect class decides what follows.
 * The output is the result's text blocks (images as `[image <mime type>]`).
 */
export const runParsed = (
  tool: AgentTool<any>,
  raw: { readonly [key: string]: unknown },
  call: DurableToolCall
): Effect.Effect<
  Runner.ToolExecutionResult,
  Errors.ToolExecutionError | Errors.ToolAttemptError,
  EventWriter.EventWriter
> =>
  Effect.gen(function* () {
    const toolCall: ToolCall = { type: "toolCall", id: call.toolCallId, name: tool.name, arguments: { ...raw } }
    const args = yield* Effect.try({
      try: () => {
        const prepared: ToolCall =
          tool.prepareArguments === undefined
            ? toolCall
            : { ...toolCall, arguments: tool.prepareArguments(toolCall.arguments) as ToolCall["arguments"] }
        return validateToolArguments(tool, prepared) as unknown
      },
      catch: (error) => new Errors.ToolExecutionError({ message: `invalid ${tool.name} arguments: ${message(error)}` })
    })
    const events = yield* EventWriter.EventWriter
    const onUpdate = (partial: AgentToolResult<unknown>) =>
      void Effect.runFork(
        events.write({
          type: "pi.tool_update",
          payload: { tool_call_id: call.toolCallId, tool_name: tool.name, text: blocksText(partial.content ?? []) }
        })
      )
    const result = yield* Effect.tryPromise({
      try: (signal) => durableCalls.run(call, () => tool.execute(call.toolCallId, args, signal, onUpdate)),
      catch: KitToolCall.fromThrown
    })
    const output = blocksText(result?.content ?? [])
    // a later pi-agent-core marks a failure in the result; this version only throws, but honour it
    if ((result as { isError?: unknown } | undefined)?.isError === true) {
      return yield* new Errors.ToolExecutionError({ message: output })
    }
    return { output }
  })

/** Runs one deferred call of a tool Step (`unknown tool <name>` when the runner has no such tool). */
export const runDeferred = (tool: AgentTool<any> | undefined, call: Runner.DeferredToolExecution) =>
  tool === undefined
    ? Effect.fail(KitToolCall.unknownTool(call))
    : Effect.flatMap(KitToolCall.parseArguments(call), (raw) =>
        runParsed(tool, raw, {
          toolCallId: call.toolCall.toolCallId,
          idempotencyKey: call.idempotencyKey,
          attempt: call.attempt
        })
      )
