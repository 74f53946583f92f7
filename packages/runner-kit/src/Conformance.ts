/**
 * The runner conformance suite: functions that take a {@link RunnerHarness} (how to build a runner over a
 * scripted model and the suite's tools) and register `@effect/vitest` tests pinning what the adapters spec
 * asks of every framework runner, on a real engine:
 *
 * - {@link matrixSuite}: the spec's test matrix that runs in one process (cases 1, 2, 3+7, 4, 7, 8, 10+11,
 *   and a single-attempt write that throws);
 * - {@link controlSuite}: the guards every runner keeps — one model call per RunModel, `cancel_turn`
 *   aborting the running model call through `cancellationSignal`, the built-ins offered only when enabled
 *   and routed to the session's Steps;
 * - {@link killSuite}: the matrix cases that need a SIGKILL of the worker process (3 with a restart, 5, 6,
 *   9), against a worker script that calls {@link killWorker};
 * - {@link runnerSuite}: all of them.
 *
 * For a runner's own tests: {@link withRunnerSession} (a session worker over the runner), the polling
 * helpers, {@link compactsLongSession} (the ContextCompactionRunner case on a small window), and matrix case
 * 1's script and checks ({@link READ_TOOL_TURN}, {@link READ_TOOL_TURN_STEPS}, {@link assertReadToolTurn})
 * for a runner's own version of it.
 *
 * A runner's own tests are this suite plus what is particular to its framework; a third party tests a
 * runner it writes the same way (see the package README).
 *
 * The harness plays the suite's script through its framework's own scripted model: for every model call it
 * describes the prompt as a {@link ModelCallView} and answers with what {@link ScriptPlayer.play} returns,
 * so the framework's real code runs between the session and the script.
 *
 * @since 0.1.0
 */
import { appendFileSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client, Engine, Inspect } from "@durable-agent/engine"
import { fileLines, spawnNode } from "@durable-agent/engine/testing/ChildProcess"
import {
  AgentSessionClient,
  AgentSessionFlow,
  BuiltInTools,
  type ModelClient,
  type Runner,
  Stepwise,
  Wire
} from "@durable-agent/session"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { allEvents, awaitSnapshot, awaitTurns, eventually, stepShape } from "./internal/polling.ts"
import type { JsonSchemaTool } from "./SourceTools.ts"

export { allEvents, awaitSnapshot, awaitTurns, eventually, stepShape }

/**
 * A tool result in a prompt.
 *
 * @category models
 * @since 0.1.0
 */
export interface PromptToolResult {
  readonly toolCallId: string
  readonly toolName: string
  readonly text: string
}

/**
 * What the suite needs to know of one model call's prompt, as the harness reads it off its framework's
 * request.
 *
 * @category models
 * @since 0.1.0
 */
export interface ModelCallView {
  /** The texts of the prompt's user messages, in order (a turn-failure note included). */
  readonly userTexts: ReadonlyArray<string>
  /** Every tool result in the prompt, in order. */
  readonly toolResults: ReadonlyArray<PromptToolResult>
  /** The tool results after the prompt's last other message: the results of the calls the last model call asked for; empty when the prompt ends otherwise. */
  readonly lastToolResults: ReadonlyArray<PromptToolResult>
  /** The names of the tools this call was offered. */
  readonly offeredTools: ReadonlyArray<string>
}

/**
 * One scripted answer: the session's `ScriptedResponse` (text, deltas, tool calls, usage, a delay that an
 * abort ends, a failure).
 *
 * @category models
 * @since 0.1.0
 */
export type Response = ModelClient.ScriptedResponse

/**
 * One entry of a script: an answer, or a function of the call's view and its zero-based index.
 *
 * @category models
 * @since 0.1.0
 */
export type ScriptEntry = Response | ((view: ModelCallView, index: number) => Response)

/**
 * What a played call answers: the response without its delay and failure, which {@link ScriptPlayer.play}
 * carried out.
 *
 * @category models
 * @since 0.1.0
 */
export interface PlayedResponse {
  readonly index: number
  readonly text?: string | undefined
  readonly textDeltas?: ReadonlyArray<string> | undefined
  readonly reasoning?: string | undefined
  readonly toolCalls: ReadonlyArray<ModelClient.ScriptedToolCall>
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
}

/**
 * The script as the harness's scripted model plays it, and what the suite reads back.
 *
 * @category models
 * @since 0.1.0
 */
export interface ScriptPlayer {
  /**
   * Answers one model call: waits out the entry's `delay` (rejecting with the signal's reason when
   * `abortSignal` fires first, recorded in {@link aborted}), rejects with `Error(fail)` for a failure, else
   * resolves with the answer the framework's model must give. Calls beyond the script reject.
   */
  readonly play: (view: ModelCallView, abortSignal?: AbortSignal | undefined) => Promise<PlayedResponse>
  /** The views of the calls made so far. */
  readonly calls: () => ReadonlyArray<ModelCallView>
  /** The indexes of the calls whose abort signal fired during their delay. */
  readonly aborted: () => ReadonlyArray<number>
}

/**
 * Makes a player over a script.
 *
 * @category constructors
 * @since 0.1.0
 */
export const player = (script: ReadonlyArray<ScriptEntry>): ScriptPlayer => {
  const calls: Array<ModelCallView> = []
  const aborted: Array<number> = []
  const play = async (view: ModelCallView, abortSignal?: AbortSignal | undefined): Promise<PlayedResponse> => {
    const index = calls.length
    calls.push(view)
    const entry = script[index]
    if (entry === undefined) throw new Error(`script exhausted after ${script.length} model calls`)
    const response = typeof entry === "function" ? entry(view, index) : entry
    if (response.delay !== undefined) {
      const ms = Duration.toMillis(Duration.fromInputUnsafe(response.delay))
      await new Promise<void>((resolve, reject) => {
        const abort = () => {
          clearTimeout(timer)
          aborted.push(index)
          reject(abortSignal?.reason ?? new Error("aborted"))
        }
        const timer = setTimeout(() => {
          abortSignal?.removeEventListener("abort", abort)
          resolve()
        }, ms)
        if (abortSignal?.aborted === true) abort()
        else abortSignal?.addEventListener("abort", abort, { once: true })
      })
    }
    if (response.fail !== undefined) throw Object.assign(new Error(response.fail), { isRetryable: true })
    return {
      index,
      text: response.text,
      textDeltas: response.textDeltas,
      reasoning: response.reasoning,
      toolCalls: response.toolCalls ?? [],
      usage: { inputTokens: response.usage?.inputTokens ?? 0, outputTokens: response.usage?.outputTokens ?? 0 }
    }
  }
  return { play, calls: () => calls, aborted: () => aborted }
}

/**
 * A tool of the suite, framework-neutral (a `SourceTools.JsonSchemaTool` with its effect class): the harness
 * makes it one of its framework's tools with this name, description, JSON Schema parameters and effect class,
 * whose function (run in the tool Step) is `execute`. A runner that takes JSON-Schema tools takes these as
 * they are.
 *
 * @category models
 * @since 0.1.0
 */
export interface SuiteTool extends JsonSchemaTool {
  readonly effect: Wire.ToolEffect
}

