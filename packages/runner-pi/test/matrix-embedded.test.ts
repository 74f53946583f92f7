// The session matrix with the Pi runner on the embedded engine (a fresh SQLite file per test).
import { matrixSuite } from "./suites/matrix.ts"
import { embeddedEngine } from "./support.ts"

matrixSuite("embedded", embeddedEngine)
