/**
 * The durable agent session Flow in Step mode: one Flow per session, every model call a RunModel Step,
 * every tool call its own CallTool or CallSingleAttemptTool Step (parallel calls as parallel Steps),
 * approvals as durable waits, and a ResumeTurn Step that waits for every result before the next model call.
 *
 * `make` builds the engine Flow definition from options; `layerWorker` registers session Flows on a worker.
 * The runner (`AgentFrameworkRunner`, e.g. `Stepwise.layer(agent)`) and its services are provided to the
 * worker layer, so a child process builds a worker with the same two calls.
 *
 * @example
 * ```ts
 * const flow = AgentSessionFlow.make({ flowType: "TriageAgent" })
 * const worker = AgentSessionFlow.layerWorker(flow).pipe(
 *   Layer.provide(Stepwise.layer({ name: "triage", instructions: "Be brief." })),
 *   Layer.provide(ModelClient.layerScripted([{ text: "Hello!" }])),
 *   Layer.provide(ToolSource.layer([])),
 *   Layer.provideMerge(Engine.layerEmbedded({ filename: "agent.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 */
import { availableParallelism } from "node:os"
import { Flow, type FlowDef, type StreamDef, Worker } from "@durable-agent/engine"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { AgentSessionDefinitionError } from "./Errors.ts"
import { defaultMessageStorage, type MessageStorageOptions, messageStorageProblem } from "./internal/messages.ts"
import { makeRpcs, type SessionRpcs } from "./internal/rpcs.ts"
import type { StartInput } from "./internal/schemas.ts"
import { makeSteps, type SessionSteps } from "./internal/steps/index.ts"
import * as P from "./Persistence.ts"
import { DEFAULT_TOOL_EFFECT, type ToolPolicy } from "./Policy.ts"
import { AgentFrameworkRunner, type AgentFrameworkRunnerShape, isContextCompactionRunner } from "./Runner.ts"
import * as Wire from "./wire/index.ts"

/**
 * The input of a session Flow's start Step (`AgentSessionStartInput` on the wire). The session decodes
 * `session_settings` as any JSON value and force-fails the session when they are not valid settings.
 *
 * @category models
 * @since 0.1.0
 */
export type AgentSessionStartInput = StartInput

/**
 * Context compaction (`CompactionPolicy`): the model's window in tokens, the share of it at which RunModel
 * compacts (`triggerRatio`, 0.85) and the share of it that stays unsummarized after a compaction
 * (`retainedRatio`, 0.3). Build it with {@link CompactionPolicy}.
 *
 * @category models
 * @since 0.1.0
 */
export interface CompactionPolicy {
  readonly contextWindowTokens: number
  readonly triggerRatio: number
  readonly retainedRatio: number
}

/**
 * A {@link CompactionPolicy} with the spec's defaults: `triggerRatio` 0.85, `retainedRatio` 0.3.
 *
 * @example
 * ```ts
 * const flow = AgentSessionFlow.make({
 *   flowType: "SupportAgent",
 *   compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: 128_000 })
 * })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const CompactionPolicy = (options: {
  readonly contextWindowTokens: number
  readonly triggerRatio?: number | undefined
  readonly retainedRatio?: number | undefined
}): CompactionPolicy => ({
  contextWindowTokens: options.contextWindowTokens,
  triggerRatio: options.triggerRatio ?? 0.85,
  retainedRatio: options.retainedRatio ?? 0.3
})

/** The problem of a compaction policy, or `undefined` when it is valid. */
const compactionProblem = (policy: CompactionPolicy): string | undefined => {
  if (!Number.isInteger(policy.contextWindowTokens) || policy.contextWindowTokens < 1) {
    return "compaction.contextWindowTokens must be a whole number of at least 1"
  }
  if (!(policy.triggerRatio > 0 && policy.triggerRatio <= 1)) return "compaction.triggerRatio must be in (0, 1]"
  if (!(policy.retainedRatio >= 0 && policy.retainedRatio < policy.triggerRatio)) {
    return "compaction.retainedRatio must be at least 0 and below triggerRatio"
  }
  return undefined
}

/**
 * Options of a session Flow.
 *
 * @category models
 * @since 0.1.0
 */
