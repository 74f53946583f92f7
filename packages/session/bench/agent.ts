/**
 * The benchmark agent: a session Flow, three read tools, and a zero-latency model that answers from the request,
 * so any number of sessions share it. A user message gets three parallel tool calls; a request that ends with
 * tool results gets a text answer. One turn is RunModel -> 3 x CallTool -> ResumeTurn -> RunModel.
 *
 * The model records when each turn's first model call starts (per session, from the session ID in the user
 * text): consecutive starts of one session give the length of one whole turn cycle, with no polling. The same
 * Stepwise runner also runs the turns in memory, without the engine ({@link runInMemory}).
 */
import { Engine, type EngineError } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { freePort } from "../../engine/test/support/ports.ts"
import {
  AgentSessionClient,
  AgentSessionFlow,
  EventWriter,
  Heartbeat,
  ModelClient,
  Policy,
  type Runner,
  Stepwise,
  ToolSource,
  type Wire
} from "../src/index.ts"

export type Mode = "embedded" | "cluster"

export const FLOW_TYPE = "BenchAgent"

export const flow = AgentSessionFlow.make({ flowType: FLOW_TYPE })

export const agentDefinition: Stepwise.AgentDefinition = {
  name: "bench-agent",
  instructions: "Look the three things up, then answer in one sentence."
}

export const TOOL_NAMES = ["get_weather", "get_time", "get_news"] as const

export const tools = TOOL_NAMES.map((name) =>
  ToolSource.tool({
    name,
    description: `${name} of a city`,
    effect: "read",
    handler: (args) => Effect.succeed({ tool: name, city: args.city ?? null, value: 21 })
  })
)

/** The user text of turn `turn` of `sessionId`; the model reads the session ID back from it. */
export const userText = (sessionId: string, turn: number) => `${sessionId} turn ${turn}: weather, time and news?`

const usage = { inputTokens: 120, outputTokens: 12, cachedInputTokens: 0, reasoningTokens: 0 }

/** When each turn's first model call started, per session (ms, `performance.now()`). */
export type TurnStarts = Map<string, Array<number>>

/** How many turns of each session got their answer (the turn's last model call ran), per session. */
export type TurnsEnded = Map<string, number>

/** The zero-latency model; `starts` collects the first model call of every turn, `ended` (when given) counts the
 * turns answered, in memory, as the bare engine Flow's `engineTurnsEnded` does. */
export const makeModel = (starts: TurnStarts, ended?: TurnsEnded) =>
  ModelClient.make((request: ModelClient.ModelRequest) =>
    Effect.gen(function* () {
      const last = request.messages[request.messages.length - 1]
      if (last?.role === "user") {
        const at = performance.now()
        const sessionId = last.text.slice(0, last.text.indexOf(" "))
        const list = starts.get(sessionId)
        if (list === undefined) starts.set(sessionId, [at])
        else list.push(at)
        const turn = request.messages.filter((m) => m.role === "user").length
        return {
          text: null,
          reasoning: null,
          toolCalls: TOOL_NAMES.map((name) => ({
            toolCallId: `${name}-${turn}`,
            toolName: name,
            arguments: JSON.stringify({ city: "Paris" })
          })),
          usage
        } satisfies ModelClient.ModelResponse
      }
      const text = "Sunny, 21 degrees, noon, nothing new."
      if (request.onTextDelta) yield* request.onTextDelta(text)
      if (ended !== undefined) {
        const user = request.messages.findLast((m) => m.role === "user")
        const sessionId = user === undefined ? "" : user.text.slice(0, user.text.indexOf(" "))
        ended.set(sessionId, (ended.get(sessionId) ?? 0) + 1)
      }
      return { text, reasoning: null, toolCalls: [], usage } satisfies ModelClient.ModelResponse
    })
  )

/** Turn cycles (ms): consecutive turn starts of each session, skipping the first `skip` cycles of each. */
export const cycles = (starts: TurnStarts, skip: number): Array<number> =>
  [...starts.values()].flatMap((list) =>
    list
      .slice(1)
      .map((at, i) => at - list[i]!)
      .slice(skip)
  )

/** Task slots of a benchmark runner: the workloads run many Flows at once; the default (the CPU count) would
 * measure the slot limit instead of the engine. */
const BENCH_TASK_SLOTS = 1024

/**
 * Control slots of a benchmark runner, as many as the task slots and for the same reason: the session's
 * bookkeeping Steps (AwaitUserMessage, ResumeTurn) are control Steps, where the bare engine Flow's (AwaitMessage,
 * Join) take task slots. With the default (the CPU count, at least 2) 100 sessions queue their control Steps
 * behind 2 slots, and each queued one records its start in a commit of its own while it holds its slot, so the
 * concurrent figure measured those 2 slots (groups of about 12 transitions, 2 more commits per turn) against a
 * baseline that had 1,024.
 */
const BENCH_CONTROL_SLOTS = BENCH_TASK_SLOTS

