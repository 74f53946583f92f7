// The session's behaviour tests on the embedded engine (a fresh SQLite file per test). They cover the spec's
// matrix cases 1, 2, 3 (without a restart), 4, 7, 8, 10 and 11; kill.test.ts covers 3 (with SIGKILL), 5, 6, 9.

import { approvalSuite } from "./suites/approval.ts"
import { cancelSuite } from "./suites/cancel.ts"
import { continuationSuite } from "./suites/continuation.ts"
import { effectsSuite } from "./suites/effects.ts"
import { idempotencySuite } from "./suites/idempotency.ts"
import { inputSuite } from "./suites/input.ts"
import { planSuite } from "./suites/plan.ts"
import { questionsSuite } from "./suites/questions.ts"
import { sizesSuite } from "./suites/sizes.ts"
import { steerSuite } from "./suites/steer.ts"
import { storageSuite } from "./suites/storage.ts"
import { taskQuestionsSuite } from "./suites/task-questions.ts"
import { turnSuite } from "./suites/turn.ts"
import { embeddedEngine } from "./support.ts"

turnSuite(embeddedEngine)
approvalSuite(embeddedEngine)
effectsSuite(embeddedEngine)
inputSuite(embeddedEngine)
sizesSuite(embeddedEngine)
cancelSuite(embeddedEngine)
steerSuite(embeddedEngine)
questionsSuite(embeddedEngine)
planSuite(embeddedEngine)
continuationSuite(embeddedEngine)
taskQuestionsSuite(embeddedEngine)
idempotencySuite(embeddedEngine)
storageSuite(embeddedEngine)
