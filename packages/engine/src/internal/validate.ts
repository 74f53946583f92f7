// Validation of Flow definitions at registration.
import * as Schema from "effect/Schema"
import { DefinitionError } from "../Errors.ts"
import type { FlowDef } from "../Flow.ts"
import { ms } from "./decision.ts"

const sameSchema = (a: Schema.Top, b: Schema.Top): boolean => {
  if (a === b) return true
  try {
    return JSON.stringify(Schema.toJsonSchemaDocument(a)) === JSON.stringify(Schema.toJsonSchemaDocument(b))
  } catch {
    return false
  }
}

/** Validates Flow definitions; the first problem is a DefinitionError. */
export const validateFlows = (flows: ReadonlyArray<FlowDef<any, any>>): DefinitionError | undefined => {
  const types = new Set<string>()
  for (const flow of flows) {
    const fail = (reason: string) => new DefinitionError({ flowType: flow.type, reason })
    if (flow.type === "") return fail("the Flow type is empty")
    if (types.has(flow.type)) return fail("duplicate Flow type")
    types.add(flow.type)
    const names = (items: ReadonlyArray<{ name: string }>, what: string) => {
      const seen = new Set<string>()
      for (const i of items) {
        if (i.name === "") return `${what} with an empty name`
        if (seen.has(i.name)) return `duplicate ${what} ${i.name}`
        seen.add(i.name)
      }
      return undefined
    }
    const dup =
      names(flow.attributes, "attribute") ??
      names(flow.channels, "channel") ??
      names(flow.streams, "stream") ??
      names(flow.rpcs, "RPC") ??
      names(
        flow.steps.map((s) => ({ name: s.type })),
        "Step type"
      )
    if (dup) return fail(dup)
    const stepTypes = new Map(flow.steps.map((s) => [s.type, s]))
    const attrs = new Map(flow.attributes.map((a) => [a.name, a]))
    const checkLocks = (locks: ReadonlyArray<any> | undefined, where: string) => {
      for (const l of locks ?? []) {
        const def = "_tag" in l ? l : l.map
        if (attrs.get(def.name) !== def) return `${where} locks ${def.name}, which the Flow does not declare`
      }
      return undefined
    }
    for (const step of flow.steps) {
      if (step.type.includes("/")) return fail(`Step type ${step.type} contains '/'`)
      const o = step.options
      const lockProblem =
        checkLocks(o?.execute?.locks, `Step ${step.type}`) ?? checkLocks(o?.waitFor?.locks, `Step ${step.type}`)
      if (lockProblem) return fail(lockProblem)
      for (const [what, d] of [
        ["execute timeout", o?.execute?.timeout],
        ["heartbeat timeout", o?.heartbeatTimeout],
        ["waitFor timeout", o?.waitFor?.timeout]
      ] as const) {
        const v = ms(d)
        if (v !== null && (v < 0 || v % 1000 !== 0)) return fail(`Step ${step.type}: ${what} must be whole seconds`)
      }
      for (const max of [o?.execute?.retry?.maxAttempts, o?.waitFor?.retry?.maxAttempts]) {
        if (max !== undefined && (!Number.isInteger(max) || max < 1)) {
          return fail(`Step ${step.type}: maxAttempts must be a positive integer`)
        }
      }
      const route = o?.onExecuteFailure
      if (route !== undefined) {
        if (stepTypes.get(route.type) !== route) {
          return fail(`Step ${step.type}: failure route ${route.type} is not a Step of this Flow`)
        }
        if (!sameSchema(route.input, step.input)) {
          return fail(`Step ${step.type}: failure route ${route.type} takes a different input type`)
        }
      }
    }
    const handler = flow.executionTimeout?.handler
    if (handler !== undefined && stepTypes.get(handler.type) !== handler) {
      return fail(`the timeout handler ${handler.type} is not a Step of this Flow`)
    }
    const after = ms(flow.executionTimeout?.after)
    if (after !== null && !(after > 0)) return fail("the execution timeout must be positive")
    for (const rpc of flow.rpcs) {
      const lockProblem = checkLocks(rpc.locks, `RPC ${rpc.name}`)
      if (lockProblem) return fail(lockProblem)
    }
    for (const s of flow.streams) {
      if (!Number.isInteger(s.capacityBytes) || s.capacityBytes <= 0) {
        return fail(`stream ${s.name}: capacity must be a positive whole number of bytes`)
      }
    }
  }
  return undefined
}
