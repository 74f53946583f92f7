/**
 * Codecs of the plan that `write_todos` keeps and of plan execution approvals.
 *
 * Contract: `docs/session-contract.md`, "Persistence schema" (`AgentPlan`, `AgentPlanTask`,
 * `PlanExecutionRequest`) and "Session Flow contract" rules on `write_todos` and plan mode.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { Timestamp } from "./Common.ts"
import { wireStruct } from "./internal.ts"

/**
 * The status of an `AgentPlan` ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentPlanStatus = Schema.Literals(["draft", "active", "completed", "cleared"])
/** @since 0.1.0 */
export type AgentPlanStatus = typeof AgentPlanStatus.Type

/**
 * The status of one task of a plan ("Persistence schema", `AgentPlanTask.status`).
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentPlanTaskStatus = Schema.Literals(["pending", "in_progress", "completed"])
/** @since 0.1.0 */
export type AgentPlanTaskStatus = typeof AgentPlanTaskStatus.Type

/**
 * One task of a plan ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentPlanTask = Schema.Struct({
  content: Schema.String,
  status: AgentPlanTaskStatus
})
/** @since 0.1.0 */
export type AgentPlanTask = typeof AgentPlanTask.Type

/**
 * The `AgentPlan` Attribute value, replaced by each successful `write_todos` ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const AgentPlan = wireStruct(
  {
    revision: Schema.Int,
    status: AgentPlanStatus,
    tasks: Schema.Array(AgentPlanTask),
    updatedAt: Timestamp
  },
  { updatedAt: "updated_at" }
)
/** @since 0.1.0 */
export type AgentPlan = typeof AgentPlan.Type
/** @since 0.1.0 */
export type AgentPlanEncoded = typeof AgentPlan.Encoded

/**
 * A plan approval: the `PlanExecutions` ChannelMap message and the `PendingPlanExecution` Attribute
 * value ("Persistence schema").
 *
 * @category schemas
 * @since 0.1.0
 */
export const PlanExecutionRequest = Schema.Struct({ revision: Schema.Int })
/** @since 0.1.0 */
export type PlanExecutionRequest = typeof PlanExecutionRequest.Type
