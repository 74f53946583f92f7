// Context compaction and retention (spec: RunModel, CompactContext, "Compaction changes the model input",
// "Message storage": Retention, Reads, Warning; the adapter interface's ContextCompactionRunner), on both engines:
// a scripted model with a 1,000-token window (test/support/compaction.ts) gets a compacted context across 200
// turns, the summary call sees the previous summary and the messages after it, a message larger than the window
// gets the "did not fit" note, retention deletes whole chunks behind the summary and the pages say where the
// messages start, cancel_turn cancels a running compaction, a blank summary fails the attempt, and a session
// stored before compaction existed upgrades in place. The SIGKILL test is in compaction-kill.test.ts.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client, Engine } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import {
  AgentSessionClient,
  AgentSessionFlow,
  ModelClient,
  Persistence as P,
  Runner,
  Stepwise,
  ToolSource,
  Wire
} from "../src/index.ts"
import {
  type CompactionModelOptions,
  compactionAgent,
  compactionModel,
  isSummaryCall,
  lookupTool,
  newestQuestion,
  question,
  tokensOf,
  WINDOW
} from "./support/compaction.ts"
import {
  allEvents,
  awaitSnapshot,
  awaitTurns,
  clusterEngine,
  type EngineFactory,
  embeddedEngine,
  FLOW_TYPE,
  makeGate,
  pageAll,
  storeOldLayout
} from "./support.ts"

interface Kit {
  readonly requests: Array<ModelClient.ModelRequest>
}

interface CompactionSetup {
  readonly model?: CompactionModelOptions | undefined
  readonly flow?: Partial<AgentSessionFlow.AgentSessionOptions> | undefined
  /** The tool source, instead of `lookup` alone. */
  readonly tools?: ToolSource.ToolSourceShape | undefined
}

/** A worker with compaction (the 1,000-token window) and a client on a fresh engine. */
const withCompaction = <A, E>(
  engine: EngineFactory,
  setup: CompactionSetup,
  body: (kit: Kit) => Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>
) => {
  const requests: Array<ModelClient.ModelRequest> = []
  const flow = AgentSessionFlow.make({
    flowType: FLOW_TYPE,
    retryInitialInterval: "100 millis",
    compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: WINDOW }),
    ...setup.flow
  })
  const model = compactionModel({
    ...setup.model,
    onRequest: (request) => {
      requests.push(request)
      setup.model?.onRequest?.(request)
    }
  })
  const worker = AgentSessionFlow.layerWorker(flow).pipe(
    Layer.provide(Stepwise.layer(compactionAgent)),
    Layer.provide(
      Layer.mergeAll(
        Layer.succeed(ModelClient.ModelClient, model),
        setup.tools === undefined ? ToolSource.layer([lookupTool]) : Layer.succeed(ToolSource.ToolSource, setup.tools)
      )
    )
  )
  return body({ requests }).pipe(
    Effect.provide(Layer.mergeAll(worker, AgentSessionClient.layer(FLOW_TYPE)).pipe(Layer.provideMerge(engine({})))),
    Effect.scoped
  ) as Effect.Effect<A, unknown>
}

/**
 * Runs turns `from..to`: question n, the model calling `lookup` in every fifth. The questions are queued at once
 * (each turn takes the next), so the session runs them back to back.
 */
const runTurns = (sessionId: string, from: number, to: number) =>
  Effect.gen(function* () {
    const client = yield* AgentSessionClient.AgentSessionClient
    for (let n = from; n <= to; n++) {
      if (n === 1) yield* client.startSession(sessionId, { initialMessage: question(1) })
      else assert.isTrue(yield* client.sendUserMessage(sessionId, question(n, n % 5 === 0)))
    }
    // many turns: the support's 20-second wait is for one turn, this one waits as long as the test may run
    yield* client.getSnapshot(sessionId).pipe(
      Effect.repeat({
        schedule: Schedule.spaced("100 millis"),
        until: (s) => s.state !== null && s.state.turnCount >= to && s.state.activeTurnId === null
      }),
      Effect.timeoutOrElse({
        duration: "200 seconds",
        orElse: () => Effect.die(new Error(`timed out waiting for ${to} finished turns`))
      })
    )
  })

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

