// Context compaction (docs/session-contract.md, "Compaction and retention"): what a compacting runner sees of
// the conversation, RunModel's two compaction decision points, and the CompactContext Step, which summarizes
// the messages through a cutoff in one model call and writes the summary, its usage and its events in one
// commit. Retention ("Message storage") runs in the same commit.
import { Step, StepDecision, type StepDef, type TxView } from "@durable-agent/engine"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ModelCallError } from "../../Errors.ts"
import * as P from "../../Persistence.ts"
import {
  type AgentFrameworkRunnerShape,
  type AgentTurnContext,
  type ContextCompactionRunner,
  isContextCompactionRunner,
  type MaybeDeferred
} from "../../Runner.ts"
import * as Wire from "../../wire/index.ts"
import { applyRetention, messageIndex, messagesBetween } from "../messages.ts"
import {
  emitter,
  isBlank,
  messageStorageFor,
  nowIso,
  provideStepServices,
  recordUsage,
  requireState,
  type SessionConfig,
  storedMessages,
  turnControl,
  turnSettings,
  withHeartbeats
} from "../session.ts"
import { maxValueBytes } from "../sizes.ts"
import { noteChat, tracedChat } from "../tracing.ts"
import { HEARTBEAT_TIMEOUT, type SessionSteps, sync } from "./common.ts"

/** The method timeout of RunModel and CompactContext. */
export const MODEL_STEP_TIMEOUT = "15 minutes"
const MODEL_STEP_TIMEOUT_MS = Duration.toMillis(Duration.fromInputUnsafe(MODEL_STEP_TIMEOUT))

/** The error of a summary call that returned a blank summary: it fails the attempt. */
export const BLANK_SUMMARY_ERROR = "the context summary is blank"

/** A turn's model input: its messages and the summary before them. */
interface ModelInput {
  readonly messages: Array<Wire.AgentMessage>
  readonly contextSummary: Wire.ContextSummary | null
}

/**
 * The model input of a turn ("Compaction changes the model input"): for a runner with the compaction
 * capability and a session that compacted, only the messages after `ContextSummary.last_sequence` (the chunks
 * before it are not read) and the summary; otherwise every stored message and no summary, with a warning when
 * retention deleted messages ("Message storage", Warning).
 */
export const modelInput = (ctx: TxView, runner: AgentFrameworkRunnerShape): Effect.Effect<ModelInput> =>
  Effect.suspend((): Effect.Effect<ModelInput> => {
    const summary = Option.getOrNull(ctx.get(P.ContextSummary))
    if (summary !== null && isContextCompactionRunner(runner)) {
      return Effect.succeed({
        messages: messagesBetween(ctx, summary.lastSequence + 1, null),
        contextSummary: summary
      })
    }
    const firstSequence = messageIndex(ctx).firstSequence
    const input = (): ModelInput => ({ messages: storedMessages(ctx), contextSummary: null })
    if (firstSequence <= 1) return Effect.succeed(input())
    return Effect.andThen(
      Effect.logWarning(
        `the runner has no compaction capability: its model input leaves out the deleted messages before sequence ${firstSequence} and has no summary`
      ),
      Effect.sync(input)
    )
  })

/** A runner result that may be a value, a Promise or an effect, as an effect. */
const deferred = <A>(what: string, thunk: () => MaybeDeferred<A>): Effect.Effect<A, ModelCallError> =>
  Effect.suspend(() => {
    let value: MaybeDeferred<A>
    try {
      value = thunk()
    } catch (error) {
      return Effect.fail(new ModelCallError({ message: `${what} failed: ${String(error)}` }))
    }
    if (Effect.isEffect(value)) return value as Effect.Effect<A, ModelCallError>
    if (typeof value === "object" && value !== null && typeof (value as PromiseLike<A>).then === "function") {
      return Effect.tryPromise({
        try: () => Promise.resolve(value as PromiseLike<A>),
        catch: (error) => new ModelCallError({ message: `${what} failed: ${String(error)}` })
      })
    }
    return Effect.succeed(value as A)
  })

/**
 * RunModel's compaction decision points, in the spec's order: the runner's `estimateInputTokens`, and at
 * `triggerRatio` of the window its `selectCompactionCutoff` with the retained budget. The cutoff to compact
 * through, or `null` for a model call: without compaction, below the trigger, without a cutoff, or with one
 * that does not advance past the current summary (so RunModel and CompactContext cannot loop) or names no
 * stored message.
 */
export const compactionCutoff = Effect.fnUntraced(function* (
  config: SessionConfig,
  runner: AgentFrameworkRunnerShape,
  turn: AgentTurnContext,
  state: Wire.AgentState
) {
  const policy = config.compaction
  if (policy === null || !isContextCompactionRunner(runner)) return null
  const compacting: ContextCompactionRunner = runner
  const tokens = yield* deferred("estimateInputTokens", () => compacting.estimateInputTokens(turn))
  if (!(tokens >= policy.triggerRatio * policy.contextWindowTokens)) return null
  const budget = Math.floor(policy.retainedRatio * policy.contextWindowTokens)
  const cutoff = yield* deferred("selectCompactionCutoff", () => compacting.selectCompactionCutoff(turn, budget))
  if (cutoff === null || cutoff === undefined || !Number.isInteger(cutoff)) return null
  const after = turn.contextSummary?.lastSequence ?? 0
  if (cutoff <= after || cutoff >= state.nextMessageSequence) return null
  return cutoff
})

