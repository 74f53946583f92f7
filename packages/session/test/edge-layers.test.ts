// EventWriter and Tracer as layers at the edge: a worker composed with a decorator that mirrors every event of
// every Step attempt to a second sink, and with its own Effect tracer under the session's Tracer layer, which
// sees the spec's spans and no other span of the session (no `AgentSession.*` Step body span).
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Engine } from "@durable-agent/engine"
import {
  AgentSessionClient,
  AgentSessionFlow,
  EventWriter,
  ModelClient,
  SessionTracer,
  Stepwise,
  ToolSource
} from "@durable-agent/session"
import * as SessionTesting from "@durable-agent/session/testing"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"

const dir = mkdtempSync(join(tmpdir(), "das-edge-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("EventWriter and Tracer layers at the edge", () => {
  it.live("a worker with a mirroring EventWriter decorator and its own Tracer", () => {
    const mirrored: Array<{ readonly scope: EventWriter.EventWriterScope; readonly event: EventWriter.WrittenEvent }> =
      []
    const spans: Array<{
      readonly name: string
      readonly parent: string | undefined
      readonly id: string
      readonly traceId: string
    }> = []
    const mirror = EventWriter.layerEventWriterDecorator((writer, scope) =>
      EventWriter.make((event) =>
        Effect.andThen(
          writer.write(event),
          Effect.sync(() => void mirrored.push({ scope, event }))
        )
      )
    )
    const tracer = Layer.succeed(
      Tracer.Tracer,
      Tracer.make({
        span: (options) => {
          const span = new Tracer.NativeSpan(options)
          spans.push({
            name: options.name,
            parent: options.parent._tag === "Some" ? options.parent.value.spanId : undefined,
            id: span.spanId,
            traceId: span.traceId
          })
          return span
        }
      })
    )
    const flow = AgentSessionFlow.make({ flowType: "EdgeAgent" })
    const worker = AgentSessionFlow.layerWorker(flow).pipe(
      Layer.provide(Stepwise.layer({ name: "edge", instructions: "Be brief." })),
      Layer.provide(
        Layer.mergeAll(
          ModelClient.layerScripted([
            { toolCalls: [{ id: "c1", name: "noop", arguments: {} }] },
            { text: "Done.", textDeltas: ["Do", "ne."] }
          ]),
          ToolSource.layer([
            ToolSource.tool({
              name: "noop",
              description: "Nothing.",
              effect: "read",
              handler: () => Effect.succeed("ok")
            })
          ])
        )
      ),
      Layer.provide(Layer.mergeAll(mirror, SessionTracer.layer())),
      Layer.provide(tracer)
    )
    const app = Layer.mergeAll(worker, AgentSessionClient.layer(flow.type)).pipe(
      Layer.provideMerge(Engine.layerEmbedded({ filename: join(dir, "edge.db"), pollInterval: "20 millis" }))
    )
    return Effect.gen(function* () {
      const sessions = yield* AgentSessionClient.AgentSessionClient
      yield* sessions.startSession("s-edge", { initialMessage: "go" })
      yield* SessionTesting.awaitTurn("s-edge")
      const stored = Array.from(yield* Stream.runCollect(sessions.events("s-edge")), (e) => [
        e.event.type,
        e.event.stepExecutionId
      ])
      assert.deepStrictEqual(
        mirrored.map((m) => [m.event.type, m.scope.stepExecutionId]),
        stored,
        "every event, the session's and the runner's, reached the mirror"
      )
      assert.isTrue(mirrored.every((m) => m.scope.flowId === "s-edge" && m.scope.attempt === 1))
      const names = spans.map((s) => s.name)
      for (const name of ["invoke_agent edge", "chat scripted", "execute_tool noop"]) assert.include(names, name)
      const prefixes = ["AgentSession.", "Stepwise.", "ModelClient.", "ToolSource."]
      assert.deepStrictEqual(
        names.filter((name) => prefixes.some((p) => name.startsWith(p))),
        [],
        "no Step body span besides the spec's"
      )
      // the invoke_agent root's trace holds the spec's spans only, all children of the root
      const root = spans.find((s) => s.name === "invoke_agent edge")!
      const trace = spans.filter((s) => s.traceId === root.traceId && s !== root)
      assert.deepStrictEqual(trace.map((s) => s.name).sort(), ["chat scripted", "chat scripted", "execute_tool noop"])
      assert.isTrue(trace.every((s) => s.parent === root.id))
    }).pipe(Effect.provide(app))
  })
})
