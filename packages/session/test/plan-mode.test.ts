// Plan mode without an engine: the plan note's texts and the Flow constructor's refusal.
import { assert, describe, it } from "@effect/vitest"
import { AgentSessionFlow, Errors, Stepwise } from "../src/index.ts"

const plan = {
  revision: 2,
  status: "draft" as const,
  tasks: [
    { content: "Book the train", status: "completed" as const },
    { content: "Pack", status: "in_progress" as const },
    { content: "Leave", status: "pending" as const }
  ]
}

describe("plan mode", () => {
  it("buildPlanNote: the plan, the planning line only in a planning turn, and no plan", () => {
    const body = [
      "[Dex] The current plan, revision 2, is draft:",
      "- [completed] Book the train",
      "- [in_progress] Pack",
      "- [pending] Leave"
    ]
    assert.strictEqual(
      Stepwise.buildPlanNote(plan, "planning"),
      [
        ...body,
        "This turn only plans: write or revise the plan with write_todos, and do not do or claim any of its tasks. The user reviews the plan before it runs."
      ].join("\n")
    )
    assert.strictEqual(Stepwise.buildPlanNote(plan, "chat"), body.join("\n"))
    assert.strictEqual(
      Stepwise.buildPlanNote({ ...plan, status: "active" }, "executing"),
      ["[Dex] The current plan, revision 2, is active:", ...body.slice(1)].join("\n")
    )
    assert.strictEqual(Stepwise.buildPlanNote(null, "planning"), "[Dex] There is no plan yet.")
    assert.strictEqual(
      Stepwise.buildPlanNote({ revision: 3, status: "cleared", tasks: [] }, "planning"),
      "[Dex] There is no plan yet."
    )
    assert.isUndefined(Stepwise.buildPlanNote(null, "chat"))
    assert.isUndefined(Stepwise.buildPlanNote({ revision: 3, status: "cleared", tasks: [] }, "executing"))
  })

  it("the Flow constructor refuses plan mode without write_todos", () => {
    for (const builtInTools of [undefined, ["ask_user" as const]]) {
      try {
        AgentSessionFlow.make({ flowType: "Planner", planModeEnabled: true, builtInTools })
        assert.fail("make accepted plan mode without write_todos")
      } catch (error) {
        assert.instanceOf(error, Errors.AgentSessionDefinitionError)
        assert.strictEqual(
          (error as Errors.AgentSessionDefinitionError).message,
          "planModeEnabled needs write_todos in builtInTools"
        )
      }
    }
    const flow = AgentSessionFlow.make({ flowType: "Planner", planModeEnabled: true, builtInTools: ["write_todos"] })
    assert.isTrue(flow.session.planModeEnabled)
  })
})
