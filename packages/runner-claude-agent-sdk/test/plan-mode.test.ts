// Plan mode is Stepwise-only (the adapters spec: "Only such a runner can enable plan mode. Stepwise does; the
// adapters do not yet"): the Claude Agent SDK runner does not set `supportsPlanMode`, so a worker of a session
// Flow with plan mode refuses it with the session's typed error before any harness runs.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import { AgentSessionFlow, Errors } from "@durable-agent/session"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ClaudeAgentSdkRunner } from "../src/index.ts"

const dir = mkdtempSync(join(tmpdir(), "das-claude-plan-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("Claude Agent SDK runner: plan mode", () => {
  it.live(
    "a session Flow with plan mode is refused with AgentSessionDefinitionError; without it the worker starts",
    () =>
      Effect.gen(function* () {
        const runner = ClaudeAgentSdkRunner.make({ name: "claude-plan", configDir: dir })
        assert.notStrictEqual(runner.supportsPlanMode, true)
        const worker = (planModeEnabled: boolean, file: string) =>
          AgentSessionFlow.layerWorker(
            AgentSessionFlow.make({ flowType: "ClaudePlanAgent", planModeEnabled, builtInTools: ["write_todos"] })
          ).pipe(
            Layer.provide(ClaudeAgentSdkRunner.layer({ name: "claude-plan", configDir: dir })),
            Layer.provideMerge(Engine.layerEmbedded({ filename: join(dir, file), pollInterval: "50 millis" }))
          )
        const error = yield* Layer.build(worker(true, "plan.db")).pipe(Effect.scoped, Effect.flip)
        assert.instanceOf(error, Errors.AgentSessionDefinitionError)
        assert.strictEqual(
          (error as Errors.AgentSessionDefinitionError).message,
          AgentSessionFlow.planModeNeedsRunnerSupport("ClaudePlanAgent")
        )
        // the same Flow without plan mode builds: the refusal is plan mode's alone
        yield* Layer.build(worker(false, "chat.db")).pipe(Effect.scoped)
      })
  )
})