export interface AgentSessionOptions<Id = AgentFrameworkRunner> {
  /** The Flow type; one per agent. */
  readonly flowType: string
  /** Per-tool-name overrides of the effect class and approval. */
  readonly toolPolicies?: Readonly<Record<string, ToolPolicy>> | undefined
  /** The effect of tools without a policy or framework metadata; default `unclassified`. */
  readonly defaultToolEffect?: Wire.ToolEffect | undefined
  /** How long an approval waits before it is rejected with `approval deadline passed`; none by default. */
  readonly interruptDeadline?: Duration.Input | null | undefined
  /** {@link interruptDeadline} in milliseconds, the spec's TypeScript option; `interruptDeadline` wins when both are set. */
  readonly interruptDeadlineMs?: number | null | undefined
  /** Byte capacity of `AgentEvents` for this Flow type; default 10 MiB. */
  readonly eventsCapacityBytes?: number | undefined
  /** First retry delay of RunModel and CallTool; default 1 second. */
  readonly retryInitialInterval?: Duration.Input | undefined
  /** How often RunModel and tool Steps heartbeat while they work; default 20 seconds. */
  readonly heartbeatInterval?: Duration.Input | undefined
  /**
   * The service key of the runner; default {@link AgentFrameworkRunner}. Give each agent of one worker its
   * own key to run several agents (Flow types) with different runners in one process.
   */
  readonly runner?: Context.Key<Id, AgentFrameworkRunnerShape> | undefined
  /**
   * The built-in tools the model may call: `ask_user`, `durable_wait`, `write_todos` (see `BuiltInTools`).
   * Their names are reserved while enabled. None by default.
   */
  readonly builtInTools?: ReadonlyArray<Wire.BuiltInToolName> | undefined
  /**
   * Plan mode (`plan_mode_enabled`): a message sent with `planMode` starts a planning turn, in which the model
   * may only call `write_todos` and writes a draft plan; `execute_plan` approves a revision and starts an
   * executing turn. Needs `write_todos` in {@link builtInTools} (`make` throws otherwise) and a runner whose
   * `supportsPlanMode` is true ({@link layerWorker} fails otherwise). Off by default.
   */
  readonly planModeEnabled?: boolean | undefined
  /** The longest `durable_wait`; default 7 days. */
  readonly maxDurableWait?: Duration.Input | undefined
  /** {@link maxDurableWait} in milliseconds, the spec's TypeScript option; `maxDurableWait` wins when both are set. */
  readonly maxDurableWaitMs?: number | undefined
  /**
   * Message storage ("Message storage" in docs/session-contract.md): how many messages the window of
   * `AgentMessages` keeps (`messageWindowSize`, 64) before the oldest move into immutable `AgentMessageChunks`
   * of at most `messageChunkSize` (32) messages and `messageChunkMaxBytes` (1 MiB, at most 8 MiB) each.
   */
  readonly messageStorage?: Partial<MessageStorageOptions> | undefined
  /**
   * Context compaction (`AgentSessionOptions.compaction`): before each model call RunModel asks the runner for
   * the input's size and, at `triggerRatio` of the window, summarizes the older messages in a CompactContext
   * Step; with `messageStorage.retainedMessageLimit` (1,000 by default) retention then deletes whole chunks
   * behind the summary. Needs a runner with the compaction capability (`Runner.ContextCompactionRunner`);
   * {@link layerWorker} fails for one without it. Off by default.
   */
  readonly compaction?: CompactionPolicy | undefined
}

/**
 * A session Flow definition: an engine `FlowDef` (register it with `Worker.layer` or {@link layerWorker}),
 * plus its Steps, RPCs and event Stream for direct use.
 *
 * @category models
 * @since 0.1.0
 */
export interface AgentSessionFlowDef<R = AgentFrameworkRunner> extends FlowDef<AgentSessionStartInput, R> {
  readonly session: {
    readonly steps: SessionSteps<R>
    readonly rpcs: SessionRpcs
    readonly events: StreamDef<Wire.AgentEventEnvelope>
    readonly toolPolicies: Readonly<Record<string, ToolPolicy>>
    readonly defaultToolEffect: Wire.ToolEffect
    /** Whether plan mode is enabled ({@link AgentSessionOptions.planModeEnabled}). */
    readonly planModeEnabled: boolean
    /** The runner's service key. */
    readonly runner: Context.Key<R, AgentFrameworkRunnerShape>
    /** The compaction policy ({@link AgentSessionOptions.compaction}), or `null` without compaction. */
    readonly compaction: CompactionPolicy | null
  }
}

const toolEffects = new Set<string>(Wire.ToolEffect.literals)

