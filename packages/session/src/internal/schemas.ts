// Engine-side codecs of the session Flow that accept more than the strict wire codecs, so the session can
// refuse bad values itself (force-fail, or an RPC that returns false) instead of failing to decode them.
import * as Schema from "effect/Schema"
import { wireStruct, withDefault } from "../wire/internal.ts"

/** The start input as the session decodes it: `session_settings` may be any JSON value. */
export const StartInput = wireStruct(
  {
    initialMessage: Schema.NullOr(Schema.String),
    sessionSettings: withDefault(Schema.NullOr(Schema.Json), null)
  },
  { initialMessage: "initial_message", sessionSettings: "session_settings" }
)
export type StartInput = typeof StartInput.Type

/** `update_session_settings` input as the session decodes it: `session_settings` may be any JSON value. */
export const UpdateSettingsInput = wireStruct(
  {
    sessionSettings: withDefault(Schema.NullOr(Schema.Json), null)
  },
  { sessionSettings: "session_settings" }
)
export type UpdateSettingsInput = typeof UpdateSettingsInput.Type

/** A tool call ID, the input of every Step of one call. */
export const ToolCallIdInput = Schema.String

/** ResumeTurn's input: the number of results it waits for. */
export const ResultCountInput = Schema.Int

/** The input of Steps that take none. */
export const NoInput = Schema.Null

/** FinishTurnCancellation's input: the cancelled turn's ID. */
export const TurnIdInput = Schema.String
