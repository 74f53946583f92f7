// The spec's test matrix on the cluster engine: a fresh Postgres database and a runner on a free port per test.
import { sessionMatrix } from "./matrix.ts"
import { clusterEngine } from "./support.ts"

sessionMatrix("cluster (Postgres)", clusterEngine)
