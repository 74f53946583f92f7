// The request path: a client's request (start, RPC, publish, skip timer, set attribute, stop) reaches the
// Flow's owner as a volatile cluster message (`protocol.ts`), and the transition that serves it stores its
// answer under the request ID. Both ends of the retry live here: the client sends a request whose answer it lost
// again with the same ID (`deliver`), and the owner answers a request it already served from the stored reply
// (`owner.ts`): an RPC reads it by its primary key before its handler runs (`replyOf`); a control request finds it
// as the conflict of its reply's insert, and its transition rolls back (`AlreadyAnswered`).
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { EngineError } from "../Errors.ts"

/** The failures after which a request is sent again: the owner did not serve it, or the answer was lost. */
const RESENT = [
  "MailboxFull",
  "AlreadyProcessingMessage",
  "PersistenceError",
  "EntityNotAssignedToRunner",
  "RunnerUnavailable",
  "RequestNotServed"
] as const

type Resent = (typeof RESENT)[number]

const RESEND_TAGS: ReadonlySet<string> = new Set(RESENT)

/**
 * The pauses between two sends of one request: 20 ms, doubling, at most 1 s apart (the request's timeout ends
 * them).
 */
const RESEND_SCHEDULE = Schedule.min([Schedule.exponential(Duration.millis(20)), Schedule.spaced(Duration.seconds(1))])

/** A send that is sent again: the owner did not serve it, or its answer was lost (`last` says which). */
class Resend extends Data.TaggedError("Resend")<{ readonly last: string }> {}

/**
 * Sends one request to the Flow's owner until it is answered or `timeoutMs` has passed. `send` makes the same
 * request (same request ID) each time; the owner's transition stores its answer under that ID, so a request
 * whose answer was lost (the owner's runner died between its commit and its reply, the shard moved, the
 * connection dropped, no runner had the entity yet) is answered from the stored reply and runs once. Sent again,
 * on `RESEND_SCHEDULE`: the cluster's routing failures, the owner's RequestNotServed (its commit was refused or
 * failed), and an interrupted answer (the owner stopped while serving it). Every other failure (the request's
 * typed errors, and defects) is the answer: a refused request is never sent again into another outcome. One
 * timeout bounds the sends and the pauses together.
 */
export const deliver = <A, E>(
  send: Effect.Effect<A, E>,
  what: string,
  timeoutMs: number,
  shuttingDown: Effect.Effect<boolean>
): Effect.Effect<A, Exclude<E, { readonly _tag: Resent }> | EngineError> => {
  let last = ""
  const once = send.pipe(
    Effect.catchCause((cause): Effect.Effect<never, Exclude<E, { readonly _tag: Resent }> | EngineError | Resend> => {
      const failure = Cause.findErrorOption(cause)
      const tag =
        Option.isSome(failure) && typeof failure.value === "object" && failure.value !== null
          ? (failure.value as { readonly _tag?: unknown })._tag
          : undefined
      const resend = (typeof tag === "string" && RESEND_TAGS.has(tag)) || Cause.hasInterruptsOnly(cause)
      if (!resend) return Effect.failCause(cause as Cause.Cause<Exclude<E, { readonly _tag: Resent }>>)
      last = typeof tag === "string" ? tag : "interrupted"
      // this process's cluster is stopping: no answer can come through it any more
      return Effect.flatMap(
        shuttingDown,
        (stopping): Effect.Effect<never, EngineError | Resend> =>
          stopping
            ? Effect.fail(
                new EngineError({ reason: `cluster: ${last}: ${what} not answered, this process is stopping` })
              )
            : Effect.fail(new Resend({ last }))
      )
    })
  )
  return once.pipe(
    Effect.retry({ schedule: RESEND_SCHEDULE, while: (e) => e instanceof Resend }),
    // the schedule never ends by itself: the timeout does
    Effect.catchIf(
      (e): e is Resend => e instanceof Resend,
      (e) => Effect.fail(new EngineError({ reason: `${what}: not answered (last: ${e.last})` }))
    ),
    Effect.timeoutOrElse({
      duration: Duration.millis(timeoutMs),
      orElse: () =>
        Effect.fail(
          new EngineError({
            reason: `${what}: not answered within ${timeoutMs} ms${last === "" ? "" : ` (last: ${last})`}; it may have committed, send it again with the same request ID`
          })
        )
    })
  )
}
