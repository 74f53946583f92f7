// Test support: a session worker and client on a fresh engine (by default embedded, on its own SQLite file; a
// fresh Postgres database and runner with `engine: clusterEngine` or SESSION_TEST_ENGINE=cluster), a scripted
// model whose requests are recorded, tools that count their side effects, and polling helpers.
import { Client, type Engine, type Inspect } from "@durable-agent/engine"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { AgentSessionClient, AgentSessionFlow, ModelClient, Stepwise, ToolSource, Wire } from "../src/index.ts"
import * as Persistence from "../src/Persistence.ts"
import * as SessionTesting from "../src/testing.ts"

export const FLOW_TYPE = "TestAgent"

/** What a test can inspect: the model's requests and the tools' side effects. */
export interface Kit {
  readonly requests: Array<ModelClient.ModelRequest>
  readonly sideEffects: Map<string, number>
  readonly idempotencyKeys: Array<string>
  readonly flow: AgentSessionFlow.AgentSessionFlowDef
  readonly count: (name: string) => number
}

/** Options every test engine takes. */
export interface EngineOptions {
  readonly maxValueBytes?: number | undefined
  readonly maxFlowStateBytes?: number | undefined
  /** Task slots of the runner (the test engines default to 64). */
  readonly maxConcurrentTasks?: number | undefined
}

/** Builds a fresh engine (its own storage) for one test; the layer's scope removes what it created. */
export type EngineFactory = (options: EngineOptions) => Layer.Layer<Engine.EngineServices, unknown>

/**
 * The embedded engine on a new SQLite file in its own temporary directory, removed when the layer's scope closes
 * (after the engine closed the file).
 */
export const embeddedEngine: EngineFactory = (options) =>
  SessionTesting.layerEngine({
    maxValueBytes: options.maxValueBytes,
    maxFlowStateBytes: options.maxFlowStateBytes,
    maxConcurrentTasks: options.maxConcurrentTasks,
    pollInterval: "50 millis"
  })

/**
 * The cluster engine on a fresh Postgres database (dropped afterwards) with a runner on a free port. Loaded
 * lazily, so embedded runs do not load the Postgres support.
 */
export const clusterEngine: EngineFactory = (options) =>
  Layer.unwrap(
    Effect.map(
      Effect.promise(() => import("./support/cluster.ts")),
      (m) => m.clusterEngine(options)
    )
  )

/** The engine of tests that do not choose one: SESSION_TEST_ENGINE=cluster selects the cluster engine. */
export const defaultEngine: EngineFactory =
  process.env.SESSION_TEST_ENGINE === "cluster" ? clusterEngine : embeddedEngine

/** A gate a test opens once: a model call it holds (see {@link Setup.holds}) answers only after {@link Gate.open}. */
export interface Gate {
  /** Waits until the gate is open (interruptibly, so cancel_turn and a closing worker end the wait). */
  readonly wait: Effect.Effect<void>
  /** Opens the gate; every held call goes on. */
  readonly open: Effect.Effect<void>
}

/** A closed {@link Gate}. */
export const makeGate = (): Gate => {
  const deferred = Deferred.makeUnsafe<void>()
  return { wait: Deferred.await(deferred), open: Effect.asVoid(Deferred.succeed(deferred, undefined)) }
}

/**
 * `model` with some of its calls held: call `n` (zero-based, in the order they are made) is passed to `onRequest`
 * at once, then waits for `holds[n]` before `model` answers it. A test orders its RPCs against a model call this
 * way instead of by a delay.
 */
export const holdModel = (
  model: ModelClient.ModelClientShape,
  holds: { readonly [modelCall: number]: Gate } = {},
  onRequest?: (request: ModelClient.ModelRequest) => void
): ModelClient.ModelClientShape => {
  let calls = 0
  return ModelClient.make((request) =>
    Effect.suspend(() => {
      const gate = holds[calls++]
      onRequest?.(request)
      return gate === undefined ? model.generate(request) : Effect.andThen(gate.wait, model.generate(request))
    })
  )
}

export interface Setup {
  readonly script: ReadonlyArray<ModelClient.ScriptedStep>
  /**
   * Model calls held until a gate opens, by zero-based call index (across the worker's sessions): the call is in
   * `kit.requests` while it waits.
   */
  readonly holds?: { readonly [modelCall: number]: Gate } | undefined
  readonly tools?: (kit: Kit) => ReadonlyArray<ToolSource.Tool>
  /** A whole tool source instead of `tools` (a source whose tools start tasks that the session polls). */
  readonly toolSource?: ((kit: Kit) => ToolSource.ToolSourceShape) | undefined
  readonly flow?: Partial<AgentSessionFlow.AgentSessionOptions>
  readonly agent?: Partial<Stepwise.AgentDefinition>
  readonly maxValueBytes?: number
  readonly maxFlowStateBytes?: number
  /** Task slots of the runner (see {@link EngineOptions.maxConcurrentTasks}). */
  readonly maxConcurrentTasks?: number
  /** The engine; {@link defaultEngine} when omitted. */
  readonly engine?: EngineFactory | undefined
  /** Services added to the worker, such as the session's `Tracer` layer. */
  readonly services?: Layer.Layer<any> | undefined
}

