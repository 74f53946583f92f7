// Runs one Pi AgentTool call the way Pi's agent loop does (prepareArguments, then validateToolArguments
// against the TypeBox schema, then execute), inside a tool Step: the Step's abort signal, the durable call in
// an AsyncLocalStorage, partial results as events, thrown errors mapped by the runner kit.
import { AsyncLocalStorage } from "node:async_hooks"
import { ToolCall as KitToolCall } from "@durable-agent/runner-kit"
import { Errors, EventWriter, type Runner } from "@durable-agent/session"
import type { AgentTool, AgentToolResult } from "@mariozechner/pi-agent-core"
import { type ImageContent, type TextContent, type ToolCall, validateToolArguments } from "@mariozechner/pi-ai"
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

/** A Pi tool result's content and details, as a tool Step records them for the next model call. */
export interface RecordedResult {
  readonly content: ReadonlyArray<TextContent | ImageContent>
  readonly details?: unknown
}

const RESULT_PREFIX = '{"pi_tool_result":'

const noDetails = (details: unknown): boolean =>
  details === undefined ||
  details === null ||
  (typeof details === "object" && !Array.isArray(details) && Object.keys(details).length === 0)

/**
 * The output a tool Step records for a Pi tool's result. A result of text blocks without details is its text
 * (what any runner shows); a result with an image block or with `details` is the JSON text
 * `{"pi_tool_result":{"content":[...],"details":...}}`, so the next RunModel gives Pi's model the same
 * `toolResult` message Pi's own loop would (images as image blocks, `details` kept). Details that are not JSON
 * are left out.
 */
export const encodeResult = (result: RecordedResult): string => {
  const content = result.content
  if (content.every((b) => b.type === "text") && noDetails(result.details)) return blocksText(content)
  try {
    return JSON.stringify({
      pi_tool_result: { content, ...(noDetails(result.details) ? {} : { details: result.details }) }
    })
  } catch {
    return JSON.stringify({ pi_tool_result: { content } })
  }
}

const isBlock = (b: unknown): b is TextContent | ImageContent => {
  const block = b as {
    readonly type?: unknown
    readonly text?: unknown
    readonly data?: unknown
    readonly mimeType?: unknown
  } | null
  return (
    block !== null &&
    typeof block === "object" &&
    ((block.type === "text" && typeof block.text === "string") ||
      (block.type === "image" && typeof block.data === "string" && typeof block.mimeType === "string"))
  )
}

/** The result {@link encodeResult} recorded, or `undefined` for an output that is plain text. */
export const decodeResult = (output: string | null): RecordedResult | undefined => {
  if (output === null || !output.startsWith(RESULT_PREFIX)) return undefined
  try {
    const parsed = (JSON.parse(output) as { pi_tool_result?: { content?: unknown; details?: unknown } }).pi_tool_result
    if (parsed === undefined || !Array.isArray(parsed.content) || !parsed.content.every(isBlock)) return undefined
    return { content: parsed.content, ...(parsed.details === undefined ? {} : { details: parsed.details }) }
  } catch {
    return undefined
  }
}

/**
 * Runs `tool` once on arguments already parsed as a JSON object. Arguments that fail the schema, a thrown
 * error, and a result with `isError` fail the call with `ToolExecutionError` (the model sees it); a thrown
 * `ToolRetryableError` fails the attempt (`ToolAttemptError`), and the effect class decides what follows.
 * The output is the result's text blocks (images as `[image <mime type>]`), or with `recordDetails` (the Pi
 * runner's own tool Steps) what {@link encodeResult} makes of the result.
 */
export const runParsed = (
  tool: AgentTool<any>,
  raw: { readonly [key: string]: unknown },
  call: DurableToolCall,
  options?: { readonly recordDetails?: boolean | undefined }
): Effect.Effect<
  Runner.ToolExecutionResult,
  Errors.ToolExecutionError | Errors.ToolAttemptError,
  EventWriter.EventWriter
> =>
  EventWriter.EventWriter.use((events) => {
    const onUpdate = (partial: AgentToolResult<unknown>) =>
      void Effect.runFork(
        events.write({
          type: "pi.tool_update",
          payload: { tool_call_id: call.toolCallId, tool_name: tool.name, text: blocksText(partial.content ?? []) }
        })
      )
    // one promise for the validation and the run: what fails the call is thrown as a `Failed`
    return Effect.tryPromise({
      try: async (signal) => {
        const toolCall: ToolCall = { type: "toolCall", id: call.toolCallId, name: tool.name, arguments: { ...raw } }
        let args: unknown
        try {
          const prepared: ToolCall =
            tool.prepareArguments === undefined
              ? toolCall
              : { ...toolCall, arguments: tool.prepareArguments(toolCall.arguments) as ToolCall["arguments"] }
          args = validateToolArguments(tool, prepared)
        } catch (error) {
          throw new Failed(`invalid ${tool.name} arguments: ${message(error)}`)
        }
        const result = await durableCalls.run(call, () => tool.execute(call.toolCallId, args, signal, onUpdate))
        const content = result?.content ?? []
        // a later pi-agent-core marks a failure in the result; this version only throws, but honour it
        if ((result as { isError?: unknown } | undefined)?.isError === true) throw new Failed(blocksText(content))
        return {
          output:
            options?.recordDetails === true ? encodeResult({ content, details: result?.details }) : blocksText(content)
        }
      },
      catch: (error) =>
        error instanceof Failed
          ? new Errors.ToolExecutionError({ message: error.message })
          : KitToolCall.fromThrown(error)
    })
  })

/** What fails a call inside {@link runParsed}'s promise: invalid arguments, a result marked as an error. */
class Failed {
  readonly message: string
  constructor(message: string) {
    this.message = message
  }
}

/** Runs one deferred call of a tool Step (`unknown tool <name>` when the runner has no such tool). */
export const runDeferred = (tool: AgentTool<any> | undefined, call: Runner.DeferredToolExecution) =>
  tool === undefined
    ? Effect.fail(KitToolCall.unknownTool(call))
    : Effect.flatMap(KitToolCall.parseArguments(call), (raw) =>
        runParsed(
          tool,
          raw,
          { toolCallId: call.toolCall.toolCallId, idempotencyKey: call.idempotencyKey, attempt: call.attempt },
          { recordDetails: true }
        )
      )
