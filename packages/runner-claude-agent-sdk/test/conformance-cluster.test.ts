// The runner kit's conformance suite (control suite, adapted matrix) for the Claude Agent SDK runner on the
// cluster engine (a fresh Postgres database and runner per test), the real binary against the scripted server.
import { clusterEngine } from "../../session/test/support.ts"
import { conformanceSuite } from "./suites/conformance.ts"

conformanceSuite("cluster", () => clusterEngine({ maxConcurrentTasks: 64 }))
