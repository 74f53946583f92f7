// The published packages the way an application meets them: every package of the workspace (`packages/*`,
// from the root manifest's `workspaces`) is built (`tsc -b`, a no-op when `npm test` built it already) and
// packed with `npm pack`, and the tarballs are installed into a fresh application in a temporary folder
// outside the workspace (no symlinks, nothing from the workspace's node_modules; the peer dependencies at the
// workspace's pinned versions, from the machine's npm cache when it has them). One install serves every check:
// the quickstart as plain JavaScript on Node without type stripping, a strict TypeScript consumer under
// nodenext and bundler resolution, a browser bundle of the wire codecs, the `durable-engine` bin, the tarballs'
// contents and the entry points an application can (and cannot) import.
import { execFile } from "node:child_process"
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statfsSync,
  writeFileSync
} from "node:fs"
import { rm } from "node:fs/promises"
import { builtinModules, stripTypeScriptTypes } from "node:module"
import { tmpdir } from "node:os"
import { basename, delimiter, dirname, join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"

const root = fileURLToPath(new URL("../..", import.meta.url))
const appSources = fileURLToPath(new URL("../app", import.meta.url))

interface Manifest {
  readonly name: string
  readonly version: string
  readonly private?: boolean
  readonly workspaces?: ReadonlyArray<string>
  readonly exports?: Record<string, null | string | Record<string, string>>
  readonly bin?: Record<string, string>
  readonly files?: ReadonlyArray<string>
  readonly dependencies?: Record<string, string>
  readonly devDependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
  readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }>
}
const readManifest = (dir: string): Manifest => JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))

const rootManifest = readManifest(root)
/** Every publishable package of the workspace: the `packages/*` workspaces that are not private. */
const packages = (rootManifest.workspaces ?? [])
  .filter((w) => w.startsWith("packages/"))
  .map((dir) => ({ dir, manifest: readManifest(join(root, dir)) }))
  .filter((p) => p.manifest.private !== true)

/**
 * Optional peers the application does not install: `@effect/vitest` serves only the engine's
 * `./testing/Conformance` entry (it would bring vitest into the app); that entry must then fail to import with
 * the missing package, nothing else.
 */
const notInstalled = new Set(["@effect/vitest"])

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}
const run = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv, timeout = 240_000) =>
  new Promise<Run>((resolve) => {
    execFile(command, args, { cwd, env, maxBuffer: 64 * 1024 * 1024, timeout }, (error, stdout, stderr) =>
      resolve({
        code: error ? Number(error.code ?? 1) || 1 : 0,
        stdout,
        stderr: error?.killed ? `${stderr}\n(stopped after ${timeout / 1000} s)` : stderr
      })
    )
  })
const ok = (result: Run, what: string) => {
  assert.strictEqual(result.code, 0, `${what} failed:\n${result.stdout}\n${result.stderr}`)
  return result
}

/** npm's own CLI scripts (the npm that runs this test when it runs under `npm test` or `npx vitest`). */
const npmBin = (() => {
  const execPath = process.env.npm_execpath
  const dir = execPath !== undefined && /np[mx]-cli\.js$/.test(execPath) ? dirname(execPath) : undefined
  return dir === undefined
    ? { npm: ["npm"], npx: ["npx"] }
    : { npm: [process.execPath, join(dir, "npm-cli.js")], npx: [process.execPath, join(dir, "npx-cli.js")] }
})()

/**
 * The application's environment: no npm configuration inherited from the workspace's npm, no workspace
 * `node_modules/.bin` on PATH (the pinned Node's own directory first), no type stripping for any Node process.
 */
const appEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (key.toLowerCase().startsWith("npm_") && key.toLowerCase() !== "npm_config_cache") continue
    if (key === "NODE_OPTIONS" || key === "NODE_PATH" || key === "INIT_CWD") continue
    env[key] = value
  }
  const path = (process.env.PATH ?? "").split(delimiter).filter((p) => p !== "" && !p.startsWith(root))
  env.PATH = [dirname(process.execPath), ...path].join(delimiter)
  env.NODE_OPTIONS = "--no-experimental-strip-types"
  return env
}

