// The Claude Agent SDK runner's turn controls and records, the real binary against the scripted server:
// the model's name, usage and cost from the query's result message; a steer while a deferred write waits
// for approval ends the turn, the write never runs and the next turn's harness sees the call as not run;
// built-in Claude Code tools enabled by `builtInTools` run inside the harness.
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { AgentSessionClient } from "@durable-agent/session"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
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
            assert.deepStrictEqual(yield* stepShape("lc1"), [
              "StartAgentSession",
              "RunModel",
              "CallTool",
              "ResumeTurn",
              "RunModel",
              "AwaitUserMessage"
            ])
            // the session's record of the write is what the turn stored
            const stored = done.messages.find((m) => m.role === "tool" && m.toolCallId === "toolu_c")
            assert.strictEqual(stored?.toolOutput, "saved x")
            // whatever the harness replays for the call, the model reads the recorded result in the prompt
            const texts = userTexts(kit.server.requests.at(-1)!).join("\n")
            assert.include(texts, "- save_note toolu_c: saved x")
            assert.strictEqual(done.messages.at(-1)?.text, "Done.")
          })
      ),
    T
  )
})
