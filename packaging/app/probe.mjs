// Imports every specifier given on the command line in this application (plain Node, no type stripping) and
// prints one JSON line per specifier: `{ specifier, ok }` or `{ specifier, code, message }`.
for (const specifier of process.argv.slice(2)) {
  try {
    await import(specifier)
    console.log(JSON.stringify({ specifier, ok: true }))
  } catch (error) {
    console.log(JSON.stringify({ specifier, ok: false, code: error?.code ?? null, message: String(error?.message) }))
  }
}
