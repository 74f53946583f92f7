/**
 * `McpToolSource`: the tools of MCP servers as a durable tool source. The Worker's configuration names the
 * servers (stdio or Streamable HTTP); the source lists each server once when it is built and offers its tools
 * as `<server>__<tool>`. A server that cannot be listed, and a tool whose name an earlier tool already took,
 * are left out with a warning.
 *
 * - Effects come from annotations: `readOnlyHint` is `read`, otherwise `idempotentHint` is
 *   `idempotent_write` (whatever `destructiveHint` says); an explicit `ToolPolicy` wins.
 * - Each tool carries a `toolSourceReference` (server, MCP name, task support) that the session stores on the
 *   call's record, so the tool Step calls the server without listing it again.
 * - Every request opens a new connection (a new process for stdio) with the handshake bounded in time, and
 *   closes it afterwards, ending an HTTP protocol session with DELETE. A server restarted between listing
 *   and calling is therefore harmless.
 * - `tools/call` carries the call's idempotency key in `_meta` under `io.superdurable.dex/idempotencyKey`.
 * - An `isError` result, a JSON-RPC error answer, and a request that was never sent fail the call with
 *   `ToolExecutionError` (the model sees it). A request sent without a result back (a broken connection, a
 *   timeout, JSON-RPC -32603 or -32700, an HTTP error status) fails the attempt: the call's effect class
 *   decides a retry or `outcome_unknown`.
 *
 * @since 0.1.0
 */

import { Errors, EventWriter, Heartbeat, Policy, Runner, ToolSource, type Wire } from "@durable-agent/session"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import {
  type CallToolResult,
  CallToolResultSchema,
  CreateTaskResultSchema,
  type GetTaskResult,
  type Tool as McpTool
} from "@modelcontextprotocol/sdk/types.js"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type Connection, connect, type NoResult, type Rejected, request } from "./internal/connection.ts"
import { decodeReference, encodeReference, resultText, type ToolReference } from "./internal/results.ts"
import type { Servers } from "./McpServerConfig.ts"

/**
 * The `_meta` key under which `tools/call` carries the call's idempotency key.
 *
 * @category constants
 * @since 0.1.0
 */
export const IDEMPOTENCY_KEY_META = "io.superdurable.dex/idempotencyKey"

/**
 * The separator between a server's name and its tool's name.
 *
 * @category constants
 * @since 0.1.0
 */
export const NAME_SEPARATOR = "__"

/**
 * Options of a source.
 *
 * @category models
 * @since 0.1.0
 */
export interface McpToolSourceOptions {
  /** The servers, from the Worker's configuration only. */
  readonly servers: Servers
  /** The bound of each connection's initialize handshake; default 30 seconds. */
  readonly handshakeTimeout?: Duration.Input | undefined
  /** How long one request may wait for its answer; default 10 minutes. */
  readonly requestTimeout?: Duration.Input | undefined
  /** Whether annotations decide effects; default `true`. */
  readonly trustAnnotations?: boolean | undefined
  /** How long one attempt waits for a task only its own connection can poll; default 10 minutes. */
  readonly taskWait?: Duration.Input | undefined
  /** The lifetime requested for a task the session polls across Worker restarts; default 24 hours. */
  readonly taskTtl?: Duration.Input | undefined
  /** {@link taskTtl} in milliseconds, the spec's TypeScript option; `taskTtl` wins when both are set. */
  readonly taskTtlMs?: number | undefined
}

/**
 * A tool as the source lists it.
 *
 * @category models
 * @since 0.1.0
 */
export interface McpToolDefinition extends ToolSource.ToolDefinition {
  readonly server: string
  readonly mcpName: string
  readonly taskSupport: ToolReference["taskSupport"]
  readonly toolSourceReference: string
}

/**
 * A request sent without a result back: the server may have run the call. As a tool Step's failure it is a
 * `ToolAttemptError`, so the call's effect class decides a retry or `outcome_unknown`.
 *
 * @category errors
 * @since 0.1.0
 */
export class McpToolCallInterruptedError extends Schema.TaggedError<McpToolCallInterruptedError>()(
  "McpToolCallInterruptedError",
  { message: Schema.String }
) {}

/**
 * One call outside a session's tool Step (for runners that take JSON-Schema tools): the tool's listed name,
 * its arguments, and the idempotency key from the runner's tool context.
 *
 * @category models
 * @since 0.1.0
 */
export interface McpCallRequest {
  readonly toolName: string
  readonly arguments: { readonly [key: string]: unknown }
  readonly idempotencyKey: string
  readonly toolSourceReference?: string | null | undefined
}