/**
 * How to build the runner under test.
 *
 * @category models
 * @since 0.1.0
 */
export interface RunnerHarness {
  /** The runner's name in test titles. */
  readonly name: string
  /**
   * The runner for one session: its framework's scripted model answers every model call with
   * `player.play(view, abortSignal)`, and its tools are `tools`, each with its `effect` as the tool's
   * effect class. Enabled built-ins are offered as the runner always offers them.
   */
  readonly make: (options: {
    readonly player: ScriptPlayer
    readonly tools: ReadonlyArray<SuiteTool>
  }) => Layer.Layer<Runner.AgentFrameworkRunner>
}

/**
 * A fresh engine (its own database) for one test.
 *
 * @category models
 * @since 0.1.0
 */
export type EngineFactory = () => Layer.Layer<Engine.EngineServices, unknown>

const dir = mkdtempSync(join(tmpdir(), "das-runner-kit-"))
process.on("exit", () => rmSync(dir, { recursive: true, force: true }))
let files = 0

/**
 * The default engine of the suite: an embedded engine on a fresh SQLite file.
 *
 * @category constructors
 * @since 0.1.0
 */
export const embeddedEngine: EngineFactory = () =>
  Engine.layerEmbedded({
    filename: join(dir, `kit-${process.pid}-${++files}.db`),
    pollInterval: "50 millis",
    maxConcurrentTasks: 64
  })

/**
 * What a test reads off its session: the player, and the side effects the suite's tools counted.
 *
 * @category models
 * @since 0.1.0
 */
export interface Kit {
  readonly player: ScriptPlayer
  readonly idempotencyKeys: Array<string>
  readonly count: (tool: string) => number
  /** The tool results, by call ID, in the prompt of the model call at `index`. */
  readonly toolResults: (index: number) => Readonly<Record<string, string>>
}

const objectSchema = (properties: { readonly [key: string]: unknown }) => ({
  type: "object",
  properties,
  required: Object.keys(properties),
  additionalProperties: false
})

/**
 * The suite's tools: `get_weather` (read), `save_note` (idempotent_write, keeps its idempotency key),
 * `send_email` (non_idempotent_write: approval by default) and `flaky_write` (non_idempotent_write, throws
 * after it took effect). Each counts its runs in `bump`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const suiteTools = (bump: (tool: string, idempotencyKey: string) => void): ReadonlyArray<SuiteTool> => [
  {
    name: "get_weather",
    description: "The weather of a city.",
    parameters: objectSchema({ city: { type: "string" } }),
    effect: "read",
    execute: async (input, options) => {
      bump("get_weather", options.idempotencyKey)
      return { city: input.city, temperature: 21 }
    }
  },
  {
    name: "save_note",
    description: "Saves a note (idempotent by key).",
    parameters: objectSchema({ text: { type: "string" } }),
    effect: "idempotent_write",
    execute: async (input, options) => {
      bump("save_note", options.idempotencyKey)
      return `saved ${String(input.text)}`
    }
  },
  {
    name: "send_email",
    description: "Sends an email.",
    parameters: objectSchema({ to: { type: "string" } }),
    effect: "non_idempotent_write",
    execute: async (input, options) => {
      bump("send_email", options.idempotencyKey)
      return `sent to ${String(input.to)}`
    }
  },
  {
    name: "flaky_write",
    description: "A write that fails after it took effect.",
    parameters: objectSchema({}),
    effect: "non_idempotent_write",
    execute: async (_input, options) => {
      bump("flaky_write", options.idempotencyKey)
      throw new Error("the mail server hung up")
    }
  }
]

/**
 * Session options a test may set.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionOptions {
  /** The runner's tools instead of {@link suiteTools} (such as a tool source's, `SourceTools.tools`). */
  readonly tools?: ReadonlyArray<SuiteTool> | undefined
  readonly toolPolicies?: AgentSessionFlow.AgentSessionOptions["toolPolicies"]
  readonly interruptDeadline?: AgentSessionFlow.AgentSessionOptions["interruptDeadline"]
  readonly builtInTools?: AgentSessionFlow.AgentSessionOptions["builtInTools"]
  /** The session's compaction policy (`AgentSessionFlow.CompactionPolicy`); none by default. */
  readonly compaction?: AgentSessionFlow.AgentSessionOptions["compaction"]
}

const FLOW_TYPE = "RunnerConformanceAgent"

/**
 * The session Flow options a runner's test session sets (tool policies, the approval deadline, built-ins,
 * compaction).
 *
 * @category models
 * @since 0.1.0
 */
export type SessionFlowOptions = Pick<
  SessionOptions,
  "toolPolicies" | "interruptDeadline" | "builtInTools" | "compaction"
>

/**
 * A runner's test session: the Flow type, the runner under test (with its framework's scripted model), the
 * engine, and the Flow's options.
 *
 * @category models
 * @since 0.1.0
 */
export interface RunnerSession {
  readonly flowType: string
  readonly runner: Layer.Layer<Runner.AgentFrameworkRunner, unknown>
  readonly engine: Layer.Layer<Engine.EngineServices, unknown>
  readonly flow?: SessionFlowOptions | undefined
  /** Services added to the worker, such as the session's `Tracer` layer. */
  readonly services?: Layer.Layer<any> | undefined
}

/**
 * Runs `body` with a session worker (`session.runner` on a session Flow with the test defaults: retries after
 * 100 ms) and an `AgentSessionClient` on `session.engine`, in a scope that closes them. The scaffolding of
 * {@link withSession} and of each runner's own test sessions.
 *
 * @category constructors
 * @since 0.1.0
 */
export const withRunnerSession = <A, E>(
  session: RunnerSession,
  body: Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>
): Effect.Effect<A, unknown> => {
  const options = session.flow
  const flow = AgentSessionFlow.make({
    flowType: session.flowType,
    retryInitialInterval: "100 millis",
    ...(options?.toolPolicies ? { toolPolicies: options.toolPolicies } : {}),
    ...(options?.interruptDeadline ? { interruptDeadline: options.interruptDeadline } : {}),
    ...(options?.builtInTools ? { builtInTools: options.builtInTools } : {}),
    ...(options?.compaction ? { compaction: options.compaction } : {})
  })
  const worker = AgentSessionFlow.layerWorker(flow).pipe(
    Layer.provide(session.runner),
    Layer.provide(session.services ?? Layer.empty)
  )
  return body.pipe(
    Effect.provide(
      Layer.mergeAll(worker, AgentSessionClient.layer(session.flowType)).pipe(Layer.provideMerge(session.engine))
    ),
    Effect.scoped
  ) as Effect.Effect<A, unknown>
}

/**
 * The side effects a runner's test tools count: runs by tool name and the idempotency keys they saw.
 *
 * @category models
 * @since 0.1.0
 */
export interface SideEffects {
  readonly sideEffects: Map<string, number>
  readonly idempotencyKeys: Array<string>
  readonly count: (name: string) => number
}

/**
 * Empty {@link SideEffects}.
 *
 * @category constructors
 * @since 0.1.0
 */
export const sideEffects = (): SideEffects => {
  const counts = new Map<string, number>()
  return { sideEffects: counts, idempotencyKeys: [], count: (name) => counts.get(name) ?? 0 }
}

