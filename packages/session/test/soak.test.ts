// The soak (soak/soak.ts) in the test command: 60 s of faults on each engine with a few sessions (both kinds of
// fault, which alternate), which must end with exit code 0 and every check passed; and the soak's checks themselves, on made-up ledgers and states
// that break each invariant once.

import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { nodeFlags } from "@durable-agent/engine/testing/ChildProcess"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import {
  type Durable,
  type EventRow,
  type LedgerLine,
  type MessageStorage,
  readMessages,
  runChecks,
  type SoakResult
} from "../soak/soak.ts"

const soakPath = fileURLToPath(new URL("../soak/soak.ts", import.meta.url))

/** Runs `npm run soak -- <args>` as a child process: its exit code and stdout. */
const runSoak = (args: ReadonlyArray<string>) =>
  Effect.callback<{ readonly code: number | null; readonly stdout: string }>((resume) => {
    const child = spawn(process.execPath, [...nodeFlags, soakPath, ...args], { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
    })
    child.once("exit", (code) => resume(Effect.succeed({ code, stdout })))
  })

const CHECKS = [
  "non-idempotent tool calls executed at most once",
  "every tool record final exactly once",
  "no duplicate event",
  "no contradicting event",
  "every message stored once, in sequence",
  "every user message answered",
  "no session stuck"
]

const soakRun = (mode: "embedded" | "cluster") =>
  Effect.gen(function* () {
    const { code, stdout } = yield* runSoak([
      "--mode",
      mode,
      "--sessions",
      "4",
      "--minutes",
      "1",
      "--settle-seconds",
      "90"
    ])
    const line = stdout.split("\n").find((l) => l.startsWith("SOAK_RESULT "))
    assert.isDefined(line, `no SOAK_RESULT line:\n${stdout}`)
    const result = JSON.parse(line!.slice("SOAK_RESULT ".length)) as SoakResult
    for (const name of CHECKS) assert.include(stdout, `PASS ${name}`, stdout)
    assert.strictEqual(result.violations, 0, stdout)
    assert.strictEqual(code, 0, stdout)
    assert.isAbove(result.faults.kills, 0, "SIGKILLs were injected")
    assert.isAbove(result.faults.stops, 0, "SIGSTOPs were injected")
    assert.strictEqual(result.faults.survived, result.faults.injected, "every fault was survived")
    assert.isAbove(result.turnsCompleted, 0)
    assert.isAbove(result.checked.toolCalls, 0, "the checks read tool calls")
    assert.isAbove(result.checked.userMessages, 0, "the checks read user messages")
  })

describe("soak", () => {
  it.live("embedded: 60 s of SIGKILL and SIGSTOP of the worker, no violation", () => soakRun("embedded"), {
    timeout: 240_000
  })

  it.live("cluster: 60 s of SIGKILL and SIGSTOP of three runners, no violation", () => soakRun("cluster"), {
    timeout: 240_000
  })
})

const event = (e: Partial<EventRow> & Pick<EventRow, "type">): EventRow => ({
  session: "s",
  stepExecutionId: "RunModel-1",
  attempt: 1,
  turnId: "turn-1",
  payload: {},
  at: 0,
  ...e
})

/** The messages of `clean`: its first two rolled over into a chunk, the other two in the window. */
const cleanStorage = (): { -readonly [K in keyof MessageStorage]: MessageStorage[K] } => {
  const messages = [
    { sequence: 1, role: "user", text: "turn 1" },
    { sequence: 2, role: "assistant", text: null, tool_call_id: "charge-1", tool_name: "charge" },
    { sequence: 3, role: "tool", text: null, tool_call_id: "charge-1", tool_name: "charge", tool_output: "charge ok" },
    { sequence: 4, role: "assistant", text: "done 1" }
  ]
  return {
    index: { chunks: [{ first_sequence: 1, last_sequence: 2 }], first_sequence: 1, window_first_sequence: 3 },
    chunks: new Map([["000000000001", messages.slice(0, 2)]]),
    window: messages.slice(2)
  }
}

