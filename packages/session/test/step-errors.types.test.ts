// Type-level tests of the session Steps' failure channels (`tsc` checks them; the typecheck includes tests).
import type { Defect, RecoveryError, StepDecision, StepDef, StepFailure } from "@durable-agent/engine"
import { describe, expectTypeOf, it } from "@effect/vitest"
import type * as Effect from "effect/Effect"
import { AgentSessionFlow, type Errors, type Runner } from "../src/index.ts"
import type { makeSteps } from "../src/internal/steps/index.ts"

const { steps } = AgentSessionFlow.make({ flowType: "Types" }).session
type Steps = typeof steps
type Bodies = ReturnType<typeof makeSteps<Runner.AgentFrameworkRunner>>["toolBodies"]

describe("the session Steps' failure channels (types)", () => {
  it("RunModel fails with ModelCallError, which RecordTurnFailure recovers", () => {
    expectTypeOf<StepDef.Error<Steps["RunModel"]>>().toEqualTypeOf<Errors.ModelCallError>()
    expectTypeOf<StepDef.Recovers<Steps["RecordTurnFailure"]>>().toEqualTypeOf<Errors.ModelCallError>()
    expectTypeOf<RecoveryError<StepDef.Recovers<Steps["RecordTurnFailure"]>>["errorType"]>().toEqualTypeOf<
      "ModelCallError" | StepFailure["_tag"]
    >()
    // the probe from the issue: a RunModel body may not fail with 42
    const probe = (body: ReturnType<Steps["RunModel"]["execute"]>) => {
      // @ts-expect-error: 42 is not ModelCallError
      const fortyTwo: Effect.Effect<StepDecision, 42, Runner.AgentFrameworkRunner> = body
      return fortyTwo
    }
    expectTypeOf(probe).toBeFunction()
  })

  it("a tool Step's body fails with ToolExecutionError | ToolAttemptError; the Step records the first itself", () => {
    expectTypeOf<ReturnType<Bodies["callTool"]>>().toEqualTypeOf<
      Effect.Effect<StepDecision, Errors.ToolExecutionError | Errors.ToolAttemptError, Runner.AgentFrameworkRunner>
    >()
    expectTypeOf<ReturnType<Bodies["pollToolTask"]>>().toEqualTypeOf<
      Effect.Effect<StepDecision, Errors.ToolExecutionError | Errors.ToolAttemptError, Runner.AgentFrameworkRunner>
    >()
    expectTypeOf<StepDef.Error<Steps["CallTool"]>>().toEqualTypeOf<Errors.ToolAttemptError>()
    expectTypeOf<StepDef.Error<Steps["CallSingleAttemptTool"]>>().toEqualTypeOf<Errors.ToolAttemptError>()
    expectTypeOf<StepDef.Error<Steps["PollToolTask"]>>().toEqualTypeOf<Errors.ToolAttemptError>()
    expectTypeOf<StepDef.Recovers<Steps["RecordToolFailure"]>>().toEqualTypeOf<Errors.ToolAttemptError>()
    expectTypeOf<StepDef.Recovers<Steps["RecordToolOutcomeUnknown"]>>().toEqualTypeOf<Errors.ToolAttemptError>()
    // a ValueTooLarge commit and a defect reach the tool routes typed
    expectTypeOf<RecoveryError<Errors.ToolAttemptError>["error"]>().toEqualTypeOf<
      Errors.ToolAttemptError | StepFailure
    >()
    expectTypeOf<Extract<RecoveryError<Errors.ToolAttemptError>["error"], { _tag: "Defect" }>>().toEqualTypeOf<Defect>()
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
    expectTypeOf<StepDef.Error<Steps["CancelToolTask"]>>().toEqualTypeOf<Errors.ToolAttemptError>()
  })

  it("no session Step has `any` in its type", () => {
    type IsAny<T> = 0 extends 1 & T ? true : false
    type AnyParam<S> =
      | IsAny<StepDef.Input<S>>
      | IsAny<StepDef.Error<S>>
      | IsAny<StepDef.Services<S>>
      | IsAny<StepDef.Recovers<S>>
    expectTypeOf<{ [K in keyof Steps]: AnyParam<Steps[K]> }[keyof Steps]>().toEqualTypeOf<false>()
    expectTypeOf<StepDef.Services<Steps["RunModel"]>>().toEqualTypeOf<Runner.AgentFrameworkRunner>()
  })
})