/**
 * Runs `body` with a session worker (the harness's runner over `script` and {@link suiteTools}) and an
 * `AgentSessionClient` on a fresh engine.
 *
 * @category constructors
 * @since 0.1.0
 */
export const withSession = <A, E>(
  harness: RunnerHarness,
  engine: EngineFactory,
  script: ReadonlyArray<ScriptEntry>,
  body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>,
  options?: SessionOptions
): Effect.Effect<A, unknown> => {
  const counts = new Map<string, number>()
  const idempotencyKeys: Array<string> = []
  const play = player(script)
  const kit: Kit = {
    player: play,
    idempotencyKeys,
    count: (tool) => counts.get(tool) ?? 0,
    toolResults: (index) =>
      Object.fromEntries((play.calls()[index]?.toolResults ?? []).map((r) => [r.toolCallId, r.text]))
  }
  const tools =
    options?.tools ??
    suiteTools((tool, key) => {
      counts.set(tool, kit.count(tool) + 1)
      if (tool === "save_note") idempotencyKeys.push(key)
    })
  return withRunnerSession(
    { flowType: FLOW_TYPE, runner: harness.make({ player: play, tools }), engine: engine(), flow: options },
    body(kit)
  )
}

// ---------------------------------------------------------------------------------------------------------
// compaction
// ---------------------------------------------------------------------------------------------------------

/**
 * Words that make every message of {@link compactsLongSession} cost some tokens of a small window; a scripted
 * answer may add them too.
 *
 * @category compaction
 * @since 0.1.0
 */
export const COMPACTION_PAD =
  "and a few more words so that every message costs some tokens of the small window. ".repeat(2)

/**
 * How {@link compactsLongSession} reads the model calls of a runner's scripted model, of type `C`.
 *
 * @category compaction
 * @since 0.1.0
 */
export interface CompactionCalls<C> {
  /** Every model call the scripted model received so far, in order. */
  readonly calls: () => ReadonlyArray<C>
  /** Whether the call is a summary call (its instructions are `Stepwise.DEFAULT_SUMMARY_INSTRUCTIONS`). */
  readonly isSummary: (call: C) => boolean
  /** The text of the call's first input message after its instructions: where a summary stands. */
  readonly firstText: (call: C) => string
  /** The text of the call's last input message. */
  readonly lastText: (call: C) => string
  /** The tools the call offered, where the model records them (a summary call offers none); unchecked when absent. */
  readonly tools?: ((call: C) => ReadonlyArray<unknown> | undefined) | undefined
}

/**
 * The spec's ContextCompactionRunner case for a runner whose session has a small `compaction` window: starts
 * `sessionId` and sends `turns` user messages (`question <n>` and {@link COMPACTION_PAD}), waits until every
 * turn ended (`timeout`, 120 s by default), and asserts that no turn failed, that the session compacted more
 * than once (the snapshot's summary is the last summary call's answer, which the scripted model must give as
 * `summary <n>`, n counting the summary calls), that the second summary call starts with the first summary
 * and asks for the summary last (offering no tool), and that the call after each summary starts with it.
 * Returns the snapshot, the calls and the summary calls, for the runner's own checks (such as its token
 * estimate keeping every input inside the window). Run it in a session of {@link withRunnerSession} with
 * `flow.compaction` set.
 *
 * @category compaction
 * @since 0.1.0
 */
export const compactsLongSession = <C>(
  sessionId: string,
  turns: number,
  read: CompactionCalls<C>,
  timeout: Duration.Input = "120 seconds"
): Effect.Effect<
  {
    readonly snapshot: Wire.AgentSnapshot
    readonly calls: ReadonlyArray<C>
    readonly summaryCalls: ReadonlyArray<C>
  },
  unknown,
  AgentSessionClient.AgentSessionClient
> =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    yield* client.startSession(sessionId, { initialMessage: `question 1 ${COMPACTION_PAD}` })
    for (let n = 2; n <= turns; n++) {
      assert.isTrue(yield* client.sendUserMessage(sessionId, `question ${n} ${COMPACTION_PAD}`))
    }
    const snapshot = yield* awaitTurns(sessionId, turns, timeout)
    assert.isNull(snapshot.state?.lastTurnError)
    const calls = read.calls()
    const summaryCalls = calls.filter(read.isSummary)
    assert.isAtLeast(summaryCalls.length, 2, "the session compacted more than once")
    assert.strictEqual(snapshot.contextSummary?.generation, summaryCalls.length)
    assert.strictEqual(snapshot.contextSummary?.text, `summary ${summaryCalls.length}`)
    // the second summary call starts with the first summary, asks for the summary last, offers no tool
    const second = summaryCalls[1]!
    assert.strictEqual(read.firstText(second), `${Wire.CONTEXT_SUMMARY_PREFIX}\nsummary 1`)
    assert.strictEqual(read.lastText(second), Stepwise.SUMMARY_REQUEST_TEXT)
    if (read.tools !== undefined) assert.deepStrictEqual(read.tools(second) ?? [], [])
    // the call after each summary starts with it
    for (const [i, summary] of summaryCalls.entries()) {
      const next = calls[calls.indexOf(summary) + 1]!
      assert.isFalse(read.isSummary(next))
      assert.strictEqual(read.firstText(next), `${Wire.CONTEXT_SUMMARY_PREFIX}\nsummary ${i + 1}`)
    }
    return { snapshot, calls, summaryCalls }
  })

// ---------------------------------------------------------------------------------------------------------
// matrix case 1, for a runner's own versions of it
// ---------------------------------------------------------------------------------------------------------

/**
 * The script of matrix case 1 (session `m1`, first message `Weather in Paris?`): a text and a `get_weather`
 * call (`call_1`, Paris) with usage 10/3, the answer with usage 20/7, and the next turn's answer. A runner's
 * own version of the case (checking its framework's context besides) plays it, with its fields added to an
 * entry where it needs them.
 *
 * @category matrix case 1
 * @since 0.1.0
 */
export const READ_TOOL_TURN: ReadonlyArray<Response> = [
  {
    text: "Checking.",
    toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
    usage: { inputTokens: 10, outputTokens: 3 }
  },
  { text: "It is 21 degrees in Paris.", usage: { inputTokens: 20, outputTokens: 7 } },
  { text: "You are welcome." }
]

/**
 * The Step shape of {@link READ_TOOL_TURN}'s first turn for a runner with one model call per RunModel:
 * RunModel -> CallTool -> ResumeTurn -> RunModel.
 *
 * @category matrix case 1
 * @since 0.1.0
 */
export const READ_TOOL_TURN_STEPS: ReadonlyArray<string> = [
  "StartAgentSession",
  "RunModel",
  "CallTool",
  "ResumeTurn",
  "RunModel",
  "AwaitUserMessage"
]

/**
 * Matrix case 1's checks of the snapshot after {@link READ_TOOL_TURN}'s first turn: the stored messages (the
 * text, the call, its result, the answer) and the usage summed over its two model calls.
 *
 * @category matrix case 1
 * @since 0.1.0
 */
