// Requests from other processes to a Flow's owner, as effect/cluster entity messages.
import { createHash } from "node:crypto"
import { ClusterSchema, DeliverAt, Entity } from "effect/cluster"
import * as DateTime from "effect/DateTime"
import * as PrimaryKey from "effect/PrimaryKey"
import { Rpc } from "effect/rpc"
import * as Schema from "effect/Schema"
import {
  ChannelMessageNotFound,
  DefinitionError,
  EngineError,
  FlowAlreadyStarted,
  FlowNotActive,
  FlowNotFound,
  IdempotencyKeyReused,
  InvalidInput,
  RpcFailed,
  RpcLockConflict,
  ValueTooLarge
} from "../Errors.ts"
import { AttrWriteSchema } from "./decision.ts"

/** Wakes a Flow whose wait has a timer due at `at` (delivered then, to whichever runner owns the Flow). */
export class WakePayload extends Schema.Class<WakePayload>("@durable-agent/engine/Wake")({
  flowId: Schema.String,
  stepExecutionId: Schema.String,
  at: Schema.Number
}) {
  [PrimaryKey.symbol]() {
    return `wake/${this.stepExecutionId}@${this.at}`
  }
  [DeliverAt.symbol]() {
    return DateTime.makeUnsafe(this.at)
  }
}

export class StartPayload extends Schema.Class<StartPayload>("@durable-agent/engine/Start")({
  flowId: Schema.String,
  flowType: Schema.String,
  input: Schema.String,
  requestId: Schema.String,
  ignoreAlreadyStarted: Schema.Boolean,
  stepDurability: Schema.Literals(["sync", "async"]),
  initialAttributes: Schema.Array(AttrWriteSchema),
  /** Overrides the Flow definition's execution timeout. */
  executionTimeoutMs: Schema.optional(Schema.Number),
  /** Whether a closed Flow's ID may start a new run (default `reject`). */
  idReusePolicy: Schema.optional(Schema.Literals(["reject", "allowIfClosed", "allowIfFailed"]))
}) {
  [PrimaryKey.symbol]() {
    return `start/${this.requestId}`
  }
}

export class InvokePayload extends Schema.Class<InvokePayload>("@durable-agent/engine/Invoke")({
  flowId: Schema.String,
  rpc: Schema.String,
  input: Schema.String,
  /** The reply is stored under it: a random ID, or {@link keyedRequestId} of the caller's key. */
  requestId: Schema.String,
  /**
   * The caller's idempotency key, when it gave one. Each send of a keyed request is then its own cluster
   * message (`sendId`): a retry is answered from the stored reply by the owner, and never from a failure the
   * cluster stored for an earlier send (a lock conflict, an unreachable runner).
   */
  idempotencyKey: Schema.optional(Schema.String),
  sendId: Schema.optional(Schema.String)
}) {
  [PrimaryKey.symbol]() {
    // a keyed request ID is up to 270 characters, over the cluster's 255 for a message ID
    return `rpc/${this.sendId ?? this.requestId}`
  }
}

/** The prefix of a keyed request ID; the key starts after it and a 64-digit fingerprint (70 characters). */
export const KEYED_PREFIX = "idem/"

/**
 * The request ID of a call with the idempotency key `key`: `idem/<sha-256 of rpc and input>/<key>`. The same
 * key with the same RPC and input gives the same ID, so a retry finds the first call's stored reply; with other
 * arguments it gives another ID under the same key, which the owner refuses with IdempotencyKeyReused.
 */
export const keyedRequestId = (key: string, rpc: string, input: string) =>
  `${KEYED_PREFIX}${createHash("sha256").update(rpc).update("\n").update(input).digest("hex")}/${key}`

const ControlCommand = Schema.Union([
  Schema.Struct({
    _tag: Schema.Literal("Stop"),
    mode: Schema.Literals(["cancel", "terminate", "fail"]),
    reason: Schema.String
  }),
  Schema.Struct({
    _tag: Schema.Literal("SkipTimer"),
    stepExecutionId: Schema.String,
    timer: Schema.Union([Schema.String, Schema.Number])
  }),
  Schema.Struct({ _tag: Schema.Literal("Publish"), channel: Schema.String, key: Schema.String, value: Schema.String }),
  Schema.Struct({
    _tag: Schema.Literal("SetAttribute"),
    name: Schema.String,
    key: Schema.String,
    value: Schema.NullOr(Schema.String)
  })
])

export class ControlPayload extends Schema.Class<ControlPayload>("@durable-agent/engine/Control")({
  flowId: Schema.String,
  requestId: Schema.String,
  command: ControlCommand
}) {
  [PrimaryKey.symbol]() {
    return `control/${this.requestId}`
  }
}

const StartError = Schema.Union([FlowAlreadyStarted, DefinitionError, EngineError, ValueTooLarge, InvalidInput])
const InvokeError = Schema.Union([
  FlowNotFound,
  IdempotencyKeyReused,
  FlowNotActive,
  RpcLockConflict,
  ChannelMessageNotFound,
  RpcFailed,
  ValueTooLarge,
  DefinitionError,
  EngineError,
  InvalidInput
])
const ControlError = Schema.Union([
  FlowNotFound,
  FlowNotActive,
  EngineError,
  ValueTooLarge,
  DefinitionError,
  InvalidInput,
  RpcLockConflict
])

/**
 * Requests from other processes are persisted messages: saved with dedupe by request ID, delivered to
 * the Flow's owner (again after a failover) and answered once. The handler's transition stores its reply
 * itself (`dex_replies`), so the reply save needs no transaction of its own.
 */
const persisted = <R extends Rpc.Any>(rpc: R): R =>
  // `Rpc.Any` does not expose `annotate` in its type; every concrete Rpc has it
  (rpc as any).annotate(ClusterSchema.Persisted, true)

/** The Flow entity: one owner per Flow, which runs its Steps and commits its transitions. */
export const FlowEntity = Entity.make("DexFlow", [
  persisted(Rpc.make("Start", { payload: StartPayload, success: Schema.String, error: StartError })),
  persisted(Rpc.make("Invoke", { payload: InvokePayload, success: Schema.String, error: InvokeError })),
  persisted(Rpc.make("Wake", { payload: WakePayload, error: EngineError })),
  persisted(Rpc.make("Control", { payload: ControlPayload, success: Schema.Boolean, error: ControlError }))
])
