/**
 * Reading the event stream back into what the records say. Events are written while a Step attempt runs, before
 * its commit, so the stream can hold events of attempts that never committed. Two rules settle it
 * (docs/session-contract.md, "Events"):
 *
 * 1. Within one `step_execution_id`, only the highest `attempt` counts: an attempt that wrote an event has
 *    produced output, so a crash fails it and the retry runs under a higher number, superseding its events.
 * 2. Of the events that state an outcome, the last one counts: `tool_call_finished` per turn and `tool_call_id`
 *    (a tool call ID is unique only within its turn, so a later turn may reuse it), and
 *    the turn ends (`turn_completed`, `turn_failed`, `turn_steered`, `turn_cancelled`) per turn. A failure route
 *    or a cancellation Step writes after the attempt it replaces.
 *
 * @since 0.1.0
 */

/**
 * The fields of an event that the rules read; `AgentEvent` and the session client's events have them.
 *
 * @category models
 * @since 0.1.0
 */
export interface SettleableEvent {
  readonly type: string
  readonly turnId: string | null
  readonly stepExecutionId: string
  readonly attempt: number
  readonly payload: unknown
}

/**
 * The key of an outcome event (rule 2), or `undefined` for any other event.
 *
 * @category accessors
 * @since 0.1.0
 */
export const outcomeKey = (event: SettleableEvent): string | undefined => {
  if (event.type === "tool_call_finished") {
    const payload = event.payload as { readonly toolCallId?: unknown; readonly tool_call_id?: unknown } | null
    const id = payload?.toolCallId ?? payload?.tool_call_id
    // keyed by turn and call: a later turn that reuses the ID must not drop the earlier turn's outcome
    return typeof id === "string" ? `tool_call_finished/${JSON.stringify([event.turnId, id])}` : undefined
  }
  if (
    event.type === "turn_completed" ||
    event.type === "turn_failed" ||
    event.type === "turn_steered" ||
    event.type === "turn_cancelled"
  ) {
    return event.turnId === null ? undefined : `turn_end/${event.turnId}`
  }
  return undefined
}

/**
 * The events of `events` (in stream order) that the rules keep, in stream order.
 *
 * @category combinators
 * @since 0.1.0
 */
export const settleEvents = <E extends SettleableEvent>(events: ReadonlyArray<E>): Array<E> => {
  const highest = new Map<string, number>()
  for (const e of events) highest.set(e.stepExecutionId, Math.max(highest.get(e.stepExecutionId) ?? 0, e.attempt))
  const current = events.filter((e) => e.attempt === highest.get(e.stepExecutionId))
  const last = new Map<string, E>()
  for (const e of current) {
    const key = outcomeKey(e)
    if (key !== undefined) last.set(key, e)
  }
  return current.filter((e) => {
    const key = outcomeKey(e)
    return key === undefined || last.get(key) === e
  })
}
