// The matrix on the cluster engine (a fresh Postgres database and a runner on a free port per test).
import { matrixSuite } from "./suites/matrix.ts"
import { clusterEngine } from "./support.ts"

matrixSuite("cluster engine", clusterEngine)
