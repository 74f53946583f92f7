// The Flow entity's keep-alive: effect/cluster's persisted `KeepAliveRpc` request, held while the Flow has
// running Steps, so a crash or a shard move redelivers it and the Flow comes back on its next owner (the
// engine README, "Recovery without a message per transition").
//
// What it costs, and how this module keeps that off the request path (measured with statement timestamps on
// the engine bench's publish -> execute path): effect/cluster's `Entity.keepAlive(true)` saves the request in
// a commit of its own and wakes the storage reader, whose read (a SELECT and an UPDATE of `last_read`) is a
// second commit, and releasing it makes the entity save its reply, a third; on the embedded engine each is a
// synchronous fsync on the one SQLite connection, run before the Step the commit started. Here
// - `hold` saves the request inside the transition's own transaction (effect/cluster's outbox, as `Wake`
//   is) and does not wake the reader: the storage poll (every `pollInterval`) delivers it, with every other
//   keep-alive saved since, in one read;
// - the owner releases it only after the Flow has had no running Step for `KEEP_ALIVE_LINGER` (owner.ts), so
//   a Flow that runs again within it (a session's next turn) writes neither a new request nor a reply.
import * as Context from "effect/Context"
import { type ClusterError, Entity, Envelope, Message, MessageStorage, Sharding } from "effect/cluster"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { Headers } from "effect/http"
import * as Option from "effect/Option"

/** How long an owner keeps the keep-alive after its Flow's last running Step ended. */
export const KEEP_ALIVE_LINGER = Duration.seconds(10)

/**
 * Holds the entity's keep-alive: closes its latch and saves the persisted keep-alive request in the current
 * transaction (a rollback leaves no request), without waking effect/cluster's storage reader. Without a
 * message storage in the context (never on the engine's layers) it falls back to `Entity.keepAlive(true)`.
 */
export const hold: Effect.Effect<
  void,
  ClusterError.PersistenceError | ClusterError.MalformedMessage,
  Sharding.Sharding | Entity.CurrentAddress
> = Effect.gen(function* () {
  const latch = yield* Effect.serviceOption(Entity.KeepAliveLatch)
  if (Option.isNone(latch)) return
  const storage = yield* Effect.serviceOption(MessageStorage.MessageStorage)
  if (Option.isNone(storage)) return yield* Entity.keepAlive(true)
  const sharding = yield* Sharding.Sharding
  const address = yield* Entity.CurrentAddress
  const requestId = yield* sharding.getSnowflake
  latch.value.closeUnsafe()
  yield* storage.value.saveRequest(
    new Message.OutgoingRequest<typeof Entity.KeepAliveRpc>({
      annotations: Entity.KeepAliveRpc.annotations,
      rpc: Entity.KeepAliveRpc,
      context: Context.empty() as never,
      envelope: Envelope.makeRequest<typeof Entity.KeepAliveRpc>({
        requestId,
        address,
        tag: Entity.KeepAliveRpc._tag,
        payload: undefined,
        headers: Headers.empty
      }),
      lastReceivedReply: Option.none(),
      respond: () => Effect.void
    })
  )
})

/** Releases the keep-alive (opens its latch; the entity then answers the request, which effect/cluster saves). */
export const release: Effect.Effect<void, never, Sharding.Sharding | Entity.CurrentAddress> = Entity.keepAlive(false)
