// Type-level tests of the session Steps' failure channels (`tsc` checks them; the typecheck includes tests).
import type { Defect, RecoveryError, StepDecision, StepDef, StepFailure } from "@durable-agent/engine"
import { describe, expectTypeOf, it } from "@effect/vitest"
import type * as Effect from "effect/Effect"
import {
  type AgentFrameworkRunner,
  AgentSessionFlow,
  type ModelCallError,
  type ToolAttemptError,
  type ToolExecutionError
} from "../src/index.ts"
import type { makeSteps } from "../src/internal/steps.ts"

const { steps } = AgentSessionFlow.make({ flowType: "Types" }).session
type Steps = typeof steps
type Bodies = ReturnType<typeof makeSteps<AgentFrameworkRunner>>["toolBodies"]

describe("the session Steps' failure channels (types)", () => {
  it("RunModel fails with ModelCallError, which RecordTurnFailure recovers", () => {
    expectTypeOf<StepDef.Error<Steps["RunModel"]>>().toEqualTypeOf<ModelCallError>()
    expectTypeOf<StepDef.Recovers<Steps["RecordTurnFailure"]>>().toEqualTypeOf<ModelCallError>()
    expectTypeOf<RecoveryError<StepDef.Recovers<Steps["RecordTurnFailure"]>>["errorType"]>().toEqualTypeOf<
      "ModelCallError" | StepFailure["_tag"]
    >()
    // the probe from the issue: a RunModel body may not fail with 42
    const probe = (body: ReturnType<Steps["RunModel"]["execute"]>) => {
      // @ts-expect-error: 42 is not ModelCallError
      const fortyTwo: Effect.Effect<StepDecision, 42, AgentFrameworkRunner> = body
      return fortyTwo
    }
    expectTypeOf(probe).toBeFunction()
  })

  it("a tool Step's body fails with ToolExecutionError | ToolAttemptError; the Step records the first itself", () => {
    expectTypeOf<ReturnType<Bodies["callTool"]>>().toEqualTypeOf<
      Effect.Effect<StepDecision, ToolExecutionError | ToolAttemptError, AgentFrameworkRunner>
    >()
    expectTypeOf<ReturnType<Bodies["pollToolTask"]>>().toEqualTypeOf<
      Effect.Effect<StepDecision, ToolExecutionError | ToolAttemptError, AgentFrameworkRunner>
    >()
    expectTypeOf<StepDef.Error<Steps["CallTool"]>>().toEqualTypeOf<ToolAttemptError>()
    expectTypeOf<StepDef.Error<Steps["CallSingleAttemptTool"]>>().toEqualTypeOf<ToolAttemptError>()
    expectTypeOf<StepDef.Error<Steps["PollToolTask"]>>().toEqualTypeOf<ToolAttemptError>()
    expectTypeOf<StepDef.Recovers<Steps["RecordToolFailure"]>>().toEqualTypeOf<ToolAttemptError>()
    expectTypeOf<StepDef.Recovers<Steps["RecordToolOutcomeUnknown"]>>().toEqualTypeOf<ToolAttemptError>()
    // a ValueTooLarge commit and a defect reach the tool routes typed
    expectTypeOf<RecoveryError<ToolAttemptError>["error"]>().toEqualTypeOf<ToolAttemptError | StepFailure>()
    expectTypeOf<Extract<RecoveryError<ToolAttemptError>["error"], { _tag: "Defect" }>>().toEqualTypeOf<Defect>()
  })

  it("the bookkeeping Steps fail with nothing typed", () => {
    expectTypeOf<StepDef.Error<Steps["StartAgentSession"]>>().toEqualTypeOf<never>()
    expectTypeOf<StepDef.Error<Steps["AwaitUserMessage"]>>().toEqualTypeOf<never>()
    expectTypeOf<StepDef.Error<Steps["RecordTurnFailure"]>>().toEqualTypeOf<never>()
    expectTypeOf<StepDef.Error<Steps["AwaitToolApproval"]>>().toEqualTypeOf<never>()
    expectTypeOf<StepDef.Error<Steps["RecordToolFailure"]>>().toEqualTypeOf<never>()
    expectTypeOf<StepDef.Error<Steps["RecordToolOutcomeUnknown"]>>().toEqualTypeOf<never>()
    expectTypeOf<StepDef.Error<Steps["ResumeTurn"]>>().toEqualTypeOf<never>()
    expectTypeOf<StepDef.Error<Steps["ApplyTurnControl"]>>().toEqualTypeOf<never>()
    expectTypeOf<StepDef.Error<Steps["FinishTurnCancellation"]>>().toEqualTypeOf<never>()
  })

  it("CancelToolTask fails its attempt with ToolAttemptError, which RecordToolOutcomeUnknown recovers", () => {
    expectTypeOf<StepDef.Error<Steps["CancelToolTask"]>>().toEqualTypeOf<ToolAttemptError>()
  })

  it("no session Step has `any` in its type", () => {
    type IsAny<T> = 0 extends 1 & T ? true : false
    type AnyParam<S> =
      | IsAny<StepDef.Input<S>>
      | IsAny<StepDef.Error<S>>
      | IsAny<StepDef.Services<S>>
      | IsAny<StepDef.Recovers<S>>
    expectTypeOf<{ [K in keyof Steps]: AnyParam<Steps[K]> }[keyof Steps]>().toEqualTypeOf<false>()
    expectTypeOf<StepDef.Services<Steps["RunModel"]>>().toEqualTypeOf<AgentFrameworkRunner>()
  })
})