/** The model messages Stepwise builds from stored messages, after a summary when one is given. */
const expectedInput = (summary: string | null, messages: ReadonlyArray<Wire.AgentMessage>) =>
  Stepwise.toModelMessages([
    ...(summary === null ? [] : [{ type: "user" as const, text: `${Wire.CONTEXT_SUMMARY_PREFIX}\n${summary}` }]),
    ...messages.map(Stepwise.fromStoredMessage)
  ])

/** Asserts that no request separates a tool call from its result. */
const assertPairsKept = (request: ModelClient.ModelRequest) => {
  const calls = new Set<string>()
  const results = new Set<string>()
  for (const m of request.messages) {
    if (m.role === "assistant") for (const c of m.toolCalls) calls.add(c.toolCallId)
    if (m.role === "tool") {
      assert.isTrue(calls.has(m.toolCallId), `the result of ${m.toolCallId} follows its call`)
      results.add(m.toolCallId)
    }
  }
  for (const id of calls) assert.isTrue(results.has(id), `the call ${id} has its result`)
}

const eventsOf = (sessionId: string, type: string) =>
  Effect.map(allEvents(sessionId), (events) =>
    events.filter((e) => e.event.type === type).map((e) => e.event.payload as unknown as Record<string, number>)
  )

const compactionSuite = (engine: EngineFactory, turns: number) =>
  describe("context compaction", () => {
    it.live(
      `a small window gets a compacted context across ${turns} turns; each summary call reads the previous summary and the messages after it`,
      () =>
        withCompaction(engine, { flow: { messageStorage: { retainedMessageLimit: null } } }, (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* runTurns("s-200", 1, turns)
            const snapshot = yield* client.getSnapshot("s-200")
            assert.strictEqual(snapshot.state?.turnCount, turns)
            assert.isNull(snapshot.state?.lastTurnError)
            // every turn ended with its answer, none failed
            const failed = yield* eventsOf("s-200", "turn_failed")
            assert.deepStrictEqual(failed, [])
            // the model input never exceeded the window, and no request separated a tool call from its result
            for (const request of kit.requests) {
              assert.isAtMost(tokensOf(request), WINDOW)
              assertPairsKept(request)
            }
            // the summaries: one compaction_finished each, generations 1.., cutoffs advancing
            const finished = yield* eventsOf("s-200", "compaction_finished")
            assert.isAtLeast(finished.length, 5, "the session compacted again and again")
            assert.deepStrictEqual(
              finished.map((f) => f.generation),
              range(1, finished.length)
            )
            for (let i = 1; i < finished.length; i++) {
              assert.isAbove(finished[i]!.throughSequence!, finished[i - 1]!.throughSequence!)
            }
            const started = yield* eventsOf("s-200", "compaction_started")
            assert.deepStrictEqual(
              started.map((s) => s.throughSequence),
              finished.map((f) => f.throughSequence)
            )
            const summary = snapshot.contextSummary
            assert.isNotNull(summary)
            assert.strictEqual(summary!.generation, finished.length)
            assert.strictEqual(summary!.firstSequence, 1)
            assert.strictEqual(summary!.lastSequence, finished.at(-1)!.throughSequence)
            assert.deepStrictEqual(
              Option.getOrNull(yield* (yield* Client.Client).getAttribute("s-200", P.ContextSummary)),
              summary
            )
            // each summary call's input: the previous summary, then the messages after it through its cutoff
            const { messages } = yield* pageAll("s-200", 200)
            assert.deepStrictEqual(
              messages.map((m) => m.sequence),
              range(1, snapshot.state!.nextMessageSequence - 1)
            )
            const summaryCalls = kit.requests.filter(isSummaryCall)
            assert.strictEqual(summaryCalls.length, finished.length)
            const texts: Array<string> = []
            for (const [i, call] of summaryCalls.entries()) {
              const previous = i === 0 ? null : texts[i - 1]!
              const after = i === 0 ? 0 : finished[i - 1]!.throughSequence!
              const through = finished[i]!.throughSequence!
              const expected = [
                ...expectedInput(
                  previous,
                  messages.filter((m) => m.sequence > after && m.sequence <= through)
                ),
                { role: "user" as const, text: Stepwise.SUMMARY_REQUEST_TEXT }
              ]
              assert.deepStrictEqual(call.messages, expected, `summary call ${i + 1}`)
              assert.isAtMost(tokensOf(call) + compactionAgent.maxOutputTokens!, WINDOW)
              texts.push(`summary ${i + 1} through question ${newestQuestion(call)}`)
            }
            assert.strictEqual(texts.at(-1), summary!.text)
            // the last model call: the summary, then only the messages after it
            const last = kit.requests.at(-1)!
            assert.isFalse(isSummaryCall(last))
            const answer = messages.at(-1)!
            assert.deepStrictEqual(
              last.messages,
              expectedInput(
                summary!.text,
                messages.filter((m) => m.sequence > summary!.lastSequence && m.sequence < answer.sequence)
              )
            )
            // RunModel's decision moved the turn through compacting_context: the model usage counts the summaries
            const usage = snapshot.usage
            assert.strictEqual(usage.modelCalls, kit.requests.length)
          })
        ),
      240_000
    )

    it.live("a message larger than the whole window is left out of the summary call with the note", () =>
      withCompaction(engine, {}, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* runTurns("s-huge", 1, 1)
          const huge = `question 2 ${"x".repeat(4 * WINDOW)}`
          assert.isAbove(tokensOf({ instructions: "", messages: [{ role: "user", text: huge }] }), WINDOW)
          assert.isTrue(yield* client.sendUserMessage("s-huge", huge))
          yield* awaitTurns("s-huge", 2)
          yield* runTurns("s-huge", 3, 4)
          const snapshot = yield* client.getSnapshot("s-huge")
          assert.isNull(snapshot.state?.lastTurnError)
          const summaryCalls = kit.requests.filter(isSummaryCall)
          assert.strictEqual(summaryCalls.length, 1)
          // the three messages up to the huge one did not fit: the note says so, exactly as the spec writes it
          assert.deepStrictEqual(summaryCalls[0]!.messages, [
            { role: "user", text: "[Dex] 3 earlier messages did not fit in this request and are left out." },
            { role: "user", text: Stepwise.SUMMARY_REQUEST_TEXT }
          ])
          assert.strictEqual(
            Wire.omittedMessagesNote(1),
            "[Dex] 1 earlier message did not fit in this request and is left out."
          )
          for (const request of kit.requests) assert.isAtMost(tokensOf(request), WINDOW)
          // the huge turn answered from the summary
          assert.strictEqual(snapshot.contextSummary?.lastSequence, 3)
          const afterSummary = kit.requests[kit.requests.indexOf(summaryCalls[0]!) + 1]!
          assert.deepStrictEqual(afterSummary.messages, expectedInput(snapshot.contextSummary!.text, []))
        })
      )
    )

    it.live(
      "retention deletes whole chunks behind the summary; the pages go back to where the messages start",
      () =>
        withCompaction(
          engine,
          { flow: { messageStorage: { messageWindowSize: 6, messageChunkSize: 4, retainedMessageLimit: 12 } } },
          () =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              const db = yield* Client.Client
              yield* runTurns("s-keep", 1, 40)
              const snapshot = yield* client.getSnapshot("s-keep")
              const newest = snapshot.state!.nextMessageSequence - 1
              const summary = snapshot.contextSummary!
              assert.isNotNull(summary)
              const index = Option.getOrThrow(yield* db.getAttribute("s-keep", P.AgentMessageIndex))
              assert.isAbove(index.firstSequence, 1, "retention deleted messages")
              // only messages the summary covers are deleted, whole chunks, and the newest 12 stay
              assert.isAtMost(index.firstSequence - 1, summary.lastSequence)
              assert.isAtLeast(newest - index.firstSequence + 1, 12)
              for (let s = 1; s < index.firstSequence; s += 4) {
                assert.isTrue(
                  Option.isNone(yield* db.getAttribute("s-keep", P.AgentMessageChunks, Wire.messageSequenceKey(s))),
                  `chunk ${s} is deleted`
                )
              }
              // the oldest kept chunk is the first one retention may not delete
              const oldest = index.chunks[0]!
              assert.strictEqual(oldest.firstSequence, index.firstSequence)
              assert.isTrue(oldest.lastSequence > summary.lastSequence || newest - oldest.lastSequence < 12)
              // the pages: every kept message once, in order, and where the messages start
              const { messages, pages } = yield* pageAll("s-keep", 5)
              assert.deepStrictEqual(
                messages.map((m) => m.sequence),
                range(index.firstSequence, newest)
              )
              for (const page of pages) assert.strictEqual(page.deletedBeforeSequence, index.firstSequence)
              assert.isNull(pages[0]!.nextBeforeSequence)
              // the snapshot shows what is left, and the summary
              assert.deepStrictEqual(
                snapshot.messages.map((m) => m.sequence),
                range(index.firstSequence, newest)
              )
              assert.deepStrictEqual(Option.getOrNull(yield* db.getAttribute("s-keep", P.ContextSummary)), summary)
            })
        ),
      120_000
    )

    it.live("cancel_turn cancels a running CompactContext; the next turn compacts again", () => {
      const gate = makeGate()
      let summaryCalls = 0
      let aborted: AbortSignal | undefined
      return withCompaction(
        engine,
        {
          model: {
            beforeSummary: () => Effect.suspend(() => (summaryCalls++ === 0 ? gate.wait : Effect.void))
          }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            const db = yield* Client.Client
            yield* client.startSession("s-cancel", { initialMessage: question(1) })
            let n = 1
            // turns until one compacts: its summary call is held
            for (;;) {
              const snapshot = yield* awaitSnapshot(
                "s-cancel",
                (s) => (s.state?.turnCount ?? 0) >= n || s.state?.status === "compacting_context",
                "the turn's end or its compaction"
              )
              if (snapshot.state?.status === "compacting_context") break
              n++
              assert.isTrue(yield* client.sendUserMessage("s-cancel", question(n)))
            }
            yield* awaitSnapshot("s-cancel", () => summaryCalls === 1, "the held summary call")
            aborted = kit.requests.filter(isSummaryCall)[0]!.cancellationSignal
            assert.isTrue(yield* client.cancelTurn("s-cancel"))
            const done = yield* awaitTurns("s-cancel", n)
            assert.strictEqual(done.state?.status, "waiting_for_user_message")
            assert.isNull(done.contextSummary)
            assert.isTrue(aborted?.aborted, "the summary call's signal aborted")
            assert.isTrue(Option.isNone(yield* db.getAttribute("s-cancel", P.ContextSummary)))
            const types = (yield* allEvents("s-cancel")).map((e) => e.event.type)
            assert.include(types, "turn_cancelled")
            assert.include(types, "compaction_started")
            assert.notInclude(types, "compaction_finished")
            // the next turn compacts (the cutoff still advances past no summary) and answers
            yield* gate.open
            assert.isTrue(yield* client.sendUserMessage("s-cancel", question(n + 1)))
            const next = yield* awaitTurns("s-cancel", n + 1)
            assert.isNull(next.state?.lastTurnError)
            assert.strictEqual(next.contextSummary?.generation, 1)
          })
      )
    })

    it.live(
      "compaction waits for the turn's pending approval, question, durable wait and task, and keeps each call with its result",
      () => {
        let released = false
        // a tool call with a long text beside it: after it the context is over the trigger (850 of 1,000 tokens)
        const LONG = "y".repeat(1_600)
        const calls: Record<string, { readonly toolName: string; readonly arguments: string }> = {
          approve: { toolName: "transfer", arguments: JSON.stringify({ amount: 5 }) },
          ask: { toolName: "ask_user", arguments: JSON.stringify({ question: "Which account?" }) },
          wait: { toolName: "durable_wait", arguments: JSON.stringify({ seconds: 1 }) },
          task: { toolName: "deploy", arguments: "{}" }
        }
        const tools: ToolSource.ToolSourceShape = {
          tools: [
            {
              name: "transfer",
              description: "Moves money.",
              parameters: { type: "object" },
              effect: "non_idempotent_write"
            },
            {
              name: "deploy",
              description: "Deploys in a remote task.",
              parameters: { type: "object" },
              effect: "read"
            },
            { name: "lookup", description: "Looks a thing up.", parameters: { type: "object" }, effect: "read" }
          ],
          call: (request) =>
            Effect.succeed(
              request.toolName === "deploy"
                ? Runner.toolTaskStarted(`task-${request.toolCallId}`, 1)
                : { output: "done" }
            ),
          pollToolTask: () =>
            Effect.sync(() =>
              released ? { output: "deployed" } : { _tag: "ToolTaskPending" as const, pollIntervalSeconds: 1 }
            )
        }
        return withCompaction(
          engine,
          {
            tools,
            flow: { builtInTools: ["ask_user", "durable_wait"] },
            model: {
              callFor: (_n, text) => {
                const kind = /^question \d+ (\w+)/.exec(text)?.[1]
                const call = kind === undefined ? undefined : calls[kind]
                // beside each pending call a read that finishes at once: the turn's model call waits for both
                return call === undefined
                  ? undefined
                  : { toolCalls: [call, { toolName: "lookup", arguments: "{}" }], text: LONG }
              }
            }
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              const sessionId = "s-pending"
              yield* runTurns(sessionId, 1, 2)
              const cases: ReadonlyArray<{
                readonly kind: string
                readonly pending: string
                readonly resolve: (
                  toolCallId: string
                ) => Effect.Effect<unknown, unknown, AgentSessionClient.AgentSessionClient>
              }> = [
                {
                  kind: "approve",
                  pending: "awaiting_approval",
                  resolve: (id) => client.resolveInterrupt(sessionId, { interruptId: id, approved: true })
                },
                {
                  kind: "ask",
                  pending: "awaiting_answer",
                  resolve: (id) => client.answerQuestion(sessionId, { interruptId: id, answer: "savings" })
                },
                // the timer ends by itself after its second
                { kind: "wait", pending: "waiting_for_timer", resolve: () => Effect.void },
                {
                  kind: "task",
                  pending: "waiting_for_task",
                  resolve: () =>
                    Effect.sync(() => {
                      released = true
                    })
                }
              ]
              let turn = 2
              for (const c of cases) {
                turn++
                const toolCallId = `${calls[c.kind]!.toolName}-${turn}`
                assert.isTrue(
                  yield* client.sendUserMessage(
                    sessionId,
                    question(turn, false).replace(`question ${turn}`, `question ${turn} ${c.kind}`)
                  )
                )
                const waiting = yield* awaitSnapshot(
                  sessionId,
                  (s) =>
                    s.toolCalls.some((t) => t.toolCallId === toolCallId && t.status === c.pending) &&
                    s.toolCalls.some((t) => t.toolCallId === `lookup-${turn}` && t.status === "succeeded"),
                  `the pending ${c.kind}`
                )
                // while it is pending the next model input (the request that got the call, the call with its text,
                // and the result to come) is over the trigger, and no compaction runs
                const asked = kit.requests.at(-1)!
                assert.isFalse(isSummaryCall(asked))
                const input = {
                  instructions: asked.instructions,
                  messages: [
                    ...asked.messages,
                    {
                      role: "assistant" as const,
                      text: LONG,
                      toolCalls: [
                        { toolCallId, toolName: calls[c.kind]!.toolName, arguments: calls[c.kind]!.arguments },
                        { toolCallId: `lookup-${turn}`, toolName: "lookup", arguments: "{}" }
                      ]
                    }
                  ]
                }
                assert.isAtLeast(tokensOf(input), 0.85 * WINDOW, `the context is over the trigger (${c.kind})`)
                assert.notStrictEqual(waiting.state?.status, "compacting_context")
                const before = (yield* allEvents(sessionId)).map((e) => e.event.type)
                assert.strictEqual(
                  before.filter((t) => t === "compaction_started").length,
                  before.filter((t) => t === "compaction_finished").length,
                  "no compaction is running"
                )
                yield* c.resolve(toolCallId)
                const done = yield* awaitTurns(sessionId, turn)
                assert.isNull(done.state?.lastTurnError, c.kind)
                // the turn compacted once the call had its result, not before
                const events = (yield* allEvents(sessionId)).map((e) => e.event)
                const finished = events.findIndex(
                  (e) =>
                    e.type === "tool_call_finished" &&
                    (e.payload as unknown as { tool_call_id?: string; toolCallId?: string }).toolCallId === toolCallId
                )
                assert.isAtLeast(finished, 0, `the ${c.kind} call finished`)
                const started = events.findIndex((e, i) => i >= before.length && e.type === "compaction_started")
                assert.isAbove(started, finished, `the ${c.kind} turn compacted after the call's result`)
              }
              // no request, summary calls included, separated a call from its result
              for (const request of kit.requests) {
                assert.isAtMost(tokensOf(request), WINDOW)
                assertPairsKept(request)
              }
            })
        )
      },
      120_000
    )

    it.live("a blank summary fails the attempt; out of attempts the turn fails through RecordTurnFailure", () =>
      withCompaction(engine, { model: { summaryText: () => "  \n " } }, (kit) =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          yield* client.startSession("s-blank", { initialMessage: question(1) })
          let n = 1
          for (;;) {
            const snapshot = yield* awaitTurns("s-blank", n)
            if (snapshot.state?.lastTurnError !== null) break
            n++
            assert.isTrue(yield* client.sendUserMessage("s-blank", question(n)))
          }
          const snapshot = yield* client.getSnapshot("s-blank")
          assert.strictEqual(snapshot.state?.lastTurnError, "ModelCallError: the context summary is blank")
          assert.isNull(snapshot.contextSummary)
          // three attempts, three summary calls, and the session goes on
          assert.strictEqual(kit.requests.filter(isSummaryCall).length, 3)
          assert.strictEqual(snapshot.state?.status, "waiting_for_user_message")
          assert.deepStrictEqual(yield* eventsOf("s-blank", "compaction_finished"), [])
        })
      )
    )

    it.live("a session stored before compaction existed (no index, no summary) upgrades in place", () =>
      withCompaction(
        engine,
        { flow: { messageStorage: { messageWindowSize: 8, messageChunkSize: 4, retainedMessageLimit: 10 } } },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            const db = yield* Client.Client
            yield* client.startSession("s-old")
            yield* awaitTurns("s-old", 0)
            // 40 messages of 20 earlier turns, as 0.1.0 stored them: all in AgentMessages, no index, no summary
            const old = 40
            yield* storeOldLayout("s-old", old, (turn, user) => (user ? question(turn) : `answer ${turn}: old`))
            assert.isTrue(yield* client.sendUserMessage("s-old", question(21)))
            const done = yield* awaitTurns("s-old", 21)
            assert.isNull(done.state?.lastTurnError)
            // the first turn compacted the old conversation, and the model input fitted the window
            assert.strictEqual(done.contextSummary?.generation, 1)
            for (const request of kit.requests) assert.isAtMost(tokensOf(request), WINDOW)
            const summaryCall = kit.requests.find(isSummaryCall)!
            assert.isDefined(summaryCall)
            // the rollover moved the old messages into chunks; later turns delete those the summary covers
            yield* runTurns("s-old", 22, 30)
            const index = Option.getOrThrow(yield* db.getAttribute("s-old", P.AgentMessageIndex))
            const snapshot = yield* client.getSnapshot("s-old")
            assert.isAbove(index.firstSequence, 1)
            assert.isAtMost(index.firstSequence - 1, snapshot.contextSummary!.lastSequence)
            const { messages } = yield* pageAll("s-old", 7)
            assert.deepStrictEqual(
              messages.map((m) => m.sequence),
              range(index.firstSequence, snapshot.state!.nextMessageSequence - 1)
            )
          })
      )
    )
  })

