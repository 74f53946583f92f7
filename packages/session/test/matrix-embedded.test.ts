// The spec's test matrix on the embedded engine: a fresh SQLite file per test.
import { sessionMatrix } from "./matrix.ts"
import { embeddedEngine } from "./support.ts"

sessionMatrix("embedded (SQLite)", embeddedEngine)