/** Runs `body` with a worker and an AgentSessionClient on a fresh engine. */
export const withSession = <A, E>(setup: Setup, body: SessionBody<A, E>) => {
  const sideEffects = new Map<string, number>()
  const requests: Array<ModelClient.ModelRequest> = []
  const flow = AgentSessionFlow.make({
    flowType: FLOW_TYPE,
    retryInitialInterval: "100 millis",
    ...setup.flow
  })
  const kit: Kit = {
    requests,
    sideEffects,
    idempotencyKeys: [],
    flow,
    count: (name) => sideEffects.get(name) ?? 0
  }
  const engine = (setup.engine ?? defaultEngine)({
    maxValueBytes: setup.maxValueBytes,
    maxFlowStateBytes: setup.maxFlowStateBytes,
    maxConcurrentTasks: setup.maxConcurrentTasks
  })
  const worker = AgentSessionFlow.layerWorker(flow).pipe(
    Layer.provide(Stepwise.layer({ name: "test-agent", instructions: "You are a test agent.", ...setup.agent })),
    Layer.provide(
      Layer.mergeAll(
        ModelClient.layer(
          holdModel(ModelClient.scripted(setup.script), setup.holds, (request) => void requests.push(request)).generate
        ),
        setup.toolSource === undefined
          ? ToolSource.layer(setup.tools?.(kit) ?? [])
          : Layer.succeed(ToolSource.ToolSource, setup.toolSource(kit)),
        setup.services ?? Layer.empty
      )
    )
  )
  return body(kit).pipe(
    Effect.provide(Layer.mergeAll(worker, AgentSessionClient.layer(FLOW_TYPE)).pipe(Layer.provideMerge(engine))),
    Effect.scoped
  ) as Effect.Effect<A, unknown>
}

/** A test body: it runs with an AgentSessionClient, the engine's Client and the runner's state (its slots). */
export type SessionBody<A, E> = (
  kit: Kit
) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client | Engine.RunnerState>

/**
 * {@link withSession} bound to one engine: what a suite registers its tests with. `defaults` stand under each
 * test's setup (a test's `flow` options are merged over the default `flow`).
 */
export const sessionOn =
  (engine: EngineFactory, defaults: Omit<Setup, "engine" | "script"> = {}) =>
  <A, E>(setup: Omit<Setup, "engine">, body: SessionBody<A, E>) =>
    withSession({ ...defaults, ...setup, flow: { ...defaults.flow, ...setup.flow }, engine }, body)

/** Counts one side effect of a tool. */
export const bump = (kit: Kit, name: string) => kit.sideEffects.set(name, kit.count(name) + 1)

/** The suites' read tool `get_weather`: counts its runs and answers "sunny". */
export const weatherTool = (kit: Kit) =>
  ToolSource.tool({
    name: "get_weather",
    description: "Read the weather.",
    effect: "read",
    handler: () =>
      Effect.sync(() => {
        bump(kit, "get_weather")
        return "sunny"
      })
  })

/** The suites' single-attempt write `send_email`: counts its runs. */
export const sendEmailTool = (kit: Kit) =>
  ToolSource.tool({
    name: "send_email",
    description: "Send an email.",
    effect: "non_idempotent_write",
    handler: (args) =>
      Effect.sync(() => {
        bump(kit, "send_email")
        return `sent to ${String(args.to)}`
      })
  })

/** The suites' `slow_read`: a read that counts its start and runs until the test bumps "release". */
export const slowReadTool = (kit: Kit) =>
  ToolSource.tool({
    name: "slow_read",
    description: "A read that runs until the test releases it.",
    effect: "read",
    handler: () =>
      Effect.gen(function* () {
        bump(kit, "slow_read:started")
        while (kit.count("release") === 0) yield* Effect.sleep("20 millis")
        bump(kit, "slow_read")
        return "slow result"
      })
  })

/** The suites' three counting tools: `get_weather`, `slow_read` and `send_email`. */
export const countingTools = (kit: Kit) => [weatherTool(kit), slowReadTool(kit), sendEmailTool(kit)]

/**
 * The Steps of a turn whose model calls a read and a write that needs approval, the write approved: the read runs
 * while the approval waits, then the write, then the model answers.
 */
export const APPROVED_WRITE_TURN_STEPS = [
  "StartAgentSession",
  "RunModel",
  "AwaitToolApproval",
  "CallTool",
  "ResumeTurn",
  "CallSingleAttemptTool",
  "RunModel",
  "AwaitUserMessage"
]

/** Polls `effect` until `predicate` holds (20 s at most). */
export const eventually = <A, E, R>(effect: Effect.Effect<A, E, R>, predicate: (a: A) => boolean, what: string) =>
  effect.pipe(
    Effect.repeat({ schedule: Schedule.spaced("30 millis"), until: predicate }),
    Effect.timeoutOrElse({
      duration: "20 seconds",
      orElse: () => Effect.die(new Error(`timed out waiting for ${what}`))
    })
  )

