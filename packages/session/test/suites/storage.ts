// Message storage ("Message storage" in docs/session-contract.md): the window of AgentMessages, rollover into
// AgentMessageChunks listed in AgentMessageIndex, single oversized messages, the reads that page through
// chunks, and a session stored the old way (every message in AgentMessages, no index) upgraded in place.
import { Client } from "@durable-agent/engine"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { AgentSessionClient, type ModelClient, Persistence as P, Wire } from "../../src/index.ts"
import { allEvents, awaitTurns, type EngineFactory, FLOW_TYPE, pageAll, sessionOn, storeOldLayout } from "../support.ts"

/** A scripted answer per turn. */
const answers = (n: number): Array<ModelClient.ScriptedStep> =>
  Array.from({ length: n }, (_, i) => ({ text: `answer ${i + 1}` }))

const index = (sessionId: string) =>
  Effect.flatMap(Client.Client, (client) => client.getAttribute(sessionId, P.AgentMessageIndex))

/** The window's sequences: the AgentMessages instances that are set. */
const windowSequences = (sessionId: string, upTo: number) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const out: Array<number> = []
    for (let s = 1; s <= upTo; s++) {
      const m = yield* client.getAttribute(sessionId, P.AgentMessages, Wire.messageSequenceKey(s))
      if (Option.isSome(m)) out.push(s)
    }
    return out
  })

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