/** A session that ran one turn with one write, cleanly. */
const clean = (): { ledger: Array<LedgerLine>; durable: Durable } => ({
  ledger: [
    { kind: "sent", session: "s", turn: 1, ok: true, pid: 1, at: 0 },
    { kind: "exec", session: "s", toolCallId: "charge-1", tool: "charge", pid: 1, at: 0 }
  ],
  durable: {
    records: new Map([["s", []]]),
    messages: new Map([["s", readMessages(cleanStorage())]]),
    storage: new Map([["s", cleanStorage()]]),
    states: new Map([["s", { active_turn_id: null, next_message_sequence: 5 }]]),
    events: [
      event({ type: "tool_call_deferred", payload: { tool_call_id: "charge-1" } }),
      event({
        type: "tool_call_finished",
        stepExecutionId: "CallSingleAttemptTool-1",
        payload: { tool_call_id: "charge-1", status: "succeeded" }
      }),
      event({ type: "text_delta", stepExecutionId: "RunModel-2", payload: { text: "done " } }),
      event({ type: "text_delta", stepExecutionId: "RunModel-2", payload: { text: "1" } }),
      event({ type: "turn_completed", stepExecutionId: "RunModel-2" })
    ],
    queued: new Map(),
    activeSteps: new Map()
  }
})

const violationsOf = (ledger: ReadonlyArray<LedgerLine>, durable: Durable, settled = true) =>
  Object.fromEntries(
    runChecks(["s"], ledger, durable, settled, 90)
      .filter((c) => c.violations.length > 0)
      .map((c) => [c.name, c.violations])
  )

