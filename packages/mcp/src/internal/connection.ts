// One MCP connection per request: a new client and transport (a new child process for stdio), the initialize
// handshake bounded in time, and a close that ends an HTTP protocol session with DELETE. Requests map the SDK's
// errors to two kinds: `Rejected` (never sent, or an error answer the model should see) and `NoResult` (sent,
// and no usable result came back: the server may have run it).
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { isStdio, type ServerConfig } from "../McpServerConfig.ts"

/** The client name and version this package announces in the handshake. */
const CLIENT_INFO = { name: "durable-agent-mcp", version: "0.1.0" } as const

/** A request that was never sent, or that the server answered with an error. */
export class Rejected extends Data.TaggedError("Rejected")<{ readonly message: string }> {}

/** A request that was sent without a usable result back. */
export class NoResult extends Data.TaggedError("NoResult")<{ readonly message: string }> {}

/** An open connection. */
export interface Connection {
  readonly server: string
  readonly client: Client
  /** stdio, or an HTTP server that gave this connection a protocol session: its tasks live with it. */
  readonly sessionBound: boolean
  /** Completes when the transport reports a response stream that broke. */
  readonly broken: Deferred.Deferred<never, NoResult>
}

// The transport errors that mean a response stream broke: the answer to a pending request will not come.
const BROKEN_STREAM = /^(SSE stream disconnected|Maximum reconnection attempts|Failed to reconnect)/

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** Whether a failed fetch never reached the server (the connection was refused or the name did not resolve). */
const neverReached = (error: unknown): boolean => {
  const cause = error instanceof Error ? (error as { cause?: unknown }).cause : undefined
  const code = typeof cause === "object" && cause !== null ? (cause as { code?: unknown }).code : undefined
  return code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN"
}

/** Sorts an error of a request that was handed to the transport. */
export const classify = (error: unknown): Rejected | NoResult => {
  if (error instanceof NoResult || error instanceof Rejected) return error
  if (error instanceof McpError) {
    switch (error.code) {
      // The SDKs report an HTTP error status and an unreadable body as these two; a gateway can send them
      // after the server ran the call.
      case ErrorCode.InternalError:
      case ErrorCode.ParseError:
      // The request went out and its answer did not arrive in time, or the connection closed first.
      case ErrorCode.RequestTimeout:
      case ErrorCode.ConnectionClosed:
        return new NoResult({ message: error.message })
      default:
        return new Rejected({ message: error.message })
    }
  }
  if (error instanceof StreamableHTTPError) return new NoResult({ message: errorText(error) })
  if (neverReached(error) || errorText(error) === "Not connected") {
    return new Rejected({ message: `the request was not sent: ${errorText(error)}` })
  }
  // A result that does not parse, a reset connection: the server may have run the request.
  return new NoResult({ message: errorText(error) })
}

const makeTransport = (config: ServerConfig) => {
  if (isStdio(config)) {
    return new StdioClientTransport({
      command: config.command,
      args: [...(config.args ?? [])],
      env: { ...getDefaultEnvironment(), ...config.env },
      ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
      stderr: "ignore"
    })
  }
  return new StreamableHTTPClientTransport(new URL(config.url), {
    ...(config.headers === undefined ? {} : { requestInit: { headers: config.headers } })
  })
}

const close = (client: Client, transport: StdioClientTransport | StreamableHTTPClientTransport) =>
  Effect.promise(async () => {
    // An HTTP protocol session is ended explicitly; a server that allows no DELETE answers 405, which is fine.
    // A stdio server gets end of input (then SIGTERM and SIGKILL if it keeps running).
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
      await transport.terminateSession().catch(() => undefined)
    }
    await client.close().catch(() => undefined)
  })

/**
 * Opens a connection to `server` for the scope: a new transport and the initialize handshake within
 * `handshakeTimeout`. A failure to connect is `Rejected` (no request was sent).
 */
export const connect = (
  server: string,
  config: ServerConfig,
  handshakeTimeout: Duration.Duration
): Effect.Effect<Connection, Rejected, Scope.Scope> =>
  Effect.gen(function* () {
    const broken = yield* Deferred.make<never, NoResult>()
    const transport = makeTransport(config)
    const client = new Client(CLIENT_INFO, { capabilities: {} })
    client.onerror = (error) => {
      if (BROKEN_STREAM.test(errorText(error))) {
        Deferred.doneUnsafe(broken, Effect.fail(new NoResult({ message: errorText(error) })))
      }
    }
    const timeoutMs = Duration.toMillis(handshakeTimeout)
    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => client.connect(transport, { timeout: timeoutMs }),
        catch: (error) => new Rejected({ message: `could not connect to MCP server ${server}: ${errorText(error)}` })
      }).pipe(
        Effect.timeoutOrElse({
          duration: handshakeTimeout,
          orElse: () =>
            Effect.fail(
              new Rejected({
                message: `could not connect to MCP server ${server}: no handshake within ${Duration.format(handshakeTimeout)}`
              })
            )
        }),
        Effect.tapError(() => close(client, transport))
      ),
      () => close(client, transport)
    )
    const sessionBound = isStdio(config) || (transport as StreamableHTTPClientTransport).sessionId !== undefined
    return { server, client, sessionBound, broken }
  })

/**
 * Runs one request on a connection. Interruption aborts it (the SDK then tells the server with
 * `notifications/cancelled`). A broken response stream ends it as `NoResult`.
 */
export const request = <A>(
  connection: Connection,
  send: (signal: AbortSignal) => Promise<A>
): Effect.Effect<A, Rejected | NoResult> =>
  Effect.raceFirst(Effect.tryPromise({ try: send, catch: classify }), Deferred.await(connection.broken))