describe("compaction: construction", () => {
  it("make refuses an invalid policy", () => {
    assert.throws(
      () =>
        AgentSessionFlow.make({
          flowType: "Bad",
          compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: 0 })
        }),
      /contextWindowTokens/
    )
    assert.throws(
      () =>
        AgentSessionFlow.make({
          flowType: "Bad",
          compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: 100, triggerRatio: 0.2 })
        }),
      /retainedRatio/
    )
    assert.deepStrictEqual(AgentSessionFlow.CompactionPolicy({ contextWindowTokens: 100 }), {
      contextWindowTokens: 100,
      triggerRatio: 0.85,
      retainedRatio: 0.3
    })
  })

  for (const [name, engine] of [
    ["embedded", embeddedEngine],
    ["cluster", clusterEngine]
  ] as const) {
    it.live(`the worker refuses a compacting Flow whose runner lacks the capability (${name} engine)`, () =>
      Effect.gen(function* () {
        const flow = AgentSessionFlow.make({
          flowType: FLOW_TYPE,
          compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: 1000 })
        })
        const runner: Runner.AgentFrameworkRunnerShape = {
          name: "no-compaction",
          buildUserMessage: (text) => Stepwise.toFrameworkMessage({ type: "user", text }),
          runModelStep: () => Effect.die("not called"),
          executeDeferredToolCall: () => Effect.die("not called"),
          estimateInputTokens: () => 0
        }
        assert.isFalse(Runner.isContextCompactionRunner(runner))
        const exit = yield* Effect.exit(
          Layer.build(
            AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(Runner.layer(runner)), Layer.provideMerge(engine({})))
          ).pipe(Effect.scoped)
        )
        assert.isTrue(Exit.isFailure(exit))
        assert.include(
          String(Exit.isFailure(exit) ? exit.cause : ""),
          AgentSessionFlow.compactionNeedsRunnerSupport(FLOW_TYPE)
        )
      })
    )
  }
})

