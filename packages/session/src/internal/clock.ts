// Detects effect's TestClock, under which the engine's polls and timers never advance on their own.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { LiveClockRequired } from "../Errors.ts"

/** Whether the current fiber's clock is a TestClock (it can be adjusted by hand). */
export const isTestClock: Effect.Effect<boolean> = Effect.withFiber((fiber) => {
  const clock = fiber.getRef(Clock.Clock) as unknown as Record<string, unknown>
  return Effect.succeed(typeof clock.adjust === "function" && typeof clock.setTime === "function")
})

/** Fails at once with {@link LiveClockRequired} under a TestClock. */
export const requireLiveClock = (operation: string): Effect.Effect<void, LiveClockRequired> =>
  Effect.flatMap(isTestClock, (test) => (test ? Effect.fail(new LiveClockRequired({ operation })) : Effect.void))
