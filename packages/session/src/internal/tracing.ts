// The session's spans (the spec's "Tracing" section): one wrapper per span kind around a Step body. Each
// wrapper does nothing without the `Tracer` service; with it, it creates its span when the attempt ends, with
// the attempt's start as its start time, so every span ends inside its Step attempt. What the body learned
// (an activation, a model call's usage) reaches the wrapper as a note on the attempt's ExecuteContext.
// A tracer or exporter that throws is logged and the span skipped: tracing never changes a Step's outcome.
import type { ExecuteContext } from "@durable-agent/engine"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as EffectTracer from "effect/Tracer"
import type { ModelCallMetadata } from "../ModelClient.ts"
import * as P from "../Persistence.ts"
import * as SessionMetrics from "../SessionMetrics.ts"
import { FrameworkSpans, type RecordedSpan, Tracer, type TracerShape } from "../Tracer.ts"
import type * as Wire from "../wire/index.ts"
import type { SessionConfig } from "./session.ts"

// ---------------------------------------------------------------------------------------------------------
// traceparent
// ---------------------------------------------------------------------------------------------------------

/** A span context as a W3C traceparent carries it. */
export interface SpanContext {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** Whether the ids make a valid span context (hex of the right length, not all zeros). */
export const isValidContext = (traceId: string, spanId: string): boolean =>
  /^[0-9a-f]{32}$/.test(traceId) && /^[0-9a-f]{16}$/.test(spanId) && !/^0+$/.test(traceId) && !/^0+$/.test(spanId)

/** `00-<trace id>-<span id>-<flags>`. */
export const formatTraceparent = (c: SpanContext): string => `00-${c.traceId}-${c.spanId}-${c.sampled ? "01" : "00"}`

/** The span context of a traceparent, or undefined when it is not a valid one. */
export const parseTraceparent = (text: string | null | undefined): SpanContext | undefined => {
  const m = text == null ? null : TRACEPARENT.exec(text)
  if (m === null || !isValidContext(m[1]!, m[2]!)) return undefined
  return { traceId: m[1]!, spanId: m[2]!, sampled: (Number.parseInt(m[3]!, 16) & 1) === 1 }
}

const external = (c: SpanContext) => EffectTracer.externalSpan(c)

// ---------------------------------------------------------------------------------------------------------
// Emitting a span
// ---------------------------------------------------------------------------------------------------------

interface SpanSpec {
  readonly name: string
  readonly kind: EffectTracer.SpanKind
  readonly parent: SpanContext | undefined
  readonly links: ReadonlyArray<SpanContext>
  readonly startTime: bigint
  readonly attributes: Record<string, unknown>
  readonly exit: Exit.Exit<unknown, unknown>
  readonly children?: ReadonlyArray<RecordedSpan> | undefined
}

const emitChildren = (
  tracer: EffectTracer.Tracer,
  parent: EffectTracer.Span,
  children: ReadonlyArray<RecordedSpan>
): void => {
  for (const child of children) {
    const span = tracer.span({
      name: child.name,
      parent: Option.some(parent),
      annotations: Context.empty(),
      links: [],
      startTime: child.startTime,
      kind: child.kind ?? "internal",
      root: false,
      sampled: parent.sampled
    })
    for (const [key, value] of Object.entries(child.attributes ?? {})) span.attribute(key, value)
    if (child.children !== undefined) emitChildren(tracer, span, child.children)
    span.end(child.endTime, child.error === undefined ? Exit.void : Exit.fail(new Error(child.error)))
  }
}

/** Creates and ends one span; its context, or undefined when the tracer failed (logged) or gave none. */
const emit = (shape: TracerShape, spec: SpanSpec): Effect.Effect<SpanContext | undefined> =>
  Effect.flatMap(Clock.currentTimeNanos, (endTime) =>
    Effect.try({
      try: () => {
        const span = shape.tracer.span({
          name: spec.name,
          parent: spec.parent === undefined ? Option.none() : Option.some(external(spec.parent)),
          annotations: Context.empty(),
          links: spec.links.map((l) => ({ span: external(l), attributes: {} })),
          startTime: spec.startTime,
          kind: spec.kind,
          root: spec.parent === undefined,
          sampled: spec.parent?.sampled ?? true
        })
        for (const [key, value] of Object.entries(spec.attributes)) {
          if (value !== undefined && value !== null) span.attribute(key, value)
        }
        if (spec.children !== undefined && spec.children.length > 0) {
          emitChildren(shape.tracer, span, spec.children)
        }
        // an end before the start (a clock step) ends at the start; `Math.max` takes no bigint
        let end = endTime
        if (end < spec.startTime) end = spec.startTime
        span.end(end, spec.exit)
        return isValidContext(span.traceId, span.spanId)
          ? { traceId: span.traceId, spanId: span.spanId, sampled: span.sampled }
          : undefined
      },
      catch: (error) => error
    }).pipe(
      Effect.catch((error) =>
        Effect.as(Effect.logWarning(`tracing: the span ${spec.name} is skipped`, error), undefined)
      )
    )
  )

// ---------------------------------------------------------------------------------------------------------
// Attributes
// ---------------------------------------------------------------------------------------------------------

/** The attributes every span carries. */
const stepAttributes = (ctx: ExecuteContext, stepType: string, turnId: string | null, operation: string) => ({
  "gen_ai.operation.name": operation,
  "gen_ai.conversation.id": ctx.flowId,
  "session.id": ctx.flowId,
  "dex.flow.id": ctx.flowId,
  "dex.run.id": ctx.runId,
  "dex.step.type": stepType,
  "dex.step.execution_id": ctx.stepExecutionId,
  "dex.step.attempt": ctx.attempt,
  "dex.agent.turn.id": turnId ?? undefined
})

/** `error.type` and the exit of a failed attempt. */
const errorAttributes = (exit: Exit.Exit<unknown, unknown>): Record<string, unknown> => {
  if (Exit.isSuccess(exit)) return {}
  const error = Cause.squash(exit.cause)
  const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : undefined
  return { "error.type": Cause.hasInterruptsOnly(exit.cause) ? "interrupted" : (tag ?? "_OTHER") }
}

const activeTurn = (ctx: ExecuteContext): string | null =>
  Option.match(ctx.get(P.AgentState), { onNone: () => null, onSome: (s) => s.activeTurnId })

// ---------------------------------------------------------------------------------------------------------
// Notes: what a Step body tells its wrapper
// ---------------------------------------------------------------------------------------------------------

/** What a RunModel attempt reports for its `chat` span. */
export interface ChatNote {
  readonly usage: Wire.AgentUsage
  readonly metadata: ModelCallMetadata | undefined
  /** The sequences of the messages this attempt stored. */
  readonly messageSequences: ReadonlyArray<number>
  /** The tool calls the model asked for. */
  readonly toolCallIds: ReadonlyArray<string>
  /** Opt-in content: the model input and the new messages, as JSON text. */
  readonly input?: (() => unknown) | undefined
  readonly output?: (() => unknown) | undefined
}

interface Note {
  activation?: { readonly toolCallId?: string | undefined }
  chat?: ChatNote
}

const notes = new WeakMap<ExecuteContext, Note>()

const note = (ctx: ExecuteContext): Note => {
  let n = notes.get(ctx)
  if (n === undefined) {
    n = {}
    notes.set(ctx, n)
  }
  return n
}

/**
 * Marks the attempt as an activation: it consumed an input from outside the session. With `toolCallId` (an
 * approval's answer or deadline), the record's `traceContext` becomes the new root.
 */
export const noteActivation = (ctx: ExecuteContext, toolCallId?: string): void => {
  note(ctx).activation = { toolCallId }
}

/** Reports a RunModel attempt's model call for its `chat` span. */
export const noteChat = (ctx: ExecuteContext, chat: ChatNote): void => {
  note(ctx).chat = chat
}

const tracerOption = Effect.serviceOption(Tracer)

/**
 * Runs `body` (built with the tracer, if any), then `finish` with its exit, the tracer and the start time;
 * `finish` (the metrics, and the span when tracing is on) never fails the body.
 */
const around = <A, E, R>(
  ctx: ExecuteContext,
  body: (tracer: TracerShape | undefined) => Effect.Effect<A, E, R>,
  finish: (tracer: TracerShape | undefined, exit: Exit.Exit<A, E>, startTime: bigint) => Effect.Effect<void>
): Effect.Effect<A, E, R> =>
  Effect.flatMap(tracerOption, (option) => {
    const tracer = Option.getOrUndefined(option)
    return Effect.flatMap(Clock.currentTimeNanos, (startTime) =>
      Effect.onExit(body(tracer), (exit) =>
        finish(tracer, exit, startTime).pipe(
          Effect.catchCause((cause) => Effect.logWarning("tracing failed; the span is skipped", cause)),
          Effect.ensuring(Effect.sync(() => notes.delete(ctx)))
        )
      )
    )
  })

// ---------------------------------------------------------------------------------------------------------
// The spans
// ---------------------------------------------------------------------------------------------------------

/**
 * An activation Step's `invoke_agent {agent}` root: emitted when the body called {@link noteActivation}
 * (StartAgentSession always), linked to the previous root, and stored in `AgentTraceContext` (deleted when the
 * root has no valid context). A turn the attempt started is counted.
 */
export const activationSpan = <A, E, R>(
  config: SessionConfig<any>,
  ctx: ExecuteContext,
  stepType: string,
  body: Effect.Effect<A, E, R>,
  always: boolean
): Effect.Effect<A, E, R> => {
  if (always) noteActivation(ctx)
  const turnBefore = activeTurn(ctx)
  return around(
    ctx,
    () => body,
    (shape, exit, startTime) => {
      if (!Exit.isSuccess(exit)) return Effect.void
      const turnAfter = activeTurn(ctx)
      const counted = turnAfter !== null && turnAfter !== turnBefore ? SessionMetrics.turnStarted : Effect.void
      const activation = notes.get(ctx)?.activation
      // without a tracer or an activation there is no span: the count alone
      if (shape === undefined || activation === undefined) return counted
      return Effect.andThen(counted, emitRoot(config, ctx, stepType, shape, activation, turnAfter, exit, startTime))
    }
  )
}

/** {@link activationSpan}'s root span, stored in `AgentTraceContext` (and the approved record's context). */
const emitRoot = (
  config: SessionConfig<any>,
  ctx: ExecuteContext,
  stepType: string,
  shape: TracerShape,
  activation: NonNullable<Note["activation"]>,
  turnAfter: string | null,
  exit: Exit.Exit<unknown, unknown>,
  startTime: bigint
) =>
  Effect.gen(function* () {
    const runner = yield* Effect.serviceOption(config.runner)
    const agentName = Option.match(runner, { onNone: () => config.flowType, onSome: (r) => r.name })
    const previous = parseTraceparent(Option.getOrUndefined(ctx.get(P.AgentTraceContext)))
    const root = yield* emit(shape, {
      name: `invoke_agent ${agentName}`,
      kind: "internal",
      parent: undefined,
      links: previous === undefined ? [] : [previous],
      startTime,
      attributes: {
        ...stepAttributes(ctx, stepType, turnAfter, "invoke_agent"),
        "gen_ai.agent.name": agentName
      },
      exit
    })
    if (root === undefined) {
      ctx.delete(P.AgentTraceContext)
      return
    }
    const traceparent = formatTraceparent(root)
    ctx.set(P.AgentTraceContext, traceparent)
    if (activation.toolCallId !== undefined) {
      const record = ctx.getAt(P.AgentToolCalls, activation.toolCallId)
      if (Option.isSome(record)) {
        ctx.setAt(P.AgentToolCalls, activation.toolCallId, { ...record.value, traceContext: traceparent })
      }
    }
  })

const usageAttributes = (shape: TracerShape, usage: Wire.AgentUsage, metadata: ModelCallMetadata | undefined) => ({
  [shape.conventions === "1.36.0" ? "gen_ai.system" : "gen_ai.provider.name"]: metadata?.providerName,
  "gen_ai.request.model": metadata?.requestModel,
  "gen_ai.response.model": metadata?.responseModel,
  "gen_ai.response.id": metadata?.responseId,
  "gen_ai.response.finish_reasons": metadata?.finishReasons,
  "gen_ai.usage.input_tokens": usage.inputTokens,
  "gen_ai.usage.output_tokens": usage.outputTokens,
  ...(shape.conventions === "1.36.0" ? {} : { "gen_ai.usage.cache_read.input_tokens": usage.cachedInputTokens }),
  "dex.usage.reasoning_tokens": usage.reasoningTokens
})

/**
 * A RunModel attempt's `chat` span under the root in `AgentTraceContext`: CLIENT with usage when the body
 * reported one model call ({@link noteChat}), INTERNAL without otherwise. The framework spans the runner
 * recorded in {@link FrameworkSpans} become its children. The body runs with `FrameworkSpans` enabled (RunModel
 * itself copies the root onto each tool call record it writes). The model call is counted.
 */
export const chatSpan = <A, E, R>(ctx: ExecuteContext, stepType: string, body: Effect.Effect<A, E, R>) => {
  const recorded: Array<RecordedSpan> = []
  const annotations: Record<string, unknown> = {}
  const root = Option.getOrUndefined(ctx.get(P.AgentTraceContext))
  const turnId = activeTurn(ctx)
  return around(
    ctx,
    (tracer) =>
      tracer === undefined
        ? body
        : Effect.provideService(body, FrameworkSpans, {
            enabled: true,
            record: (s) => void recorded.push(s),
            annotate: (attributes) => void Object.assign(annotations, attributes)
          }),
    (shape, exit, startTime) => {
      const chat = notes.get(ctx)?.chat
      const counted = SessionMetrics.modelCall(exit, chat?.usage, startTime)
      if (shape === undefined) return counted
      return Effect.andThen(
        counted,
        Effect.gen(function* () {
          const oneCall = chat !== undefined && chat.usage.modelCalls === 1
          const model = chat?.metadata?.requestModel ?? chat?.metadata?.responseModel
          yield* emit(shape, {
            name: model === undefined ? "chat" : `chat ${model}`,
            kind: oneCall ? "client" : "internal",
            parent: parseTraceparent(root),
            links: [],
            startTime,
            attributes: {
              ...annotations,
              ...stepAttributes(ctx, stepType, turnId, "chat"),
              ...(oneCall ? usageAttributes(shape, chat.usage, chat.metadata) : {}),
              "dex.agent.message.sequences": chat?.messageSequences.length ? chat.messageSequences : undefined,
              "dex.agent.tool_call.ids": chat?.toolCallIds.length ? chat.toolCallIds : undefined,
              ...(shape.captureContent && chat !== undefined
                ? {
                    "gen_ai.input.messages": chat.input === undefined ? undefined : JSON.stringify(chat.input()),
                    "gen_ai.output.messages": chat.output === undefined ? undefined : JSON.stringify(chat.output())
                  }
                : {}),
              ...errorAttributes(exit)
            },
            exit,
            children: recorded
          })
        })
      )
    }
  )
}

/**
 * A tool Step attempt's `execute_tool {tool}` span (CallTool, CallSingleAttemptTool, PollToolTask) under the
 * record's `traceContext`, with the record's status when the attempt ended.
 */
export const toolSpan = <A, E, R>(
  ctx: ExecuteContext,
  stepType: string,
  toolCallId: string,
  body: Effect.Effect<A, E, R>
) => {
  const before = Option.getOrUndefined(ctx.getAt(P.AgentToolCalls, toolCallId))
  return around(
    ctx,
    () => body,
    (shape, exit, startTime) => {
      if (before === undefined) return Effect.void
      const after = Option.getOrElse(ctx.getAt(P.AgentToolCalls, toolCallId), () => before)
      const counted = SessionMetrics.toolCall(before.effect, Exit.isSuccess(exit) ? after.status : "attempt_failed")
      if (shape === undefined) return counted
      return Effect.andThen(
        counted,
        emit(shape, {
          name: `execute_tool ${before.toolName}`,
          kind: "internal",
          parent: parseTraceparent(before.traceContext),
          links: [],
          startTime,
          attributes: {
            ...stepAttributes(ctx, stepType, before.turnId, "execute_tool"),
            "gen_ai.tool.name": before.toolName,
            "gen_ai.tool.call.id": before.toolCallId,
            "gen_ai.tool.type": "function",
            "dex.tool.effect": before.effect,
            "dex.tool.status": after.status,
            ...(shape.captureContent
              ? { "gen_ai.tool.call.arguments": before.arguments, "gen_ai.tool.call.result": after.output ?? undefined }
              : {}),
            ...errorAttributes(exit)
          },
          exit
        })
      )
    }
  )
}

// ---------------------------------------------------------------------------------------------------------
// Step wrappers
// ---------------------------------------------------------------------------------------------------------

/** An activation Step's execute with its `invoke_agent` root (StartAgentSession: `always`). */
export const tracedActivation =
  <I, A, E, R>(
    config: SessionConfig<any>,
    stepType: string,
    execute: (ctx: ExecuteContext, input: I) => Effect.Effect<A, E, R>,
    always = false
  ) =>
  (ctx: ExecuteContext, input: I): Effect.Effect<A, E, R> =>
    activationSpan(config, ctx, stepType, execute(ctx, input), always)

/** RunModel's execute with its `chat` span. */
export const tracedChat =
  <I, A, E, R>(stepType: string, execute: (ctx: ExecuteContext, input: I) => Effect.Effect<A, E, R>) =>
  (ctx: ExecuteContext, input: I): Effect.Effect<A, E, R> =>
    chatSpan(ctx, stepType, execute(ctx, input))

/** A tool Step's execute with its `execute_tool` span. */
export const tracedTool =
  <A, E, R>(stepType: string, execute: (ctx: ExecuteContext, toolCallId: string) => Effect.Effect<A, E, R>) =>
  (ctx: ExecuteContext, toolCallId: string): Effect.Effect<A, E, R> =>
    toolSpan(ctx, stepType, toolCallId, execute(ctx, toolCallId))
