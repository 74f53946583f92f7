// SqlSessionStore on the engine's own database, the embedded engine's SQLite file and the cluster engine's
// Postgres database, without the binary: positions, the cut back to a committed position, and the writer
// fence (an append of an attempt that is no longer the session's writer is refused, so a superseded harness
// that still runs cannot land entries after a later attempt's cut).
import type { SessionStoreEntry } from "@anthropic-ai/claude-agent-sdk"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type { SqlClient } from "effect/sql"
import { clusterEngine, embeddedEngine } from "../../session/test/support.ts"
import { SqlSessionStore } from "../src/index.ts"

const SESSION = "7c0f6a39-52a4-5d1e-8f7e-3f4b2a1c9d00"
const main = { projectKey: "p", sessionId: SESSION }
const entry = (uuid: string): SessionStoreEntry => ({ type: "user", uuid, message: { content: uuid } })
const uuids = (entries: ReadonlyArray<SessionStoreEntry> | null) => (entries ?? []).map((e) => e.uuid)

for (const [engineName, engine] of [
  ["embedded (SQLite)", embeddedEngine],
  ["cluster (Postgres)", clusterEngine]
] as const) {
  describe(`SqlSessionStore on the ${engineName} engine`, () => {
    it.live("truncate cuts back to a position and makes its attempt the writer; a superseded append is refused", () =>
      Effect.gen(function* () {
        const store = yield* SqlSessionStore.make
        // attempt A: nothing committed yet
        assert.strictEqual(yield* Effect.promise(() => store.truncate(SESSION, 0, "A")), 0)
        const a = store.forAttempt("A")
        yield* Effect.promise(() => a.append(main, [entry("e1"), entry("e2")]))
        yield* Effect.promise(() => a.append({ ...main, subpath: "subagents/agent-x" }, [entry("s1")]))
        assert.strictEqual(yield* Effect.promise(() => store.lastSeq(SESSION)), 2)
        // a retried batch appends nothing twice
        yield* Effect.promise(() => a.append(main, [entry("e2")]))
        assert.strictEqual(yield* Effect.promise(() => store.lastSeq(SESSION)), 2)
        // attempt B: the committed state knows position 1
        assert.strictEqual(yield* Effect.promise(() => store.truncate(SESSION, 1, "B")), 1)
        const refused = yield* Effect.flip(Effect.tryPromise(() => a.append(main, [entry("late")])))
        assert.instanceOf(refused.cause, SqlSessionStore.SupersededAppendError)
        assert.deepStrictEqual(uuids(yield* Effect.promise(() => store.load(main))), ["e1"])
        yield* Effect.promise(() => store.forAttempt("B").append(main, [entry("e3")]))
        assert.deepStrictEqual(uuids(yield* Effect.promise(() => store.load(main))), ["e1", "e3"])
        assert.strictEqual(yield* Effect.promise(() => store.lastSeq(SESSION)), 2)
        assert.isTrue(yield* Effect.promise(() => store.exists(SESSION)))
        // a subagent's transcript is kept by a cut above 0, and removed with the rest at 0
        assert.deepStrictEqual(yield* Effect.promise(() => store.listSubkeys!(main)), ["subagents/agent-x"])
        assert.strictEqual(yield* Effect.promise(() => store.truncate(SESSION, 0, "C")), 0)
        assert.deepStrictEqual(yield* Effect.promise(() => store.listSubkeys!(main)), [])
        assert.isNull(yield* Effect.promise(() => store.load(main)))
        assert.isFalse(yield* Effect.promise(() => store.exists(SESSION)))
      }).pipe(Effect.provide(engine({}) as unknown as Layer.Layer<SqlClient.SqlClient>), Effect.scoped)
    )
  })
}
