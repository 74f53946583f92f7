// The run inspector's page: one HTML document with its script, no dependencies. It reads /api/flows and
// /api/flows/:id and draws the list, the timeline and, for agent sessions, the session panel. Every value is
// inserted as text (textContent), never as HTML.
export const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>durable-engine inspect</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  :root { font-family: system-ui, sans-serif; font-size: 14px; color: #1d2330; background: #f6f7f9; }
  body { margin: 0; }
  header { background: #1d2330; color: #fff; padding: 10px 16px; display: flex; gap: 16px; align-items: baseline; }
  header a { color: #9cc3ff; }
  main { padding: 12px 16px; }
  table { border-collapse: collapse; width: 100%; background: #fff; table-layout: fixed; }
  th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e3e6eb; vertical-align: top; overflow-wrap: anywhere; }
  main { max-width: 1400px; }
  th { background: #eef0f3; font-weight: 600; }
  .status-completed { color: #1a7f37; } .status-failed { color: #cf222e; } .status-running { color: #0969da; }
  h2 { margin: 16px 0 8px; font-size: 15px; }
  .timeline { background: #fff; border: 1px solid #e3e6eb; padding: 8px; }
  .row { display: grid; grid-template-columns: 380px 1fr; align-items: center; min-height: 24px; cursor: pointer; }
  .row:hover { background: #f0f4fa; }
  .row.selected { background: #e4edfb; }
  .label { font-family: ui-monospace, monospace; font-size: 12px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  .label .route { color: #bc4c00; margin-left: 4px; }
  .track { position: relative; height: 18px; }
  .bar { position: absolute; top: 2px; height: 14px; border-radius: 3px; min-width: 3px; }
  .wait { background: repeating-linear-gradient(45deg, #d8dee8, #d8dee8 4px, #eef1f5 4px, #eef1f5 8px); top: 6px; height: 6px; }
  .attempt { border: 1px solid rgba(0,0,0,.15); }
  .outcome-success { background: #2da44e; } .outcome-failure { background: #cf222e; }
  .outcome-cancelled { background: #8c959f; } .outcome-running { background: #0969da; }
  .axis { display: grid; grid-template-columns: 380px 1fr; color: #57606a; font-size: 11px; }
  .axis .ticks { display: flex; justify-content: space-between; }
  pre { background: #f6f8fa; border: 1px solid #e3e6eb; padding: 6px; white-space: pre-wrap; word-break: break-word; max-height: 240px; overflow: auto; margin: 4px 0; font-size: 12px; }
  .detail { background: #fff; border: 1px solid #e3e6eb; padding: 8px 12px; margin-top: 8px; }
  .grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
  .legend span { display: inline-block; margin-right: 12px; }
  .legend i { display: inline-block; width: 12px; height: 10px; margin-right: 4px; vertical-align: middle; border-radius: 2px; }
  .msg-user { color: #0969da; } .msg-assistant { color: #1a7f37; } .msg-tool { color: #8250df; }
  .error { color: #cf222e; }
</style>
</head>
<body>
<header><strong>durable-engine inspect</strong><a href="#" data-testid="home">Flows</a><span>read-only</span></header>
<main id="main"></main>
<script>
const main = document.getElementById("main")
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v
    else if (k === "style") node.setAttribute("style", v)
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v)
    else node.setAttribute(k, v)
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)))
  return node
}
const time = (ms) => (ms == null ? "" : new Date(ms).toISOString().replace("T", " ").replace("Z", ""))
const show = (value) => {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 1)
  return text && text.length > 2000 ? text.slice(0, 2000) + "… (" + (text.length - 2000) + " more characters)" : text
}
const get = async (path) => {
  const response = await fetch(path)
  const body = await response.json()
  if (!response.ok) throw new Error(body.error || response.statusText)
  return body
}

async function listView() {
  main.replaceChildren(el("h2", {}, "Flows"))
  const flows = await get("/api/flows")
  const table = el("table", { "data-testid": "flows" },
    el("tr", {}, el("th", {}, "Flow"), el("th", {}, "Type"), el("th", {}, "Status"), el("th", {}, "Started"), el("th", {}, "Waiting / running")))
  for (const f of flows) {
    table.append(el("tr", { "data-testid": "flow-row", "data-flow-id": f.flowId },
      el("td", {}, el("a", { href: "#flow=" + encodeURIComponent(f.flowId) }, f.flowId)),
      el("td", {}, f.flowType),
      el("td", { class: "status-" + f.status }, f.status + (f.errorType ? " (" + f.errorType + ")" : "")),
      el("td", {}, time(f.startedAt)),
      el("td", {}, [...f.waitingSteps, ...f.runningSteps].join(", "))))
  }
  main.append(flows.length === 0 ? el("p", {}, "no Flows") : table)
}

function timeline(detail) {
  const steps = detail.steps
  const now = Date.now()
  const starts = steps.map((s) => s.createdAt)
  const ends = steps.flatMap((s) => [s.createdAt, ...s.attempts.map((a) => a.finishedAt ?? (s.status === "running" ? now : a.startedAt))])
  const t0 = Math.min(detail.flow.startedAt, ...starts)
  const t1 = Math.max(t0 + 1, detail.flow.closedAt ?? 0, ...ends)
  const pct = (t) => ((t - t0) / (t1 - t0)) * 100
  const box = el("div", { class: "timeline", "data-testid": "timeline" })
  box.append(el("div", { class: "axis" }, el("span", {}, "Step execution"),
    el("span", { class: "ticks" }, el("span", {}, time(t0)), el("span", {}, "+" + (t1 - t0) + " ms"))))
  const selected = el("div", { class: "detail", "data-testid": "step-detail" }, "Click a Step execution for its input, decision and attempts.")
  for (const s of steps) {
    const track = el("div", { class: "track" })
    const first = s.attempts[0]
    const waitEnd = first ? first.startedAt : (s.status === "waiting" ? now : s.createdAt)
    if (waitEnd > s.createdAt) {
      track.append(el("div", { class: "bar wait", "data-testid": "wait-bar", title: "waiting " + (waitEnd - s.createdAt) + " ms",
        style: "left:" + pct(s.createdAt) + "%;width:" + Math.max(0.3, Math.min(100, pct(waitEnd)) - pct(s.createdAt)) + "%" }))
    }
    for (const a of s.attempts) {
      const end = a.finishedAt ?? (s.status === "running" ? now : a.startedAt)
      const outcome = a.outcome ?? "running"
      track.append(el("div", {
        class: "bar attempt outcome-" + outcome, "data-testid": "attempt-bar", "data-step": s.stepExecutionId,
        "data-attempt": a.attempt, "data-outcome": outcome,
        title: s.stepExecutionId + " attempt " + a.attempt + ": " + outcome + (a.errorType ? " " + a.errorType : "") + " (" + (end - a.startedAt) + " ms)",
        style: "left:" + pct(a.startedAt) + "%;width:" + Math.max(0.3, pct(end) - pct(a.startedAt)) + "%"
      }))
    }
    const route = s.recovery ? el("span", { class: "route", "data-testid": "failure-route" }, "failure route (" + s.recovery.errorType + ")") : ""
    const retries = s.attempts.length > 1 ? el("span", { class: "route" }, s.attempts.length + " attempts") : ""
    const row = el("div", { class: "row", "data-testid": "step-row", "data-step": s.stepExecutionId, "data-attempts": s.attempts.length,
      onclick: () => {
        for (const r of box.querySelectorAll(".row")) r.classList.remove("selected")
        row.classList.add("selected")
        selected.replaceChildren(
          el("strong", {}, s.stepExecutionId + " (" + s.stepType + "), " + s.status),
          el("div", {}, "scheduled by: " + (s.fromStepExecutionId ?? "the Flow's start")),
          s.recovery ? el("div", { "data-testid": "step-recovery" }, "failure route: " + show(s.recovery)) : "",
          el("div", { class: "grid2" },
            el("div", {}, el("div", {}, "input"), el("pre", { "data-testid": "step-input" }, s.input)),
            el("div", {}, el("div", {}, "decision"), el("pre", {}, s.decision ?? "(none yet)"))),
          el("table", {}, el("tr", {}, el("th", {}, "attempt"), el("th", {}, "started"), el("th", {}, "finished"), el("th", {}, "outcome"), el("th", {}, "error")),
            ...s.attempts.map((a) => el("tr", {}, el("td", {}, a.attempt), el("td", {}, time(a.startedAt)), el("td", {}, time(a.finishedAt)),
              el("td", {}, a.outcome ?? "running"), el("td", { class: "error" }, [a.errorType, a.detail].filter(Boolean).join(": "))))))
      } },
      el("div", { class: "label", title: s.stepExecutionId }, s.stepExecutionId, retries, route), track)
    box.append(row)
  }
  return [box, selected]
}

function sessionPanel(detail) {
  const messages = detail.attributes.filter((a) => a.name === "AgentMessages")
  const events = detail.streams.filter((m) => m.stream === "AgentEvents")
  if (messages.length === 0 && events.length === 0) return []
  const parsed = (text) => { try { return JSON.parse(text) } catch { return null } }
  const out = [el("h2", {}, "Agent session")]
  const msgTable = el("table", { "data-testid": "messages" }, el("tr", {}, el("th", {}, "#"), el("th", {}, "turn"), el("th", {}, "role"), el("th", {}, "text / tool")))
  for (const m of messages) {
    const v = m.data || parsed(m.value) || {}
    const text = v.text ?? (v.tool_name ? v.tool_name + "(" + (v.tool_arguments ?? "") + ") = " + (v.tool_output ?? "") : m.value)
    msgTable.append(el("tr", { "data-testid": "message" }, el("td", {}, v.sequence ?? m.key), el("td", {}, v.turn_id ?? ""), el("td", { class: "msg-" + v.role }, v.role ?? ""), el("td", {}, show(text))))
  }
  out.push(el("div", {}, "Messages"), msgTable)
  const payloadOf = (ev) => (ev && typeof ev.payload === "string" ? parsed(ev.payload) : ev && ev.payload) || {}
  const calls = new Map()
  for (const e of events) {
    const ev = e.value && e.value.event ? e.value.event : e.value
    const p = payloadOf(ev)
    if (!ev || !p.tool_call_id) continue
    const call = calls.get(p.tool_call_id) ?? { id: p.tool_call_id, name: p.tool_name, effect: "", status: "", steps: new Set() }
    if (ev.type === "tool_call_deferred") { call.effect = p.effect; call.status = p.requires_approval ? "awaiting_approval" : "approved" }
    if (ev.type === "tool_call_finished") call.status = p.status
    if (p.tool_name) call.name = p.tool_name
    call.steps.add(ev.step_execution_id ?? e.stepExecutionId)
    calls.set(p.tool_call_id, call)
  }
  const callTable = el("table", { "data-testid": "tool-calls" }, el("tr", {}, el("th", {}, "tool call"), el("th", {}, "tool"), el("th", {}, "effect"), el("th", {}, "status"), el("th", {}, "Steps")))
  for (const c of calls.values()) {
    callTable.append(el("tr", { "data-testid": "tool-call", "data-tool-call-id": c.id }, el("td", {}, c.id), el("td", {}, c.name ?? ""), el("td", {}, c.effect), el("td", { class: "status-" + (c.status === "succeeded" ? "completed" : c.status === "failed" ? "failed" : "running") }, c.status), el("td", {}, [...c.steps].join(", "))))
  }
  out.push(el("div", {}, "Tool calls"), callTable)
  const evTable = el("table", { "data-testid": "events" }, el("tr", {}, el("th", {}, "at"), el("th", {}, "type"), el("th", {}, "Step"), el("th", {}, "attempt"), el("th", {}, "payload")))
  for (const e of events) {
    const ev = e.value && e.value.event ? e.value.event : e.value
    evTable.append(el("tr", {}, el("td", {}, time(e.at)), el("td", {}, ev && ev.type), el("td", {}, e.stepExecutionId), el("td", {}, e.attempt), el("td", {}, show(payloadOf(ev)))))
  }
  out.push(el("div", {}, "Events"), evTable)
  return out
}

async function flowView(id) {
  main.replaceChildren(el("p", {}, "loading " + id))
  const detail = await get("/api/flows/" + encodeURIComponent(id))
  const f = detail.flow
  main.replaceChildren(
    el("h2", { "data-testid": "flow-title" }, f.flowId + " (" + f.flowType + ")"),
    el("div", {}, el("span", { class: "status-" + f.status, "data-testid": "flow-status" }, f.status),
      " run " + f.runId + ", started " + time(f.startedAt) + (f.closedAt ? ", closed " + time(f.closedAt) : "") + (f.reason ? ", " + f.reason : "")),
    el("p", { class: "legend" }, el("span", {}, el("i", { class: "wait" }), "waiting"), el("span", {}, el("i", { class: "outcome-success" }), "succeeded"),
      el("span", {}, el("i", { class: "outcome-failure" }), "failed (retried or routed)"), el("span", {}, el("i", { class: "outcome-cancelled" }), "cancelled"),
      el("span", {}, el("i", { class: "outcome-running" }), "running")),
    ...timeline(detail),
    ...sessionPanel(detail),
    el("h2", {}, "Attributes"),
    el("table", { "data-testid": "attributes" }, el("tr", {}, el("th", {}, "name"), el("th", {}, "key"), el("th", {}, "value")),
      ...detail.attributes.map((a) => el("tr", {}, el("td", {}, a.name), el("td", {}, a.key), el("td", {}, el("pre", {}, a.value))))))
}

async function route() {
  const m = /^#flow=(.*)$/.exec(location.hash)
  try {
    if (m) await flowView(decodeURIComponent(m[1])); else await listView()
  } catch (e) {
    main.replaceChildren(el("p", { class: "error", "data-testid": "error" }, String(e.message || e)))
  }
  document.body.dataset.ready = "true"
}
window.addEventListener("hashchange", () => { document.body.dataset.ready = "false"; route() })
route()
</script>
</body>
</html>
`
