// Requests to a Flow's owner, as effect/cluster entity messages. Start, Invoke and Control are volatile
// (effect/cluster's non-persisted RPC: no message row, no stored cluster reply); the owner's transition stores
// the answer under the request ID (`dex_replies`, or the Flow row's `request_id` for a start), and the client
// sends a request whose answer it lost again with the same request ID (`request.ts`, `deliver`). Only Wake,
// the timer of a waiting Flow, is persisted: it must outlive every process.
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

/**
 * A start. A repeat with the same `requestId` (a client's retry after a lost answer) is answered with the run
 * it started: the Flow row keeps the request ID of the start that made it.
 */
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
}) {}

export class InvokePayload extends Schema.Class<InvokePayload>("@durable-agent/engine/Invoke")({
  flowId: Schema.String,
  rpc: Schema.String,
  input: Schema.String,
  /** The reply is stored under it: a random ID, or {@link keyedRequestId} of the caller's key. */
  requestId: Schema.String,
  /**
   * The caller's idempotency key, when it gave one: the owner refuses the key with other arguments
   * (IdempotencyKeyReused). A retry of the same call, by the caller or by the client after a lost answer, is
   * answered from the stored reply.
   */
  idempotencyKey: Schema.optional(Schema.String)
}) {}

/**
 * The longest a client sends one request again (`request.ts`, `deliver`): it clamps its `requestTimeout` to this,
 * so a stored reply of a request without an idempotency key is asked for no later (`RESEND_WINDOW_MS`).
 */
export const MAX_RESEND_MS = 10 * 60 * 1000

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

/** A publish, timer skip, attribute write or stop; its transition stores `true` under `requestId`. */
export class ControlPayload extends Schema.Class<ControlPayload>("@durable-agent/engine/Control")({
  flowId: Schema.String,
  requestId: Schema.String,
  command: ControlCommand
}) {}

/**
 * The owner did not serve the request and committed nothing for it: its commit was refused (another runner
 * took the Flow over, or this runner lost the Flow's shard lock) or failed. Never reaches the caller: the client
 * sends the request again, with the same request ID, to whichever runner owns the Flow then.
 */
export class RequestNotServed extends Schema.TaggedError<RequestNotServed>()("RequestNotServed", {
  flowId: Schema.String,
  reason: Schema.String
}) {}

const StartError = Schema.Union([
  FlowAlreadyStarted,
  DefinitionError,
  EngineError,
  ValueTooLarge,
  InvalidInput,
  RequestNotServed
])
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
  InvalidInput,
  RequestNotServed
])
const ControlError = Schema.Union([
  FlowNotFound,
  FlowNotActive,
  EngineError,
  ValueTooLarge,
  DefinitionError,
  InvalidInput,
  RpcLockConflict,
  RequestNotServed
])

/**
 * A persisted message: saved by effect/cluster before delivery and delivered to the Flow's owner again after a
 * failover. Only Wake is: it is sent in the transaction of the transition that arms the timer (the cluster's
 * transactional outbox), and nobody waits for its answer.
 */
const persisted = <R extends Rpc.Any>(rpc: R): R =>
  // `Rpc.Any` does not expose `annotate` in its type; every concrete Rpc has it
  (rpc as any).annotate(ClusterSchema.Persisted, true)

/**
 * The Flow entity: one owner per Flow, which runs its Steps and commits its transitions. Start, Invoke and
 * Control are volatile requests (no cluster message row; the transition stores the answer), Wake is persisted.
 */
export const FlowEntity = Entity.make("DexFlow", [
  Rpc.make("Start", { payload: StartPayload, success: Schema.String, error: StartError }),
  Rpc.make("Invoke", { payload: InvokePayload, success: Schema.String, error: InvokeError }),
  persisted(Rpc.make("Wake", { payload: WakePayload, error: EngineError })),
  Rpc.make("Control", { payload: ControlPayload, success: Schema.Boolean, error: ControlError })
])