describe("compaction: a runner without the capability on a compacted session", () => {
  it.live("gets the messages retention kept, no summary, and a warning on each model call", () => {
    const dir = mkdtempSync(join(tmpdir(), "das-compaction-warning-"))
    const filename = join(dir, "warning.db")
    const warnings: Array<string> = []
    const seen: Array<Runner.AgentTurnContext> = []
    const collect = Logger.make((options) => {
      if (options.logLevel === "Warn") warnings.push(JSON.stringify(options.message))
    })
    const services = Layer.mergeAll(
      Layer.succeed(ModelClient.ModelClient, compactionModel()),
      ToolSource.layer([lookupTool])
    )
    const storage = { messageWindowSize: 6, messageChunkSize: 4, retainedMessageLimit: 12 }
    // first a compacting worker, whose retention deletes the oldest messages
    const compacting = AgentSessionFlow.layerWorker(
      AgentSessionFlow.make({
        flowType: FLOW_TYPE,
        retryInitialInterval: "100 millis",
        compaction: AgentSessionFlow.CompactionPolicy({ contextWindowTokens: WINDOW }),
        messageStorage: storage
      })
    ).pipe(Layer.provide(Stepwise.layer(compactionAgent)), Layer.provide(services))
    // then, on the same file, a worker whose runner lacks the capability (Stepwise without its three methods)
    const plain = AgentSessionFlow.layerWorker(
      AgentSessionFlow.make({ flowType: FLOW_TYPE, retryInitialInterval: "100 millis", messageStorage: storage })
    ).pipe(
      Layer.provide(
        Layer.effect(
          Runner.AgentFrameworkRunner,
          Effect.map(
            Stepwise.make(compactionAgent),
            ({ estimateInputTokens: _e, selectCompactionCutoff: _s, summarizeContext: _c, ...runner }) => ({
              ...runner,
              runModelStep: (turn: Runner.AgentTurnContext) => {
                seen.push(turn)
                return runner.runModelStep(turn)
              }
            })
          )
        )
      ),
      Layer.provide(services)
    )
    const on = <A, E>(
      worker: Layer.Layer<never, unknown, Engine.EngineServices>,
      body: Effect.Effect<A, E, AgentSessionClient.AgentSessionClient | Client.Client>
    ) =>
      body.pipe(
        Effect.provide(
          Layer.mergeAll(worker, AgentSessionClient.layer(FLOW_TYPE)).pipe(
            Layer.provideMerge(Engine.layerEmbedded({ filename, pollInterval: "50 millis" }))
          )
        ),
        Effect.scoped
      )
    return Effect.gen(function* () {
      const firstSequence = yield* on(
        compacting,
        Effect.gen(function* () {
          yield* runTurns("s-warn", 1, 30)
          const index = Option.getOrThrow(yield* (yield* Client.Client).getAttribute("s-warn", P.AgentMessageIndex))
          assert.isAbove(index.firstSequence, 1)
          return index.firstSequence
        })
      )
      assert.deepStrictEqual(warnings, [])
      yield* on(
        plain,
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          assert.isTrue(yield* client.sendUserMessage("s-warn", question(31)))
          yield* awaitTurns("s-warn", 31)
        })
      )
      assert.strictEqual(seen.length, 1)
      assert.strictEqual(seen[0]!.messages[0]!.sequence, firstSequence)
      assert.isNull(seen[0]!.contextSummary ?? null)
      assert.strictEqual(warnings.filter((w) => w.includes("no compaction capability")).length, 1)
    }).pipe(
      Effect.provide(Logger.layer([collect])),
      Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    )
  })
})

describe("embedded engine", () => {
  compactionSuite(embeddedEngine, 200)
})
// The 200 turns on Postgres too (about 70 s at load 20 on 2 cores; the test waits up to 200 s).
describe("cluster engine", () => {
  compactionSuite(clusterEngine, 200)
})
