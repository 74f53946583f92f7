// Polling helpers of the conformance suite: snapshots, turns, Step shapes and events of a session on a real
// engine, waited for on the live clock with a 20 s bound unless the caller gives its own.
import { Client } from "@durable-agent/engine"
import { AgentSessionClient, type Wire } from "@durable-agent/session"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"

/** The suite's default bound of one wait. */
export const DEFAULT_WAIT: Duration.Input = "20 seconds"

/** Polls `effect` until `predicate` holds (`timeout` at most, 20 s by default). */
export const eventually = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  predicate: (a: A) => boolean,
  what: string,
  timeout: Duration.Input = DEFAULT_WAIT
) =>
  effect.pipe(
    Effect.repeat({ schedule: Schedule.spaced("30 millis"), until: predicate }),
    Effect.timeoutOrElse({
      duration: timeout,
      orElse: () => Effect.die(new Error(`timed out waiting for ${what}`))
    })
  )

/** The snapshot once `predicate` holds. */
export const awaitSnapshot = (
  sessionId: string,
  predicate: (s: Wire.AgentSnapshot) => boolean,
  what: string,
  timeout?: Duration.Input
) =>
  Effect.flatMap(AgentSessionClient.AgentSessionClient, (client) =>
    eventually(client.getSnapshot(sessionId), predicate, what, timeout)
  )

/** The snapshot once `turns` turns ended and no turn is active. */
export const awaitTurns = (sessionId: string, turns: number, timeout?: Duration.Input) =>
  awaitSnapshot(
    sessionId,
    (s) => s.state !== null && s.state.turnCount >= turns && s.state.activeTurnId === null,
    `${turns} finished turns`,
    timeout
  )

/** The Step types of a session's executions, in scheduling order. */
export const stepShape = (sessionId: string) =>
  Effect.flatMap(Client.Client, (client) =>
    Effect.map(client.stepExecutions(sessionId), (steps) => steps.map((s) => s.stepType))
  )

/** Every event written so far. */
export const allEvents = (sessionId: string) =>
  Effect.flatMap(AgentSessionClient.AgentSessionClient, (client) =>
    Effect.map(
      Stream.runCollect(client.events(sessionId)),
      (chunk): Array<AgentSessionClient.AgentSessionEvent> => Array.from(chunk)
    )
  )
