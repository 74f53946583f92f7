/**
 * `@durable-agent/session/testing`: a session worker and client on a throwaway embedded engine, for an
 * application's own tests. `layer` builds both from a scripted model (or any model or runner layer) and
 * tools; `awaitTurn` and `awaitSnapshot` wait for the session to get somewhere.
 *
 * Write these tests with `it.live`: the engine polls and sets timers on the real clock, so under `it.effect`
 * (TestClock) nothing would advance. The layer and the waits fail at once with `LiveClockRequired` there.
 *
 * @example
 * ```ts
 * import * as SessionTesting from "@durable-agent/session/testing"
 *
 * it.live("answers", () =>
 *   Effect.gen(function* () {
 *     const sessions = yield* AgentSessionClient
 *     yield* sessions.startSession("s-1", { initialMessage: "Hi" })
 *     const snapshot = yield* SessionTesting.awaitTurn("s-1")
 *     assert.strictEqual(snapshot.messages.at(-1)?.text, "Hello!")
 *   }).pipe(Effect.provide(SessionTesting.layer({ model: [{ text: "Hello!" }] })))
 * )
 * ```
 *
 * @since 0.1.0
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Client, Engine } from "@durable-agent/engine"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { AgentSessionClient } from "./AgentSessionClient.ts"
import * as AgentSessionFlow from "./AgentSessionFlow.ts"
import { AwaitTurnTimeout } from "./Errors.ts"
import { requireLiveClock } from "./internal/clock.ts"
import { ModelClient, type ScriptedStep } from "./ModelClient.ts"
import type { AgentFrameworkRunner } from "./Runner.ts"
import * as Stepwise from "./Stepwise.ts"
import { type Tool, ToolSource } from "./ToolSource.ts"
import type { AgentSnapshot } from "./wire/index.ts"

/**
 * What a test session runs.
 *
 * @category models
 * @since 0.1.0
 */
export interface TestSessionOptions {
  /** A script for `ModelClient.layerScripted`, or any `ModelClient` layer. */
  readonly model?: ReadonlyArray<ScriptedStep> | Layer.Layer<ModelClient> | undefined
  /** Tools for `ToolSource.layer`, or any `ToolSource` layer; none by default. */
  readonly tools?: ReadonlyArray<Tool> | Layer.Layer<ToolSource> | undefined
  /** A runner layer instead of Stepwise (then `model`, `tools` and `agent` are not used). */
  readonly runner?: Layer.Layer<AgentFrameworkRunner> | undefined
  /** Stepwise's agent; a terse test agent by default. */
  readonly agent?: Partial<Stepwise.AgentDefinition> | undefined
  /** Session Flow options; Flow type `TestAgent` and a 100 ms first retry delay by default. */
  readonly flow?: Partial<AgentSessionFlow.AgentSessionOptions> | undefined
  /** The engine's largest stored value; the engine default (16 MiB) when omitted. */
  readonly maxValueBytes?: number | undefined
}

/**
 * An embedded engine on a new SQLite file in its own temporary directory, removed when the layer's scope
 * closes (after the engine closed the file). It has 64 task slots (tests run parallel tool calls on
 * small machines) and a 1 s drain timeout (a test that ends with a Step still running closes quickly).
 *
 * @category layers
 * @since 0.1.0
 */
export const layerEngine = (options: {
  readonly maxValueBytes?: number | undefined
  /** The run budget of one session (the engine's `maxFlowStateBytes`); the engine default when omitted. */
  readonly maxFlowStateBytes?: number | undefined
  /** Task slots of the runner; 64 when omitted. */
  readonly maxConcurrentTasks?: number | undefined
  readonly pollInterval?: Duration.Input | undefined
}): Layer.Layer<Engine.EngineServices, unknown> =>
  Layer.unwrap(
    Effect.map(
      Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "das-session-test-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      ),
      (dir) =>
        Engine.layerEmbedded({
          filename: join(dir, "session.db"),
          pollInterval: options.pollInterval ?? "20 millis",
          maxConcurrentTasks: options.maxConcurrentTasks ?? 64,
          drainTimeout: "1 second",
          ...(options.maxValueBytes === undefined ? {} : { maxValueBytes: options.maxValueBytes }),
          ...(options.maxFlowStateBytes === undefined ? {} : { maxFlowStateBytes: options.maxFlowStateBytes })
        })
    )
  )

/**
 * A worker for the session Flow and an `AgentSessionClient` (with the engine's `Client`) on an embedded
 * engine in a new temporary directory, removed when the layer's scope closes.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: TestSessionOptions = {}): Layer.Layer<AgentSessionClient | Client.Client, unknown> => {
  const flow = AgentSessionFlow.make({ flowType: "TestAgent", retryInitialInterval: "100 millis", ...options.flow })
  const model: Layer.Layer<ModelClient> = Layer.isLayer(options.model)
    ? (options.model as Layer.Layer<ModelClient>)
    : ModelClient.layerScripted((options.model as ReadonlyArray<ScriptedStep> | undefined) ?? [])
  const tools: Layer.Layer<ToolSource> = Layer.isLayer(options.tools)
    ? (options.tools as Layer.Layer<ToolSource>)
    : ToolSource.layer((options.tools as ReadonlyArray<Tool> | undefined) ?? [])
  const runner =
    options.runner ??
    Stepwise.layer({ name: "test-agent", instructions: "You are a test agent.", ...options.agent }).pipe(
      Layer.provide(Layer.mergeAll(model, tools))
    )
  const engine = layerEngine({ maxValueBytes: options.maxValueBytes })
  const app = Layer.mergeAll(
    AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(runner)),
    AgentSessionClient.layer(flow.type)
  ).pipe(Layer.provideMerge(engine))
  return Layer.unwrap(Effect.as(requireLiveClock("SessionTesting.layer"), app))
}

/**
 * Waits until the session settled (see `AgentSessionClient.awaitTurn`): no active turn, nothing queued, and
 * at least `turn` turns ended when given.
 *
 * @category waiting
 * @since 0.1.0
 */
export const awaitTurn = (
  sessionId: string,
  options?: { readonly turn?: number | undefined; readonly timeout?: Duration.Input | undefined }
) =>
  Effect.flatMap(AgentSessionClient, (client) => client.awaitTurn(sessionId, { pollInterval: "20 millis", ...options }))

/**
 * The first snapshot for which `predicate` holds; fails with `AwaitTurnTimeout` after `timeout` (20 s by
 * default).
 *
 * @category waiting
 * @since 0.1.0
 */
export const awaitSnapshot = (
  sessionId: string,
  predicate: (snapshot: AgentSnapshot) => boolean,
  options?: { readonly timeout?: Duration.Input | undefined }
) =>
  Effect.gen(function* () {
    yield* requireLiveClock("SessionTesting.awaitSnapshot")
    const client = yield* AgentSessionClient
    const timeout = options?.timeout ?? "20 seconds"
    return yield* client.getSnapshot(sessionId).pipe(
      Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: predicate }),
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () =>
          Effect.fail(new AwaitTurnTimeout({ sessionId, timeout: String(timeout), state: "predicate never held" }))
      })
    )
  })