/**
 * The service shape of a source: a `ToolSourceShape` plus its annotation policies and a plain call.
 *
 * @category models
 * @since 0.1.0
 */
export interface McpToolSourceShape extends ToolSource.ToolSourceShape {
  readonly tools: ReadonlyArray<McpToolDefinition>
  /** The effect of each tool whose annotations decide one. */
  readonly policies: Readonly<Record<string, Policy.ToolPolicy>>
  /** The annotation policies overridden by the application's own, for a runner's `toolPolicies`. */
  readonly mergeToolPolicies: (
    applicationPolicies?: Readonly<Record<string, Policy.ToolPolicy>> | undefined
  ) => Record<string, Policy.ToolPolicy>
  /** Calls a tool outside a tool Step; a task is awaited in the call. */
  readonly callTool: (
    request: McpCallRequest
  ) => Effect.Effect<Runner.ToolExecutionResult, Errors.ToolExecutionError | McpToolCallInterruptedError>
}

/**
 * The effect an MCP tool's annotations decide, if any: `readOnlyHint` is `read`, otherwise `idempotentHint`
 * is `idempotent_write`.
 *
 * @category conversions
 * @since 0.1.0
 */
export const annotationEffect = (annotations: McpTool["annotations"]): Wire.ToolEffect | undefined =>
  Policy.hintsEffect(annotations)

interface Resolved {
  readonly handshakeTimeout: Duration.Duration
  readonly requestTimeoutMs: number
  readonly taskWait: Duration.Duration
  readonly taskTtlMs: number
  readonly trustAnnotations: boolean
}

const resolveOptions = (options: McpToolSourceOptions): Resolved => ({
  handshakeTimeout: Duration.fromInputUnsafe(options.handshakeTimeout ?? "30 seconds"),
  requestTimeoutMs: Duration.toMillis(options.requestTimeout ?? "10 minutes"),
  taskWait: Duration.fromInputUnsafe(options.taskWait ?? "10 minutes"),
  taskTtlMs: Duration.toMillis(options.taskTtl ?? options.taskTtlMs ?? "24 hours"),
  trustAnnotations: options.trustAnnotations ?? true
})

/** Lists every tool of one server on its own connection, following pagination. */
const listServer = (name: string, options: McpToolSourceOptions, resolved: Resolved) =>
  Effect.scoped(
    Effect.gen(function* () {
      const connection = yield* connect(name, options.servers[name]!, resolved.handshakeTimeout)
      const tools: Array<McpTool> = []
      let cursor: string | undefined
      do {
        const page = yield* request(connection, (signal) =>
          connection.client.listTools(cursor === undefined ? {} : { cursor }, {
            signal,
            timeout: Duration.toMillis(resolved.handshakeTimeout)
          })
        )
        tools.push(...page.tools)
        cursor = page.nextCursor
      } while (cursor !== undefined)
      return tools
    })
  )

const definition = (server: string, tool: McpTool, resolved: Resolved): McpToolDefinition => {
  const taskSupport = tool.execution?.taskSupport ?? "forbidden"
  const effect = resolved.trustAnnotations ? annotationEffect(tool.annotations) : undefined
  return {
    name: `${server}${NAME_SEPARATOR}${tool.name}`,
    description: tool.description ?? tool.annotations?.title ?? tool.title ?? tool.name,
    parameters: tool.inputSchema as { readonly [key: string]: unknown },
    ...(effect === undefined ? {} : { effect }),
    server,
    mcpName: tool.name,
    taskSupport,
    toolSourceReference: encodeReference({ server, tool: tool.name, taskSupport })
  }
}

/** What a source saves as the checkpoint of an attempt that started a task. */
const CHECKPOINT_KIND = "@durable-agent/mcp/task"
const TaskCheckpoint = Schema.Struct({
  kind: Schema.Literal(CHECKPOINT_KIND),
  server: Schema.String,
  tool: Schema.String,
  taskId: Schema.String,
  pollIntervalSeconds: Schema.Number
})
const encodeCheckpoint = Schema.encodeSync(TaskCheckpoint)
/** A checkpoint this source wrote; another writer's reads as none. */
const decodeCheckpoint = (checkpoint: Option.Option<unknown>) =>
  Option.flatMap(checkpoint, Schema.decodeUnknownOption(TaskCheckpoint))

const noHeartbeat: Heartbeat.HeartbeatShape = { beat: () => Effect.void, checkpoint: Option.none() }

