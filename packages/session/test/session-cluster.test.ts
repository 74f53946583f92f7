// The same behaviour tests on the cluster engine: a fresh Postgres database and a runner on a free port per test.

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
import { clusterEngine } from "./support.ts"

turnSuite(clusterEngine)
approvalSuite(clusterEngine)
effectsSuite(clusterEngine)
inputSuite(clusterEngine)
sizesSuite(clusterEngine)
cancelSuite(clusterEngine)
steerSuite(clusterEngine)
questionsSuite(clusterEngine)
planSuite(clusterEngine)
continuationSuite(clusterEngine)
taskQuestionsSuite(clusterEngine)
idempotencySuite(clusterEngine)
storageSuite(clusterEngine)
