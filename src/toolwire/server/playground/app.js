// The toolwire playground: chat with a gateway model, watch server-tool calls, decide
// approvals. Plain DOM, no dependencies; every text from a model or a tool is inserted
// with textContent, never as HTML. Only this gateway's origin is called.
"use strict";

const $ = (id) => document.getElementById(id);
const messages = [];
let busy = false;

function headers() {
  const out = { "content-type": "application/json" };
  const key = $("key").value.trim();
  if (key) out.authorization = `Bearer ${key}`;
  return out;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function add(node) {
  $("conversation").append(node);
  node.scrollIntoView({ block: "end" });
  return node;
}

function turn(who, text) {
  const box = el("div", `turn ${who}`);
  box.append(el("span", "who", who === "user" ? "You" : "Assistant"));
  const body = el("span", "text", text);
  box.append(body);
  add(box);
  return body;
}

function pretty(value) {
  if (typeof value === "string") {
    try { return JSON.stringify(JSON.parse(value), null, 2); } catch { return value; }
  }
  return JSON.stringify(value, null, 2);
}

async function loadModels() {
  const select = $("model");
  try {
    const response = await fetch("/v1/models", { headers: headers() });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const body = await response.json();
    select.replaceChildren(...body.data.map((m) => el("option", "", m.id)));
  } catch (err) {
    select.replaceChildren(el("option", "", "(give the gateway key)"));
  }
}

// --- tool cards ------------------------------------------------------------------------

const cards = new Map();

function toolCall(event) {
  const card = el("div", "card");
  card.dataset.callId = event.id;
  card.append(el("h2", "", `Tool call: ${event.name}`));
  card.append(el("div", "meta", "server side · running"));
  card.append(el("pre", "args", pretty(event.arguments)));
  cards.set(event.id, card);
  add(card);
}

function toolResult(event) {
  let card = cards.get(event.call_id);
  if (!card) {
    toolCall({ id: event.call_id, name: event.name, arguments: "" });
    card = cards.get(event.call_id);
  }
  // A call that waited for approval gets its real result when the run goes on.
  card.classList.remove("ok", "error", "pending");
  card.querySelectorAll("pre.result").forEach((node) => node.remove());
  const waiting = !event.success && event.error.code === "awaiting_approval";
  card.classList.add(event.success ? "ok" : waiting ? "pending" : "error");
  const meta = card.querySelector(".meta");
  const outcome = event.success ? "ok" : waiting ? "waiting for approval" : `error: ${event.error.code}`;
  const took = waiting ? "" : ` · ${event.duration_ms} ms${event.cached ? " · cached" : ""}`;
  meta.textContent = `server side · ${outcome}${took}`;
  if (!waiting) {
    card.append(el("pre", "result", event.success ? pretty(event.result) : event.error.message));
  }
}

function approvalCard(approval, runId) {
  const card = el("div", "card pending");
  card.dataset.approvalId = approval.id;
  card.append(el("h2", "", `Approval needed: ${approval.name}`));
  card.append(el("div", "meta", approval.reason || "A person must approve this call."));
  card.append(el("pre", "args", pretty(approval.arguments)));
  const actions = el("div", "actions");
  const approve = el("button", "approve", "Approve");
  const deny = el("button", "secondary deny", "Deny");
  approve.type = deny.type = "button";
  approve.addEventListener("click", () => decide(card, approval.id, runId, true));
  deny.addEventListener("click", () => decide(card, approval.id, runId, false));
  actions.append(approve, deny);
  card.append(actions);
  add(card);
}

async function decide(card, approvalId, runId, approve) {
  card.querySelectorAll("button").forEach((b) => (b.disabled = true));
  const response = await fetch(`/v1/approvals/${encodeURIComponent(approvalId)}`, {
    method: "POST",
    headers: headers(),
    body: JSON.stringify({ decision: approve ? "approve" : "deny" }),
  });
  const meta = card.querySelector(".meta");
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    meta.textContent = `Not decided: ${body.error?.message || response.status}`;
    meta.classList.add("error-line");
    return;
  }
  card.classList.remove("pending");
  card.classList.add(approve ? "ok" : "error");
  meta.textContent = approve ? "Approved" : "Denied";
  card.querySelector(".actions").remove();
  const pending = document.querySelectorAll(".card.pending[data-approval-id]");
  if (pending.length === 0 && runId) {
    await stream(`/v1/runs/${encodeURIComponent(runId)}/resume`, { stream: true });
  }
}

// --- streaming ---------------------------------------------------------------------------

function raw(line) {
  if (!$("raw-toggle").checked) return;
  $("raw-events").textContent += `${line}\n`;
}

async function stream(path, body) {
  busy = true;
  $("send").disabled = true;
  const answer = turn("assistant", "");
  let text = "";
  try {
    const response = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (!response.ok) {
      const failure = await response.json().catch(() => ({}));
      answer.textContent = `Error ${response.status}: ${failure.error?.message || response.statusText}`;
      answer.classList.add("error-line");
      return;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, cut).trimEnd();
        buffer = buffer.slice(cut + 1);
        if (!line) continue;
        raw(line);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) {
          answer.textContent = text + `\n[${chunk.error.message}]`;
          answer.classList.add("error-line");
          continue;
        }
        const delta = chunk.choices?.[0]?.delta;
        if (delta?.content) {
          text += delta.content;
          answer.textContent = text;
        }
        if (chunk.toolwire) handle(chunk.toolwire);
      }
    }
    if (text) messages.push({ role: "assistant", content: text });
  } catch (err) {
    answer.textContent = `${text}\n[${err}]`;
    answer.classList.add("error-line");
  } finally {
    busy = false;
    $("send").disabled = false;
  }
}

function handle(event) {
  if (event.type === "tool_call") toolCall(event);
  else if (event.type === "tool_result") toolResult(event);
  else if (event.type === "run_status" && event.status === "awaiting_approval") {
    for (const approval of event.pending_approvals || []) approvalCard(approval, event.run_id);
  }
}

// --- wiring ------------------------------------------------------------------------------

$("ask").addEventListener("submit", async (e) => {
  e.preventDefault();
  const content = $("message").value.trim();
  if (!content || busy) return;
  $("message").value = "";
  turn("user", content);
  messages.push({ role: "user", content });
  await stream("/v1/chat/completions", { model: $("model").value, messages, stream: true });
});

$("message").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("ask").requestSubmit();
  }
});

$("raw-toggle").addEventListener("change", () => {
  $("raw").hidden = !$("raw-toggle").checked;
  $("raw").open = $("raw-toggle").checked;
});

$("key").value = sessionStorage.getItem("toolwire-key") || "";
$("key").addEventListener("change", () => {
  sessionStorage.setItem("toolwire-key", $("key").value.trim());
  loadModels();
});

loadModels();
