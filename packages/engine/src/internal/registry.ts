// The Flows this process runs, with the services their handlers need.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { AnyStepDef, FlowDef, RpcDef, StreamDef } from "../Flow.ts"
import { validateFlows } from "./validate.ts"

/** A registered Flow definition, indexed, with the context its handlers run in. */
export interface RegisteredFlow {
  readonly def: FlowDef<any, any>
  readonly steps: ReadonlyMap<string, AnyStepDef>
  readonly rpcs: ReadonlyMap<string, RpcDef<any, any, any>>
  readonly streams: ReadonlyMap<string, StreamDef<any>>
  /** Names of the hard-delete attributes. */
  readonly hardDelete: ReadonlySet<string>
  // the services of the Worker layer, captured at registration; their types are erased per Flow
  readonly context: Context.Context<any>
}

/** The Flows this process can run. */
export class FlowRegistry extends Context.Service<FlowRegistry, { readonly flows: Map<string, RegisteredFlow> }>()(
  "@durable-agent/engine/FlowRegistry"
) {
  static readonly layer = Layer.sync(FlowRegistry, () => ({ flows: new Map() }))
}

/** Validates the definitions (the first problem is a DefinitionError), then registers them. */
export const registerFlows = (flows: ReadonlyArray<FlowDef<any, any>>) =>
  Effect.gen(function* () {
    const problem = validateFlows(flows)
    if (problem) return yield* problem
    const registry = yield* FlowRegistry
    const context = yield* Effect.context<any>()
    for (const def of flows) {
      registry.flows.set(def.type, {
        def,
        steps: new Map(def.steps.map((s) => [s.type, s])),
        rpcs: new Map(def.rpcs.map((r) => [r.name, r])),
        streams: new Map(def.streams.map((s) => [s.name, s])),
        hardDelete: new Set(def.attributes.filter((a) => a.hardDelete === true).map((a) => a.name)),
        context
      })
    }
  })