/**
 * Builds the session Flow. Throws {@link AgentSessionDefinitionError} for invalid options.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <Id = AgentFrameworkRunner>(options: AgentSessionOptions<Id>): AgentSessionFlowDef<Id> => {
  const fail = (message: string) => {
    throw new AgentSessionDefinitionError({ message })
  }
  if (options.flowType.length === 0 || options.flowType.includes("/")) {
    fail(`invalid flowType ${JSON.stringify(options.flowType)}`)
  }
  const defaultToolEffect = options.defaultToolEffect ?? DEFAULT_TOOL_EFFECT
  if (!toolEffects.has(defaultToolEffect)) fail(`invalid defaultToolEffect ${JSON.stringify(defaultToolEffect)}`)
  const toolPolicies = { ...options.toolPolicies }
  for (const [name, policy] of Object.entries(toolPolicies)) {
    if (!toolEffects.has(policy.effect)) fail(`tool policy of ${name}: invalid effect ${JSON.stringify(policy.effect)}`)
  }
  const interruptDeadline =
    options.interruptDeadline !== undefined ? options.interruptDeadline : options.interruptDeadlineMs
  const deadline =
    interruptDeadline === undefined || interruptDeadline === null
      ? null
      : Duration.toMillis(Duration.fromInputUnsafe(interruptDeadline))
  if (deadline !== null && !(deadline >= 0)) fail("interruptDeadline must not be negative")
  const builtInTools = new Set<string>(options.builtInTools ?? [])
  for (const name of builtInTools) {
    if (!(Wire.BuiltInToolName.literals as ReadonlyArray<string>).includes(name)) {
      fail(`unknown built-in tool ${JSON.stringify(name)}`)
    }
  }
  const maxDurableWaitSeconds = Math.floor(
    Duration.toMillis(Duration.fromInputUnsafe(options.maxDurableWait ?? options.maxDurableWaitMs ?? "7 days")) / 1000
  )
  if (!(maxDurableWaitSeconds >= 1)) fail("maxDurableWait must be at least 1 second")
  const planModeEnabled = options.planModeEnabled === true
  if (planModeEnabled && !builtInTools.has("write_todos")) {
    fail(PLAN_MODE_NEEDS_WRITE_TODOS)
  }
  const messageStorage: MessageStorageOptions = { ...defaultMessageStorage, ...options.messageStorage }
  const storageProblem = messageStorageProblem(messageStorage)
  if (storageProblem !== undefined) fail(storageProblem)
  const compaction = options.compaction === undefined ? null : CompactionPolicy(options.compaction)
  const policyProblem = compaction === null ? undefined : compactionProblem(compaction)
  if (policyProblem !== undefined) fail(policyProblem)
  const runner = options.runner ?? (AgentFrameworkRunner as unknown as Context.Key<Id, AgentFrameworkRunnerShape>)
  const events = P.agentEvents(options.eventsCapacityBytes)
  const { steps } = makeSteps({
    flowType: options.flowType,
    toolPolicies,
    defaultToolEffect,
    approvalDeadlineMs: deadline,
    events,
    runner,
    heartbeatInterval: Duration.fromInputUnsafe(options.heartbeatInterval ?? "20 seconds"),
    retryInitialInterval: options.retryInitialInterval ?? "1 second",
    builtInTools,
    maxDurableWaitSeconds,
    planModeEnabled,
    messageStorage,
    compaction
  })
  const rpcs = makeRpcs(steps, { planModeEnabled })
  const flow = Flow<AgentSessionStartInput, Id>({
    type: options.flowType,
    start: steps.StartAgentSession,
    steps: Object.values(steps),
    attributes: [...P.attributes],
    channels: [...P.channels],
    streams: [events],
    rpcs: Object.values(rpcs)
  })
  return {
    ...flow,
    session: { steps, rpcs, events, toolPolicies, defaultToolEffect, planModeEnabled, runner, compaction }
  }
}

/**
 * Why `make` refuses `planModeEnabled`: plan mode needs the `write_todos` built-in.
 *
 * @category constants
 * @since 0.1.0
 */
export const PLAN_MODE_NEEDS_WRITE_TODOS = "planModeEnabled needs write_todos in builtInTools"

/**
 * Why {@link layerWorker} refuses a session Flow with plan mode: its runner does not support plan mode.
 *
 * @category constants
 * @since 0.1.0
 */
export const planModeNeedsRunnerSupport = (flowType: string): string =>
  `planModeEnabled needs a runner whose supportsPlanMode is true (Flow type ${flowType})`

