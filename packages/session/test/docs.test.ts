// The session's source cites its contract in docs/session-contract.md: the file exists, every section a comment
// names is a heading there, and nothing cites a document that is not in the repository.
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const contract = readFileSync(join(root, "docs/session-contract.md"), "utf8")
const headings = new Set([...contract.matchAll(/^#{2,3} (.+)$/gm)].map((m) => m[1]!.trim()))

const sources = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []
  )

const files = sources(join(root, "packages/session/src")).map((file) => ({ file, text: readFileSync(file, "utf8") }))

describe("docs/session-contract.md", () => {
  it("covers Steps, RPCs, events, effect classes and size rules", () => {
    for (const heading of ["Steps", "RPCs", "Events", "Effects and policies", "Size rules"]) {
      assert.isTrue(headings.has(heading), heading)
    }
  })

  it("is the only contract the source cites, and every section it names exists", () => {
    for (const { file, text } of [
      ...files,
      { file: "README.md", text: readFileSync(join(root, "packages/session/README.md"), "utf8") }
    ]) {
      assert.notInclude(text, "agent-framework-adapters", file)
    }
    const named = new Set<string>()
    for (const { text } of files) {
      const comments = text.match(/\/\/.*|\/\*[\s\S]*?\*\//g) ?? []
      for (const comment of comments) {
        const flat = comment.replace(/\s*\n\s*\*?\s*/g, " ")
        if (!flat.includes("session-contract.md")) continue
        for (const m of flat.matchAll(/"([A-Z][A-Za-z -]+)"/g)) named.add(m[1]!)
      }
    }
    assert.isAbove(named.size, 5)
    for (const section of named) assert.isTrue(headings.has(section), `section "${section}" is cited but missing`)
  })
})
