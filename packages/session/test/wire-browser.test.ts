// `@durable-agent/session/wire` is the browser-safe entry: bundled for the browser (with rolldown, the bundler
// vite brings), it pulls in Effect and Schema only, no `node:` module, no engine, no database driver.
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { rolldown } from "rolldown"

const root = fileURLToPath(new URL("../../..", import.meta.url))

/** Bundles `source` for the browser; returns every import specifier met and the bundled module files. */
const bundle = async (source: string) => {
  const specifiers: Array<string> = []
  const build = await rolldown({
    input: "entry",
    cwd: root,
    platform: "browser",
    // the workspace's packages from their sources (the consumer test bundles the built entry)
    resolve: { conditionNames: ["@durable-agent/source", "import", "browser", "default"] },
    logLevel: "silent",
    plugins: [
      {
        name: "entry",
        resolveId: (id) => (id === "entry" ? "\0entry" : null),
        load: (id) => (id === "\0entry" ? source : null)
      },
      {
        name: "record-imports",
        resolveId: (id) => {
          specifiers.push(id)
          return null
        }
      }
    ]
  })
  const output = await build.generate({ format: "esm" })
  await build.close()
  return { specifiers, modules: Object.keys(output.output[0].modules) }
}

const forbidden = (specifier: string) =>
  specifier.startsWith("node:") ||
  specifier.includes("@durable-agent/engine") ||
  specifier.includes("/packages/engine/") ||
  /(^|\/)(pg|@effect\/sql-pg|@effect\/platform-node)(\/|$)/.test(specifier)

describe("@durable-agent/session/wire in a browser bundle", () => {
  it("decodes events with Effect and Schema only", async () => {
    const { specifiers, modules } = await bundle(
      'import { AgentEvent, AgentSnapshot, settleEvents } from "@durable-agent/session/wire"\nexport { AgentEvent, AgentSnapshot, settleEvents }\n'
    )
    assert.deepStrictEqual(specifiers.filter(forbidden), [])
    const outside = modules.filter((m) => !m.includes("/packages/session/src/wire/") && !m.includes("/effect/"))
    assert.deepStrictEqual(
      outside.filter((m) => !m.startsWith("\0")),
      [],
      "only the codecs and effect"
    )
    assert.isBelow(modules.length, 150)
  })
})
