// The session's Steps (docs/session-contract.md, "Session Flow contract"), one module per Step family:
// turn.ts (StartAgentSession, AwaitUserMessage, RunModel, RecordTurnFailure, ResumeTurn), compaction.ts
// (CompactContext, failing into the turn family's RecordTurnFailure), tools.ts (CallTool,
// CallSingleAttemptTool and their failure routes RecordToolFailure, RecordToolOutcomeUnknown), tasks.ts
// (PollToolTask, CancelToolTask), waits.ts (AwaitToolApproval, AwaitQuestionAnswer, AwaitTimer) and
// control.ts (ApplyTurnControl, FinishTurnCancellation); common.ts holds what they share.
//
// The Steps refer to each other in two ways. A failure route (`onExecuteFailure`) is read when a Step is
// defined, so the families are built in dependency order: a route lives in its Step's family or in one built
// before it (tools before tasks). A decision (`goTo`, `StepMovement.of`) is made at run time, so it reads the
// late-bound registry `steps`, which is filled once every family is built and before any Step runs.
import type { SessionConfig } from "../session.ts"
import type { SessionSteps } from "./common.ts"
import { makeCompactionSteps } from "./compaction.ts"
import { makeControlSteps } from "./control.ts"
import { makeTaskSteps } from "./tasks.ts"
import { makeToolSteps } from "./tools.ts"
import { makeTurnSteps } from "./turn.ts"
import { makeWaitSteps } from "./waits.ts"

export { abandonable, type SessionSteps, type ToolStepBody } from "./common.ts"

/**
 * The session's Steps, and the tool Steps' bodies as they are (their types inferred, so the type tests pin
 * what the bodies really fail with).
 */
export const makeSteps = <Id>(config: SessionConfig<Id>) => {
  // Filled below, before any Step runs; until then no family reads it.
  const registry = {} as { -readonly [K in keyof SessionSteps<Id>]: SessionSteps<Id>[K] }
  const turn = makeTurnSteps(config, registry)
  const compaction = makeCompactionSteps(config, registry, turn.RecordTurnFailure)
  const tools = makeToolSteps(config, registry)
  const tasks = makeTaskSteps(config, registry, tools)
  const waits = makeWaitSteps(config, registry)
  const control = makeControlSteps(config, registry)
  // In the order the Flow lists them.
  Object.assign(registry, {
    StartAgentSession: turn.StartAgentSession,
    AwaitUserMessage: turn.AwaitUserMessage,
    RunModel: turn.RunModel,
    RecordTurnFailure: turn.RecordTurnFailure,
    CompactContext: compaction.CompactContext,
    CallTool: tools.CallTool,
    CallSingleAttemptTool: tools.CallSingleAttemptTool,
    AwaitToolApproval: waits.AwaitToolApproval,
    RecordToolFailure: tools.RecordToolFailure,
    RecordToolOutcomeUnknown: tools.RecordToolOutcomeUnknown,
    PollToolTask: tasks.PollToolTask,
    ResumeTurn: turn.ResumeTurn,
    ApplyTurnControl: control.ApplyTurnControl,
    FinishTurnCancellation: control.FinishTurnCancellation,
    CancelToolTask: tasks.CancelToolTask,
    AwaitQuestionAnswer: waits.AwaitQuestionAnswer,
    AwaitTimer: waits.AwaitTimer
  } satisfies SessionSteps<Id>)
  const steps: SessionSteps<Id> = registry
  return { steps, toolBodies: { callTool: tools.callToolBody, pollToolTask: tasks.pollToolTaskBody } }
}
