// The stored attribute versions' garbage collection (`internal/attrVersions.ts`): the incremental pass, which
// looks only at the keys a transition wrote and the keys that keep older versions, against the whole-map pass it
// replaced, over random histories of writes, deletes and running Steps' views.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AttrVersions, collectGarbage } from "../src/internal/attrVersions.ts"
import { splitChannelKey } from "../src/internal/state.ts"
import type { AttrVersionRow } from "../src/internal/store/rows.ts"

/** The whole-map pass as it was: every key of the Flow examined on every transition. */
const wholeMap = (
  stored: ReadonlyMap<string, ReadonlyArray<number>>,
  written: ReadonlyMap<string, AttrVersionRow>,
  visible: ReadonlySet<number>,
  hardDelete: ReadonlySet<string>
) => {
  const versions = new Map(stored)
  const deletes: Array<Omit<AttrVersionRow, "value">> = []
  const dropped = new Set<string>()
  for (const [k, w] of written) {
    const unread =
      w.value === null && ![...visible].some((v) => v < w.version && (stored.get(k) ?? []).some((x) => x <= v))
    if (w.value === null && (hardDelete.has(w.name) || unread)) {
      for (const x of stored.get(k) ?? []) deletes.push({ name: w.name, key: w.key, version: x })
      versions.delete(k)
      dropped.add(k)
      continue
    }
    versions.set(k, [...(stored.get(k) ?? []), w.version])
  }
  for (const [k, list] of versions) {
    if (list.length < 2) continue
    const keep = new Set<number>([list[list.length - 1]!])
    for (const v of hardDelete.has(splitChannelKey(k)[0]) ? [] : visible) {
      let best: number | undefined
      for (const x of list) if (x <= v) best = x
      if (best !== undefined) keep.add(best)
    }
    if (keep.size === list.length) continue
    const [name, key] = splitChannelKey(k)
    for (const x of list) if (!keep.has(x)) deletes.push({ name, key, version: x })
    versions.set(
      k,
      list.filter((x) => keep.has(x))
    )
  }
  return { deletes, versions, dropped }
}

/** A small deterministic generator (the same histories on every run). */
const random = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
}

const sortDeletes = (deletes: ReadonlyArray<Omit<AttrVersionRow, "value">>) =>
  deletes.map((d) => `${d.name}/${d.key}/${d.version}`).sort()

describe("attribute versions' garbage collection", () => {
  it.effect("the incremental pass deletes, keeps and drops what the whole-map pass does", () =>
    Effect.sync(() => {
      let deleted = 0
      let dropped = 0
      let kept = 0
      for (let history = 0; history < 200; history++) {
        const next = random(history + 1)
        const hardDelete = new Set(next() < 0.3 ? ["h"] : [])
        let reference = new Map<string, ReadonlyArray<number>>()
        let versions: AttrVersions | undefined
        /** The versions the running Steps' views read (each view is of a past version). */
        let views: Array<number> = []
        for (let version = 1; version <= 60; version++) {
          const written = new Map<string, AttrVersionRow>()
          const writes = Math.floor(next() * 4)
          for (let i = 0; i < writes; i++) {
            const name = ["a", "m", "h"][Math.floor(next() * 3)]!
            const key = name === "a" ? "" : String(Math.floor(next() * 6))
            const value = next() < 0.25 ? null : `v${version}`
            written.set(`${name}\u0000${key}`, { name, key, version, value })
          }
          if (next() < 0.3) views.push(version - 1 - Math.floor(next() * 3))
          if (next() < 0.3) views = views.filter(() => next() < 0.5)
          const visible = new Set(views.filter((v) => v > 0))
          const expected = wholeMap(reference, written, visible, hardDelete)
          const actual = collectGarbage(versions, written, visible, hardDelete)
          assert.deepStrictEqual(sortDeletes(actual.deletes), sortDeletes(expected.deletes))
          assert.deepStrictEqual([...actual.dropped].sort(), [...expected.dropped].sort())
          deleted += actual.deletes.length
          dropped += actual.dropped.size
          // a transition that rolls back leaves the versions as they were: only some commit
          if (next() < 0.15) continue
          reference = expected.versions
          versions = (versions ?? new AttrVersions()).apply(actual.changes)
          assert.strictEqual(versions.size, reference.size)
          for (const [k, list] of reference) assert.deepStrictEqual(versions.get(k), list)
          kept += versions.multiVersion().size
          assert.deepStrictEqual(
            [...versions.multiVersion()].sort(),
            [...reference]
              .filter(([, list]) => list.length > 1)
              .map(([k]) => k)
              .sort()
          )
        }
      }
      // the histories cover superseded versions deleted, dropped deletes and older versions kept for a view
      assert.isAbove(deleted, 1000)
      assert.isAbove(dropped, 100)
      assert.isAbove(kept, 100)
    })
  )

  it.effect("versions loaded from rows in any order are each key's ascending list", () =>
    Effect.sync(() => {
      const versions = AttrVersions.fromRows([
        { name: "m", key: "1", version: 7 },
        { name: "a", key: "", version: 3 },
        { name: "m", key: "1", version: 2 }
      ])
      assert.deepStrictEqual(versions.get("m\u00001"), [2, 7])
      assert.deepStrictEqual(versions.get("a\u0000"), [3])
      assert.deepStrictEqual([...versions.multiVersion()], ["m\u00001"])
    })
  )
})