/**
 * Why {@link layerWorker} refuses a session Flow with compaction: its runner lacks the compaction capability
 * (`estimateInputTokens`, `selectCompactionCutoff` and `summarizeContext`).
 *
 * @category constants
 * @since 0.1.0
 */
export const compactionNeedsRunnerSupport = (flowType: string): string =>
  `compaction needs a runner with the compaction capability: estimateInputTokens, selectCompactionCutoff and summarizeContext (Flow type ${flowType})`

const isSessionFlow = (flow: FlowDef<any, any>): flow is AgentSessionFlowDef<unknown> => "session" in flow

/**
 * Checks the runners of session Flows: with plan mode each must set `supportsPlanMode`, with compaction each
 * must have the compaction capability. The runner comes from the worker's services, so this is where the
 * Flow's definition meets its runner. A runner that is missing is left to the worker, which needs it anyway.
 *
 * @category constructors
 * @since 0.1.0
 */
export const checkRunners = (
  flows: ReadonlyArray<FlowDef<any, any>>
): Effect.Effect<void, AgentSessionDefinitionError> =>
  Effect.forEach(
    flows.filter(isSessionFlow).filter((flow) => flow.session.planModeEnabled || flow.session.compaction !== null),
    (flow) =>
      Effect.flatMap(Effect.serviceOption(flow.session.runner), (runner) =>
        Option.isNone(runner)
          ? Effect.void
          : flow.session.planModeEnabled && runner.value.supportsPlanMode !== true
            ? Effect.fail(new AgentSessionDefinitionError({ message: planModeNeedsRunnerSupport(flow.type) }))
            : flow.session.compaction !== null && !isContextCompactionRunner(runner.value)
              ? Effect.fail(new AgentSessionDefinitionError({ message: compactionNeedsRunnerSupport(flow.type) }))
              : Effect.void
      ),
    { discard: true }
  )

/**
 * The agent worker's default task limit: 8 slots per CPU, at least 16. A session's model calls and most tool
 * calls wait on the network, so an agent worker needs more task slots than the engine's default (the CPU
 * count; the deploy guide: "agent Workers usually need a higher maxConcurrentTasks"). {@link layerWorker}
 * applies it when the engine layer was given no `maxConcurrentTasks`; a limit the application sets wins.
 * The session's bookkeeping Steps run in the runner's control slots (`EngineConfig.maxControlTasks`), so
 * they never wait behind these.
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_MAX_CONCURRENT_TASKS: number = Math.max(16, 8 * availableParallelism())

/**
 * The agent worker's default control slots: as many as its task slots (8 per CPU, at least 16). The session's
 * bookkeeping Steps (AwaitUserMessage, ResumeTurn and the other decisions) are control Steps, one or two in every
 * turn of every session, and a control Step holds its slot until its start is recorded: with the engine's
 * default (the CPU count, at least 2), 100 sessions at once queued their bookkeeping behind 2 slots, each queued
 * Step recording its start in a commit of its own. {@link layerWorker} applies it when the engine layer was given
 * no `maxControlTasks`; a limit the application sets wins.
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_MAX_CONTROL_TASKS: number = DEFAULT_MAX_CONCURRENT_TASKS

/**
 * Registers session Flows (and any other Flows) on a worker. Provide their runners and services to it. Fails
 * with {@link AgentSessionDefinitionError} when a session Flow enables plan mode or compaction and its runner
 * does not support it (see {@link checkRunners}). Unless the engine layer was given `maxConcurrentTasks`, the
 * runner gets {@link DEFAULT_MAX_CONCURRENT_TASKS} task slots, and unless it was given `maxControlTasks`,
 * {@link DEFAULT_MAX_CONTROL_TASKS} control slots.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerWorker = <const Flows extends ReadonlyArray<FlowDef<any, any>>>(
  ...flows: Flows
): Layer.Layer<
  never,
  Layer.Error<WorkerLayer<Flows>> | AgentSessionDefinitionError,
  Layer.Services<WorkerLayer<Flows>>
> =>
  Worker.layer(...flows).pipe(
    Layer.provide(Layer.effectDiscard(checkRunners(flows))),
    Layer.provide(Worker.layerDefaultTasks(DEFAULT_MAX_CONCURRENT_TASKS, DEFAULT_MAX_CONTROL_TASKS))
  )

/** The engine's worker layer for these Flows (named so that the declaration of `layerWorker` is portable). */
type WorkerLayer<Flows extends ReadonlyArray<FlowDef<any, any>>> = ReturnType<typeof Worker.layer<Flows>>
