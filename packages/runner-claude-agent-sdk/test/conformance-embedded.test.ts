// The runner kit's conformance suite (control suite, adapted matrix) for the Claude Agent SDK runner on the
// embedded engine (a fresh SQLite file per test), the real binary against the scripted server.
import { embeddedEngine } from "../../session/test/support.ts"
import { conformanceSuite } from "./suites/conformance.ts"

conformanceSuite("embedded", () => embeddedEngine({ maxConcurrentTasks: 64 }))