/** The status a poll saw last, from the continuation the previous poll returned. */
const lastStatus = (continuation: string | null): string | undefined => {
  if (continuation === null) return "working"
  try {
    const parsed: unknown = JSON.parse(continuation)
    return typeof parsed === "object" && parsed !== null ? String((parsed as { status?: unknown }).status) : undefined
  } catch {
    return undefined
  }
}

/**
 * The wait before the next poll: the server's poll interval in whole seconds, or, when that is shorter,
 * double the previous interval, up to a minute.
 *
 * @category constructors
 * @since 0.1.0
 */
export const nextPollSeconds = (serverPollMs: number | undefined, previousSeconds: number): number =>
  Math.max(serverPollMs === undefined ? 1 : Math.ceil(serverPollMs / 1000), Math.min(60, 2 * previousSeconds))

const toResult = (result: CallToolResult) =>
  result.isError === true
    ? Effect.fail(new Errors.ToolExecutionError({ message: resultText(result) || "the MCP tool reported an error" }))
    : Effect.succeed<Runner.ToolExecutionResult>({ output: resultText(result) })

const TERMINAL = new Set<GetTaskResult["status"]>(["completed", "failed", "cancelled"])

/** Text naming the input a task or a call asked for, which this source cannot answer. */
const inputRequestedMessage = (detail: string | undefined) =>
  `the tool asked for input${detail ? ` (${detail})` : ""}, which this MCP client cannot answer over MCP 2025-11-25`

