/**
 * `npm run web`: the web chat. One Node process holds the embedded engine (a SQLite file), the session worker with
 * the demonstration model, and an effect/http server with the UI stream routes and the page, built with Vite at
 * start. No server to install and no API key.
 *
 * Settings: `PORT` (3000; 0 picks a free one), `WEB_DB` (web.db in $XDG_STATE_HOME/durable-agent-session/web, by default ~/.local/state/durable-agent-session/web), `WEB_SKIP_BUILD=1` (serve
 * the last build), `WEB_WORD_DELAY_MS` (60: how fast the demonstration model streams).
 */
import { randomUUID } from "node:crypto"
import { existsSync, mkdirSync, readFileSync } from "node:fs"
import { createServer } from "node:http"
import { homedir } from "node:os"
import { dirname, extname, join, normalize } from "node:path"
import { fileURLToPath } from "node:url"
import { Engine } from "@durable-agent/engine"
import { AgentSessionClient, AgentSessionFlow, Stepwise, ToolSource } from "@durable-agent/session"
import { HttpChat } from "@durable-agent/ui-stream"
import { NodeHttpServer } from "@effect/platform-node"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import type * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Layer from "effect/Layer"
import { demoModel, FLOW_TYPE, tools } from "./agent.ts"
import { conversationStore } from "./conversations.ts"

const here = dirname(fileURLToPath(import.meta.url))
const appRoot = join(here, "..")
const dist = join(appRoot, "dist")
const port = Number(process.env.PORT ?? "3000")
// what the demo keeps stays out of the repository: $XDG_STATE_HOME/durable-agent-session/web (~/.local/state/...)
const stateDir = join(
  process.env.XDG_STATE_HOME?.trim() || join(homedir(), ".local", "state"),
  "durable-agent-session",
  "web"
)
const database = process.env.WEB_DB ?? join(stateDir, "web.db")
const notesFile = join(dirname(database), "notes.md")
const conversationsFile = join(dirname(database), "conversations.json")
const wordDelay = Number(process.env.WEB_WORD_DELAY_MS ?? "60")

/** Builds the page with Vite (React) into `dist`. */
const buildPage = Effect.promise(async () => {
  if (process.env.WEB_SKIP_BUILD === "1" && existsSync(join(dist, "index.html"))) return
  const { build, defaultClientConditions } = await import("vite")
  const react = (await import("@vitejs/plugin-react")).default
  await build({
    root: appRoot,
    plugins: [react()],
    // this repository runs its packages from their sources; an application's build leaves the conditions alone
    resolve: { conditions: ["@durable-agent/source", ...defaultClientConditions] },
    logLevel: "warn",
    build: { outDir: dist, emptyOutDir: true }
  })
})

/** The example's users: a random ID in a cookie that lasts a year, so closing the browser keeps the conversations. */
const userOf = (request: { readonly headers: { readonly get: (name: string) => string | null } }) => {
  const cookie = request.headers.get("cookie") ?? ""
  const match = /(?:^|;\s*)uid=([\w-]+)/.exec(cookie)
  return match?.[1]
}
const userOfRequest = (request: HttpServerRequest.HttpServerRequest) =>
  userOf({ headers: { get: (name) => request.headers[name] ?? null } })
/** How long the user cookie lasts (`Max-Age`). */
export const USER_COOKIE_MAX_AGE = "365 days"
const withUser = (response: HttpServerResponse.HttpServerResponse, user: string) =>
  HttpServerResponse.setCookieUnsafe(response, "uid", user, {
    path: "/",
    httpOnly: true,
    sameSite: "strict",
    maxAge: USER_COOKIE_MAX_AGE
  })

/** Each user's conversations: the sessions they own. */
const conversations = conversationStore(conversationsFile)

const jsonResponse = (status: number, body: unknown) =>
  HttpServerResponse.text(JSON.stringify(body), { status, contentType: "application/json" })
const notYours = jsonResponse(404, { error: { code: "not_found", message: "no such conversation" } })

/** The body's `title`, or undefined. */
const titleOf = (request: HttpServerRequest.HttpServerRequest) =>
  request.json.pipe(
    Effect.map((body) =>
      typeof body === "object" && body !== null && typeof (body as { title?: unknown }).title === "string"
        ? (body as { title: string }).title
        : undefined
    ),
    Effect.orElseSucceed(() => undefined)
  )