export const assertReadToolTurn = (first: Wire.AgentSnapshot): void => {
  assert.deepStrictEqual(
    first.messages.map((m) => [m.role, m.text, m.toolCallId, m.toolOutput]),
    [
      ["user", "Weather in Paris?", null, null],
      ["assistant", "Checking.", null, null],
      ["assistant", null, "call_1", null],
      ["tool", null, "call_1", '{"city":"Paris","temperature":21}'],
      ["assistant", "It is 21 degrees in Paris.", null, null]
    ]
  )
  assert.strictEqual(first.usage.modelCalls, 2)
  assert.strictEqual(first.usage.inputTokens, 30)
  assert.strictEqual(first.usage.outputTokens, 10)
}

/**
 * Options of the suites.
 *
 * @category models
 * @since 0.1.0
 */
export interface SuiteOptions {
  /** The engines to run on, by name; the embedded engine alone by default. */
  readonly engines?: Readonly<Record<string, EngineFactory>> | undefined
  /**
   * The bound of each wait of the matrix and control cases (a turn, an approval, a model call): 20 s by
   * default. A runner whose framework is a slow process (a CLI harness on a loaded machine) sets a longer one;
   * each of those tests then may take this bound and 90 s more.
   */
  readonly timeout?: Duration.Input | undefined
  /**
   * The matrix cases {@link matrixSuite} registers (all by default): a runner whose framework differs from the
   * suite's expectations where the spec allows, in a way {@link SuiteOptions.readsInline} does not cover,
   * registers the others and its own versions of the rest.
   */
  readonly matrixCases?: ReadonlyArray<MatrixCase> | undefined
  /**
   * The runner is a whole-turn harness that runs READ tools inline inside the RunModel, as the spec allows:
   * matrix cases 1, 2 and 3+7 then assert that shape (no CallTool Step and no record for a read, the model
   * calls before and after it in one RunModel); the messages, usage, results the model sees and idempotency
   * keys are asserted as for any runner. `false` by default.
   */
  readonly readsInline?: boolean | undefined
}

/**
 * A case of {@link matrixSuite}: the spec's matrix numbers, and the single-attempt write that throws.
 *
 * @category models
 * @since 0.1.0
 */
export type MatrixCase = "1" | "2" | "3+7" | "7" | "4" | "single-attempt-failure" | "8" | "10+11"

const MATRIX_CASES: ReadonlyArray<MatrixCase> = ["1", "2", "3+7", "7", "4", "single-attempt-failure", "8", "10+11"]

const enginesOf = (options: SuiteOptions | undefined): ReadonlyArray<readonly [string, EngineFactory]> =>
  Object.entries(options?.engines ?? { embedded: embeddedEngine })

/** The suite's waits with the bound of `options`, and `it.live` with the test timeout that goes with it. */
const waitsOf = (options: SuiteOptions | undefined) => {
  const timeout = options?.timeout
  const testTimeout = timeout === undefined ? undefined : Duration.toMillis(timeout) + 90_000
  return {
    eventually: <A, E, R>(effect: Effect.Effect<A, E, R>, predicate: (a: A) => boolean, what: string) =>
      eventually(effect, predicate, what, timeout),
    awaitSnapshot: (sessionId: string, predicate: (s: Wire.AgentSnapshot) => boolean, what: string) =>
      awaitSnapshot(sessionId, predicate, what, timeout),
    awaitTurns: (sessionId: string, turns: number) => awaitTurns(sessionId, turns, timeout),
    live: <A, E>(name: string, self: () => Effect.Effect<A, E, never>) => it.live(name, self, testTimeout)
  }
}

/**
 * The spec's matrix cases that run in one process, for every engine of `options`.
 *
 * @category suites
 * @since 0.1.0
 */
