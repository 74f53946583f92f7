// The framework run state between RunModel Steps of one turn, as JSON text.
import { RunState } from "@durable-agent/runner-kit"
import type { AgentInputItem } from "@openai/agents"
import * as Schema from "effect/Schema"

/**
 * While tool calls run: the SDK's `RunState` JSON, minus the stored messages at the start of its
 * `originalInput` (the session holds them already; the next RunModel puts them back), so the state grows
 * with the turn and not with the conversation.
 */
export interface InterruptedState {
  readonly v: 1
  readonly kind: "run_state"
  /** The agent the run started with: the root `RunState.fromString` restores from. */
  readonly agent: string
  /** How many stored messages were cut from `originalInput`. */
  readonly stored: number
  readonly runState: { readonly [key: string]: unknown }
}

/**
 * After a handoff: the turn's items after the stored messages and the agent that makes the next model call.
 * (A `RunState` saved right after a handoff does not restore in @openai/agents 0.20.)
 */
export interface HandoffState {
  readonly v: 1
  readonly kind: "history"
  readonly agent: string
  readonly items: ReadonlyArray<AgentInputItem>
}

/** The framework run state. */
export type FrameworkRunState = InterruptedState | HandoffState

const codec = RunState.make(
  Schema.Union([
    Schema.Struct({
      v: Schema.Literal(1),
      kind: Schema.Literal("run_state"),
      agent: Schema.String,
      stored: Schema.Number,
      runState: Schema.Record(Schema.String, Schema.Unknown)
    }),
    Schema.Struct({
      v: Schema.Literal(1),
      kind: Schema.Literal("history"),
      agent: Schema.String,
      items: Schema.Array(Schema.Unknown)
    })
  ])
)

/** Parses the stored run state; `undefined` for none or for text this runner did not write. */
export const decode = (text: string | null): FrameworkRunState | undefined =>
  codec.decode(text) as FrameworkRunState | undefined

/** The stored text of a run state. */
export const encode = (state: FrameworkRunState): string => codec.encode(state as never)

/** The run state of an interrupted run, from the SDK's `RunState.toJSON()` without the stored messages. */
export const interrupted = (
  agent: string,
  stored: number,
  runState: { readonly [key: string]: unknown }
): InterruptedState => ({ v: 1, kind: "run_state", agent, stored, runState })

/** The SDK's `RunState` JSON with the stored messages put back at the start of `originalInput`. */
export const restore = (
  state: InterruptedState,
  storedItems: ReadonlyArray<AgentInputItem>
): { [key: string]: unknown } => {
  const rest = Array.isArray(state.runState.originalInput) ? state.runState.originalInput : []
  return { ...state.runState, originalInput: [...storedItems, ...rest] }
}
