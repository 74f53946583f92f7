// The exported span tree of a traced turn: the spec's spans, the framework's own under chat (the SDK's
// telemetry), no span of the runner itself (runner-kit's span suite).
import { assert } from "@effect/vitest"
import { spanSuite } from "../../runner-kit/test/support/span-suite.ts"
import { harness } from "./harness.ts"

spanSuite(harness, {
  check: (tree) => {
    assert.isTrue(
      tree.framework.some((s) => s.name === "ai.streamText"),
      "the SDK's own spans nest under chat"
    )
  }
})
