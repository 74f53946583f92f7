// How a benchmark process runs its main function: it exits 0 when main ends; a failure prints
// `<label> failed: <stack>`, runs the cleanup and exits 1; SIGINT or SIGTERM runs the cleanup and exits 130.

/** Runs `main` as the benchmark process, with `cleanup` (databases, child processes) on a failure or a signal. */
export const runBenchmark = (
  label: string,
  main: () => Promise<void>,
  cleanup: () => Promise<unknown>,
  progress: (message: string) => void
): void => {
  const interrupted = (signal: NodeJS.Signals) => {
    progress(`${signal}: cleaning up`)
    void cleanup().finally(() => process.exit(130))
  }
  process.once("SIGINT", interrupted)
  process.once("SIGTERM", interrupted)
  main().then(
    () => process.exit(0),
    async (error) => {
      process.stderr.write(
        `${label} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`
      )
      await cleanup()
      process.exit(1)
    }
  )
}