export const matrixSuite = (harness: RunnerHarness, options?: SuiteOptions): void => {
  for (const [engineName, engine] of enginesOf(options)) {
    const { awaitSnapshot, awaitTurns, live } = waitsOf(options)
    const selected = new Set<MatrixCase>(options?.matrixCases ?? MATRIX_CASES)
    const inline = options?.readsInline === true
    /** Registers the case when `options.matrixCases` selects it. */
    const matrixCase = <A, E>(id: MatrixCase, name: string, self: () => Effect.Effect<A, E, never>) => {
      if (selected.has(id)) live(name, self)
    }
    const session = <A, E>(
      script: ReadonlyArray<ScriptEntry>,
      body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>,
      sessionOptions?: SessionOptions
    ) => withSession(harness, engine, script, body, sessionOptions)

    describe(`${harness.name} on the ${engineName} engine: the session matrix`, () => {
      matrixCase(
        "1",
        inline
          ? "1. a READ tool runs inline: one RunModel makes both model calls; the history replays"
          : "1. two model calls and a READ tool: RunModel -> CallTool -> ResumeTurn -> RunModel; the history replays",
        () =>
          session(READ_TOOL_TURN, (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m1", { initialMessage: "Weather in Paris?" })
              const first = yield* awaitTurns("m1", 1)
              assert.deepStrictEqual(
                yield* stepShape("m1"),
                inline ? ["StartAgentSession", "RunModel", "AwaitUserMessage"] : READ_TOOL_TURN_STEPS
              )
              assert.strictEqual(kit.count("get_weather"), 1)
              assert.strictEqual(
                kit.player.calls().length,
                2,
                inline ? "two model calls in the one RunModel" : "one model call per RunModel"
              )
              assertReadToolTurn(first)
              if (inline) assert.deepStrictEqual(first.toolCalls, [], "an inline read has no record")
              assert.deepStrictEqual(kit.toolResults(1), { call_1: '{"city":"Paris","temperature":21}' })
              // the next turn replays the stored history
              assert.isTrue(yield* client.sendUserMessage("m1", "Thanks!"))
              yield* awaitTurns("m1", 2)
              const replay = kit.player.calls()[2]!
              assert.deepStrictEqual(replay.userTexts, ["Weather in Paris?", "Thanks!"])
              assert.deepStrictEqual(kit.toolResults(2), { call_1: '{"city":"Paris","temperature":21}' })
            })
          )
      )

      matrixCase(
        "2",
        inline
          ? "2. parallel calls of one response: the READs inline, the write in its own Step with its idempotency key"
          : "2. parallel tool calls of one response run as parallel Steps, with per-call idempotency keys",
        () =>
          session(
            [
              {
                toolCalls: [
                  { id: "a", name: "get_weather", arguments: { city: "Oslo" } },
                  { id: "b", name: "get_weather", arguments: { city: "Rome" } },
                  { id: "c", name: "save_note", arguments: { text: "x" } }
                ]
              },
              { text: "Done." }
            ],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("m2", { initialMessage: "both" })
                yield* awaitTurns("m2", 1)
                const shape = yield* stepShape("m2")
                // inline: one tool Step, for the write; the reads ran inside the first RunModel
                const toolSteps = inline ? ["CallTool"] : ["CallTool", "CallTool", "CallTool"]
                assert.deepStrictEqual(shape.slice(0, 2), ["StartAgentSession", "RunModel"])
                assert.deepStrictEqual(shape.slice(2, 2 + toolSteps.length).sort(), toolSteps)
                assert.deepStrictEqual(shape.slice(2 + toolSteps.length), [
                  "ResumeTurn",
                  "RunModel",
                  "AwaitUserMessage"
                ])
                assert.strictEqual(kit.count("get_weather"), 2)
                if (inline) assert.strictEqual(kit.count("save_note"), 1)
                assert.deepStrictEqual(Object.keys(kit.toolResults(1)).sort(), ["a", "b", "c"])
                const turnId = (yield* client.getSnapshot("m2")).messages[0]!.turnId
                assert.deepStrictEqual(kit.idempotencyKeys, [`m2/${turnId}/c`])
              })
          )
      )

      matrixCase(
        "3+7",
        inline
          ? "3+7. a write that needs approval waits beside an inline READ, runs once after approval; a second resolve is false"
          : "3+7. a write that needs approval waits beside a READ tool, runs once after approval; a second resolve is false",
        () =>
          session(
            [
              {
                toolCalls: [
                  { id: "w1", name: "send_email", arguments: { to: "ann" } },
                  { id: "r1", name: "get_weather", arguments: { city: "Oslo" } }
                ]
              },
              { text: "Sent." }
            ],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("m3", { initialMessage: "email ann" })
                yield* awaitSnapshot(
                  "m3",
                  (s) =>
                    (inline || s.toolCalls.some((c) => c.toolCallId === "r1" && c.status === "succeeded")) &&
                    s.pendingInterrupts.length === 1,
                  inline ? "the approval" : "the read result and the approval"
                )
                // inline: the read ran before the RunModel committed; it has no record
                if (inline) assert.strictEqual(kit.count("get_weather"), 1)
                assert.strictEqual(kit.count("send_email"), 0)
                assert.isTrue(yield* client.resolveInterrupt("m3", { interruptId: "w1", approved: true }))
                assert.isFalse(yield* client.resolveInterrupt("m3", { interruptId: "w1", approved: true }))
                yield* awaitTurns("m3", 1)
                assert.strictEqual(kit.count("send_email"), 1)
                assert.deepStrictEqual(kit.toolResults(1), {
                  w1: "sent to ann",
                  r1: '{"city":"Oslo","temperature":21}'
                })
                assert.isTrue((yield* stepShape("m3")).includes("CallSingleAttemptTool"))
              })
          )
      )

      matrixCase(
        "7",
        '7. an approval deadline rejects the call with "approval deadline passed"; resolving after it is false',
        () =>
          session(
            [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "cy" } }] }, { text: "Too late." }],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("m7", { initialMessage: "email cy" })
                yield* awaitTurns("m7", 1)
                assert.isFalse(yield* client.resolveInterrupt("m7", { interruptId: "w1", approved: true }))
                assert.strictEqual(kit.count("send_email"), 0)
                assert.deepStrictEqual(kit.toolResults(1), { w1: "approval deadline passed" })
              }),
            { interruptDeadline: "1 second" }
          )
      )

      matrixCase("4", "4. a rejected write never runs, and the model sees the rejection message", () =>
        session(
          [{ toolCalls: [{ id: "w1", name: "send_email", arguments: { to: "bob" } }] }, { text: "OK, I will not." }],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m4", { initialMessage: "email bob" })
              yield* awaitSnapshot("m4", (s) => s.pendingInterrupts.length === 1, "the approval")
              assert.isTrue(
                yield* client.resolveInterrupt("m4", {
                  interruptId: "w1",
                  approved: false,
                  rejectionMessage: "Not today."
                })
              )
              yield* awaitTurns("m4", 1)
              assert.strictEqual(kit.count("send_email"), 0)
              assert.deepStrictEqual(kit.toolResults(1), { w1: "Not today." })
            })
        )
      )

      matrixCase(
        "single-attempt-failure",
        "a single-attempt write whose tool throws records failed with the error, runs once, and the model sees it",
        () =>
          session(
            [{ toolCalls: [{ id: "f1", name: "flaky_write", arguments: {} }] }, { text: "It may have gone through." }],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("m5", { initialMessage: "do it" })
                yield* awaitSnapshot("m5", (s) => s.pendingInterrupts.length === 1, "the approval")
                assert.isTrue(yield* client.resolveInterrupt("m5", { interruptId: "f1", approved: true }))
                yield* awaitTurns("m5", 1)
                assert.strictEqual(kit.count("flaky_write"), 1)
                // a thrown error is a ToolExecutionError: recorded failed, not retried, visible to the model
                assert.include(kit.toolResults(1).f1, "the mail server hung up")
                assert.notStrictEqual(kit.toolResults(1).f1, Wire.OUTCOME_UNKNOWN_TEXT)
              }),
            { toolPolicies: { flaky_write: { effect: "non_idempotent_write", requiresApproval: true } } }
          )
      )

      matrixCase(
        "8",
        "8. a turn that fails after a write ran leaves the turn-failure note, and the write is not repeated",
        () =>
          session(
            [
              { toolCalls: [{ id: "n1", name: "save_note", arguments: { text: "hello" } }] },
              { fail: "provider down 1" },
              { fail: "provider down 2" },
              { fail: "provider down 3" },
              { text: "Recovered." }
            ],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("m8", { initialMessage: "save hello" })
                const failed = yield* awaitTurns("m8", 1)
                assert.strictEqual(kit.count("save_note"), 1)
                assert.include(failed.state?.lastTurnError ?? "", "provider down 3")
                const note = failed.messages[failed.messages.length - 1]!
                assert.isTrue(note.text?.startsWith(Wire.TURN_FAILURE_NOTE_HEADER))
                assert.include(note.text ?? "", "save_note")
                assert.isTrue(yield* client.sendUserMessage("m8", "and now?"))
                yield* awaitTurns("m8", 2)
                const last = kit.player.calls().at(-1)!
                assert.isTrue(
                  last.userTexts.some((t) => t.includes(Wire.TURN_FAILURE_NOTE_HEADER.slice(0, 20))),
                  "the next model call sees the turn-failure note"
                )
                assert.strictEqual(kit.count("save_note"), 1)
              })
          )
      )

      matrixCase(
        "10+11",
        "10+11. a message sent during a turn is queued and handled after it; the snapshot returns the conversation",
        () =>
          session([{ text: "First answer.", delay: "800 millis" }, { text: "Second answer." }], (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("m10", { initialMessage: "one" })
              yield* awaitSnapshot("m10", (s) => s.state?.activeTurnId !== null, "the first turn")
              assert.isTrue(yield* client.sendUserMessage("m10", "two"))
              const snapshot = yield* awaitTurns("m10", 2)
              assert.deepStrictEqual(
                snapshot.messages.map((m) => [m.role, m.text]),
                [
                  ["user", "one"],
                  ["assistant", "First answer."],
                  ["user", "two"],
                  ["assistant", "Second answer."]
                ]
              )
              assert.strictEqual(kit.player.calls().length, 2)
              assert.isFalse(yield* client.sendUserMessage("m10", "   "), "a blank message is refused")
            })
          )
      )
    })
  }
}

/** The ask_user call of the control suite. */
const ASK_USER_CALL = {
  id: "q1",
  name: "ask_user",
  arguments: { question: "Which city?", choices: ["Paris", "Rome"], allows_free_text: false }
} as const