/**
 * The compaction family: CompactContext, with RunModel's options and failure route (RecordTurnFailure, built in
 * the turn family before it). Other families' Steps are read from `steps` when a decision is made.
 */
export const makeCompactionSteps = <Id>(
  config: SessionConfig<Id>,
  steps: SessionSteps<Id>,
  RecordTurnFailure: SessionSteps<Id>["RecordTurnFailure"]
) => {
  // Its input type is its failure route's, as RunModel's is: CompactContextInput or JSON null (RunModel always
  // moves here with an input; a null one has nothing to summarize).
  const CompactContext: StepDef<Wire.RecordTurnFailureInput, ModelCallError, Id> = Step({
    type: "CompactContext",
    input: Wire.RecordTurnFailureInput,
    error: ModelCallError,
    options: {
      ...sync,
      execute: {
        ...sync.execute,
        timeout: MODEL_STEP_TIMEOUT,
        retry: { maxAttempts: 3, totalDuration: "30 minutes", initialInterval: config.retryInitialInterval }
      },
      heartbeatTimeout: HEARTBEAT_TIMEOUT,
      onExecuteFailure: RecordTurnFailure
    },
    execute: tracedChat(
      "CompactContext",
      Effect.fnUntraced(function* (ctx, maybeInput: Wire.RecordTurnFailureInput) {
        const runner = yield* config.runner
        const state = yield* requireState(ctx)
        const turnId = state.activeTurnId
        if (turnId === null) return StepDecision.goTo(steps.AwaitUserMessage, null)
        // A turn that was steered or cancelled before the summary call: RunModel ends it without a model call.
        if (turnControl(ctx, turnId) !== null || !isContextCompactionRunner(runner)) {
          return StepDecision.goTo(steps.RunModel, null)
        }
        const previous = Option.getOrNull(ctx.get(P.ContextSummary))
        const input = maybeInput ?? { throughSequence: 0 }
        if (input.throughSequence <= (previous?.lastSequence ?? 0)) {
          // Nothing new to summarize (defensive: RunModel only moves here past the summary).
          ctx.set(P.AgentState, { ...state, status: "running_model" })
          return StepDecision.goTo(steps.RunModel, null)
        }
        // Only the messages it summarizes: the chunks after the previous summary through the cutoff.
        const messages = messagesBetween(ctx, (previous?.lastSequence ?? 0) + 1, input.throughSequence)
        const events = emitter(ctx, config, turnId)
        yield* events.raw(
          "compaction_started",
          Schema.encodeSync(Wire.CompactionStartedPayload)({ throughSequence: input.throughSequence })
        )
        const policy = config.compaction
        const controller = new AbortController()
        const result = yield* runner
          .summarizeContext({
            flowId: ctx.flowId,
            turnId,
            stepExecutionId: ctx.stepExecutionId,
            attempt: ctx.attempt,
            previousSummary: previous,
            messages,
            throughSequence: input.throughSequence,
            inputTokenBudget: policy?.contextWindowTokens ?? Number.MAX_SAFE_INTEGER,
            sessionSettings: turnSettings(ctx, turnId),
            cancellationSignal: controller.signal,
            deadline: new Date((yield* Clock.currentTimeMillis) + MODEL_STEP_TIMEOUT_MS)
          })
          .pipe(
            withHeartbeats(ctx, config.heartbeatInterval),
            provideStepServices(ctx, config, turnId),
            Effect.onInterrupt(() => Effect.sync(() => controller.abort(new Error("the turn was cancelled"))))
          )
        noteChat(ctx, {
          usage: result.usage,
          metadata: result.modelCallMetadata,
          messageSequences: [],
          toolCallIds: [],
          input: () => messages.map((m) => ({ role: m.role, text: m.text, tool_call_id: m.toolCallId })),
          output: () => [{ role: "assistant", text: result.text }]
        })
        if (typeof result.text !== "string" || isBlank(result.text)) {
          return yield* new ModelCallError({ message: BLANK_SUMMARY_ERROR })
        }
        const now = yield* nowIso
        const generation = (previous?.generation ?? 0) + 1
        // One commit: the summary, the call's usage, the status, retention and compaction_finished.
        ctx.set(P.ContextSummary, {
          generation,
          firstSequence: 1,
          lastSequence: input.throughSequence,
          text: result.text,
          createdAt: now
        })
        yield* recordUsage(ctx, events, result.usage)
        applyRetention(ctx, messageStorageFor(config, yield* maxValueBytes))
        ctx.set(P.AgentState, { ...state, status: "running_model" })
        yield* events.raw(
          "compaction_finished",
          Schema.encodeSync(Wire.CompactionFinishedPayload)({ generation, throughSequence: input.throughSequence })
        )
        return StepDecision.goTo(steps.RunModel, null)
      })
    )
  })

  return { CompactContext }
}