/** The snapshot once `predicate` holds. */
export const awaitSnapshot = (sessionId: string, predicate: (s: Wire.AgentSnapshot) => boolean, what = "a snapshot") =>
  Effect.flatMap(AgentSessionClient.AgentSessionClient, (client) =>
    eventually(client.getSnapshot(sessionId), predicate, what)
  )

/** Polls a number the test keeps (a count of the kit, the model requests so far) until it is `n`. */
export const awaitCount = (read: () => number, n: number, what: string) =>
  eventually(Effect.sync(read), (value) => value === n, what)

/**
 * Starts session `sessionId` (with `initialMessage` when given) and returns the client and the snapshot once
 * `predicate` holds.
 */
export const startAndAwait = (
  sessionId: string,
  initialMessage: string | undefined,
  predicate: (s: Wire.AgentSnapshot) => boolean,
  what: string
) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    yield* client.startSession(sessionId, initialMessage === undefined ? undefined : { initialMessage })
    const snapshot = yield* awaitSnapshot(sessionId, predicate, what)
    return { client, snapshot }
  })

/** The snapshot once `turns` turns ended and no turn is active. */
export const awaitTurns = (sessionId: string, turns: number) =>
  awaitSnapshot(
    sessionId,
    (s) => s.state !== null && s.state.turnCount >= turns && s.state.activeTurnId === null,
    `${turns} finished turns`
  )

/** The Step types of a session's executions, in scheduling order. */
export const stepShape = (sessionId: string) =>
  Effect.flatMap(Client.Client, (client) =>
    Effect.map(client.stepExecutions(sessionId), (steps) => steps.map((s) => s.stepType))
  )

/** The Step executions of a session. */
export const stepExecutions = (
  sessionId: string
): Effect.Effect<ReadonlyArray<Inspect.StepExecution>, unknown, Client.Client> =>
  Effect.flatMap(Client.Client, (client) => client.stepExecutions(sessionId))

/** Every event written so far. */
export const allEvents = (sessionId: string) =>
  Effect.flatMap(AgentSessionClient.AgentSessionClient, (client) =>
    Effect.map(
      Stream.runCollect(client.events(sessionId)),
      (chunk): Array<AgentSessionClient.AgentSessionEvent> => Array.from(chunk)
    )
  )

/** Every stored message through list_agent_messages, page by page from the newest, and the pages. */
export const pageAll = (sessionId: string, limit: number) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const pages: Array<Wire.AgentMessagesPage> = []
    let before: number | null = null
    for (;;) {
      const page: Wire.AgentMessagesPage = yield* client.listMessages(sessionId, { beforeSequence: before, limit })
      pages.push(page)
      if (page.nextBeforeSequence === null) break
      before = page.nextBeforeSequence
    }
    return { messages: pages.reverse().flatMap((p) => p.messages), pages }
  })

/**
 * Stores `count` messages of `count / 2` earlier turns of a started session the way 0.1.0 did (all in
 * AgentMessages, no AgentMessageIndex, no summary): a user message and an answer per turn, with the texts
 * `text(turn, user)`, and moves the session's state past them.
 */
export const storeOldLayout = (sessionId: string, count: number, text: (turn: number, user: boolean) => string) =>
  Effect.gen(function* () {
    const db = yield* Client.Client
    for (let s = 1; s <= count; s++) {
      const turn = Math.ceil(s / 2)
      const user = s % 2 === 1
      yield* db.setAttribute(
        sessionId,
        Persistence.AgentMessages,
        {
          sequence: s,
          turnId: Wire.formatTurnId(turn),
          role: user ? "user" : "assistant",
          text: text(turn, user),
          toolCallId: null,
          toolName: null,
          toolArguments: null,
          toolOutput: null,
          frameworkItem: JSON.stringify({ type: user ? "user" : "assistant_text" }),
          createdAt: "2026-01-01T00:00:00.000Z"
        },
        Wire.messageSequenceKey(s)
      )
    }
    const state = Option.getOrThrow(yield* db.getAttribute(sessionId, Persistence.AgentState))
    yield* db.setAttribute(sessionId, Persistence.AgentState, {
      ...state,
      turnCount: count / 2,
      nextMessageSequence: count + 1
    })
  })
/** The types of the events written so far. */
export const eventTypes = (sessionId: string) =>
  Effect.map(allEvents(sessionId), (events) => events.map((e) => e.event.type))

/** The last user text of a model request. */
export const lastUserText = (request: ModelClient.ModelRequest) => {
  const users = request.messages.filter((m) => m.role === "user")
  const last = users[users.length - 1]
  return last?.role === "user" ? last.text : undefined
}

/** The tool results a model request carries, by tool call ID. */
export const toolResults = (request: ModelClient.ModelRequest) =>
  Object.fromEntries(request.messages.flatMap((m) => (m.role === "tool" ? [[m.toolCallId, m.output] as const] : [])))
