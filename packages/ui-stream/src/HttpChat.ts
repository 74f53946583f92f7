/**
 * The UI stream routes (see `ChatHandler`) for an effect/http server: `HttpChat.layer(options)` adds them to
 * the application's `HttpRouter`, so they mount beside its own routes and share its server.
 *
 * @example
 * ```ts
 * const routes = HttpChat.layer({ authorize: ({ request, sessionId }) => ownsSession(request, sessionId) })
 * const server = HttpRouter.serve(routes).pipe(Layer.provide(NodeHttpServer.layer(createServer, { port: 3000 })))
 * ```
 *
 * @since 0.1.0
 */
import type { Client } from "@durable-agent/engine"
import type { AgentSessionClient } from "@durable-agent/session"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import type * as Layer from "effect/Layer"
import * as ChatHandler from "./ChatHandler.ts"

/**
 * The route handler: the effect/http request as a Web request through `ChatHandler.makeHandler`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const handler = (options: ChatHandler.ChatHandlerOptions) => {
  const handle = ChatHandler.makeHandler(options)
  return (request: HttpServerRequest.HttpServerRequest) =>
    Effect.gen(function* () {
      const web = yield* HttpServerRequest.toWeb(request).pipe(Effect.option)
      if (web._tag === "None") return HttpServerResponse.text("bad request", { status: 400 })
      const response = yield* handle(web.value)
      return response === undefined ? HttpServerResponse.empty({ status: 404 }) : HttpServerResponse.fromWeb(response)
    })
}

/**
 * The routes under the base path (`/api/chat` by default) as router layer.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  options: ChatHandler.ChatHandlerOptions
): Layer.Layer<
  never,
  never,
  | HttpRouter.HttpRouter
  | HttpRouter.Request<"Requires", Client.Client>
  | HttpRouter.Request<"Requires", AgentSessionClient.AgentSessionClient>
> => {
  const base = (options.basePath ?? "/api/chat").replace(/\/+$/, "") as `/${string}`
  const route = handler(options)
  // the wildcard route also matches the base path itself (`POST {base}`)
  return HttpRouter.add("*", `${base}/*`, route)
}