/** The minimal program of the README's "Add it to your application" section (its `js` block). */
const readmeProgram = () => {
  const readme = readFileSync(join(root, "README.md"), "utf8")
  const section = readme.slice(readme.indexOf("## Add it to your application"))
  const block = /```js\n([\s\S]*?)```/.exec(section.slice(0, section.indexOf("\n## ", 1)))
  assert.isNotNull(block, "the README's Add it to your application section has a js program")
  return block![1]!
}

/**
 * Where the application goes: a tmpfs (`/dev/shm`) when it has room, else the system's temporary folder. The
 * install writes about 30,000 files (400 MB, most of them the frameworks' own dependencies); on a loaded
 * machine's disk, writing and removing them takes longer than every check together.
 */
const scratchRoot = () => {
  try {
    const fs = statfsSync("/dev/shm")
    if (fs.bavail * fs.bsize > 2 * 1024 ** 3) return "/dev/shm"
  } catch {
    // no /dev/shm
  }
  return tmpdir()
}

let temp = ""
let app = ""
let env: NodeJS.ProcessEnv = {}
const packed = new Map<string, ReadonlyArray<string>>()

const npm = (args: ReadonlyArray<string>, cwd: string, environment: NodeJS.ProcessEnv, timeout?: number) =>
  run(npmBin.npm[0]!, [...npmBin.npm.slice(1), ...args], cwd, environment, timeout)
const node = (args: ReadonlyArray<string>) => run(process.execPath, args, app, env)

beforeAll(async () => {
  const started = Date.now()
  const phase = (name: string) =>
    console.log(`packaging: ${name} after ${((Date.now() - started) / 1000).toFixed(1)} s`)
  temp = realpathSync(mkdtempSync(join(scratchRoot(), "das-packaging-")))
  assert.isFalse(temp.startsWith(root), "the application lives outside the workspace")
  app = join(temp, "app")
  env = appEnv()

  ok(
    await run(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-b", "tsconfig.build.json"], root, {
      ...process.env
    }),
    "npm run build"
  )
  phase("build")
  const pack = ok(
    await npm(
      ["pack", "--json", "--pack-destination", temp, ...packages.flatMap((p) => ["--workspace", p.dir])],
      root,
      process.env
    ),
    "npm pack"
  )
  phase("npm pack")
  const tarballs: Record<string, string> = {}
  for (const entry of JSON.parse(pack.stdout) as ReadonlyArray<{
    readonly name: string
    readonly filename: string
    readonly files: ReadonlyArray<{ readonly path: string }>
  }>) {
    tarballs[entry.name] = `file:${join(temp, basename(entry.filename))}`
    packed.set(
      entry.name,
      entry.files.map((f) => f.path)
    )
  }

  // the peers at the workspace's exact pins (root devDependencies), and the application's own tools
  const pins = rootManifest.devDependencies ?? {}
  const pin = (name: string) => {
    const version = pins[name]
    assert.isDefined(version, `the root manifest pins ${name} as a devDependency`)
    return version!
  }
  const peers = new Set(packages.flatMap((p) => Object.keys(p.manifest.peerDependencies ?? {})))
  const dependencies: Record<string, string> = { ...tarballs }
  for (const peer of peers) if (!notInstalled.has(peer)) dependencies[peer] = pin(peer)
  dependencies.typescript = pin("typescript")
  dependencies["@types/node"] = pin("@types/node")
  dependencies.rolldown = readManifest(join(root, "node_modules/rolldown")).version

  rmSync(app, { recursive: true, force: true })
  // the application's files: the consumer sources, and the README's quickstart as plain JavaScript
  cpSync(appSources, app, { recursive: true })
  writeFileSync(
    join(app, "package.json"),
    `${JSON.stringify({ name: "consumer-app", private: true, type: "module", dependencies }, null, 2)}\n`
  )
  const quickstart = readFileSync(join(root, "examples/basics/src/quickstart.ts"), "utf8")
  writeFileSync(join(app, "quickstart.mjs"), stripTypeScriptTypes(quickstart))
  writeFileSync(join(app, "program.mjs"), readmeProgram())
  ok(
    // A registry request that stalls is given up after 30 s and tried again (npm's own default waits 5 min for
    // one); the install may take 9 min in all. npm asks the registry for the packages' own names too, so it needs
    // the machine's CA certificates (NODE_EXTRA_CA_CERTS where a proxy signs): without them every request fails
    // SELF_SIGNED_CERT_IN_CHAIN and npm retries until the limit, with no output.
    await npm(
      [
        "install",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--fetch-timeout=30000",
        "--fetch-retries=4"
      ],
      app,
      env,
      540_000
    ),
    "npm install in the application"
  )
  phase("npm install")
}, 720_000)