/** The durable_wait call of the control suite. */
const DURABLE_WAIT_CALL = { id: "w1", name: "durable_wait", arguments: { seconds: 3600, reason: "cool down" } } as const

/**
 * The guards every runner keeps, for every engine of `options`: `cancel_turn` aborts the running model
 * call through the turn's `cancellationSignal` and the session stays open; ask_user and durable_wait are
 * offered only when the session enabled them, with the built-ins' own JSON Schemas, and their calls go to
 * the session's Steps (the runner's tools never see them).
 *
 * @category suites
 * @since 0.1.0
 */
export const controlSuite = (harness: RunnerHarness, options?: SuiteOptions): void => {
  for (const [engineName, engine] of enginesOf(options)) {
    const { eventually, awaitSnapshot, awaitTurns, live } = waitsOf(options)
    describe(`${harness.name} on the ${engineName} engine: turn controls and built-in tools`, () => {
      live(
        "cancel_turn aborts the running model call; the turn ends cancelled and the next message gets an answer",
        () =>
          withSession(
            harness,
            engine,
            [{ text: "never seen", delay: "10 minutes" }, { text: "Second answer." }],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                yield* client.startSession("c1", { initialMessage: "think hard" })
                yield* eventually(
                  Effect.sync(() => kit.player.calls().length),
                  (n) => n === 1,
                  "the model call"
                )
                assert.deepStrictEqual(kit.player.aborted(), [])
                // the scripted call waits ten minutes: a turn that ends at all shows the call was given up
                assert.isTrue(yield* client.cancelTurn("c1"))
                const done = yield* awaitTurns("c1", 1)
                yield* eventually(Effect.sync(kit.player.aborted), (a) => a.length === 1, "the model to see the abort")
                assert.strictEqual(done.state?.lastTurnError, null)
                assert.deepStrictEqual(
                  done.messages.map((m) => [m.role, m.text]),
                  [["user", "think hard"]]
                )
                const cancelled = (yield* allEvents("c1")).filter((e) => e.event.type === "turn_cancelled")
                assert.strictEqual(cancelled.length, 1)
                assert.deepStrictEqual(yield* stepShape("c1"), [
                  "StartAgentSession",
                  "RunModel",
                  "FinishTurnCancellation",
                  "ApplyTurnControl",
                  "AwaitUserMessage"
                ])
                assert.isTrue(yield* client.sendUserMessage("c1", "again"))
                const next = yield* awaitTurns("c1", 2)
                assert.strictEqual(next.messages.at(-1)?.text, "Second answer.")
                assert.strictEqual(kit.player.calls().length, 2)
                assert.deepStrictEqual(kit.player.aborted(), [0], "the second call ran to its end")
              })
          )
      )

      live("ask_user: offered when enabled, answered through answerQuestion, the turn resumes with the answer", () =>
        withSession(
          harness,
          engine,
          [{ toolCalls: [ASK_USER_CALL] }, { text: "Paris it is." }],
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("b1", { initialMessage: "plan a trip" })
              const waiting = yield* awaitSnapshot("b1", (s) => s.pendingInterrupts.length === 1, "the question")
              const interrupt = waiting.pendingInterrupts[0]!
              assert.deepStrictEqual(
                [interrupt.interruptId, interrupt.kind, interrupt.question, interrupt.choices],
                ["q1", "question", "Which city?", ["Paris", "Rome"]]
              )
              assert.isTrue(yield* client.answerQuestion("b1", { interruptId: "q1", answer: "Paris" }))
              const done = yield* awaitTurns("b1", 1)
              assert.deepStrictEqual(kit.toolResults(1), { q1: '{"status":"answered","answer":"Paris"}' })
              assert.strictEqual(done.messages.at(-1)?.text, "Paris it is.")
              assert.deepStrictEqual(yield* stepShape("b1"), [
                "StartAgentSession",
                "RunModel",
                "AwaitQuestionAnswer",
                "ResumeTurn",
                "RunModel",
                "AwaitUserMessage"
              ])
              const offered = [...kit.player.calls()[0]!.offeredTools].sort()
              assert.deepStrictEqual(offered, [
                "ask_user",
                "durable_wait",
                "flaky_write",
                "get_weather",
                "save_note",
                "send_email"
              ])
            }),
          { builtInTools: ["ask_user", "durable_wait"] }
        )
      )

      live(
        "durable_wait: a durable timer that SkipTimer ends; a built-in the session did not enable is not offered",
        () =>
          withSession(
            harness,
            engine,
            [{ toolCalls: [DURABLE_WAIT_CALL] }, { text: "Done waiting." }],
            (kit) =>
              Effect.gen(function* () {
                const client = yield* AgentSessionClient.AgentSessionClient
                const engineClient = yield* Client.Client
                yield* client.startSession("b2", { initialMessage: "wait an hour" })
                yield* awaitSnapshot("b2", (s) => s.toolCalls.some((c) => c.status === "waiting_for_timer"), "the wait")
                assert.include(kit.player.calls()[0]!.offeredTools, "durable_wait")
                assert.notInclude(kit.player.calls()[0]!.offeredTools, "ask_user")
                const steps = yield* engineClient.stepExecutions("b2").pipe(
                  Effect.repeat({
                    schedule: Schedule.spaced("30 millis"),
                    until: (steps) => steps.some((s) => s.stepType === "AwaitTimer" && s.status === "waiting")
                  })
                )
                const timer = steps.find((s) => s.stepType === "AwaitTimer" && s.status === "waiting")!
                assert.isTrue(yield* engineClient.skipTimer("b2", timer.stepExecutionId, 0))
                const done = yield* awaitTurns("b2", 1)
                const result = JSON.parse(kit.toolResults(1).w1!) as { status: string; reason: string }
                assert.strictEqual(result.status, "completed")
                assert.strictEqual(result.reason, "cool down")
                assert.strictEqual(done.messages.at(-1)?.text, "Done waiting.")
                assert.strictEqual(kit.count("get_weather") + kit.count("save_note"), 0)
              }),
            { builtInTools: ["durable_wait"] }
          )
      )

      live("no built-in is offered when the session enables none", () =>
        withSession(harness, engine, [{ text: "Hi." }], (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("b3", { initialMessage: "hello" })
            yield* awaitTurns("b3", 1)
            const offered = kit.player.calls()[0]!.offeredTools
            for (const d of BuiltInTools.definitions) assert.notInclude(offered, d.name)
            assert.strictEqual(kit.player.calls().length, 1)
          })
        )
      )
    })
  }
}

// ---------------------------------------------------------------------------------------------------------
// kill tests
// ---------------------------------------------------------------------------------------------------------

const KILL_FLOW_TYPE = "RunnerConformanceProcessAgent"

