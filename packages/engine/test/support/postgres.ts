/**
 * Test support: a fresh PostgreSQL database per test, dropped afterwards.
 *
 * The server is chosen in this order:
 *
 * 1. `DATABASE_URL`, when set. It must be reachable; the helper never falls back from an explicit URL.
 * 2. `postgres://postgres@127.0.0.1:5432/postgres`, the server the CI machine normally runs.
 * 3. A private server started from Debian's binaries (`/usr/lib/postgresql/<version>/bin`) in a temporary
 *    directory, shared by the whole test process and stopped and removed when the process exits. When the
 *    binaries are missing the helper fails with {@link PostgresUnavailable}.
 *
 * Effect code uses {@link withTestDatabase} (or {@link layerTestDatabase}); child-process scripts and benchmarks
 * use the promise-based {@link createTestDatabase}.
 */
import { execFile, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { Clock, Duration, Effect, Exit, Layer, Redacted, Schedule, Schema, Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import type { SqlClient, SqlError } from "effect/sql"

/** The server the CI machine runs: trust authentication for the `postgres` user. */
export const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres"

/** Where Debian's `postgresql-<version>` packages install their server binaries. */
export const DEBIAN_POSTGRES_ROOT = "/usr/lib/postgresql"

const INSTALL_HINT =
  "Install a server with `apt-get install -y postgresql` (the tests use it, or start a private one from its " +
  "binaries), or set DATABASE_URL to a reachable server."

/** No PostgreSQL server could be reached or started. */
export class PostgresUnavailable extends Schema.TaggedError<PostgresUnavailable>()("PostgresUnavailable", {
  message: Schema.String
}) {}

/** The connection URL the tests start from: `DATABASE_URL`, or the CI machine's default server. */
export const baseDatabaseUrl = (): string => process.env.DATABASE_URL || DEFAULT_DATABASE_URL

/** A fresh, random database name: `das_test_<16 hex digits>`. */
export const makeDatabaseName = (): string => `das_test_${randomBytes(8).toString("hex")}`

/** `baseUrl` with its database (the URL path) replaced by `name`; credentials, host and query are kept. */
export const makeDatabaseUrl = (name: string, baseUrl: string = baseDatabaseUrl()): string => {
  const url = new URL(baseUrl)
  url.pathname = `/${encodeURIComponent(name)}`
  return url.toString()
}

/** A URL safe to print: the password, if any, is masked. */
export const redactUrl = (raw: string): string => {
  try {
    const url = new URL(raw)
    if (url.password !== "") url.password = "***"
    return url.toString()
  } catch {
    return "<invalid URL>"
  }
}

/** The most useful text of an error: a `SqlError`'s reason and its underlying cause (e.g. `ECONNREFUSED`). */
const errorMessage = (cause: unknown): string => {
  if (!(cause instanceof Error)) return String(cause)
  const reason = (cause as { readonly reason?: { readonly message?: unknown; readonly cause?: unknown } }).reason
  if (typeof reason?.message !== "string" || reason.message === "") return cause.message
  const inner = reason.cause instanceof Error ? reason.cause.message : undefined
  return inner && !reason.message.includes(inner) ? `${reason.message} (${inner})` : reason.message
}

// ---------------------------------------------------------------------------------------------------------------
// Administrative connections
// ---------------------------------------------------------------------------------------------------------------

const liveClock = Clock.Clock.defaultValue()

/**
 * Runs `self` with the real clock, so the helper's timeouts and retries work inside `it.effect`, whose `TestClock`
 * only moves when a test adjusts it.
 */
const withLiveClock = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(self, Clock.Clock, liveClock)

/** Runs `f` with a one-connection client on `url`, closed afterwards. */
export const withAdminClient = <A, E>(
  url: string,
  f: (sql: PgClient.PgClient) => Effect.Effect<A, E>
): Effect.Effect<A, E | SqlError.SqlError> =>
  PgClient.makeClient({
    url: Redacted.make(url),
    prepare: false,
    connectTimeout: Duration.seconds(5),
    applicationName: "das-test-support"
  }).pipe(Effect.flatMap(f), Effect.scoped, Effect.provide(Reactivity.layer), withLiveClock)

/** Succeeds with `undefined` when `SELECT 1` works on `url`, else with the reason it does not. */
const probe = (url: string): Effect.Effect<string | undefined> =>
  withAdminClient(url, (sql) => sql`SELECT 1 AS ok`).pipe(
    Effect.as(undefined),
    Effect.catch((error) => Effect.succeed(errorMessage(error)))
  )

/** Whether a database with this name exists on the server behind `baseUrl`. */
export const databaseExists = (baseUrl: string, name: string): Effect.Effect<boolean, SqlError.SqlError> =>
  withAdminClient(
    baseUrl,
    (sql) => sql<{ readonly n: number }>`SELECT 1 AS n FROM pg_database WHERE datname = ${name}`
  ).pipe(Effect.map((rows) => rows.length > 0))

const createDatabase = (baseUrl: string, name: string) =>
  withAdminClient(baseUrl, (sql) => sql`CREATE DATABASE ${sql(name)}`).pipe(
    // Concurrent CREATE DATABASE commands copying template1 can collide; a short retry absorbs that.
    Effect.retry({ times: 3, schedule: Schedule.spaced(Duration.millis(200)) }),
    Effect.asVoid,
    withLiveClock
  )

const dropDatabase = (baseUrl: string, name: string) =>
  withAdminClient(baseUrl, (sql) => sql`DROP DATABASE IF EXISTS ${sql(name)} WITH (FORCE)`).pipe(Effect.asVoid)

// ---------------------------------------------------------------------------------------------------------------
// Private server
// ---------------------------------------------------------------------------------------------------------------

/** A PostgreSQL server started by this process in a temporary directory. */
export interface PrivateServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`, trust authentication. */
  readonly url: string
  readonly port: number
  /** The temporary directory holding the data directory, the socket and the log. */
  readonly dir: string
  /** The directory `initdb`, `pg_ctl` and `postgres` came from. */
  readonly binDir: string
  /** Stops the server and removes its directory. Idempotent. */
  readonly stop: () => Promise<void>
}

export interface PrivateServerOptions {
  /** Where to look for `<version>/bin/{initdb,pg_ctl,postgres}`. Defaults to {@link DEBIAN_POSTGRES_ROOT}. */
  readonly installRoot?: string | undefined
}

class PrivateServerError extends Error {}

/** The `bin` directory of the newest PostgreSQL under `installRoot` that has a server, if any. */
export const findPostgresBinDir = (installRoot: string = DEBIAN_POSTGRES_ROOT): string | undefined => {
  let versions: Array<string>
  try {
    versions = readdirSync(installRoot)
  } catch {
    return undefined
  }
  return versions
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a) || b.localeCompare(a))
    .map((version) => join(installRoot, version, "bin"))
    .find((bin) => ["initdb", "pg_ctl", "postgres"].every((tool) => existsSync(join(bin, tool))))
}

/** uid and gid of an OS user, read from /etc/passwd. */
const lookupUser = (name: string): { readonly uid: number; readonly gid: number } | undefined => {
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const fields = line.split(":")
      if (fields[0] === name && fields.length >= 4) return { uid: Number(fields[2]), gid: Number(fields[3]) }
    }
  } catch {
    // No /etc/passwd: not a system where the server can run as another user.
  }
  return undefined
}

/** An unused TCP port on 127.0.0.1 (it may be taken again before the server binds it; the caller retries). */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => (port > 0 ? resolve(port) : reject(new Error("could not pick a free port"))))
    })
  })

const run = (command: string, args: ReadonlyArray<string>, cwd: string): Promise<string> =>
  new Promise((resolve, reject) => {
    execFile(command, args, { cwd, encoding: "utf8", timeout: 120_000 }, (error, stdout, stderr) => {
      if (error) {
        reject(new PrivateServerError(`${[command, ...args].join(" ")} failed: ${error.message}\n${stdout}${stderr}`))
      } else {
        resolve(stdout)
      }
    })
  })

const readLogTail = (file: string): string => {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-20).join("\n")
  } catch {
    return ""
  }
}

/**
 * A detached process that stops the server and removes its directory if this process dies without doing it
 * (a killed test worker never runs `exit` handlers).
 */
const spawnWatchdog = (stopCommand: ReadonlyArray<string>, dir: string): number | undefined => {
  const script = `
const { execFileSync } = require("node:child_process")
const { rmSync } = require("node:fs")
const [parent, command, dir] = [Number(process.argv[1]), JSON.parse(process.argv[2]), process.argv[3]]
setInterval(() => {
  try {
    process.kill(parent, 0)
  } catch {
    try { execFileSync(command[0], command.slice(1), { stdio: "ignore", timeout: 30000 }) } catch {}
    try { rmSync(dir, { recursive: true, force: true }) } catch {}
    process.exit(0)
  }
}, 1000)
`
  try {
    const child = spawn(process.execPath, ["-e", script, String(process.pid), JSON.stringify(stopCommand), dir], {
      detached: true,
      stdio: "ignore"
    })
    child.on("error", () => {})
    child.unref()
    return child.pid
  } catch {
    return undefined
  }
}

/**
 * Starts a PostgreSQL server in a new temporary directory: `initdb` (trust authentication, superuser `postgres`),
 * then `pg_ctl start` on a free port of 127.0.0.1 with durability turned off (it is a throwaway test server).
 * Running as root, the binaries run as the `postgres` OS user, which owns the directory.
 *
 * The promise rejects with a {@link PrivateServerError} when there are no binaries or the server does not start.
 */
export const launchPrivateServer = async (options: PrivateServerOptions = {}): Promise<PrivateServer> => {
  const installRoot = options.installRoot ?? DEBIAN_POSTGRES_ROOT
  const binDir = findPostgresBinDir(installRoot)
  if (binDir === undefined) {
    throw new PrivateServerError(
      `No PostgreSQL server is reachable and no server binaries (initdb, pg_ctl, postgres) were found under ` +
        `${installRoot}/<version>/bin to start a private one.`
    )
  }

  const asRoot = process.getuid?.() === 0
  const owner = asRoot ? lookupUser("postgres") : undefined
  if (asRoot && owner === undefined) {
    throw new PrivateServerError(
      "Running as root, the private PostgreSQL server must run as the `postgres` OS user, which does not exist."
    )
  }
  // Command prefix that runs a server binary as the right OS user.
  const as = (tool: string, args: ReadonlyArray<string>): [string, Array<string>] =>
    asRoot ? ["runuser", ["-u", "postgres", "--", join(binDir, tool), ...args]] : [join(binDir, tool), [...args]]

  const dir = mkdtempSync(join(tmpdir(), "das-pg-"))
  const dataDir = join(dir, "data")
  const logFile = join(dir, "postgres.log")
  const remove = () => rmSync(dir, { recursive: true, force: true })
  try {
    chmodSync(dir, 0o700)
    if (owner !== undefined) chownSync(dir, owner.uid, owner.gid)

    await run(
      ...as("initdb", ["-D", dataDir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"]),
      dir
    )

    let port = 0
    let lastError: unknown
    for (let attempt = 0; attempt < 3 && port === 0; attempt++) {
      const candidate = await freePort()
      const serverOptions = [
        `-p ${candidate}`,
        `-k ${dir}`,
        "-h 127.0.0.1",
        "-c fsync=off",
        "-c synchronous_commit=off",
        "-c full_page_writes=off"
      ].join(" ")
      try {
        await run(...as("pg_ctl", ["-D", dataDir, "-l", logFile, "-o", serverOptions, "-w", "-t", "60", "start"]), dir)
        port = candidate
      } catch (error) {
        lastError = error
      }
    }
    if (port === 0) {
      throw new PrivateServerError(`${errorMessage(lastError)}\nServer log:\n${readLogTail(logFile)}`)
    }

    const [stopBin, stopArgs] = as("pg_ctl", ["-D", dataDir, "-m", "immediate", "-w", "stop"])
    const watchdog = spawnWatchdog([stopBin, ...stopArgs], dir)
    let stopped = false
    const stopSync = () => {
      if (stopped) return
      stopped = true
      try {
        execFileSync(stopBin, stopArgs, { cwd: dir, stdio: "ignore", timeout: 30_000 })
      } catch {
        // Already stopped.
      }
      remove()
    }
    process.once("exit", stopSync)

    const stop = async (): Promise<void> => {
      if (stopped) return
      stopped = true
      process.removeListener("exit", stopSync)
      if (watchdog !== undefined) {
        try {
          process.kill(watchdog)
        } catch {
          // Already gone.
        }
      }
      try {
        await run(...as("pg_ctl", ["-D", dataDir, "-m", "fast", "-w", "-t", "60", "stop"]), dir)
      } catch {
        try {
          await run(stopBin, stopArgs, dir)
        } catch {
          // Not running any more.
        }
      } finally {
        remove()
      }
    }

    return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, port, dir, binDir, stop }
  } catch (error) {
    try {
      await run(...as("pg_ctl", ["-D", dataDir, "-m", "immediate", "-w", "stop"]), dir)
    } catch {
      // It never started.
    }
    remove()
    throw error
  }
}

const toUnavailable = (cause: unknown): PostgresUnavailable =>
  new PostgresUnavailable({
    message: cause instanceof PrivateServerError ? `${cause.message}\n${INSTALL_HINT}` : errorMessage(cause)
  })

/** A private server for the lifetime of the surrounding scope. */
export const startPrivateServer = (
  options: PrivateServerOptions = {}
): Effect.Effect<PrivateServer, PostgresUnavailable, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => launchPrivateServer(options), catch: toUnavailable }),
    (server) => Effect.promise(() => server.stop())
  )

let sharedServer: Promise<PrivateServer> | undefined

/** One private server for the whole process, stopped when the process exits. */
const sharedPrivateServer: Effect.Effect<PrivateServer, PostgresUnavailable> = Effect.tryPromise({
  try: () => {
    if (sharedServer === undefined) {
      sharedServer = launchPrivateServer()
      sharedServer.catch(() => {
        sharedServer = undefined
      })
    }
    return sharedServer
  },
  catch: toUnavailable
})

let resolvedBaseUrl: string | undefined

/**
 * The administrative URL of the server tests use: `DATABASE_URL`, the default local server, or a private server.
 * The choice is made once per process.
 */
export const resolveBaseUrl: Effect.Effect<string, PostgresUnavailable> = Effect.gen(function* () {
  if (resolvedBaseUrl !== undefined) return resolvedBaseUrl
  const explicit = process.env.DATABASE_URL
  if (explicit) {
    const failure = yield* probe(explicit)
    if (failure !== undefined) {
      return yield* new PostgresUnavailable({
        message: `DATABASE_URL (${redactUrl(explicit)}) is not reachable: ${failure}\n${INSTALL_HINT}`
      })
    }
    resolvedBaseUrl = explicit
  } else if ((yield* probe(DEFAULT_DATABASE_URL)) === undefined) {
    resolvedBaseUrl = DEFAULT_DATABASE_URL
  } else {
    resolvedBaseUrl = (yield* sharedPrivateServer).url
  }
  return resolvedBaseUrl
})

// ---------------------------------------------------------------------------------------------------------------
// Test databases
// ---------------------------------------------------------------------------------------------------------------

/**
 * Creates `das_test_<random>` on the test server and succeeds with its connection URL; the database is dropped
 * (`WITH (FORCE)`, so open connections do not block it) when the scope closes.
 */
export const withTestDatabase: Effect.Effect<string, PostgresUnavailable, Scope.Scope> = Effect.gen(function* () {
  const baseUrl = yield* resolveBaseUrl
  const name = makeDatabaseName()
  return yield* Effect.acquireRelease(
    createDatabase(baseUrl, name).pipe(
      Effect.mapError(
        (error) =>
          new PostgresUnavailable({
            message: `Could not create database ${name} on ${redactUrl(baseUrl)}: ${errorMessage(error)}`
          })
      ),
      Effect.as(makeDatabaseUrl(name, baseUrl))
    ),
    () => Effect.orDie(dropDatabase(baseUrl, name))
  )
})

/** `PgClient` and `SqlClient` on a fresh test database, dropped when the layer is released. */
export const layerTestDatabase: Layer.Layer<
  PgClient.PgClient | SqlClient.SqlClient,
  PostgresUnavailable | SqlError.SqlError
> = Layer.unwrap(Effect.map(withTestDatabase, (url) => PgClient.layer({ url: Redacted.make(url) })))

/** A test database for code outside Effect (child-process scripts, benchmarks). Call `drop` when done. */
export const createTestDatabase = async (): Promise<{ readonly url: string; readonly drop: () => Promise<void> }> => {
  const scope = Effect.runSync(Scope.make())
  const exit = await Effect.runPromiseExit(Scope.provide(withTestDatabase, scope))
  if (Exit.isFailure(exit)) {
    await Effect.runPromise(Scope.close(scope, exit))
    return Effect.runPromise(Effect.failCause(exit.cause))
  }
  let dropped: Promise<void> | undefined
  return {
    url: exit.value,
    drop: () => {
      dropped ??= Effect.runPromise(Scope.close(scope, Exit.void))
      return dropped
    }
  }
}