/**
 * Builds a source: lists every configured server concurrently, then names and classifies their tools.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (options: McpToolSourceOptions) {
  const resolved = resolveOptions(options)
  const names = Object.keys(options.servers)
  const listings = yield* Effect.forEach(
    names,
    (name) =>
      listServer(name, options, resolved).pipe(
        Effect.map(Option.some),
        Effect.catch((error) =>
          Effect.as(
            Effect.logWarning(`MCP server ${name} cannot be listed; its tools are left out: ${error.message}`),
            Option.none<ReadonlyArray<McpTool>>()
          )
        )
      ),
    { concurrency: "unbounded" }
  )
  const tools: Array<McpToolDefinition> = []
  const byName = new Map<string, McpToolDefinition>()
  for (const [i, listing] of listings.entries()) {
    if (Option.isNone(listing)) continue
    for (const tool of listing.value) {
      const listed = definition(names[i]!, tool, resolved)
      if (byName.has(listed.name)) {
        yield* Effect.logWarning(`MCP tool ${listed.name} is left out: an earlier tool has the same name`)
        continue
      }
      byName.set(listed.name, listed)
      tools.push(listed)
    }
  }
  const policies: Record<string, Policy.ToolPolicy> = {}
  for (const t of tools) if (t.effect !== undefined) policies[t.name] = { effect: t.effect }

  /** The server and MCP tool of a call: its stored reference, else the listing. */
  const target = (
    toolName: string,
    reference: string | null | undefined
  ): Effect.Effect<ToolReference, Errors.ToolExecutionError> => {
    const stored = decodeReference(reference)
    const listed = byName.get(toolName)
    const found: ToolReference | undefined = Option.isSome(stored)
      ? stored.value
      : listed === undefined
        ? undefined
        : { server: listed.server, tool: listed.mcpName, taskSupport: listed.taskSupport }
    if (found === undefined) return Effect.fail(new Errors.ToolExecutionError({ message: `unknown tool ${toolName}` }))
    if (!Object.hasOwn(options.servers, found.server)) {
      return Effect.fail(
        new Errors.ToolExecutionError({ message: `MCP server ${found.server} is not configured on this worker` })
      )
    }
    return Effect.succeed(found)
  }

  const timeout = { timeout: resolved.requestTimeoutMs, resetTimeoutOnProgress: true } as const

  /** Polls a task on its own connection until it ends, with a heartbeat per poll, for at most `taskWait`. */
  const awaitTask = (
    connection: Connection,
    taskId: string,
    firstPollMs: number | undefined,
    beat: Effect.Effect<void>
  ) =>
    Effect.gen(function* () {
      const client: Client = connection.client
      const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(resolved.taskWait)
      let interval = firstPollMs ?? 1000
      while (true) {
        const task = yield* request(connection, (signal) =>
          client.experimental.tasks.getTask(taskId, { signal, ...timeout })
        )
        yield* beat
        if (TERMINAL.has(task.status)) {
          if (task.status === "cancelled") {
            return yield* new Errors.ToolExecutionError({
              message: `the MCP task was cancelled${task.statusMessage ? `: ${task.statusMessage}` : ""}`
            })
          }
          return yield* request(connection, (signal) =>
            client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, { signal, ...timeout })
          )
        }
        if (task.status === "input_required") {
          yield* cancelQuietly(connection, taskId)
          return yield* new Errors.ToolExecutionError({ message: inputRequestedMessage(task.statusMessage) })
        }
        if ((yield* Clock.currentTimeMillis) >= deadline) {
          yield* cancelQuietly(connection, taskId)
          return yield* new McpToolCallInterruptedError({
            message: `the MCP task ${taskId} did not finish within ${Duration.format(resolved.taskWait)}`
          })
        }
        interval = task.pollInterval ?? interval
        yield* Effect.sleep(Duration.millis(Math.max(100, interval)))
      }
    })

  const cancelQuietly = (connection: Connection, taskId: string) =>
    request(connection, (signal) =>
      connection.client.experimental.tasks.cancelTask(taskId, { signal, ...timeout })
    ).pipe(Effect.ignore)

  /** A result, or a started task the session polls. */
  type Invoked = { readonly _tag: "Result"; readonly result: CallToolResult } | Runner.ToolTaskStarted

  /**
   * One `tools/call` on a new connection. A tool that requires a task is called as one: a task any
   * connection can poll is returned as started when `heartbeat` is given (its handle saved as the attempt's
   * checkpoint first); any other task is awaited on this connection.
   */
  const invoke = (
    reference: ToolReference,
    args: McpCallRequest["arguments"],
    key: string,
    heartbeat: Heartbeat.HeartbeatShape,
    startTasks: boolean
  ): Effect.Effect<
    Runner.ToolExecutionResult | Runner.ToolTaskStarted,
    Errors.ToolExecutionError | McpToolCallInterruptedError
  > =>
    Effect.scoped(
      Effect.gen(function* () {
        const connection = yield* connect(
          reference.server,
          options.servers[reference.server]!,
          resolved.handshakeTimeout
        )
        const params = { name: reference.tool, arguments: { ...args }, _meta: { [IDEMPOTENCY_KEY_META]: key } }
        if (reference.taskSupport !== "required") {
          const result = yield* request(connection, (signal) =>
            connection.client.request({ method: "tools/call", params }, CallToolResultSchema, { signal, ...timeout })
          )
          return { _tag: "Result", result } satisfies Invoked as Invoked
        }
        const pollable = startTasks && !connection.sessionBound
        // A task polled across Worker restarts lives long; one awaited here needs only this attempt's wait.
        const ttl = pollable ? resolved.taskTtlMs : 4 * Duration.toMillis(resolved.taskWait)
        const created = yield* request(connection, (signal) =>
          connection.client.request(
            { method: "tools/call", params: { ...params, task: { ttl } } },
            CreateTaskResultSchema,
            {
              signal,
              ...timeout
            }
          )
        )
        const taskId = created.task.taskId
        if (pollable) {
          const pollIntervalSeconds = Math.max(1, Math.ceil((created.task.pollInterval ?? 1000) / 1000))
          // Before anything else: a retried attempt finds the handle and returns the same task.
          yield* heartbeat.beat(
            encodeCheckpoint({
              kind: CHECKPOINT_KIND,
              server: reference.server,
              tool: reference.tool,
              taskId,
              pollIntervalSeconds
            })
          )
          return Runner.toolTaskStarted(taskId, pollIntervalSeconds) as Invoked
        }
        const result = yield* awaitTask(connection, taskId, created.task.pollInterval, heartbeat.beat())
        return { _tag: "Result", result } satisfies Invoked as Invoked
      })
    ).pipe(
      Effect.catchTags({
        Rejected: (e: Rejected) => Effect.fail(new Errors.ToolExecutionError({ message: e.message })),
        NoResult: (e: NoResult) =>
          Effect.fail(
            new McpToolCallInterruptedError({
              message: `MCP server ${reference.server} got tools/call ${reference.tool} and sent no result: ${e.message}`
            })
          )
      }),
      Effect.flatMap((invoked) => (invoked._tag === "Result" ? toResult(invoked.result) : Effect.succeed(invoked)))
    )

  const callTool = (call: McpCallRequest) =>
    Effect.flatMap(target(call.toolName, call.toolSourceReference), (reference) =>
      invoke(reference, call.arguments, call.idempotencyKey, noHeartbeat, false)
    )

  const call = Effect.fnUntraced(function* (call: ToolSource.ToolCallRequest) {
    const heartbeat = yield* Heartbeat.Heartbeat
    const reference = yield* target(call.toolName, call.toolSourceReference)
    const saved = decodeCheckpoint(heartbeat.checkpoint)
    if (Option.isSome(saved) && saved.value.server === reference.server && saved.value.tool === reference.tool) {
      // An earlier attempt started this call's task: return it instead of calling again.
      return Runner.toolTaskStarted(saved.value.taskId, saved.value.pollIntervalSeconds)
    }
    return yield* invoke(
      reference,
      call.arguments,
      call.idempotencyKey,
      heartbeat,
      call.supportsToolTasks === true
    ).pipe(
      Effect.catchTag("McpToolCallInterruptedError", (e) =>
        Effect.fail(new Errors.ToolAttemptError({ message: e.message }))
      )
    )
  }) as (
    call: ToolSource.ToolCallRequest
  ) => Effect.Effect<Runner.ToolExecutionResult | Runner.ToolTaskStarted, ToolSource.ToolCallError, Heartbeat.Heartbeat>

  /** A request about a task on a new connection; failing to reach the server fails the attempt. */
  const onTask = <A>(
    task: ToolSource.ToolTaskRequest,
    use: (
      connection: Connection,
      reference: ToolReference
    ) => Effect.Effect<A, ToolSource.ToolCallError | Rejected | NoResult>
  ): Effect.Effect<A, ToolSource.ToolCallError> =>
    Effect.flatMap(target(task.toolName, task.toolSourceReference), (reference) =>
      Effect.scoped(
        Effect.flatMap(connect(reference.server, options.servers[reference.server]!, resolved.handshakeTimeout), (c) =>
          use(c, reference)
        )
      ).pipe(
        Effect.catchTags({
          Rejected: (e: Rejected) => Effect.fail(new Errors.ToolAttemptError({ message: e.message })),
          NoResult: (e: NoResult) => Effect.fail(new Errors.ToolAttemptError({ message: e.message }))
        })
      )
    )

  const pollToolTask = Effect.fnUntraced(function* (task: ToolSource.ToolTaskRequest) {
    const events = yield* EventWriter.EventWriter
    return yield* onTask(task, (connection) =>
      Effect.gen(function* () {
        const client = connection.client
        // A task the server no longer knows is an error answer here: the attempt fails, and the call's
        // failure route records it by effect once the attempts run out.
        const status = yield* request(connection, (signal) =>
          client.experimental.tasks.getTask(task.taskId, { signal, ...timeout })
        )
        if (status.status !== lastStatus(task.continuation)) {
          yield* events.write({
            type: "mcp.task_status",
            payload: { task_id: task.taskId, status: status.status, status_message: status.statusMessage ?? null }
          })
        }
        switch (status.status) {
          case "working":
            return {
              _tag: "ToolTaskPending",
              pollIntervalSeconds: nextPollSeconds(status.pollInterval, task.pollIntervalSeconds),
              continuation: JSON.stringify({ status: status.status })
            } satisfies Runner.ToolTaskPending as Runner.ToolTaskPollOutcome
          case "input_required":
            yield* cancelQuietly(connection, task.taskId)
            return yield* new Errors.ToolExecutionError({ message: inputRequestedMessage(status.statusMessage) })
          case "cancelled":
            return yield* new Errors.ToolExecutionError({
              message: `the MCP task was cancelled${status.statusMessage ? `: ${status.statusMessage}` : ""}`
            })
          default: {
            const result = yield* request(connection, (signal) =>
              client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, { signal, ...timeout })
            )
            return (yield* toResult(result)) as Runner.ToolTaskPollOutcome
          }
        }
      })
    )
  })

  const cancelToolTask = Effect.fnUntraced(function* (task: ToolSource.ToolTaskRequest) {
    yield* onTask(task, (connection) =>
      request(connection, (signal) =>
        connection.client.experimental.tasks.cancelTask(task.taskId, { signal, ...timeout })
      ).pipe(
        // any answer is done: an error answer means the task already ended or is gone
        Effect.catchTag("Rejected", () => Effect.void),
        Effect.asVoid
      )
    )
  })

  return {
    tools,
    policies,
    mergeToolPolicies: (applicationPolicies) => ({ ...policies, ...applicationPolicies }),
    call,
    callTool,
    pollToolTask,
    cancelToolTask
  } satisfies McpToolSourceShape as McpToolSourceShape
})

/**
 * The source as the session's `ToolSource` (for Stepwise), listing the servers when the layer is built.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: McpToolSourceOptions): Layer.Layer<ToolSource.ToolSource> =>
  Layer.effect(ToolSource.ToolSource, make(options))