/**
 * The worker process of {@link killSuite}: call it from a script of your own (the harness's module) and
 * pass that script's path to `killSuite`. A runner's own kill tests may start it the same way.
 *
 *   node <script> <engine target> <side-effect file> <command> [args...]
 *
 * The target is a SQLite file (the embedded engine) or a `postgres://` URL (a cluster runner on a free
 * port of 127.0.0.1).
 * Commands: `start <sessionId> <text>` then serve (it prints `INTERRUPT_PENDING <id>` once the snapshot
 * shows a pending approval); `approve <sessionId> <interruptId> <turns>` approves, then awaits;
 * `await <sessionId> <turns>` serves until <turns> turns ended, prints `RESULT <json>` and exits. The
 * script answers from the prompt, so a restarted worker answers the same way: the last line starting with
 * `call ` of the last user message, `call <tool> [<tool>...]`, asks for those tools (IDs `<tool>-<n>`, n
 * the user message count); a prompt ending with tool results gets `done: <tool>=<output> | ...`, sorted
 * by tool name. Every model call appends `model <n>` (n: the user messages it saw) to the side-effect file
 * and every tool run its name, before the marker a parent kills on. `SLOW_TOOL_MS` makes `charge` and
 * `send_email` sleep after `TOOL_STARTED`; `SLOW_MODEL_MS` makes a model call that follows tool results
 * sleep; `STEP_DURABILITY=async` starts the session with an ASYNC Step durability default.
 *
 * @category kill tests
 * @since 0.1.0
 */
export const killWorker = (harness: RunnerHarness, argv: ReadonlyArray<string> = process.argv.slice(2)): void => {
  const [target, sideFile, command, ...args] = argv
  const slowTool = Number(process.env.SLOW_TOOL_MS ?? "0")
  const slowModel = Number(process.env.SLOW_MODEL_MS ?? "0")
  const say = (line: string) => process.stdout.write(`${line}\n`)
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  const answer = (view: ModelCallView): Response => {
    appendFileSync(sideFile!, `model ${view.userTexts.length}\n`)
    say("MODEL_CALLED")
    if (view.lastToolResults.length > 0) {
      const results = [...view.lastToolResults].sort((a, b) => a.toolName.localeCompare(b.toolName))
      return {
        text: `done: ${results.map((r) => `${r.toolName}=${r.text}`).join(" | ")}`,
        ...(slowModel > 0 ? { delay: `${slowModel} millis` } : {})
      }
    }
    const text = view.userTexts.at(-1) ?? ""
    const line = text.split("\n").findLast((l) => l.startsWith("call ")) ?? ""
    if (line !== "") {
      const turn = view.userTexts.length
      return {
        toolCalls: line
          .slice(5)
          .split(" ")
          .map((name) => ({ id: `${name}-${turn}`, name, arguments: {} }))
      }
    }
    return { text: "ok" }
  }
  const tool = (name: string, effect: Wire.ToolEffect, slow: boolean): SuiteTool => ({
    name,
    description: `${name} (test tool)`,
    parameters: objectSchema({}),
    effect,
    execute: async () => {
      // the side effect first, then the marker the parent kills on
      appendFileSync(sideFile!, `${name}\n`)
      say(`TOOL_STARTED ${name}`)
      if (slow && slowTool > 0) await sleep(slowTool)
      return `${name} ran`
    }
  })
  const flow = AgentSessionFlow.make({
    flowType: KILL_FLOW_TYPE,
    retryInitialInterval: "200 millis",
    toolPolicies: { charge: { effect: "non_idempotent_write", requiresApproval: false } }
  })
  const runner = harness.make({
    player: player(Array.from({ length: 50 }, () => answer)),
    tools: [
      tool("read_file", "read", false),
      tool("send_email", "non_idempotent_write", true),
      tool("charge", "non_idempotent_write", true)
    ]
  })
  const worker = Layer.mergeAll(
    AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(runner)),
    AgentSessionClient.layer(flow.type)
  ).pipe(Layer.provideMerge(workerEngine(target!)))
  const program = Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    const engine = yield* Client.Client
    say(`READY ${process.pid}`)
    const [sessionId, arg] = args
    if (command === "start") {
      const durability = process.env.STEP_DURABILITY === "async" ? "async" : "sync"
      yield* client.startSession(sessionId!, { initialMessage: arg!, stepDurability: durability })
      say(`DONE ${command}`)
      const waiting = yield* client
        .getSnapshot(sessionId!)
        .pipe(
          Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (s) => s.pendingInterrupts.length > 0 }),
          Effect.timeoutOption("10 minutes")
        )
      if (waiting._tag === "Some") say(`INTERRUPT_PENDING ${waiting.value.pendingInterrupts[0]!.interruptId}`)
      return yield* Effect.never
    }
    if (command === "approve") {
      const ok = yield* client.resolveInterrupt(sessionId!, { interruptId: arg!, approved: true })
      say(`APPROVED ${ok}`)
    }
    if (command === "await" || command === "approve") {
      const turns = Number(command === "await" ? arg : args[2])
      const snapshot = yield* client.getSnapshot(sessionId!).pipe(
        Effect.repeat({
          schedule: Schedule.spaced("50 millis"),
          until: (s) => s.state !== null && s.state.turnCount >= turns && s.state.activeTurnId === null
        })
      )
      const steps = yield* engine.stepExecutions(sessionId!)
      say(`RESULT ${JSON.stringify({ snapshot, steps })}`)
      process.stderr.write(`${yield* Inspect.renderHistory(sessionId!)}\n`)
      return
    }
    say(`DONE ${command}`)
    return yield* Effect.never
  })
  Effect.runPromise(program.pipe(Effect.provide(worker), Effect.scoped) as Effect.Effect<void>).then(
    () => process.exit(0),
    (error) => {
      say(`ERROR ${String(error)}`)
      process.exit(1)
    }
  )
}

/** A free TCP port on 127.0.0.1, for a cluster runner's address. */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** The worker's engine: embedded on a SQLite file, or a cluster runner on a Postgres URL. */
const workerEngine = (target: string): Layer.Layer<Engine.EngineServices, unknown> =>
  target.startsWith("postgres://")
    ? Layer.unwrap(
        Effect.map(Effect.promise(freePort), (runnerPort) =>
          Engine.layerCluster({ url: target, runnerPort, pollInterval: "50 millis", maxConcurrentTasks: 64 })
        )
      )
    : Engine.layerEmbedded({ filename: target, pollInterval: "50 millis", maxConcurrentTasks: 64 })

/**
 * Where a kill test's worker processes keep the engine: a SQLite file path, or a `postgres://` URL of a
 * fresh database the scope drops.
 *
 * @category models
 * @since 0.1.0
 */
export type KillTarget = Effect.Effect<string, unknown, Scope.Scope>

/**
 * The default kill-test target: a fresh SQLite file for the embedded engine.
 *
 * @category constructors
 * @since 0.1.0
 */
export const embeddedTarget: KillTarget = Effect.sync(() => join(dir, `kill-${process.pid}-${++files}.db`))

/**
 * Options of {@link killSuite}.
 *
 * @category models
 * @since 0.1.0
 */
export interface KillSuiteOptions {
  /** The engine targets by name; a fresh SQLite file (the embedded engine) alone by default. */
  readonly targets?: Readonly<Record<string, KillTarget>> | undefined
}

/** A restarted worker first waits for the engine to declare the killed one lost: allow a loaded machine time. */
const RESULT_WAIT_MS = 90_000
const KILL_TEST_TIMEOUT = { timeout: 150_000 }

