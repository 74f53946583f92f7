// The exported span tree of a traced turn: the spec's spans, the framework's own under chat, no span of the
// runner itself (runner-kit's span suite); the harness's cost is on each chat span. The harness is a real
// process: the package's longer wait.
import { assert } from "@effect/vitest"
import { spanSuite } from "../../runner-kit/test/support/span-suite.ts"
import { harness } from "./harness.ts"

spanSuite(harness, {
  timeout: 240_000,
  check: (tree) => {
    for (const chat of tree.chats) {
      assert.isNumber(chat.attributes["claude_agent_sdk.total_cost_usd"], chat.name)
      assert.isNumber(chat.attributes["claude_agent_sdk.turn_cost_usd"], chat.name)
    }
  }
})
