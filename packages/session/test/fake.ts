// An in-memory engine Step context for unit tests of Step bodies: staged writes apply at once, publishes and
// stream writes are recorded, and heartbeats are counted.
import type { ExecuteContext, RecoveryError } from "@durable-agent/engine"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Wire } from "../src/index.ts"

export interface FakeEnv {
  readonly ctx: ExecuteContext<never>
  readonly published: Array<readonly [string, unknown]>
  readonly emitted: Array<Wire.AgentEventEnvelope>
  readonly heartbeats: () => number
}

export const makeEnv = (options: {
  readonly stepExecutionId: string
  readonly recoveryError?: RecoveryError<never> | undefined
}): FakeEnv => {
  const values = new Map<string, unknown>()
  const published: Array<readonly [string, unknown]> = []
  const emitted: Array<Wire.AgentEventEnvelope> = []
  let beats = 0
  const slot = (name: string, key = "") => `${name}\u0000${key}`
  const ctx: ExecuteContext<never> = {
    get: (attribute) => Option.fromUndefinedOr(values.get(slot(attribute.name))) as never,
    getAt: (map, key) => Option.fromUndefinedOr(values.get(slot(map.name, key))) as never,
    keys: (map) =>
      [...values.keys()]
        .filter((k) => k.startsWith(`${map.name}\u0000`))
        .map((k) => k.slice(map.name.length + 1))
        .sort(),
    set: (attribute, value) => void values.set(slot(attribute.name), value),
    setAt: (map, key, value) => void values.set(slot(map.name, key), value),
    delete: (attribute) => void values.delete(slot(attribute.name)),
    deleteAt: (map, key) => void values.delete(slot(map.name, key)),
    publish: (channel, value) => void published.push([channel.name, value]),
    publishAt: (channel, key, value) => void published.push([`${channel.name}[${key}]`, value]),
    channelSize: () => 0,
    flowId: "flow-1",
    runId: "run-1",
    flowType: "Fake",
    stepExecutionId: options.stepExecutionId,
    fromStepExecutionId: undefined,
    attempt: 1,
    firstAttemptAt: 0,
    timerFired: () => false,
    channelResults: () => [],
    waitForFailed: false,
    recoveryError: Option.fromUndefinedOr(options.recoveryError),
    heartbeatCheckpoint: Option.none(),
    heartbeat: () =>
      Effect.sync(() => {
        beats++
      }),
    emit: (_stream, value) => Effect.sync(() => void emitted.push(value as Wire.AgentEventEnvelope)),
    emitAll: (_stream, values) =>
      Effect.sync(() => void emitted.push(...(values as ReadonlyArray<Wire.AgentEventEnvelope>))),
    // staged events commit with the Step; the fake has no commit, so they are seen at once
    stage: (_stream, value) => Effect.sync(() => void emitted.push(value as Wire.AgentEventEnvelope)),
    heartbeatWith: (_stream, values) =>
      Effect.sync(() => {
        beats++
        emitted.push(...(values as ReadonlyArray<Wire.AgentEventEnvelope>))
      })
  }
  return { ctx, published, emitted, heartbeats: () => beats }
}
