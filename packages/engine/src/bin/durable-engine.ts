#!/usr/bin/env node
// The inspection command (`durable-engine --help`): lists Flows and prints a Flow's Step executions,
// attempts and history, from an embedded engine's SQLite file or a cluster engine's Postgres database.
//
// An embedded SQLite file is locked by the worker process that runs it: read it after that process
// stops (or ask the running process through its own Client, as the example chat's `/history` does).
// A Postgres database can be read at any time.
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import * as Command from "effect/cli/Command"
import * as Effect from "effect/Effect"
import { command } from "../InspectCommand.ts"

const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`durable-engine needs Node.js 22.19 or newer (this is ${process.version})\n`)
  process.exit(1)
}

Command.run(command, { version: "0.1.0" }).pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain)
