// The package's public API is a set of namespaces, as effect's own packages export theirs, and no export
// shadows a module of effect's.
import { assert, describe, it } from "@effect/vitest"
import * as Engine from "../../engine/src/index.ts"
import * as Session from "../src/index.ts"
import * as Wire from "../src/wire/index.ts"

const namespaces = [
  "AgentSessionClient",
  "AgentSessionFlow",
  "BuiltInTools",
  "Errors",
  "EventWriter",
  "Heartbeat",
  "ModelClient",
  "Persistence",
  "Policy",
  "Runner",
  "SessionMetrics",
  "SessionTracer",
  "Stepwise",
  "ToolSource",
  "ToolkitSource",
  "Wire"
]

describe("@durable-agent/session exports", () => {
  it("exports only module namespaces", () => {
    assert.deepStrictEqual(Object.keys(Session).sort(), [...namespaces].sort())
    for (const name of namespaces) {
      const ns = (Session as Record<string, unknown>)[name]
      assert.strictEqual(typeof ns, "object", name)
      assert.strictEqual(Object.prototype.toString.call(ns), "[object Module]", name)
    }
  })

  it("puts each service class and its layers in the module named after it", () => {
    assert.strictEqual(Session.AgentSessionClient.layer, Session.AgentSessionClient.AgentSessionClient.layer)
    assert.strictEqual(Session.ModelClient.layerScripted, Session.ModelClient.ModelClient.layerScripted)
    assert.strictEqual(Session.ToolSource.layer, Session.ToolSource.ToolSource.layer)
    assert.strictEqual(Session.EventWriter.layerTest, Session.EventWriter.EventWriter.layerTest)
    assert.strictEqual(Session.Heartbeat.layerNoop, Session.Heartbeat.Heartbeat.layerNoop)
    assert.strictEqual(Session.Runner.layer, Session.Runner.AgentFrameworkRunner.layer)
  })

  it("exposes the same codecs under Wire as the browser-safe entry", () => {
    assert.deepStrictEqual(Object.keys(Session.Wire).sort(), Object.keys(Wire).sort())
    assert.strictEqual(Session.Wire.AgentEvent, Wire.AgentEvent)
  })

  it("shadows none of effect's module names", () => {
    const effectModules = [
      "Stream",
      "Rpc",
      "Schema",
      "Effect",
      "Layer",
      "Context",
      "Option",
      "Schedule",
      "Tool",
      "Tracer",
      "Metric"
    ]
    for (const name of effectModules) {
      assert.isFalse(name in Session, `session exports ${name}`)
      assert.isFalse(name in Engine, `engine exports ${name}`)
    }
  })
})
