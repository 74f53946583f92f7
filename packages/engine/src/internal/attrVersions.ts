// The stored versions of a Flow's attribute keys, as its owner caches them, and which of them a transition
// deletes (the versions no reader can see any more). A transition looks only at the keys it wrote and at the
// keys that keep more than one version (those a running Step's view still reads), not at every key of the
// Flow: a session has hundreds of keys and writes a few dozen a turn. The change is applied in place after
// COMMIT (`apply`); a transition that fails or rolls back leaves the versions untouched.
import { splitChannelKey } from "./state.ts"
import type { AttrVersionRow } from "./store/rows.ts"

/** Stored versions of each attribute key (`name\0key`), ascending. */
export class AttrVersions {
  private readonly lists = new Map<string, ReadonlyArray<number>>()
  /** The keys with two versions or more. */
  private readonly multi = new Set<string>()

  /** The versions of the stored rows (any order: each key's list is sorted). */
  static fromRows(rows: ReadonlyArray<{ readonly name: string; readonly key: string; readonly version: number }>) {
    const lists = new Map<string, Array<number>>()
    for (const r of rows) {
      const k = `${r.name}\u0000${r.key}`
      const list = lists.get(k)
      if (list === undefined) lists.set(k, [r.version])
      else list.push(r.version)
    }
    const versions = new AttrVersions()
    for (const [k, list] of lists)
      versions.set(
        k,
        list.sort((a, b) => a - b)
      )
    return versions
  }

  get size() {
    return this.lists.size
  }

  get(k: string): ReadonlyArray<number> | undefined {
    return this.lists.get(k)
  }

  /** The keys that keep more than one version. */
  multiVersion(): ReadonlySet<string> {
    return this.multi
  }

  /** Applies a transition's change (`null`: the key has no stored version any more) after its COMMIT. */
  apply(changes: ReadonlyMap<string, ReadonlyArray<number> | null>): this {
    for (const [k, list] of changes) {
      if (list === null) {
        this.lists.delete(k)
        this.multi.delete(k)
      } else this.set(k, list)
    }
    return this
  }

  private set(k: string, list: ReadonlyArray<number>) {
    this.lists.set(k, list)
    if (list.length > 1) this.multi.add(k)
    else this.multi.delete(k)
  }
}

const none: ReadonlyArray<number> = []

/**
 * Which stored attribute versions no reader can see any more. A key keeps its newest version and, for each
 * version a running Step reads, the newest version at or below it; every other version is deleted. `changes`
 * holds the new version list of each key whose list changes (`null`: no version left), for `AttrVersions.apply`.
 */
export const collectGarbage = (
  stored: AttrVersions | undefined,
  written: ReadonlyMap<string, AttrVersionRow>,
  visible: ReadonlySet<number>,
  hardDelete: ReadonlySet<string> = new Set()
) => {
  const changes = new Map<string, ReadonlyArray<number> | null>()
  const deletes: Array<Omit<AttrVersionRow, "value">> = []
  /** Written keys that are not stored at all: hard-delete attributes deleted by this transition. */
  const dropped = new Set<string>()
  for (const [k, w] of written) {
    const before = stored?.get(k) ?? none
    // A delete that no running Step's view reads past (every view is at or after it, or none reads an older
    // value) leaves no version behind: a tombstone alone reads as absent, exactly as no row does.
    if (w.value === null && (hardDelete.has(w.name) || !readBelow(visible, w.version, before))) {
      for (const x of before) deletes.push({ name: w.name, key: w.key, version: x })
      changes.set(k, null)
      dropped.add(k)
      continue
    }
    changes.set(k, [...before, w.version])
  }
  const prune = (k: string, list: ReadonlyArray<number>) => {
    if (list.length < 2) return
    const keep = new Set<number>([list[list.length - 1]!])
    const [name, key] = splitChannelKey(k)
    // a hard-delete attribute keeps no superseded value, not even for a running Step's view
    if (!hardDelete.has(name)) {
      for (const v of visible) {
        let best: number | undefined
        for (const x of list) if (x <= v) best = x
        if (best !== undefined) keep.add(best)
      }
    }
    if (keep.size === list.length) return
    for (const x of list) if (!keep.has(x)) deletes.push({ name, key, version: x })
    changes.set(
      k,
      list.filter((x) => keep.has(x))
    )
  }
  // the keys this transition wrote, then the stored keys that keep older versions for a view: every other key
  // has one version, which stays
  for (const [k, list] of changes) if (list !== null) prune(k, list)
  if (stored !== undefined) {
    for (const k of stored.multiVersion()) if (!changes.has(k)) prune(k, stored.get(k)!)
  }
  return { deletes, changes, dropped }
}

/** Whether a view reads a stored version of the key below `version` (one of `stored` at or below the view's). */
const readBelow = (visible: ReadonlySet<number>, version: number, stored: ReadonlyArray<number>) => {
  for (const v of visible) if (v < version && stored.some((x) => x <= v)) return true
  return false
}
