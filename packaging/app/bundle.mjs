// Bundles `@durable-agent/session/wire` for the browser with this application's rolldown and prints
// `{ specifiers, modules }`: every import specifier the bundler met and every module file in the bundle.
import { rolldown } from "rolldown"

const specifiers = []
const build = await rolldown({
  input: "entry",
  platform: "browser",
  logLevel: "silent",
  plugins: [
    {
      name: "entry",
      resolveId: (id) => (id === "entry" ? "\0entry" : null),
      load: (id) =>
        id === "\0entry"
          ? 'export { AgentEvent, AgentSnapshot, settleEvents } from "@durable-agent/session/wire"\n'
          : null
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
console.log(JSON.stringify({ specifiers, modules: Object.keys(output.output[0].modules) }))
