// The exported span tree of a traced turn: the spec's spans, the framework's own under chat, no span of the
// runner itself (runner-kit's span suite).
import { spanSuite } from "../../runner-kit/test/support/span-suite.ts"
import { harness } from "./harness.ts"

spanSuite(harness)