/** The conversation routes: list, new, rename, delete (which also stops the session for good). */
const conversationRoutes = Layer.mergeAll(
  HttpRouter.add("GET", "/api/conversations", (request: HttpServerRequest.HttpServerRequest) =>
    Effect.sync(() => {
      const user = userOfRequest(request)
      return user === undefined ? notYours : jsonResponse(200, { conversations: conversations.list(user) })
    })
  ),
  HttpRouter.add("POST", "/api/conversations", (request: HttpServerRequest.HttpServerRequest) =>
    Effect.gen(function* () {
      const user = userOfRequest(request)
      if (user === undefined) return notYours
      const title = yield* titleOf(request)
      return jsonResponse(201, { conversation: conversations.create(user, title) })
    })
  ),
  HttpRouter.add("PATCH", "/api/conversations/:id", (request: HttpServerRequest.HttpServerRequest) =>
    Effect.gen(function* () {
      const user = userOfRequest(request)
      const { id } = yield* HttpRouter.params
      const title = yield* titleOf(request)
      if (user === undefined || id === undefined) return notYours
      if (title === undefined) return jsonResponse(400, { error: { code: "bad_request", message: "give a title" } })
      const renamed = conversations.rename(user, id, title)
      return renamed === undefined ? notYours : jsonResponse(200, { conversation: renamed })
    })
  ),
  HttpRouter.add("DELETE", "/api/conversations/:id", (request: HttpServerRequest.HttpServerRequest) =>
    Effect.gen(function* () {
      const user = userOfRequest(request)
      const { id } = yield* HttpRouter.params
      if (user === undefined || id === undefined || !conversations.owns(user, id)) return notYours
      const sessions = yield* AgentSessionClient.AgentSessionClient
      // a session that never started has nothing to stop
      yield* sessions.stopSession(id, { mode: "terminate", reason: "conversation deleted" }).pipe(Effect.ignore)
      conversations.remove(user, id)
      return jsonResponse(200, { deleted: id })
    })
  )
)

const routes = Layer.mergeAll(
  HttpChat.layer({
    // a session ID alone is never a credential: the cookie's user must own the conversation
    authorize: ({ request, sessionId }) => {
      const user = userOf(request)
      return user !== undefined && conversations.owns(user, sessionId)
    }
  }),
  conversationRoutes,
  HttpRouter.add("GET", "/api/me", (request: HttpServerRequest.HttpServerRequest) =>
    Effect.sync(() => {
      const existing = userOfRequest(request)
      const user = existing ?? randomUUID()
      const response = jsonResponse(200, { user })
      // every visit renews the cookie's Max-Age
      return withUser(response, user)
    })
  ),
  HttpRouter.add("GET", "/*", (request: HttpServerRequest.HttpServerRequest) =>
    Effect.sync(() => {
      const path = new URL(request.url, "http://localhost").pathname
      const file = normalize(join(dist, path === "/" ? "index.html" : path))
      const target = file.startsWith(dist) && existsSync(file) && extname(file) !== "" ? file : join(dist, "index.html")
      const types: Record<string, string> = {
        ".html": "text/html; charset=utf-8",
        ".js": "text/javascript",
        ".css": "text/css",
        ".svg": "image/svg+xml"
      }
      const response = HttpServerResponse.uint8Array(readFileSync(target), {
        contentType: types[extname(target)] ?? "application/octet-stream"
      })
      // the page sets the user cookie, before the page's own requests could race for one
      const known = userOfRequest(request) !== undefined
      return known || extname(target) !== ".html" ? response : withUser(response, randomUUID())
    })
  )
)

const services = () => {
  mkdirSync(dirname(database), { recursive: true })
  const engine = Engine.layerEmbedded({ filename: database, pollInterval: "50 millis" })
  const flow = AgentSessionFlow.make({
    flowType: FLOW_TYPE,
    retryInitialInterval: "200 millis",
    builtInTools: ["ask_user", "write_todos"]
  })
  const runner = Stepwise.layer({
    name: "web-agent",
    instructions: "You are the web chat's demonstration agent."
  }).pipe(Layer.provide(Layer.mergeAll(demoModel(`${wordDelay} millis`), ToolSource.layer(tools(notesFile)))))
  return Layer.mergeAll(
    AgentSessionFlow.layerWorker(flow).pipe(Layer.provide(runner)),
    AgentSessionClient.layer(FLOW_TYPE)
  ).pipe(Layer.provideMerge(engine))
}

const announce = Layer.effectDiscard(
  Effect.gen(function* () {
    const server = yield* HttpServer.HttpServer
    const address = server.address
    const url = address._tag === "UnixPathAddress" ? address.path : `http://127.0.0.1:${address.port}`
    console.log(`web chat on ${url} (database ${database})`)
  })
)

const main = Effect.gen(function* () {
  yield* buildPage
  return yield* Layer.launch(
    HttpRouter.serve(routes, { disableLogger: true }).pipe(
      Layer.merge(announce),
      Layer.provide(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" })),
      Layer.provide(services())
    )
  )
})

main.pipe(
  // a port in use (or another listen failure): say which port and what to do, not an empty "ServeError:"
  Effect.catchTag("ServeError", (e) =>
    Effect.sync(() => {
      const cause = e.cause as { readonly code?: string; readonly message?: string } | undefined
      const why = cause?.code === "EADDRINUSE" ? "the port is in use" : (cause?.message ?? String(e.cause))
      process.stderr.write(
        `web chat: cannot listen on 127.0.0.1:${port}: ${why}. Set PORT to another port (PORT=0 picks a free one).\n`
      )
      process.exitCode = 1
    })
  ),
  NodeRuntime.runMain
)
