// The recovery sweep: every runner looks now and then for Flows with a running Step execution whose shard it
// holds but which have no live owner on it, and wakes them (the activation claims the Flow and recovers its
// running Steps). Recovery after a crash or a shard move normally comes from the redelivered keep-alive; the
// sweep covers a keep-alive that was answered or lost, and an activation here that lost its claim (a refused
// write) or failed to load the Flow and that no request reaches: such an activation is not listed in
// `activeFlows` (owner.ts), so no Flow stays `running` with nobody running it.
import * as Clock from "effect/Clock"
import { EntityId, Sharding } from "effect/cluster"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { FlowEntity, WakePayload } from "./protocol.ts"
import { RunnerState } from "./runner.ts"
import { EngineStore } from "./store/EngineStore.ts"

/** How often a runner sweeps. */
export const SWEEP_INTERVAL = Duration.seconds(2)

/** Flows with running Steps looked at per sweep. */
const SWEEP_LIMIT = 10_000

/** One sweep: wakes every Flow with running Steps on a shard of this runner that no live owner here lists. */
export const sweepOnce = Effect.gen(function* () {
  const runner = yield* RunnerState
  if (runner.draining()) return 0
  const store = yield* EngineStore
  const sharding = yield* Sharding.Sharding
  const client = yield* FlowEntity.client
  const ids = yield* store.flowsWithRunningSteps(SWEEP_LIMIT)
  const now = yield* Clock.currentTimeMillis
  let woken = 0
  for (const flowId of ids) {
    if (runner.activeFlows.has(flowId)) continue
    if (!sharding.hasShardId(sharding.getShardId(EntityId.make(flowId), "default"))) continue
    yield* client(flowId).Wake(new WakePayload({ flowId, stepExecutionId: "recovery-sweep", at: now }), {
      discard: true
    })
    woken++
  }
  runner.counters.flowsRecovered += woken
  if (woken > 0) yield* Effect.logInfo(`recovery sweep: woke ${woken} Flows with running Steps and no owner here`)
  return woken
})

/** The sweep, forever (errors are logged and the next sweep runs). */
export const recoverySweep = sweepOnce.pipe(
  Effect.catchCause((cause) => Effect.logWarning("recovery sweep failed; retrying later", cause)),
  Effect.delay(SWEEP_INTERVAL),
  Effect.forever
)
