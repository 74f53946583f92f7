/**
 * A worker: registers Flow definitions (validated first) and runs their Steps and RPCs on the
 * engine it is given. The services the handlers need (`R`) are captured from the layer's context,
 * so applications provide ModelClient, ToolSource and the like at the edge.
 *
 * @since 0.1.0
 */

import type { Sharding } from "effect/cluster"
import * as Layer from "effect/Layer"
import type { SqlClient } from "effect/sql"
import type { EngineConfig } from "./EngineConfig.ts"
import type { DefinitionError } from "./Errors.ts"
import type { FlowDef } from "./Flow.ts"
import { GroupCommit } from "./internal/groupCommit.ts"
import { FlowEntityLayer } from "./internal/owner.ts"
import { type FlowRegistry, registerFlows } from "./internal/registry.ts"

type Services<Flows extends ReadonlyArray<FlowDef<any, any>>> = Flows[number] extends FlowDef<any, infer R> ? R : never

/**
 * Registers the Flows and starts their entities. Registration happens before any message is
 * processed, so redelivered work after a restart always finds its definitions.
 */
export const layer = <const Flows extends ReadonlyArray<FlowDef<any, any>>>(
  ...flows: Flows
): Layer.Layer<
  never,
  DefinitionError,
  Services<Flows> | Sharding.Sharding | SqlClient.SqlClient | FlowRegistry | EngineConfig
> => FlowEntityLayer.pipe(Layer.provide(Layer.effectDiscard(registerFlows(flows))), Layer.provide(GroupCommit.layer))
