// The toolwire operator console: approvals inbox, runs, audit, upstreams. Plain DOM, no
// dependencies, no build step. Every text from a model, a tool or a key is inserted with
// textContent, never as HTML. Only this gateway's origin is called. What a key may see
// or decide is the gateway's rule; the page only shows what the API answers.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_SLOT = "toolwire.console.key"; // sessionStorage: gone when the tab closes
const INBOX_EVERY_MS = 1000; // bounded polling: one listing a second while visible
const UPSTREAMS_EVERY_MS = 5000;
let session = null;
let timer = null;
let generation = 0; // bumped on each view change: a poll of an older one stops

function key() { return sessionStorage.getItem(KEY_SLOT) || ""; }

async function api(path, options = {}) {
  const headers = { ...(options.body ? { "content-type": "application/json" } : {}) };
  if (key()) headers.authorization = `Bearer ${key()}`;
  const response = await fetch(path, { ...options, headers });
  let body = null;
  try { body = await response.json(); } catch { body = null; }
  if (!response.ok) {
    const error = new Error((body && body.error && body.error.message) || `HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function pretty(value) {
  if (typeof value === "string") {
    try { return JSON.stringify(JSON.parse(value), null, 2); } catch { return value; }
  }
  return JSON.stringify(value, null, 2);
}

function when(seconds) { return seconds ? new Date(seconds * 1000).toLocaleString() : "—"; }

function ago(seconds) {
  const s = Math.max(0, Math.round(Date.now() / 1000 - seconds));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}

function until(seconds) {
  const s = Math.round(seconds - Date.now() / 1000);
  if (s <= 0) return "expired";
  return s < 120 ? `expires in ${s} s` : `expires in ${Math.floor(s / 60)} min`;
}

// --- sign-in and views ------------------------------------------------------------------

async function signIn() {
  clearTimeout(timer);
  generation += 1;
  try {
    session = await api("/v1/console/session");
  } catch (err) {
    session = null;
    $("views").hidden = true;
    for (const s of document.querySelectorAll("main > section")) s.hidden = true;
    $("who").textContent = err.status === 401
      ? (key() ? "That gateway key was not accepted." : "This gateway has keys: give yours to sign in.")
      : `Cannot reach the gateway: ${err.message}`;
    $("signout").hidden = !key();
    return;
  }
  const rights = session.open ? "open gateway: no keys" :
    session.admin ? `${session.key} (admin)` : `${session.key}, approve: ${session.approve}`;
  $("who").textContent = `Signed in: ${rights}`;
  $("signout").hidden = !key();
  $("views").hidden = false;
  for (const link of document.querySelectorAll("#views a")) {
    link.hidden = !session.views.includes(link.dataset.view);
  }
  show();
}

function show() {
  clearTimeout(timer);
  generation += 1;
  if (!session) return;
  const [view, arg] = (location.hash.slice(1) || "inbox").split("/");
  const name = session.views.includes(view) ? view : "inbox";
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== name;
  for (const link of document.querySelectorAll("#views a")) {
    if (link.dataset.view === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (name === "inbox") pollInbox(generation);
  else if (name === "runs") showRuns(arg ? decodeURIComponent(arg) : null);
  else if (name === "audit") loadAudit(0);
  else if (name === "upstreams") pollUpstreams(generation);
}

// --- inbox --------------------------------------------------------------------------------

const items = new Map(); // approval id -> its article, kept so a typed reason survives polls

async function pollInbox(gen) {
  if (gen !== generation) return;
  if (document.hidden) { timer = setTimeout(() => pollInbox(gen), INBOX_EVERY_MS); return; }
  let delay = INBOX_EVERY_MS;
  try {
    const page = await api("/v1/approvals?limit=50");
    renderInbox(page.data);
    const waiting = page.data.filter((a) => a.status === "pending").length;
    $("inbox-state").textContent = `${waiting} waiting · updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $("inbox-state").textContent = `Cannot list approvals: ${err.message}`;
    delay = 5000; // back off while the gateway answers errors
  }
  if (gen === generation) timer = setTimeout(() => pollInbox(gen), delay);
}

function renderInbox(approvals) {
  const box = $("inbox-items");
  if (!approvals.length) {
    box.replaceChildren(el("p", "meta", "Nothing to see: no approvals for this key."));
    items.clear();
    return;
  }
  const seen = new Set();
  const order = [];
  for (const a of approvals) { // newest first, as the API lists them
    seen.add(a.id);
    let node = items.get(a.id);
    if (!node) { node = buildItem(a); items.set(a.id, node); }
    updateItem(node, a);
    order.push(node);
  }
  for (const id of [...items.keys()]) if (!seen.has(id)) items.delete(id);
  const focused = document.activeElement;
  box.replaceChildren(...order);
  if (focused && box.contains(focused)) focused.focus();
}

function buildItem(a) {
  const node = el("article", "item");
  node.dataset.approvalId = a.id;
  const title = el("h3");
  title.id = `t-${a.id}`;
  node.setAttribute("aria-labelledby", title.id);
  title.append(el("span", "", a.name), el("span", `badge ${a.effects}`, a.effects), el("span", "badge status"));
  node.append(title);
  node.append(el("p", "meta who"));
  node.append(el("p", "meta times"));
  node.append(el("p", "asked"));
  const args = el("pre", "args", pretty(a.arguments));
  args.setAttribute("aria-label", "Arguments (redacted)");
  node.append(args);
  const run = el("a", "", `Run ${a.run_id}`);
  run.href = `#runs/${encodeURIComponent(a.run_id)}`;
  node.append(el("p", "meta run"));
  node.querySelector(".run").append(run);
  const form = el("form", "decide");
  const label = el("label", "", "Reason");
  const reason = el("textarea");
  reason.rows = 1;
  reason.maxLength = 2000;
  label.append(reason);
  const approve = el("button", "approve", "Approve");
  approve.type = "button";
  const deny = el("button", "deny", "Deny");
  deny.type = "button";
  approve.addEventListener("click", () => decide(node, "approve"));
  deny.addEventListener("click", () => decide(node, "deny"));
  form.addEventListener("submit", (event) => event.preventDefault());
  form.append(label, approve, deny);
  node.append(form);
  node.append(el("p", "decision"));
  node.querySelector(".decision").setAttribute("role", "status");
  node.append(el("p", "note error-line"));
  node.querySelector(".note").setAttribute("role", "alert");
  return node;
}

function updateItem(node, a) {
  node.className = `item ${a.status}`;
  const badge = node.querySelector(".badge.status");
  badge.className = `badge status ${a.status}`;
  badge.textContent = a.status;
  node.querySelector(".who").textContent = `Requested by ${a.requested_by || "anonymous"}` +
    (a.approver ? ` · only ${a.approver} may approve` : "") + (a.reason ? ` · ${a.reason}` : "");
  node.querySelector(".times").textContent = `${ago(a.created_at)} · ` +
    (a.status === "pending" ? until(a.expires_at) : `created ${when(a.created_at)}`);
  const asked = node.querySelector(".asked");
  asked.textContent = a.last_user_message ? `Asked: ${a.last_user_message}` : "";
  asked.hidden = !a.last_user_message;
  const pending = a.status === "pending";
  // The gateway's rule says who decides (`may_decide`); the page only follows it.
  node.querySelector(".decide").hidden = !pending || a.may_decide === false;
  const decision = node.querySelector(".decision");
  if (pending && a.may_decide === false) {
    decision.textContent = `Waiting for ${a.approver || "a key allowed to approve"} to decide.`;
  } else if (pending) {
    decision.textContent = "";
  } else {
    const by = a.decided_by ? ` by ${a.decided_by} ${ago(a.decided_at)}` : "";
    const why = a.decision_reason ? `: “${a.decision_reason}”` : "";
    const text = {
      approved: `Approved${by}${why} — waiting for the run to resume.`,
      used: `Approved${by}${why} — the call ran.`,
      denied: `Denied${by}${why}.`,
      expired: "Expired before anyone decided: the model must call the tool again.",
    }[a.status] || a.status;
    decision.textContent = text;
  }
}

async function decide(node, decision) {
  const id = node.dataset.approvalId;
  const reason = node.querySelector("textarea").value.trim();
  const buttons = node.querySelectorAll(".decide button");
  for (const b of buttons) b.disabled = true;
  try {
    const decided = await api(`/v1/approvals/${encodeURIComponent(id)}`, {
      method: "POST",
      body: JSON.stringify({ decision, ...(reason ? { reason } : {}) }),
    });
    node.querySelector(".note").textContent = "";
    updateItem(node, decided);
  } catch (err) {
    // 409: someone else decided first (or it expired); the poll shows who.
    node.querySelector(".note").textContent =
      err.status === 409 ? `Not decided: ${err.message}` : `Error: ${err.message}`;
    try { updateItem(node, await api(`/v1/approvals/${encodeURIComponent(id)}`)); } catch { /* gone */ }
  } finally {
    for (const b of buttons) b.disabled = false;
  }
}

// --- runs -----------------------------------------------------------------------------------

async function showRuns(id) {
  const detail = $("run-detail");
  detail.replaceChildren();
  if (id) {
    $("run-id").value = id;
    await showRun(id);
  }
  try {
    const page = await api("/v1/runs?limit=50");
    $("run-list").replaceChildren(...page.data.map((r) => {
      const li = el("li");
      const link = el("a", "", r.id);
      link.href = `#runs/${encodeURIComponent(r.id)}`;
      li.append(link, el("span", `badge ${r.status}`, r.status),
        el("span", "meta", ` ${r.owner || "anonymous"} · ${r.model || ""} · ${ago(r.updated_at)}`));
      return li;
    }));
    if (!page.data.length) $("run-list").replaceChildren(el("li", "meta", "No runs for this key."));
  } catch (err) {
    $("run-list").replaceChildren(el("li", "error-line", `Cannot list runs: ${err.message}`));
  }
}

async function showRun(id) {
  const detail = $("run-detail");
  let run, approvals;
  try {
    [run, approvals] = await Promise.all([
      api(`/v1/runs/${encodeURIComponent(id)}`),
      api(`/v1/approvals?run_id=${encodeURIComponent(id)}&limit=100`).catch(() => ({ data: [] })),
    ]);
  } catch (err) {
    detail.replaceChildren(el("p", "error-line", `Run ${id}: ${err.message}`));
    return;
  }
  const head = el("div", "step");
  const title = el("h3", "", `Run ${run.id}`);
  title.append(el("span", `badge run-status ${run.status}`, run.status));
  head.append(title, el("p", "meta", `Owner ${run.owner || "anonymous"} · model ${run.model || "—"} · started ${when(run.created_at)} · updated ${when(run.updated_at)}`));
  const timeline = el("ol", "plain timeline");
  timeline.setAttribute("aria-label", "Timeline");
  const byCall = new Map(approvals.data.map((a) => [a.call_id, a]));
  run.steps.forEach((step, i) => {
    const turn = el("li", "step");
    turn.append(el("h3", "", `Model turn ${i + 1}`));
    if (step.content) turn.append(el("p", "asked", step.content));
    if (step.finish_reason) turn.append(el("p", "meta", `finish: ${step.finish_reason}`));
    timeline.append(turn);
    for (const call of step.tool_calls || []) {
      const fn = call.function || call;
      const result = (step.tool_results || []).find((r) => r.call_id === call.id);
      const ok = result ? result.success : null;
      const li = el("li", `step ${ok === null ? "" : ok ? "ok" : "error"}`);
      li.append(el("h3", "", `Tool call: ${fn.name}`));
      li.append(el("pre", "", pretty(fn.arguments)));
      if (result) {
        const outcome = ok ? "ok" : (result.error && result.error.code) || "error";
        li.append(el("p", "meta", `${outcome} · ${Math.round(result.duration_ms)} ms` +
          (result.approval_wait_ms ? ` · waited ${Math.round(result.approval_wait_ms / 1000)} s for approval` : "")));
      } else {
        li.append(el("p", "meta", "no result yet"));
      }
      const approval = byCall.get(call.id);
      if (approval) li.append(approvalLine(approval));
      timeline.append(li);
    }
  });
  for (const pending of run.pending_approvals || []) {
    const li = el("li", "step");
    li.append(el("h3", "", `Waiting: ${pending.name || pending.tool}`));
    const approval = byCall.get(pending.call_id) || approvals.data.find((a) => a.id === pending.id);
    if (approval) li.append(approvalLine(approval));
    timeline.append(li);
  }
  const parts = [head, timeline];
  if (run.output) parts.push(el("p", "asked", `Output: ${run.output}`));
  if (run.status === "awaiting_approval") {
    const resume = el("button", "", "Resume run");
    resume.type = "button";
    const note = el("p", "meta");
    note.setAttribute("role", "status");
    resume.addEventListener("click", async () => {
      resume.disabled = true;
      note.textContent = "Resuming…";
      try {
        await api(`/v1/runs/${encodeURIComponent(id)}/resume`, { method: "POST", body: "{}" });
        await showRuns(id);
      } catch (err) {
        note.textContent = `Not resumed: ${err.message}`;
        resume.disabled = false;
      }
    });
    parts.push(el("div", "actions"));
    parts[parts.length - 1].append(resume, note);
  }
  detail.replaceChildren(...parts);
}

function approvalLine(a) {
  const text = a.status === "pending" ? `Approval pending (${until(a.expires_at)})` :
    a.status === "expired" ? "Approval expired" :
    `${a.status === "denied" ? "Denied" : "Approved"} by ${a.decided_by || "?"} at ${when(a.decided_at)}` +
    (a.decision_reason ? `: “${a.decision_reason}”` : "");
  return el("p", "meta approval", text);
}

// --- audit ----------------------------------------------------------------------------------

const auditPages = [0]; // the `after` of each page seen, for "First page"
let auditNext = null;

function auditQuery(after, limit) {
  const form = new FormData($("audit-filters"));
  const params = new URLSearchParams();
  for (const name of ["tool", "key", "outcome", "run_id"]) {
    const v = String(form.get(name) || "").trim();
    if (v) params.set(name, v);
  }
  for (const name of ["since", "until"]) {
    const v = String(form.get(name) || "");
    if (v) params.set(name, String(new Date(v).getTime() / 1000));
  }
  params.set("limit", String(limit));
  if (after) params.set("after", String(after));
  return `/v1/audit?${params}`;
}

async function loadAudit(after) {
  try {
    const page = await api(auditQuery(after, 50));
    auditNext = page.has_more ? page.last_id : null;
    $("audit-next").disabled = auditNext === null;
    $("audit-first").disabled = !after;
    $("audit-state").textContent = `${page.data.length} records${after ? ` after #${after}` : ""}${page.has_more ? " · more on the next page" : ""}`;
    $("audit-table").tBodies[0].replaceChildren(...page.data.map((r) => {
      const tr = el("tr");
      const run = el("td");
      if (r.run_id) {
        const link = el("a", "", r.run_id);
        link.href = `#runs/${encodeURIComponent(r.run_id)}`;
        run.append(link);
      }
      const args = el("td");
      if (r.arguments !== null && r.arguments !== undefined) args.append(el("pre", "", pretty(r.arguments)));
      tr.append(el("td", "", when(r.time)), el("td", "", r.tool || "—"), el("td", "", r.key_name || "—"),
        el("td", "", `${r.event}: ${r.outcome || "—"}`), el("td", "", r.approved_by || ""), run, args);
      return tr;
    }));
  } catch (err) {
    $("audit-state").textContent = `Cannot read the audit log: ${err.message}`;
  }
}

async function exportAudit() {
  // Every page under the filters, up to a bound that keeps the tab's memory reasonable.
  const lines = [];
  let after = 0;
  $("audit-state").textContent = "Exporting…";
  try {
    for (let i = 0; i < 100; i++) {
      const page = await api(auditQuery(after, 1000));
      for (const r of page.data) lines.push(JSON.stringify(r));
      if (!page.has_more) break;
      after = page.last_id;
    }
  } catch (err) {
    $("audit-state").textContent = `Export failed: ${err.message}`;
    return;
  }
  const url = URL.createObjectURL(new Blob([lines.join("\n") + (lines.length ? "\n" : "")], { type: "application/x-ndjson" }));
  const link = el("a");
  link.href = url;
  link.download = `toolwire-audit-${new Date().toISOString().slice(0, 19)}.jsonl`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
  $("audit-state").textContent = `Exported ${lines.length} records.`;
}

// --- upstreams ------------------------------------------------------------------------------

async function pollUpstreams(gen) {
  if (gen !== generation) return;
  try {
    const body = await api("/v1/upstreams");
    const inflight = body.in_flight === null ? "—" : Math.max(0, body.in_flight - 1); // minus this request
    $("upstreams-state").textContent = `${inflight} requests in flight on the gateway · recent failures since ${body.recent_since ? new Date(body.recent_since * 1000).toLocaleTimeString() : "the start"} · updated ${new Date().toLocaleTimeString()}`;
    $("upstream-list").replaceChildren(...body.data.map((u) => {
      const box = el("article", "upstream");
      const title = el("h3", "", `${u.name} (${u.kind}${u.host ? ` at ${u.host}` : ""})`);
      title.append(el("span", `badge ${u.health}`, u.health));
      box.append(title);
      const table = el("table");
      const head = el("tr");
      for (const h of ["Model", "Upstream model", "Health", "In flight", "Recent failures", "Failures since start", "Calls", "Mean latency", "Cooldown"]) {
        const th = el("th", "", h);
        th.scope = "col";
        head.append(th);
      }
      table.append(el("thead"));
      table.tHead.append(head);
      const tbody = el("tbody");
      for (const d of u.deployments) {
        const tr = el("tr");
        const kinds = Object.entries(d.failures).map(([k, v]) => `${k}: ${v}`).join(", ") || "none";
        const health = el("td");
        health.append(el("span", `badge ${d.health}`, d.health));
        tr.append(el("td", "", d.model), el("td", "", d.upstream_model), health,
          el("td", "", d.in_flight === null ? "—" : d.in_flight), el("td", "", d.recent_failures), el("td", "", kinds),
          el("td", "", d.latency.calls),
          el("td", "", d.latency.mean_seconds === null ? "—" : `${(d.latency.mean_seconds * 1000).toFixed(0)} ms`),
          el("td", "", d.cooldown_until ? `until ${when(d.cooldown_until)}` : "none"));
        tbody.append(tr);
      }
      table.append(tbody);
      const scroll = el("div", "scroll");
      scroll.append(table);
      box.append(scroll);
      return box;
    }));
  } catch (err) {
    $("upstreams-state").textContent = `Cannot read upstreams: ${err.message}`;
  }
  if (gen === generation) timer = setTimeout(() => pollUpstreams(gen), UPSTREAMS_EVERY_MS);
}

// --- wiring ---------------------------------------------------------------------------------

$("signin").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("key").value.trim();
  if (value) sessionStorage.setItem(KEY_SLOT, value); else sessionStorage.removeItem(KEY_SLOT);
  $("key").value = "";
  items.clear();
  signIn();
});
$("signout").addEventListener("click", () => {
  sessionStorage.removeItem(KEY_SLOT);
  items.clear();
  $("inbox-items").replaceChildren();
  signIn();
});
$("run-open").addEventListener("submit", (event) => {
  event.preventDefault();
  location.hash = `#runs/${encodeURIComponent($("run-id").value.trim())}`;
});
$("audit-filters").addEventListener("submit", (event) => {
  event.preventDefault();
  loadAudit(0);
});
$("audit-next").addEventListener("click", () => { if (auditNext !== null) { auditPages.push(auditNext); loadAudit(auditNext); } });
$("audit-first").addEventListener("click", () => { auditPages.length = 1; loadAudit(0); });
$("audit-export").addEventListener("click", exportAudit);
window.addEventListener("hashchange", () => { show(); $("view").focus(); });
signIn();
