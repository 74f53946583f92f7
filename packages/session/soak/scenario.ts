// What the soak's sessions do, shared by the driver (soak.ts) and the workers (soak-worker.ts).
import type { Wire } from "../src/index.ts"

/** The soak's session IDs. */
export const sessionIds = (n: number) => Array.from({ length: n }, (_, i) => `soak-${i + 1}`)

/**
 * The tools of each turn pattern (`turn <t>` uses pattern t % 4): every class, approvals in two of them; the
 * first turn uses all four.
 */
export const TURN_TOOLS: ReadonlyArray<ReadonlyArray<string>> = [
  ["lookup", "upsert"],
  ["lookup", "upsert", "charge", "deploy"],
  ["charge"],
  ["deploy", "lookup"]
]

/** Each tool's effect class. */
export const TOOL_EFFECTS: Readonly<Record<string, Wire.ToolEffect>> = {
  lookup: "read",
  upsert: "idempotent_write",
  charge: "non_idempotent_write",
  deploy: "unclassified"
}