/** Registers these tests for one engine (see test/session-embedded.test.ts and test/session-cluster.test.ts). */
export const storageSuite = (engine: EngineFactory) => {
  const withSession = sessionOn(engine)

  describe("message storage", () => {
    it.live(
      "a long session rolls the window over into chunks; the model, the snapshot and the pages see every message",
      () =>
        withSession(
          { script: answers(12), flow: { messageStorage: { messageWindowSize: 4, messageChunkSize: 3 } } },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("s-long", { initialMessage: "message 1" })
              yield* awaitTurns("s-long", 1)
              for (let turn = 2; turn <= 12; turn++) {
                assert.isTrue(yield* client.sendUserMessage("s-long", `message ${turn}`))
                yield* awaitTurns("s-long", turn)
              }
              // 24 messages: a user message and an answer per turn
              const stored = yield* index("s-long")
              assert.isTrue(Option.isSome(stored), "the first rollover wrote the index")
              const idx = Option.getOrThrow(stored)
              // chunks of 3 consecutive messages from sequence 1, and the window after them holds at most 4
              assert.deepStrictEqual(
                idx.chunks,
                range(0, idx.chunks.length - 1).map((i) => ({ firstSequence: 3 * i + 1, lastSequence: 3 * i + 3 }))
              )
              assert.isAtLeast(idx.chunks.length, 6, "several rollovers")
              assert.strictEqual(idx.firstSequence, 1)
              assert.strictEqual(idx.windowFirstSequence, 3 * idx.chunks.length + 1)
              const window = yield* windowSequences("s-long", 24)
              assert.deepStrictEqual(window, range(idx.windowFirstSequence, 24))
              assert.isAtMost(window.length, 4)
              // each chunk holds exactly its range, and nothing is stored twice
              const db = yield* Client.Client
              for (const r of idx.chunks) {
                const chunk = Option.getOrThrow(
                  yield* db.getAttribute("s-long", P.AgentMessageChunks, Wire.messageSequenceKey(r.firstSequence))
                )
                assert.deepStrictEqual(
                  chunk.messages.map((m) => m.sequence),
                  range(r.firstSequence, r.lastSequence)
                )
              }
              // the last model call saw the whole conversation, in order
              const last = kit.requests.at(-1)!
              assert.strictEqual(last.messages.length, 23)
              assert.deepStrictEqual(
                last.messages.map((m) => (m.role === "tool" ? null : m.text)),
                [...range(1, 11).flatMap((n) => [`message ${n}`, `answer ${n}`]), "message 12"]
              )
              // the snapshot returns every message (fewer than 200), in order
              const snapshot = yield* client.getSnapshot("s-long")
              assert.deepStrictEqual(
                snapshot.messages.map((m) => m.sequence),
                range(1, 24)
              )
              assert.deepStrictEqual(
                snapshot.messages.map((m) => m.text),
                range(1, 12).flatMap((n) => [`message ${n}`, `answer ${n}`])
              )
              // list_agent_messages pages back through window and chunks to the oldest
              const { messages, pages } = yield* pageAll("s-long", 5)
              assert.deepStrictEqual(
                messages.map((m) => m.sequence),
                range(1, 24)
              )
              assert.strictEqual(pages.length, 5)
              assert.deepStrictEqual(
                pages.map((p) => p.deletedBeforeSequence),
                pages.map(() => null)
              )
              // every turn counted its one answer through TurnReplySequence
              const completed = (yield* allEvents("s-long")).filter((e) => e.event.type === "turn_completed")
              assert.deepStrictEqual(
                completed.map((e) => e.event.payload),
                range(1, 12).map(() => ({ messageCount: 1 }))
              )
            })
        )
    )

    it.live("an oversized message gets a chunk of its own among the window's sequences; rollover steps over it", () =>
      withSession(
        {
          script: answers(6),
          flow: { messageStorage: { messageWindowSize: 3, messageChunkSize: 2, messageChunkMaxBytes: 2_000 } }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            const big = `big ${"x".repeat(3_000)}`
            yield* client.startSession("s-big", { initialMessage: "first" })
            yield* awaitTurns("s-big", 1)
            assert.isTrue(yield* client.sendUserMessage("s-big", big))
            yield* awaitTurns("s-big", 2)
            // sequence 3 skipped the window: its own chunk, listed in the index before any rollover
            const early = Option.getOrThrow(yield* index("s-big"))
            assert.deepStrictEqual(early.chunks, [{ firstSequence: 3, lastSequence: 3 }])
            assert.strictEqual(early.windowFirstSequence, 1)
            assert.deepStrictEqual(yield* windowSequences("s-big", 4), [1, 2, 4])
            for (let turn = 3; turn <= 6; turn++) {
              assert.isTrue(yield* client.sendUserMessage("s-big", `message ${turn}`))
              yield* awaitTurns("s-big", turn)
            }
            const idx = Option.getOrThrow(yield* index("s-big"))
            // chunks never span the oversized message: [1,2], [3], [4,5], ...
            assert.deepStrictEqual(idx.chunks.slice(0, 3), [
              { firstSequence: 1, lastSequence: 2 },
              { firstSequence: 3, lastSequence: 3 },
              { firstSequence: 4, lastSequence: 5 }
            ])
            for (let i = 1; i < idx.chunks.length; i++) {
              assert.strictEqual(idx.chunks[i]!.firstSequence, idx.chunks[i - 1]!.lastSequence + 1)
            }
            const snapshot = yield* client.getSnapshot("s-big")
            assert.deepStrictEqual(
              snapshot.messages.map((m) => m.sequence),
              range(1, 12)
            )
            assert.strictEqual(snapshot.messages[2]!.text, big)
            const { messages } = yield* pageAll("s-big", 4)
            assert.deepStrictEqual(
              messages.map((m) => m.sequence),
              range(1, 12)
            )
            // the model saw the big message in its place
            const last = kit.requests.at(-1)!
            assert.deepStrictEqual(last.messages[2], { role: "user", text: big })
            assert.strictEqual(last.messages.length, 11)
          })
      )
    )

    it.live("reads never write: the snapshot and the pages come from committed state and equal the RPCs' replies", () =>
      withSession({ script: answers(3), flow: { messageStorage: { messageWindowSize: 2, messageChunkSize: 2 } } }, () =>
        Effect.gen(function* () {
          const client = yield* AgentSessionClient.AgentSessionClient
          const db = yield* Client.Client
          const flow = AgentSessionClient.clientFlow(FLOW_TYPE)
          yield* client.startSession("s-read", { initialMessage: "one" })
          yield* awaitTurns("s-read", 1)
          for (const text of ["two", "three"]) {
            assert.isTrue(yield* client.sendUserMessage("s-read", text))
            yield* awaitTurns("s-read", (yield* client.getSnapshot("s-read")).state!.turnCount + 1)
          }
          const history = (yield* db.history("s-read")).length
          const snapshots = []
          for (let i = 0; i < 10; i++) snapshots.push(yield* client.getSnapshot("s-read"))
          const page = yield* client.listMessages("s-read", { beforeSequence: 5, limit: 3 })
          assert.strictEqual((yield* db.history("s-read")).length, history, "no history row")
          // what the RPCs return through the owner, at the same commit
          const viaRpc = yield* db.invokeRpc(flow, flow.rpcs_.get_agent_snapshot, "s-read", null)
          assert.strictEqual((yield* db.history("s-read")).length, history + 1, "the RPC itself commits (RpcCompleted)")
          for (const snapshot of snapshots) assert.deepStrictEqual(snapshot, viaRpc)
          assert.deepStrictEqual(
            viaRpc.messages.map((m) => m.sequence),
            range(1, 6)
          )
          assert.deepStrictEqual(
            page,
            yield* db.invokeRpc(flow, flow.rpcs_.list_agent_messages, "s-read", { beforeSequence: 5, limit: 3 })
          )
          assert.deepStrictEqual(
            page.messages.map((m) => m.sequence),
            [2, 3, 4]
          )
          // a handler that writes is refused by the query path, and nothing is queued
          const refused = yield* Effect.flip(
            db.queryRpc(flow, flow.rpcs_.send_user_message, "s-read", { text: "sneaky", planMode: false })
          )
          assert.strictEqual(refused._tag, "RpcFailed")
          assert.strictEqual(refused._tag === "RpcFailed" ? refused.errorType : "", "ReadOnlyViolation")
          assert.strictEqual((yield* client.getSnapshot("s-read")).queuedMessageCount, 0)
          // a missing session fails as the RPC does
          assert.strictEqual((yield* Effect.flip(client.getSnapshot("nobody")))._tag, "FlowNotFound")
        })
      )
    )

    it.live("reads that load the chunks lazily equal the RPCs' replies on a session with many chunks", () =>
      withSession(
        { script: answers(12), flow: { messageStorage: { messageWindowSize: 2, messageChunkSize: 2 } } },
        () =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            const db = yield* Client.Client
            const flow = AgentSessionClient.clientFlow(FLOW_TYPE)
            yield* client.startSession("s-chunks", { initialMessage: "message 1" })
            yield* awaitTurns("s-chunks", 1)
            for (let turn = 2; turn <= 12; turn++) {
              assert.isTrue(yield* client.sendUserMessage("s-chunks", `message ${turn}`))
              yield* awaitTurns("s-chunks", turn)
            }
            const idx = Option.getOrThrow(yield* index("s-chunks"))
            assert.isAtLeast(idx.chunks.length, 10)
            const history = (yield* db.history("s-chunks")).length
            // the client's reads (chunks read as the handlers ask for them), the whole-state query, and the RPCs
            const snapshot = yield* client.getSnapshot("s-chunks")
            const whole = yield* db.queryRpc(flow, flow.rpcs_.get_agent_snapshot, "s-chunks", null)
            const pages: Array<{ readonly beforeSequence: number | null; readonly limit: number }> = [
              { beforeSequence: null, limit: 3 },
              { beforeSequence: 20, limit: 5 },
              { beforeSequence: 7, limit: 4 },
              { beforeSequence: 3, limit: 50 },
              { beforeSequence: null, limit: 1 }
            ]
            const read = []
            for (const request of pages) read.push(yield* client.listMessages("s-chunks", request))
            assert.strictEqual((yield* db.history("s-chunks")).length, history, "no history row")
            const viaRpc = yield* db.invokeRpc(flow, flow.rpcs_.get_agent_snapshot, "s-chunks", null)
            assert.deepStrictEqual(snapshot, viaRpc)
            assert.deepStrictEqual(whole, viaRpc)
            assert.deepStrictEqual(
              snapshot.messages.map((m) => m.sequence),
              range(1, 24)
            )
            for (let i = 0; i < pages.length; i++) {
              assert.deepStrictEqual(
                read[i],
                yield* db.invokeRpc(flow, flow.rpcs_.list_agent_messages, "s-chunks", pages[i]!)
              )
            }
            assert.deepStrictEqual(
              read[1]!.messages.map((m) => m.sequence),
              range(15, 19)
            )
            assert.deepStrictEqual(
              (yield* pageAll("s-chunks", 5)).messages.map((m) => m.sequence),
              range(1, 24)
            )
          })
      )
    )

    it.live(
      "a read of an unchanged session returns the page it built, as a copy of its own; after each turn the new page",
      () =>
        withSession(
          // turns that add to the window without a rollover (the index unchanged) and turns that roll it over
          { script: answers(8), flow: { messageStorage: { messageWindowSize: 6, messageChunkSize: 4 } } },
          () =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              const db = yield* Client.Client
              const flow = AgentSessionClient.clientFlow(FLOW_TYPE)
              const pages = [
                { beforeSequence: null, limit: 5 },
                { beforeSequence: null, limit: 50 },
                { beforeSequence: 6, limit: 3 }
              ] as const
              for (let turn = 1; turn <= 8; turn++) {
                if (turn === 1) yield* client.startSession("s-memo", { initialMessage: "message 1" })
                else assert.isTrue(yield* client.sendUserMessage("s-memo", `message ${turn}`))
                yield* awaitTurns("s-memo", turn)
                const viaRpc = yield* db.invokeRpc(flow, flow.rpcs_.get_agent_snapshot, "s-memo", null)
                assert.deepStrictEqual(
                  viaRpc.messages.map((m) => m.sequence),
                  range(1, 2 * turn)
                )
                // the first read builds the page, the next ones find it; a caller that changes its copy changes no other
                const first = yield* client.getSnapshot("s-memo")
                assert.deepStrictEqual(first, viaRpc)
                ;(first.messages as Array<Wire.AgentMessage>).length = 0
                for (let i = 0; i < 2; i++) assert.deepStrictEqual(yield* client.getSnapshot("s-memo"), viaRpc)
                // pages of other sizes in turn, each the RPC's reply
                for (let i = 0; i < 2; i++) {
                  for (const request of pages) {
                    assert.deepStrictEqual(
                      yield* client.listMessages("s-memo", request),
                      yield* db.invokeRpc(flow, flow.rpcs_.list_agent_messages, "s-memo", request)
                    )
                  }
                }
              }
              assert.isAtLeast(Option.getOrThrow(yield* index("s-memo")).chunks.length, 2, "rollovers")
            })
        )
    )

    it.live("a session stored the old way (every message in AgentMessages, no index) is upgraded in place", () =>
      withSession(
        {
          script: answers(2),
          flow: { messageStorage: { messageWindowSize: 4, messageChunkSize: 2 } }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("s-old")
            yield* awaitTurns("s-old", 0)
            // 40 messages of 20 earlier turns, as 0.1.0 stored them: all in AgentMessages, no AgentMessageIndex
            const old = 40
            yield* storeOldLayout("s-old", old, (turn, user) => (user ? `old question ${turn}` : `old answer ${turn}`))
            // the old layout reads as one large window
            assert.deepStrictEqual(
              (yield* client.getSnapshot("s-old")).messages.map((m) => m.sequence),
              range(1, old)
            )
            assert.deepStrictEqual(
              (yield* pageAll("s-old", 7)).messages.map((m) => m.sequence),
              range(1, old)
            )
            assert.isTrue(yield* client.sendUserMessage("s-old", "new question"))
            yield* awaitTurns("s-old", 21)
            // two commits stored messages (the turn start and the answer): each moved at most four chunks
            const idx = Option.getOrThrow(yield* index("s-old"))
            assert.deepStrictEqual(
              idx.chunks,
              range(0, 7).map((i) => ({ firstSequence: 2 * i + 1, lastSequence: 2 * i + 2 }))
            )
            assert.strictEqual(idx.windowFirstSequence, 17)
            assert.deepStrictEqual(yield* windowSequences("s-old", 42), range(17, 42))
            // the half-moved session reads whole, through the index
            const snapshot = yield* client.getSnapshot("s-old")
            assert.deepStrictEqual(
              snapshot.messages.map((m) => m.sequence),
              range(1, 42)
            )
            assert.deepStrictEqual(
              (yield* pageAll("s-old", 5)).messages.map((m) => m.sequence),
              range(1, 42)
            )
            // the model saw the old conversation before the new question
            const last = kit.requests.at(-1)!
            assert.strictEqual(last.messages.length, 41)
            assert.deepStrictEqual(last.messages[0], { role: "user", text: "old question 1" })
            assert.deepStrictEqual(last.messages[39], { role: "assistant", text: "old answer 20", toolCalls: [] })
            assert.deepStrictEqual(last.messages[40], { role: "user", text: "new question" })
            // a second turn drains the window further
            assert.isTrue(yield* client.sendUserMessage("s-old", "another"))
            yield* awaitTurns("s-old", 22)
            const drained = Option.getOrThrow(yield* index("s-old"))
            assert.strictEqual(drained.chunks.length, 16)
            assert.deepStrictEqual(
              (yield* client.getSnapshot("s-old")).messages.map((m) => m.sequence),
              range(1, 44)
            )
          })
      )
    )
  })
}