afterAll(async () => {
  if (temp !== "") await rm(temp, { recursive: true, force: true })
}, 180_000)

// Each check waits on child processes (tsc, Node, npx) that a loaded machine slows down many times over: the
// per-test limit is generous, and the processes themselves stop after 240 s (`run`).
describe("the packages installed from their tarballs into an application outside the workspace", {
  timeout: 300_000
}, () => {
  it("installs copies, not links, and resolves every package inside the application", async () => {
    // no node_modules above the application that Node's resolution could fall back to
    for (let dir = dirname(app); dir !== dirname(dir); dir = dirname(dir)) {
      assert.isFalse(existsSync(join(dir, "node_modules")), `${dir}/node_modules`)
    }
    for (const { manifest } of packages) {
      const dir = join(app, "node_modules", ...manifest.name.split("/"))
      assert.isTrue(lstatSync(dir).isDirectory() && !lstatSync(dir).isSymbolicLink(), `${manifest.name} is a copy`)
    }
    const resolved = ok(
      await node([
        "--input-type=module",
        "-e",
        `for (const p of ${JSON.stringify(packages.map((p) => p.manifest.name))}) console.log(import.meta.resolve(p))`
      ]),
      "import.meta.resolve"
    )
    const urls = resolved.stdout.trim().split("\n")
    assert.strictEqual(urls.length, packages.length)
    for (const url of urls) {
      const file = fileURLToPath(url)
      assert.isTrue(file.startsWith(join(app, "node_modules") + sep), `${file} is in the application`)
      assert.match(file, /[/\\]dist[/\\]index\.js$/)
    }
  })

  it("runs the README's quickstart as plain JavaScript on Node without type stripping", async () => {
    const result = ok(
      await node(["--no-experimental-strip-types", "quickstart.mjs", join(app, "quickstart.db")]),
      "the quickstart"
    )
    assert.strictEqual(result.stdout, "It is 21 degrees in Paris.\n")
  })

  it("runs the README's minimal program (Add it to your application) the same way", async () => {
    const result = ok(await node(["--no-experimental-strip-types", "program.mjs"]), "the README's program")
    assert.strictEqual(result.stdout, "Hello!\n")
  })

  it("type-checks a strict consumer with nodenext and with bundler resolution: 0 errors", async () => {
    const tsc = join(app, "node_modules/typescript/bin/tsc")
    const configs = ["tsconfig.nodenext.json", "tsconfig.bundler.json"]
    const results = await Promise.all(configs.map((config) => node([tsc, "-p", config])))
    results.forEach((result, i) => {
      assert.strictEqual(`${result.stdout}${result.stderr}`, "", configs[i])
      assert.strictEqual(result.code, 0, configs[i])
    })
  })

  it("declares types that import only the package's own files, its dependencies and its peers", () => {
    // (the consumer's `skipLibCheck`, which the AI SDK's own declarations need under exactOptionalPropertyTypes,
    // would turn an unresolvable import in a declaration file into a silent `any`)
    const builtins = new Set(builtinModules)
    for (const { manifest } of packages) {
      const dir = join(app, "node_modules", ...manifest.name.split("/"))
      const allowed = new Set([
        manifest.name,
        ...Object.keys(manifest.dependencies ?? {}),
        ...Object.keys(manifest.peerDependencies ?? {})
      ])
      const declarations = packed.get(manifest.name)!.filter((f) => f.endsWith(".d.ts"))
      for (const file of declarations) {
        const text = readFileSync(join(dir, file), "utf8")
        for (const [, specifier] of text.matchAll(/(?:from |import\()"([^"]+)"/g)) {
          if (specifier!.startsWith(".")) {
            const target = join(dirname(file), specifier!).replace(/\.(ts|js)$/, ".d.ts")
            assert.include(declarations, target, `${manifest.name}/${file} imports ${specifier}`)
            continue
          }
          const name = specifier!.startsWith("@")
            ? specifier!.split("/").slice(0, 2).join("/")
            : specifier!.split("/")[0]!
          assert.isTrue(
            builtins.has(specifier!) || builtins.has(specifier!.replace(/^node:/, "")) || allowed.has(name),
            `${manifest.name}/${file} imports ${specifier}, which is neither a dependency nor a peer`
          )
        }
      }
    }
  })

  it("bundles @durable-agent/session/wire for the browser without a Node module", async () => {
    const result = ok(await node(["bundle.mjs"]), "the browser bundle")
    const { specifiers, modules } = JSON.parse(result.stdout) as {
      readonly specifiers: ReadonlyArray<string>
      readonly modules: ReadonlyArray<string>
    }
    const nodeOnly = specifiers.filter(
      (s) =>
        s.startsWith("node:") ||
        /^(fs|path|os|child_process|net|http|crypto|url|stream|worker_threads)$/.test(s) ||
        /(^|\/)(@durable-agent\/engine|pg|@effect\/sql-pg|@effect\/platform-node)(\/|$)/.test(s)
    )
    assert.deepStrictEqual(nodeOnly, [])
    const files = modules.filter((m) => !m.startsWith("\0"))
    assert.isAbove(files.length, 0)
    for (const file of files) {
      const where = relative(join(app, "node_modules"), file).split(sep)
      assert.isTrue(
        (where[0] === "@durable-agent" && where[1] === "session" && where[2] === "dist" && where[3] === "wire") ||
          where[0] === "effect",
        `${file}: only the built codecs and effect, from the application`
      )
    }
  })

  it("runs the installed bin: npx durable-engine --help", async () => {
    const result = ok(await run(npmBin.npx[0]!, [...npmBin.npx.slice(1), "durable-engine", "--help"], app, env), "npx")
    assert.include(result.stdout, "durable-engine")
    assert.include(result.stdout, "flows")
    assert.include(result.stdout, "history")
  })

  it("ships built files only: no source, test, bench or fixture file", () => {
    assert.deepStrictEqual([...packed.keys()].sort(), packages.map((p) => p.manifest.name).sort())
    for (const { manifest } of packages) {
      const files = packed.get(manifest.name)!
      const unexpected = files.filter(
        (f) =>
          !/^(package\.json|README\.md|LICENSE|CHANGELOG\.md|dist\/.+\.(js|d\.ts|js\.map))$/.test(f) ||
          /(^|\/)(test|tests|bench|fixtures?|__tests__)(\/|$)|\.(test|bench)\.|tsbuildinfo/.test(f)
      )
      assert.deepStrictEqual(unexpected, [], manifest.name)
      for (const required of ["package.json", "README.md", "LICENSE", "CHANGELOG.md", "dist/index.js"]) {
        assert.include(files, required, manifest.name)
      }
      // every built entry point and bin is in the tarball
      for (const target of Object.values(manifest.exports ?? {})) {
        if (target === null || typeof target === "string") continue
        for (const [condition, path] of Object.entries(target)) {
          if (condition === "types" || condition === "default") assert.include(files, path.replace(/^\.\//, ""))
        }
      }
      for (const path of Object.values(manifest.bin ?? {})) assert.include(files, path.replace(/^\.\//, ""))
    }
  })

  it("imports every public entry point and refuses internal modules with ERR_PACKAGE_PATH_NOT_EXPORTED", async () => {
    const publicEntries: Array<{ readonly specifier: string; readonly manifest: Manifest }> = []
    const refused: Array<string> = []
    for (const { dir, manifest } of packages) {
      for (const [key, target] of Object.entries(manifest.exports ?? {})) {
        if (key.includes("*") || key === "./package.json") continue
        const specifier = key === "." ? manifest.name : `${manifest.name}/${key.slice(2)}`
        // an entry with only the workspace's source condition is not part of the published package
        if (target !== null && typeof target === "object" && !("default" in target)) refused.push(specifier)
        else publicEntries.push({ specifier, manifest })
      }
      const internal = join(root, dir, "src/internal")
      const internals = (() => {
        try {
          return readdirSync(internal).filter((f) => f.endsWith(".ts"))
        } catch {
          return []
        }
      })()
      for (const file of internals) {
        const name = file.replace(/\.ts$/, "")
        refused.push(`${manifest.name}/internal/${name}`, `${manifest.name}/internal/${name}.js`)
      }
      refused.push(`${manifest.name}/dist/index.js`, `${manifest.name}/src/index.ts`)
    }
    const result = ok(
      await node(["probe.mjs", ...publicEntries.map((e) => e.specifier), ...refused]),
      "the import probe"
    )
    const outcomes = new Map(
      result.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { specifier: string; ok: boolean; code?: string; message?: string })
        .map((o) => [o.specifier, o])
    )
    for (const { specifier, manifest } of publicEntries) {
      const outcome = outcomes.get(specifier)!
      const missingOptional = Object.keys(manifest.peerDependenciesMeta ?? {}).filter(
        (p) => manifest.peerDependenciesMeta?.[p]?.optional === true && notInstalled.has(p)
      )
      if (outcome.ok) continue
      // only a missing optional peer the application chose not to install may stop an entry
      assert.strictEqual(outcome.code, "ERR_MODULE_NOT_FOUND", `${specifier}: ${outcome.message}`)
      assert.isTrue(
        missingOptional.some((p) => outcome.message?.includes(`'${p}'`)),
        `${specifier}: ${outcome.message}`
      )
    }
    assert.isTrue(outcomes.get("@durable-agent/session/wire")?.ok)
    for (const specifier of refused) {
      assert.strictEqual(outcomes.get(specifier)?.code, "ERR_PACKAGE_PATH_NOT_EXPORTED", specifier)
    }
  })

  it("tags every module's @since with a version the package has reached", () => {
    const parse = (v: string) => v.split(".").map(Number) as [number, number, number]
    const later = (a: string, b: string) => {
      const [x, y] = [parse(a), parse(b)]
      for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i]! > y[i]!
      return false
    }
    for (const { dir, manifest } of packages) {
      const files = readdirSync(join(root, dir, "src"), { recursive: true, encoding: "utf8" }).filter((f) =>
        f.endsWith(".ts")
      )
      for (const file of files) {
        for (const [, version] of readFileSync(join(root, dir, "src", file), "utf8").matchAll(/@since (\S+)/g)) {
          assert.isFalse(
            later(version!, manifest.version),
            `${dir}/src/${file}: @since ${version} > ${manifest.version}`
          )
        }
      }
    }
  })
})