describe("soak checks", () => {
  it("a clean run has no violation", () => {
    const { ledger, durable } = clean()
    assert.deepStrictEqual(violationsOf(ledger, durable), {})
  })

  it("each broken invariant is one violation of its check", () => {
    const twice = clean()
    twice.ledger.push({ kind: "exec", session: "s", toolCallId: "charge-1", tool: "charge", pid: 2, at: 1 })
    assert.deepStrictEqual(violationsOf(twice.ledger, twice.durable), {
      "non-idempotent tool calls executed at most once": ["s charge-1 (non_idempotent_write) executed 2 times"]
    })

    const duplicate = clean()
    duplicate.durable.events.push(event({ type: "tool_call_deferred", payload: { tool_call_id: "charge-1" } }))
    duplicate.durable.events.push(
      event({ type: "text_delta", stepExecutionId: "RunModel-2", payload: { text: "done " } })
    )
    assert.deepStrictEqual(violationsOf(duplicate.ledger, duplicate.durable), {
      "no duplicate event": [
        "s RunModel-1 attempt 1 tool_call_deferred charge-1 written 2 times",
        's RunModel-2 attempt 1: text deltas "done 1done " are not one answer "done 1"'
      ]
    })

    // a later outcome of another Step settles over the first: it must agree with the stored result
    const contradicted = clean()
    contradicted.durable.events.push(
      event({
        type: "tool_call_finished",
        stepExecutionId: "RecordToolOutcomeUnknown-1",
        payload: { tool_call_id: "charge-1", status: "outcome_unknown" }
      })
    )
    assert.deepStrictEqual(violationsOf(contradicted.ledger, contradicted.durable), {
      "no contradicting event": [
        "s charge-1: tool_call_finished says outcome_unknown (RecordToolOutcomeUnknown-1 attempt 1), the stored result succeeded"
      ]
    })

    const unfinished = clean()
    unfinished.durable.events.splice(1, 1)
    unfinished.ledger.splice(1, 1)
    assert.deepStrictEqual(violationsOf(unfinished.ledger, unfinished.durable), {
      "every tool record final exactly once": [
        "s charge-1: 0 settled tool_call_finished events (events: tool_call_deferred RunModel-1#1)",
        "s charge-1: succeeded without an execution"
      ]
    })

    const unanswered = clean()
    unanswered.ledger.push({ kind: "sent", session: "s", turn: 2, ok: true, pid: 1, at: 2 })
    unanswered.durable.messages.get("s")!.push({ sequence: 5, role: "user", text: "turn 1" })
    assert.deepStrictEqual(violationsOf(unanswered.ledger, unanswered.durable)["every user message answered"], [
      's: "turn 1" stored 2 times',
      's: user message 2 is "turn 1"',
      "s: 1 settled turn_completed of 1 turn ends for 2 turns",
      's: acknowledged "turn 2" is missing'
    ])

    // message storage: a window message whose delete was lost beside its chunk, a chunk the index does not list,
    // a message missing
    const twiceStored = clean()
    const doubled = cleanStorage()
    doubled.window = [doubled.chunks.get("000000000001")![1]!, ...doubled.window]
    twiceStored.durable.storage!.set("s", doubled)
    twiceStored.durable.messages.set("s", readMessages(doubled))
    assert.deepStrictEqual(violationsOf(twiceStored.ledger, twiceStored.durable), {
      "every message stored once, in sequence": [
        "s: window message 2 is below window_first_sequence 3",
        "s: message 2 stored 2 times"
      ]
    })
    const unlisted = clean()
    const orphan = cleanStorage()
    orphan.chunks = new Map([...orphan.chunks, ["000000000003", orphan.window]])
    unlisted.durable.storage!.set("s", orphan)
    assert.deepStrictEqual(violationsOf(unlisted.ledger, unlisted.durable), {
      "every message stored once, in sequence": ["s: chunk 000000000003 is stored but not listed in the index"]
    })
    const gap = clean()
    gap.durable.storage!.set("s", { ...cleanStorage(), window: [] })
    assert.deepStrictEqual(violationsOf(gap.ledger, gap.durable)["every message stored once, in sequence"], [
      "s: messages 3, 4 missing (2)"
    ])
    const misplaced = clean()
    const shifted = cleanStorage()
    shifted.chunks = new Map([["000000000001", [shifted.chunks.get("000000000001")![0]!]]])
    misplaced.durable.storage!.set("s", shifted)
    assert.deepStrictEqual(
      violationsOf(misplaced.ledger, misplaced.durable)["every message stored once, in sequence"],
      ["s: chunk 000000000001 holds 1..1 (1), its index entry 1..2", "s: messages 2 missing (1)"]
    )

    // mid-turn, no AwaitUserMessage waits (that is no violation of its own)
    const stuck = clean()
    stuck.durable.states.set("s", { active_turn_id: "turn-2" })
    stuck.durable.activeSteps.set("s", ["RunModel-3 running"])
    const midTurn = { ...stuck.durable, waitingForMessages: new Map<string, number>() }
    assert.deepStrictEqual(violationsOf(stuck.ledger, midTurn, false)["no session stuck"], [
      "the sessions did not all settle within 90 s after the faults stopped",
      "s: turn turn-2 still active",
      "s: Steps not settled: RunModel-3 running"
    ])
    // two waiting AwaitUserMessage Steps: two flows of control in one session
    const forked = clean()
    const waiting = { ...forked.durable, waitingForMessages: new Map([["s", 2]]) }
    assert.deepStrictEqual(violationsOf(forked.ledger, waiting)["no session stuck"], [
      "s: 2 AwaitUserMessage Steps waiting, not one"
    ])
    // a turn counted twice: its turn ID skipped, every later message one off
    const skipped = clean()
    skipped.durable.states.set("s", { active_turn_id: null, next_message_sequence: 7, turn_count: 3 })
    const turnMessages = [
      ...readMessages(cleanStorage()).map((m) => ({ ...m, turn_id: "turn-1" })),
      { sequence: 5, role: "user", text: "turn 3", turn_id: "turn-3" },
      { sequence: 6, role: "assistant", text: "done 3", turn_id: "turn-3" }
    ]
    skipped.durable.messages.set("s", turnMessages)
    skipped.durable.storage!.set("s", { index: null, chunks: new Map(), window: turnMessages })
    skipped.durable.events.push(event({ type: "turn_completed", turnId: "turn-3", stepExecutionId: "RunModel-4" }))
    assert.deepStrictEqual(violationsOf(skipped.ledger, skipped.durable)["every user message answered"], [
      's: user message 2 is "turn 3" (turn-3, sequence 5)',
      "s: turn_count is 3, the user messages are of 2 ended turns"
    ])
  })
})
