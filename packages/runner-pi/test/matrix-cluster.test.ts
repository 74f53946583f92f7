// The session matrix with the Pi runner on the cluster engine (a fresh Postgres database and runner per test).
import { matrixSuite } from "./suites/matrix.ts"
import { clusterEngine } from "./support.ts"

matrixSuite("cluster", clusterEngine)
