// The Claude Agent SDK runner's turn controls and records, the real binary against the scripted server:
// the model's name, usage and cost from the query's result message; a steer while a deferred write waits
// for approval ends the turn, the write never runs and the next turn's harness sees the call as not run;
// built-in Claude Code tools enabled by `builtInTools` run inside the harness; a RunModel retry continues
// the same turn from the committed transcript point (the prompt once, the inline reads again).
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { Client } from "@durable-agent/engine"
import { READ_TOOL_TURN_STEPS } from "@durable-agent/runner-kit/Conformance"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { ClaudeAgentSdkRunner, type SqlSessionStore } from "../src/index.ts"
import { awaitSnapshot, awaitTurns, lastToolResults, stepShape, userTexts, withClaudeSession } from "./support.ts"

const T = 300_000

describe("Claude Agent SDK runner: records and turn controls (real binary, scripted Messages API)", () => {
  it.live(
    "the model's name, usage and cost come from the result message; the cost is kept on the turn's last message",
    () =>
      withClaudeSession(
        () => ({
          text: "Priced answer.",
          usage: { inputTokens: 1000, outputTokens: 500 },
          model: "claude-sonnet-4-5-20250929"
        }),
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("p1", { initialMessage: "How much?" })
            const done = yield* awaitTurns("p1", 1)
            const last = done.messages.at(-1)!
            assert.strictEqual(last.text, "Priced answer.")
            const item = JSON.parse(last.frameworkItem) as {
              readonly result: { readonly model: string; readonly costUsd: number }
            }
            // the response's model (the harness asked for the agent's `claude-sonnet-4-5`)
            assert.strictEqual(item.result.model, "claude-sonnet-4-5-20250929")
            assert.strictEqual(kit.server.requests[0]!.model, "claude-sonnet-4-5")
            // a known model's list price: 1000 input and 500 output tokens cost more than nothing
            assert.isAbove(item.result.costUsd, 0)
            assert.strictEqual(done.usage.inputTokens, 1000)
            assert.strictEqual(done.usage.outputTokens, 500)
            assert.strictEqual(done.usage.modelCalls, 1)
          }),
        { agent: { model: "claude-sonnet-4-5" } }
      ),
    T
  )

  it.live(
    "a steer while a deferred write waits for approval ends the turn; the write never runs; the harness sees it as not run",
    () =>
      withClaudeSession(
        (_request, index) =>
          index === 0
            ? { toolUses: [{ id: "toolu_s1", name: "mcp__app__send_email", input: { to: "ann" } }] }
            : { text: "Fine, no email." },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("st1", { initialMessage: "email ann" })
            yield* awaitSnapshot("st1", (s) => s.pendingInterrupts.length === 1, "the approval")
            assert.isTrue(yield* client.steerUserMessage("st1", { text: "Actually, do not email anyone." }))
            const done = yield* awaitTurns("st1", 2)
            assert.strictEqual(kit.count("send_email"), 0)
            assert.deepStrictEqual(
              done.messages.map((m) => [m.role, m.text, m.toolCallId]),
              [
                ["user", "email ann", null],
                ["assistant", null, "toolu_s1"],
                ["tool", null, "toolu_s1"],
                ["user", "Actually, do not email anyone.", null],
                ["assistant", "Fine, no email.", null]
              ]
            )
            const cancelled = done.messages[2]!.toolOutput ?? ""
            assert.include(cancelled, "superseded_by_steered_user_message")
            const shape = yield* stepShape("st1")
            assert.notInclude(shape, "CallSingleAttemptTool")
            assert.include(shape, "ApplyTurnControl")
            // the next turn's query resumed the transcript with the waiting call: it was answered with the
            // session's record, not run, and the model saw the steered message
            const request = kit.server.requests.at(-1)!
            assert.strictEqual(lastToolResults(request).toolu_s1, cancelled)
            assert.include(userTexts(request).join("\n"), "Actually, do not email anyone.")
            assert.strictEqual(kit.server.requests.length, 2)
          })
      ),
    T
  )

  it.live(
    "builtInTools enables built-in Claude Code tools: offered to the model, run inside the harness (no Step)",
    () =>
      withClaudeSession(
        (request, index) => {
          if (index === 0) {
            const cwd = String(JSON.stringify(request.system ?? "")).match(/Primary working directory: ([^\s\\]+)/)?.[1]
            return { toolUses: [{ id: "toolu_r1", name: "Read", input: { file_path: join(cwd ?? "", "note.txt") } }] }
          }
          return { text: "The note says hello." }
        },
        (kit) =>
          Effect.gen(function* () {
            writeFileSync(join(kit.configDir!, "note.txt"), "hello from the note\n")
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("bt1", { initialMessage: "read the note" })
            const done = yield* awaitTurns("bt1", 1)
            const offered = (kit.server.requests[0]!.tools ?? []).map((t) => t.name)
            assert.include(offered, "Read")
            assert.notInclude(offered, "Bash", "only the listed built-ins")
            assert.deepStrictEqual(yield* stepShape("bt1"), ["StartAgentSession", "RunModel", "AwaitUserMessage"])
            assert.include(lastToolResults(kit.server.requests[1]!).toolu_r1 ?? "", "hello from the note")
            assert.strictEqual(done.messages.at(-1)?.text, "The note says hello.")
          }),
        { agent: { builtInTools: ["Read"] } }
      ),
    T
  )

  it.live(
    "a write deferred in a later model call beside an inline read: run once in its Step; the resume prompt carries its result",
    () =>
      withClaudeSession(
        (_request, index) =>
          index === 0
            ? { toolUses: [{ id: "toolu_a", name: "mcp__app__get_weather", input: { city: "Oslo" } }] }
            : index === 1
              ? {
                  text: "Now the note.",
                  toolUses: [
                    { id: "toolu_c", name: "mcp__app__save_note", input: { text: "x" } },
                    { id: "toolu_b", name: "mcp__app__get_weather", input: { city: "Rome" } }
                  ]
                }
              : { text: "Done." },
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("lc1", { initialMessage: "weather, then a note" })
            const done = yield* awaitTurns("lc1", 1)
            assert.strictEqual(kit.count("save_note"), 1)
            assert.strictEqual(kit.count("get_weather"), 2)
            assert.deepStrictEqual(yield* stepShape("lc1"), READ_TOOL_TURN_STEPS)
            // the session's record of the write is what the turn stored
            const stored = done.messages.find((m) => m.role === "tool" && m.toolCallId === "toolu_c")
            assert.strictEqual(stored?.toolOutput, "saved x")
            // the binary's quirk (README, "A lost result"): the tool result it sends for the resumed call is the
            // recorded one or, when it loses it, exactly this text
            const replayed = lastToolResults(kit.server.requests.at(-1)!).toolu_c
            assert.include(["saved x", "[Tool result missing due to internal error]"], replayed)
            // whatever the harness replays for the call, the model reads the recorded result in the prompt
            const texts = userTexts(kit.server.requests.at(-1)!).join("\n")
            assert.include(texts, "- save_note toolu_c: saved x")
            assert.strictEqual(done.messages.at(-1)?.text, "Done.")
          })
      ),
    T
  )

  for (const [mode, sessionStore] of [
    ["SqlSessionStore", true],
    ["the local transcript", false]
  ] as const) {
    it.live(
      `a RunModel retry continues the same turn from the committed transcript (${mode}): the prompt once, the inline read again`,
      () => {
        const PROMPT = "weather, then a note"
        return withClaudeSession(
          (_request, index) => {
            switch (index) {
              case 0:
                return { toolUses: [{ id: "toolu_r1", name: "mcp__app__get_weather", input: { city: "Oslo" } }] }
              case 2:
                return { toolUses: [{ id: "toolu_r2", name: "mcp__app__get_weather", input: { city: "Oslo" } }] }
              case 3:
                return { toolUses: [{ id: "toolu_w1", name: "mcp__app__save_note", input: { text: "x" } }] }
              case 1:
              case 4:
                // the attempt fails after the harness wrote to its transcript (403: not retried by the harness)
                throw new Error(`provider down ${index}`)
              default:
                return { text: "Done." }
            }
          },
          (kit) =>
            Effect.gen(function* () {
              const client = yield* AgentSessionClient.AgentSessionClient
              yield* client.startSession("rt1", { initialMessage: PROMPT })
              const done = yield* awaitTurns("rt1", 1)
              const requests = kit.server.requests
              assert.strictEqual(requests.length, 6)
              const prompts = (i: number) => userTexts(requests[i]!).filter((t) => t === PROMPT).length
              const resumes = (i: number) =>
                userTexts(requests[i]!).filter((t) => t.startsWith(ClaudeAgentSdkRunner.RESUME_PROMPT)).length
              // the first RunModel's retry started from nothing committed: one prompt, no call of the failed attempt
              assert.strictEqual(prompts(2), 1)
              assert.notInclude(JSON.stringify(requests[2]!.messages), "toolu_r1")
              // the resuming RunModel's retry continued from the deferred call: one prompt, one resume prompt
              assert.strictEqual(prompts(5), 1)
              assert.strictEqual(resumes(5), 1)
              assert.deepStrictEqual(Object.keys(lastToolResults(requests[5]!)).sort(), ["toolu_r2", "toolu_w1"])
              assert.strictEqual(lastToolResults(requests[5]!).toolu_w1, "saved x")
              // what a retry repeats: the inline read (and the model calls); the write ran once, in its Step
              assert.strictEqual(kit.count("get_weather"), 2)
              assert.strictEqual(kit.count("save_note"), 1)
              const steps = yield* (yield* Client.Client).stepExecutions("rt1")
              assert.deepStrictEqual(
                steps.map((st) => st.stepType),
                ["StartAgentSession", "RunModel", "CallTool", "ResumeTurn", "RunModel", "AwaitUserMessage"]
              )
              assert.deepStrictEqual(
                steps.filter((st) => st.stepType !== "AwaitUserMessage").map((st) => st.attempts.length),
                [1, 2, 1, 1, 2]
              )
              assert.deepStrictEqual(
                done.messages.map((m) => [m.role, m.toolCallId ?? m.text]),
                [
                  ["user", PROMPT],
                  ["assistant", "toolu_r2"],
                  ["tool", "toolu_r2"],
                  ["assistant", "toolu_w1"],
                  ["tool", "toolu_w1"],
                  ["assistant", "Done."]
                ]
              )
            }),
          { sessionStore }
        )
      },
      T
    )
  }

  it.live(
    "a session store that refuses the transcript (mirror_error) fails the RunModel attempt: the turn fails, nothing is kept",
    () => {
      const refuse = async () => {
        throw new Error("the store is full")
      }
      const refusing: SqlSessionStore.ClaudeSessionStore = {
        append: refuse,
        load: async () => null,
        listSubkeys: async () => [],
        exists: async () => false,
        lastSeq: async () => 0,
        truncate: async () => 0,
        forAttempt: () => ({ append: refuse, load: async () => null })
      }
      return withClaudeSession(
        () => ({ text: "An answer the store never kept." }),
        (kit) =>
          Effect.gen(function* () {
            const client = yield* AgentSessionClient.AgentSessionClient
            yield* client.startSession("me1", { initialMessage: "hello" })
            const done = yield* awaitTurns("me1", 1)
            assert.include(done.state?.lastTurnError ?? "", "the session store lost transcript entries")
            assert.include(done.state?.lastTurnError ?? "", "the store is full")
            assert.notInclude(
              done.messages.map((m) => m.text),
              "An answer the store never kept.",
              "a RunModel whose transcript is not in the store does not commit"
            )
            assert.isAtLeast(kit.server.requests.length, 2, "the attempt was retried")
          }),
        { agent: { sessionStore: refusing } }
      )
    },
    T
  )
})