/** The engine layer of a mode: a SQLite file (WAL, synchronous=FULL) or a Postgres URL (a runner on a free port). */
export const engineFor = async (
  mode: Mode,
  location: string
): Promise<Layer.Layer<Engine.EngineServices, EngineError>> =>
  mode === "embedded"
    ? Engine.layerEmbedded({
        filename: location,
        synchronous: "FULL",
        maxConcurrentTasks: BENCH_TASK_SLOTS,
        maxControlTasks: BENCH_CONTROL_SLOTS
      })
    : Engine.layerCluster({
        url: location,
        runnerPort: await freePort(),
        maxConcurrentTasks: BENCH_TASK_SLOTS,
        maxControlTasks: BENCH_CONTROL_SLOTS
      })

/** A session worker and `AgentSessionClient` on `engine`, with the benchmark model and tools. */
export const workerLayer = (
  starts: TurnStarts,
  engine: Layer.Layer<Engine.EngineServices, EngineError>,
  /** More services of the worker, such as the session's tracing. */
  services: Layer.Layer<never> = Layer.empty,
  /** Counts each session's answered turns in memory, when given. */
  ended?: TurnsEnded
) =>
  Layer.mergeAll(
    AgentSessionFlow.layerWorker(flow).pipe(
      Layer.provide(Stepwise.layer(agentDefinition)),
      Layer.provide(
        Layer.mergeAll(ModelClient.layer(makeModel(starts, ended).generate), ToolSource.layer(tools), services)
      )
    ),
    AgentSessionClient.layer(FLOW_TYPE)
  ).pipe(Layer.provideMerge(engine))

/**
 * The same Stepwise loop without the engine: for each turn the runner's `runModelStep`, the three deferred
 * tool calls in parallel through `executeDeferredToolCall`, and `runModelStep` again, with the history and the
 * tool call records kept in memory. Each session runs `turns` turns; `starts` records the turn starts as in
 * the durable run.
 */
export const runInMemory = (sessions: number, turns: number, starts: TurnStarts) =>
  Effect.gen(function* () {
    const runner = yield* Stepwise.make(agentDefinition)
    const services = Layer.mergeAll(EventWriter.layerNoop, Heartbeat.layerNoop)
    for (let s = 0; s < sessions; s++) {
      const flowId = `mem-${s}`
      const messages: Array<Wire.AgentMessage> = []
      const append = (turnId: string, framework: ReadonlyArray<ReturnType<typeof runner.buildUserMessage>>) => {
        const createdAt = new Date().toISOString()
        for (const m of framework) messages.push({ ...m, sequence: messages.length + 1, turnId, createdAt })
      }
      for (let t = 1; t <= turns; t++) {
        const turnId = `turn-${t}`
        append(turnId, [runner.buildUserMessage(userText(flowId, t))])
        let runState: string | null = null
        let records: Array<Wire.AgentToolCall> = []
        for (let step = 1; ; step++) {
          const context: Runner.AgentTurnContext = {
            flowId,
            turnId,
            stepExecutionId: `RunModel-${step}`,
            attempt: 1,
            messages,
            frameworkRunState: runState,
            toolCalls: records,
            sessionSettings: {},
            interactionMode: "chat",
            toolPolicies: {},
            defaultToolEffect: "unclassified",
            resolveToolPolicy: (toolName, frameworkEffect) => Policy.resolveToolPolicy(toolName, { frameworkEffect })
          }
          const outcome = yield* runner.runModelStep(context).pipe(Effect.provide(services))
          if (outcome._tag !== "ToolCallsRequested") {
            append(turnId, outcome.newMessages)
            break
          }
          runState = outcome.frameworkRunState
          records = outcome.toolCalls.map(
            (call, i): Wire.AgentToolCall => ({
              toolCallId: call.toolCallId,
              turnId,
              toolName: call.toolName,
              arguments: call.arguments,
              effect: call.policy.effect,
              requiresApproval: call.policy.requiresApproval,
              status: "approved",
              output: null,
              error: null,
              rejectionMessage: null,
              deferralOrder: i,
              toolSourceReference: null,
              traceContext: null,
              waitUntil: null,
              inputContinuation: null,
              inputAnswers: [],
              inputQuestion: null,
              inputChoices: [],
              inputAllowsFreeText: true,
              cancellationReason: null,
              taskId: null,
              taskPollIntervalSeconds: null,
              taskAnswerPending: false
            })
          )
          records = yield* Effect.forEach(
            records,
            (record) =>
              runner
                .executeDeferredToolCall({
                  flowId,
                  turnId,
                  toolCall: record,
                  idempotencyKey: `${flowId}/${turnId}/${record.toolCallId}`,
                  attempt: 1,
                  heartbeatCheckpoint: Option.none()
                })
                .pipe(
                  Effect.map(
                    (result): Wire.AgentToolCall => ({ ...record, status: "succeeded", output: result.output })
                  ),
                  Effect.provide(services)
                ),
            { concurrency: "unbounded" }
          )
        }
      }
    }
  }).pipe(Effect.provide(Layer.mergeAll(ModelClient.layer(makeModel(starts).generate), ToolSource.layer(tools))))
