// The framework run state between RunModel Steps of one turn, as JSON text.
import type { AgentInputItem } from "@openai/agents"

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

/** Parses the stored run state; `undefined` for none or for text this runner did not write. */
export const decode = (text: string | null): FrameworkRunState | undefined => {
  if (text === null) return undefined
  try {
    const parsed = JSON.parse(text) as FrameworkRunState
    if (parsed?.v !== 1 || typeof parsed.agent !== "string") return undefined
    if (parsed.kind === "run_state" && typeof parsed.runState === "object" && typeof parsed.stored === "number") {
      return parsed
    }
    return parsed.kind === "history" && Array.isArray(parsed.items) ? parsed : undefined
  } catch {
    return undefined
  }
}

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
