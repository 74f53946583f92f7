// The Claude Agent SDK runner on the embedded engine: the real Claude Code binary against a scripted
// Anthropic Messages server. A text turn, a read run inline, a deferred write run as its own Step exactly
// once, two parallel writes (one deferred call per RunModel), a rejected write the model sees as denied.
import { rmSync } from "node:fs"
import { join } from "node:path"
import { READ_TOOL_TURN_STEPS } from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { ClaudeAgentSdkRunner } from "../src/index.ts"
import {
  awaitSnapshot,
  awaitTurns,
  clusterEngine,
  lastToolResults,
  stepShape,
  userTexts,
  withClaudeSession
} from "./support.ts"

const T = 300_000

describe("Claude Agent SDK runner (real binary, scripted Messages API)", () => {
  it.live(
    "a text turn: one RunModel, text and usage recorded; the next turn resumes the harness session",
    () =>
      withClaudeSession(
        (_request, index) => ({
          text: index === 0 ? "Hello from Claude." : "Second answer.",
          usage: { inputTokens: 12, outputTokens: 4 }
        }),
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("c1", { initialMessage: "Hi there" })
            const first = yield* awaitTurns("c1", 1)
            assert.deepStrictEqual(yield* stepShape("c1"), ["StartAgentSession", "RunModel", "AwaitUserMessage"])
            assert.deepStrictEqual(
              first.messages.map((m) => [m.role, m.text]),
              [
                ["user", "Hi there"],
                ["assistant", "Hello from Claude."]
              ]
            )
            assert.strictEqual(first.usage.modelCalls, 1)
            assert.strictEqual(first.usage.inputTokens, 12)
            assert.strictEqual(first.usage.outputTokens, 4)
            assert.strictEqual(kit.server.requests[0]!.model, "claude-scripted-1")
            assert.isTrue(yield* client.sendUserMessage("c1", "And again"))
            const second = yield* awaitTurns("c1", 2)
            assert.strictEqual(second.messages.at(-1)?.text, "Second answer.")
            // the harness resumed its own transcript: the second request carries the first exchange
            const texts = userTexts(kit.server.requests.at(-1)!)
            assert.include(texts.join("\n"), "Hi there")
            assert.include(texts.join("\n"), "And again")
            // and the first turn's answer: the transcript position the first turn committed keeps its last entry
            assert.include(JSON.stringify(kit.server.requests.at(-1)!.messages), "Hello from Claude.")
            // offline: nothing but Messages requests reached the server
            assert.deepStrictEqual(kit.server.otherRequests, [])
            assert.strictEqual(kit.server.requests.length, 2)
          })
      ),
    T
  )

  it.live(
    "a read tool runs inline in the RunModel: no tool Step, the model sees its result",
    () =>
      withClaudeSession(
        (request) =>
          Object.keys(lastToolResults(request)).length === 0
            ? { toolUses: [{ id: "toolu_r1", name: "mcp__app__get_weather", input: { city: "Paris" } }] }
            : { text: "It is 21 degrees in Paris." },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("c2", { initialMessage: "Weather in Paris?" })
            const s = yield* awaitTurns("c2", 1)
            assert.deepStrictEqual(yield* stepShape("c2"), ["StartAgentSession", "RunModel", "AwaitUserMessage"])
            assert.strictEqual(kit.count("get_weather"), 1)
            assert.strictEqual(s.messages.at(-1)?.text, "It is 21 degrees in Paris.")
            assert.strictEqual(s.usage.modelCalls, 2, "two harness model calls in the one RunModel")
            assert.deepStrictEqual(lastToolResults(kit.server.requests.at(-1)!), {
              toolu_r1: '{"city":"Paris","temperature":21}'
            })
          })
      ),
    T
  )

  it.live(
    "a write is deferred: run once as its own CallTool Step with the session's key; the next RunModel resumes with its result",
    () =>
      withClaudeSession(
        (request) =>
          Object.keys(lastToolResults(request)).length === 0
            ? { toolUses: [{ id: "toolu_w1", name: "mcp__app__save_note", input: { text: "milk" } }] }
            : { text: "Saved your note." },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("c3", { initialMessage: "Note: milk" })
            const s = yield* awaitTurns("c3", 1)
            assert.deepStrictEqual(yield* stepShape("c3"), READ_TOOL_TURN_STEPS)
            assert.strictEqual(kit.count("save_note"), 1)
            assert.strictEqual(kit.idempotencyKeys.length, 1)
            assert.match(kit.idempotencyKeys[0]!, /^c3\/[^/]+\/toolu_w1$/)
            assert.strictEqual(s.messages.at(-1)?.text, "Saved your note.")
            assert.deepStrictEqual(lastToolResults(kit.server.requests.at(-1)!), { toolu_w1: "saved milk" })
          })
      ),
    T
  )

  it.live(
    "two parallel writes: the first is deferred and run once in its own Step, the second refused with ONE_WRITE_AT_A_TIME; the model's repeat runs in a second Step",
    () =>
      withClaudeSession(
        (request) => {
          const results = lastToolResults(request)
          if (Object.keys(results).length === 0) {
            return {
              toolUses: [
                { id: "toolu_p1", name: "mcp__app__save_note", input: { text: "a" } },
                { id: "toolu_p2", name: "mcp__app__save_note", input: { text: "b" } }
              ]
            }
          }
          if (results.toolu_p3 === undefined) {
            return { toolUses: [{ id: "toolu_p3", name: "mcp__app__save_note", input: { text: "b" } }] }
          }
          return { text: "Both saved." }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("c4", { initialMessage: "Save a and b" })
            const s = yield* awaitTurns("c4", 1)
            assert.deepStrictEqual(yield* stepShape("c4"), [
              "StartAgentSession",
              "RunModel",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "AwaitUserMessage"
            ])
            assert.strictEqual(kit.count("save_note"), 2)
            assert.deepStrictEqual(
              kit.idempotencyKeys.map((k) => k.split("/").at(-1)),
              ["toolu_p1", "toolu_p3"]
            )
            assert.strictEqual(s.messages.at(-1)?.text, "Both saved.")
            const results = lastToolResults(kit.server.requests.at(-1)!)
            assert.strictEqual(results.toolu_p1, "saved a")
            assert.include(results.toolu_p2, ClaudeAgentSdkRunner.ONE_WRITE_AT_A_TIME)
            assert.strictEqual(results.toolu_p3, "saved b")
          })
      ),
    T
  )

  it.live(
    "a rejected write never runs: the resumed harness answers it with the rejection text",
    () =>
      withClaudeSession(
        (request) =>
          Object.keys(lastToolResults(request)).length === 0
            ? { toolUses: [{ id: "toolu_e1", name: "mcp__app__send_email", input: { to: "bob" } }] }
            : { text: "I did not send it." },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("c5", { initialMessage: "Email bob" })
            yield* awaitSnapshot(
              "c5",
              (s) => s.pendingInterrupts.some((i) => i.toolCallId === "toolu_e1"),
              "the approval interrupt"
            )
            const pending = (yield* client.getSnapshot("c5")).pendingInterrupts[0]!
            assert.isTrue(
              yield* client.resolveInterrupt("c5", {
                interruptId: pending.interruptId,
                approved: false,
                rejectionMessage: "not now"
              })
            )
            const s = yield* awaitTurns("c5", 1)
            assert.strictEqual(kit.count("send_email"), 0)
            assert.strictEqual(s.messages.at(-1)?.text, "I did not send it.")
            const results = lastToolResults(kit.server.requests.at(-1)!)
            assert.include(results.toolu_e1 ?? "", "not now")
          })
      ),
    T
  )

  it.live(
    "an approved non-idempotent write runs once in CallSingleAttemptTool; a read with a ToolPolicy requiring approval is deferred too",
    () =>
      withClaudeSession(
        (request) => {
          const results = lastToolResults(request)
          if (results.toolu_r9 === undefined) {
            return { toolUses: [{ id: "toolu_r9", name: "mcp__app__get_weather", input: { city: "Oslo" } }] }
          }
          if (results.toolu_s1 === undefined) {
            return { toolUses: [{ id: "toolu_s1", name: "mcp__app__send_email", input: { to: "bob" } }] }
          }
          return { text: "Sent." }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("c7", { initialMessage: "Weather, then email bob" })
            for (const id of ["toolu_r9", "toolu_s1"]) {
              yield* awaitSnapshot("c7", (s) => s.pendingInterrupts.some((i) => i.toolCallId === id), `approval ${id}`)
              const pending = (yield* client.getSnapshot("c7")).pendingInterrupts.find((i) => i.toolCallId === id)!
              assert.isTrue(yield* client.resolveInterrupt("c7", { interruptId: pending.interruptId, approved: true }))
            }
            const s = yield* awaitTurns("c7", 1)
            // ResumeTurn starts beside each approval wait, so compare the Steps without their order
            assert.deepStrictEqual([...(yield* stepShape("c7"))].sort(), [
              "AwaitToolApproval",
              "AwaitToolApproval",
              "AwaitUserMessage",
              "CallSingleAttemptTool",
              "CallTool",
              "ResumeTurn",
              "ResumeTurn",
              "RunModel",
              "RunModel",
              "RunModel",
              "StartAgentSession"
            ])
            assert.strictEqual(kit.count("get_weather"), 1)
            assert.strictEqual(kit.count("send_email"), 1)
            assert.strictEqual(s.messages.at(-1)?.text, "Sent.")
            assert.strictEqual(lastToolResults(kit.server.requests.at(-1)!).toolu_s1, "sent to bob")
          }),
        { toolPolicies: { get_weather: { effect: "read", requiresApproval: true } } }
      ),
    T
  )

  it.live(
    "text deltas stream as text_delta events; cancel_turn aborts the harness's model call and the next turn answers",
    () => {
      let release!: () => void
      const gate = new Promise<void>((resolve) => {
        release = resolve
      })
      return withClaudeSession(
        async (_request, index) => {
          if (index === 0) return { text: "Streamed answer, in two pieces." }
          if (index === 1) {
            await gate
            return { text: "never seen" }
          }
          return { text: "After the cancel." }
        },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("c6", { initialMessage: "Stream please" })
            yield* awaitTurns("c6", 1)
            const events = Array.from(yield* Stream.runCollect(client.events("c6")))
            const deltas = events.filter((e) => e.event.type === "text_delta").map((e: any) => e.event.payload.text)
            assert.strictEqual(deltas.join(""), "Streamed answer, in two pieces.")
            assert.isTrue(yield* client.sendUserMessage("c6", "think hard"))
            yield* awaitSnapshot("c6", () => kit.server.requests.length === 2, "the second model call")
            assert.isTrue(yield* client.cancelTurn("c6"))
            const done = yield* awaitTurns("c6", 2)
            assert.deepStrictEqual(done.messages.map((m) => m.text).slice(-1), ["think hard"])
            yield* awaitSnapshot("c6", () => kit.server.aborted.includes(1), "the harness to hang up")
            const cancelled = Array.from(yield* Stream.runCollect(client.events("c6"))).filter(
              (e) => e.event.type === "turn_cancelled"
            )
            assert.strictEqual(cancelled.length, 1)
            release()
            assert.isTrue(yield* client.sendUserMessage("c6", "again"))
            const next = yield* awaitTurns("c6", 3)
            assert.strictEqual(next.messages.at(-1)?.text, "After the cancel.")
          })
      )
    },
    T
  )

  for (const [engineName, engine] of [
    ["embedded", undefined],
    ["cluster (Postgres)", clusterEngine]
  ] as const) {
    it.live(
      `SqlSessionStore on the ${engineName} engine: with the local transcript gone, the next turn resumes the harness session from the engine's database`,
      () =>
        withClaudeSession(
          (_request, index) => ({ text: index === 0 ? "First." : "Second." }),
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("c8", { initialMessage: "Remember the word zebra" })
              yield* awaitTurns("c8", 1)
              // a worker whose config directory never saw the session
              rmSync(join(kit.configDir!, "projects"), { recursive: true, force: true })
              assert.isTrue(yield* client.sendUserMessage("c8", "What was the word?"))
              const s = yield* awaitTurns("c8", 2)
              assert.strictEqual(s.messages.at(-1)?.text, "Second.")
              const texts = userTexts(kit.server.requests.at(-1)!).join("\n")
              assert.include(texts, "Remember the word zebra")
              assert.include(texts, "What was the word?")
            }),
          { sessionStore: true, ...(engine === undefined ? {} : { engine }) }
        ),
      T
    )
  }
})
