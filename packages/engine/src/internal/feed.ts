// The commit feed: readers of a Flow (a following stream read, a session's awaitTurn, a UI stream) wait for a
// notice that the Flow committed something instead of polling.
//
// - In one process the owner notifies after COMMIT (a transition, a heartbeat with messages, a stream write).
// - Across processes (Postgres) every such transaction also runs `pg_notify('dex_commit', <flow id>)` (the
//   store's `notifyCommit`, or in a fenced transaction's last statement with its lease check,
//   `requireLeaseAndNotify`), which the server delivers after COMMIT; each client process LISTENs
//   (`listenAcrossProcesses`) and feeds what it hears into its notices.
// - A reader that missed a notice (a dropped LISTEN connection, another process on a SQLite file) reads again
//   after the fallback, at least one second.
import { PgClient } from "@effect/sql-pg"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"

/** The Postgres channel of commit notices; the payload is the Flow ID. */
export const COMMIT_CHANNEL = "dex_commit"

/** The shortest fallback read of a reader waiting for a notice. */
export const MIN_FALLBACK = Duration.seconds(1)

interface Watcher {
  /** A notice came since the last `next`. */
  pending: boolean
  wake: Deferred.Deferred<void> | undefined
}

/** One reader's watch of a Flow's commits. */
export interface CommitWatch {
  /**
   * Waits for a commit notice of the Flow that came since the last `next` (or since the watch began), or for
   * `fallback` (at least one second) when none comes. A notice that came between a read and `next` is not
   * missed: `next` returns at once.
   */
  readonly next: (fallback?: Duration.Input) => Effect.Effect<void>
}

/** The commit notices of one process. */
export class CommitNotices {
  private readonly watchers = new Map<string, Set<Watcher>>()

  /** A Flow committed: wakes its watchers. */
  notify(flowId: string): void {
    const set = this.watchers.get(flowId)
    if (set === undefined) return
    for (const w of set) {
      w.pending = true
      const wake = w.wake
      if (wake !== undefined) {
        w.wake = undefined
        Deferred.doneUnsafe(wake, Effect.void)
      }
    }
  }

  /** Watches a Flow's commits for as long as the scope is open. */
  watch(flowId: string): Effect.Effect<CommitWatch, never, Scope.Scope> {
    return Effect.acquireRelease(
      Effect.sync(() => {
        const w: Watcher = { pending: false, wake: undefined }
        let set = this.watchers.get(flowId)
        if (set === undefined) {
          set = new Set()
          this.watchers.set(flowId, set)
        }
        set.add(w)
        return w
      }),
      (w) =>
        Effect.sync(() => {
          const set = this.watchers.get(flowId)
          set?.delete(w)
          if (set?.size === 0) this.watchers.delete(flowId)
        })
    ).pipe(
      Effect.map(
        (w): CommitWatch => ({
          next: (fallback) =>
            Effect.suspend(() => {
              if (w.pending) {
                w.pending = false
                return Effect.void
              }
              const wake = Deferred.makeUnsafe<void>()
              w.wake = wake
              const wait = Duration.max(Duration.fromInputUnsafe(fallback ?? MIN_FALLBACK), MIN_FALLBACK)
              return Deferred.await(wake).pipe(
                Effect.timeoutOption(wait),
                Effect.ensuring(
                  Effect.sync(() => {
                    w.pending = false
                    if (w.wake === wake) w.wake = undefined
                  })
                ),
                Effect.asVoid
              )
            })
        })
      )
    )
  }
}

/** The process's commit notices (one per process by default; every engine layer of the process shares it). */
export const Notices: Context.Reference<CommitNotices> = Context.Reference<CommitNotices>(
  "@durable-agent/engine/internal/CommitNotices",
  { defaultValue: () => new CommitNotices() }
)

/**
 * Feeds the commits of every process into `notices` (Postgres: the transactions NOTIFY after COMMIT, see the
 * store's `notifyCommit`) for as long as the scope is open; a dropped listener connection is opened again
 * (readers meanwhile read on their fallback). Nothing without a `PgClient`: in one process the owner notifies.
 */
export const listenAcrossProcesses = (notices: CommitNotices): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isNone(pg)) return
    const listen = Effect.scoped(
      Effect.gen(function* () {
        const queue = yield* pg.value.listen(COMMIT_CHANNEL)
        while (true) {
          const notice = yield* Queue.take(queue)
          notices.notify(notice.payload)
        }
      })
    )
    yield* Effect.forkScoped(
      listen.pipe(
        Effect.catchCause((cause) =>
          Effect.andThen(
            Effect.logDebug("commit notices: the LISTEN connection ended; listening again", cause),
            Effect.sleep("1 second")
          )
        ),
        Effect.forever
      )
    )
  })