interface KillResult {
  readonly snapshot: { readonly messages: ReadonlyArray<{ readonly role: string; readonly text: string | null }> }
  readonly steps: ReadonlyArray<{
    readonly stepType: string
    readonly attempts: ReadonlyArray<{ readonly errorType: string | null }>
  }>
}

/**
 * The matrix cases that need a SIGKILL of the worker (3 with a restart, 5, 6, 9). `workerFile` is a script
 * that calls {@link killWorker} with the harness; each test starts it in its own process group, kills it
 * with SIGKILL at a marker the worker prints after it recorded its side effect, and restarts it on the same
 * database.
 *
 * @category suites
 * @since 0.1.0
 */
export const killSuite = (harness: RunnerHarness, workerFile: string, options?: KillSuiteOptions): void => {
  const killDir = mkdtempSync(join(tmpdir(), "das-runner-kit-kill-"))
  afterAll(() => rmSync(killDir, { recursive: true, force: true }))
  let n = 0
  const lines = fileLines
  const start = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => spawnNode(workerFile, args, env)
  const awaitLines = (file: string, count: number) =>
    Effect.gen(function* () {
      for (let i = 0; i < 600 && lines(file).length < count; i++) yield* Effect.sleep("50 millis")
      return lines(file)
    })
  const recordedBeforeMarker = (file: string, line: string) =>
    assert.include(lines(file), line, `the worker printed the marker before it recorded ${line}`)
  for (const [targetName, target] of Object.entries(options?.targets ?? { embedded: embeddedTarget })) {
    const files = () => Effect.map(target, (db) => ({ db, side: join(killDir, `side-${++n}.log`) }))
    const killedDuringSingleAttemptWrite = (durability: "sync" | "async") =>
      Effect.gen(function* () {
        const { db, side } = yield* files()
        const first = yield* start([db, side, "start", "s", "call charge"], {
          SLOW_TOOL_MS: "60000",
          ...(durability === "async" ? { STEP_DURABILITY: "async" } : {})
        })
        yield* first.waitFor("TOOL_STARTED charge")
        recordedBeforeMarker(side, "charge")
        yield* first.kill()
        const second = yield* start([db, side, "await", "s", "1"])
        const result: KillResult = JSON.parse(yield* second.waitFor("RESULT", RESULT_WAIT_MS))
        assert.deepStrictEqual(
          lines(side).filter((l) => l === "charge"),
          ["charge"],
          "the write ran once"
        )
        assert.strictEqual(
          result.snapshot.messages[result.snapshot.messages.length - 1]!.text,
          `done: charge=${Wire.OUTCOME_UNKNOWN_TEXT}`
        )
        return result
      })

    describe(`${harness.name} on the ${targetName} engine: SIGKILL of the worker`, () => {
      it.live(
        "5. killed during CallSingleAttemptTool: outcome_unknown, the tool does not run again, the model sees it",
        () =>
          Effect.gen(function* () {
            const result = yield* killedDuringSingleAttemptWrite("sync")
            assert.deepStrictEqual(
              result.steps.map((s) => s.stepType),
              [
                "StartAgentSession",
                "RunModel",
                "CallSingleAttemptTool",
                "ResumeTurn",
                "RecordToolOutcomeUnknown",
                "RunModel",
                "AwaitUserMessage"
              ]
            )
            const call = result.steps.find((s) => s.stepType === "CallSingleAttemptTool")!
            assert.deepStrictEqual(
              call.attempts.map((a) => a.errorType),
              ["WorkerLost"],
              "one attempt, lost with its worker"
            )
          }),
        KILL_TEST_TIMEOUT
      )

      it.live(
        "9. a session started with an ASYNC Step durability default never reruns a single-attempt write",
        () =>
          Effect.gen(function* () {
            const result = yield* killedDuringSingleAttemptWrite("async")
            assert.isTrue(result.steps.some((s) => s.stepType === "RecordToolOutcomeUnknown"))
          }),
        KILL_TEST_TIMEOUT
      )

      it.live(
        "6. killed during RunModel: only that model call runs again",
        () =>
          Effect.gen(function* () {
            const { db, side } = yield* files()
            const first = yield* start([db, side, "start", "s", "call read_file"], { SLOW_MODEL_MS: "60000" })
            yield* first.waitFor("TOOL_STARTED read_file")
            recordedBeforeMarker(side, "read_file")
            // the second model call (after the tool result) hangs: kill it there
            assert.deepStrictEqual(yield* awaitLines(side, 3), ["model 1", "read_file", "model 1"])
            yield* first.kill()
            const second = yield* start([db, side, "await", "s", "1"])
            const result: KillResult = JSON.parse(yield* second.waitFor("RESULT", RESULT_WAIT_MS))
            assert.deepStrictEqual(
              lines(side),
              ["model 1", "read_file", "model 1", "model 1"],
              "one more model call, no tool rerun"
            )
            assert.deepStrictEqual(
              result.steps.map((s) => s.stepType),
              ["StartAgentSession", "RunModel", "CallTool", "ResumeTurn", "RunModel", "AwaitUserMessage"]
            )
            assert.strictEqual(
              result.snapshot.messages[result.snapshot.messages.length - 1]!.text,
              "done: read_file=read_file ran"
            )
          }),
        KILL_TEST_TIMEOUT
      )

      it.live(
        "3. an approval waiting beside a READ tool survives a restart and the write runs once after approval",
        () =>
          Effect.gen(function* () {
            const { db, side } = yield* files()
            const first = yield* start([db, side, "start", "s", "call send_email read_file"])
            yield* first.waitFor("TOOL_STARTED read_file")
            recordedBeforeMarker(side, "read_file")
            yield* Effect.sleep("500 millis")
            yield* first.kill()
            assert.notInclude(lines(side), "send_email", "nothing ran the write while it waited")
            const approver = yield* start([db, side, "approve", "s", "send_email-1", "1"])
            assert.strictEqual(yield* approver.waitFor("APPROVED", RESULT_WAIT_MS), "true")
            const result: KillResult = JSON.parse(yield* approver.waitFor("RESULT", RESULT_WAIT_MS))
            const runs = lines(side).filter((l) => !l.startsWith("model"))
            assert.deepStrictEqual(
              runs.filter((l) => l === "send_email"),
              ["send_email"],
              "the write ran once, after the approval"
            )
            // a READ call may run again when a kill lands before its result commits
            assert.isAtLeast(runs.filter((l) => l === "read_file").length, 1)
            assert.strictEqual(
              result.snapshot.messages[result.snapshot.messages.length - 1]!.text,
              "done: read_file=read_file ran | send_email=send_email ran"
            )
          }),
        KILL_TEST_TIMEOUT
      )
    })
  }
}

/**
 * The whole suite: {@link matrixSuite}, {@link controlSuite} and, with `workerFile`, {@link killSuite}
 * (on `targets`).
 *
 * @category suites
 * @since 0.1.0
 */
export const runnerSuite = (
  harness: RunnerHarness,
  options?: SuiteOptions & KillSuiteOptions & { readonly workerFile?: string | undefined }
): void => {
  matrixSuite(harness, options)
  controlSuite(harness, options)
  if (options?.workerFile !== undefined) killSuite(harness, options.workerFile, options)
}
