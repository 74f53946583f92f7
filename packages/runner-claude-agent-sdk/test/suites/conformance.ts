// The runner kit's conformance suite for the Claude Agent SDK runner, on one engine: the kit's control suite
// and matrix suite as they are, with a 150 s bound on their waits (the binary is a real process, slow on a
// loaded machine) and `readsInline` (the README's "Conformance" section): a READ tool runs inline inside the
// RunModel (no CallTool Step, no record, the two model calls in one RunModel), so the kit's cases 1, 2 and
// 3+7 assert that shape.

import { controlSuite, type EngineFactory, matrixSuite } from "@durable-agent/runner-kit/Conformance"
import { harness } from "../harness.ts"

export const conformanceSuite = (engineName: string, engine: EngineFactory): void => {
  const options = { engines: { [engineName]: engine }, timeout: "150 seconds" } as const
  controlSuite(harness, options)
  matrixSuite(harness, { ...options, readsInline: true })
}
