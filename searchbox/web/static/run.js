// Run dashboard: everything comes from the run's own artifacts, streamed over SSE (trace lines, tables, meta, job).
"use strict";
nav();
const REF = decodeURIComponent(location.pathname.replace(/^\/runs\//, "")).replace(/\/+$/, "");
const REF_URL = REF.split("/").map(encodeURIComponent).join("/");
const JOB_ID = (REF.match(/^web\/jobs\/([^/]+)$/) || [])[1] || null;
const COLORS = { input: "#2f6fde", output: "#e07b24", cached: "#2aa876", llm: "#2f6fde", tools: "#e07b24", other: "#b9bfcc" };
const FEED_MAX = 400;
const S = { usage: {}, ctx: [], llmS: 0, t0: null, t1: null, turns: [], calls: [], meta: null, job: null, traceCalls: [],
            items: new Map(), feedCount: 0, offset: 0, live: true, es: null, question: null };
window.sbDash = S; // for scripts and the browser test

// ---- charts (uPlot, bundled) --------------------------------------------------------------
function makeChart(el, height, series, xLabel) {
  const opts = {
    width: Math.max(260, el.clientWidth || 320), height,
    legend: { live: false },
    scales: { x: { time: false, range: (u, min, max) => [0.5, Math.max(max || 1, 1) + 0.5] },
              y: { range: (u, min, max) => [0, Math.max(max || 1, (u.sbYMax && u.sbYMax()) || 0) * 1.05] } },
    axes: [{ label: xLabel, values: (u, vals) => vals.map(v => Number.isInteger(v) ? v : "") }, { size: 60 }],
    series: [{ label: xLabel }, ...series.map(s => ({ label: s.label, stroke: s.color, width: 2, points: { show: true, size: 5 },
                                                     dash: s.dash || undefined }))],
  };
  return new uPlot(opts, [[], ...series.map(() => [])], el);
}
const tokChart = makeChart($("#tokens-chart"), 230, [
  { label: "input", color: COLORS.input }, { label: "output", color: COLORS.output }, { label: "cached", color: COLORS.cached }], "turn");
const ctxChart = makeChart($("#ctx-chart"), 150, [{ label: "context tokens per call", color: COLORS.output }], "call");
ctxChart.sbYMax = () => (S.meta && S.meta.context_window) || 0; // the y axis ends at the window
window.addEventListener("resize", () => {
  for (const [c, sel] of [[tokChart, "#tokens-chart"], [ctxChart, "#ctx-chart"]]) c.setSize({ width: Math.max(260, $(sel).clientWidth), height: c.height });
});

// ---- the feed -----------------------------------------------------------------------------
function pushItem(el, key) {
  const feed = $("#feed");
  feed.prepend(el);
  if (key) S.items.set(key, el);
  S.feedCount += 1;
  while (feed.children.length > FEED_MAX) feed.lastChild.remove();
  $("#feed-count").textContent = `(${S.feedCount})`;
}

function marker(text, bad = false, detail = null) {
  pushItem(h("div", { class: `feed-item marker${bad ? " fail" : ""}` }, h("div", { class: "feed-head", text }),
    detail ? h("details", {}, h("summary", { text: "details" }), h("pre", { text: detail })) : null));
}

function prettyArgs(name, raw) {
  try {
    const obj = JSON.parse(raw);
    if (name === "bash" && obj && typeof obj.command === "string") return "$ " + obj.command;
    return JSON.stringify(obj, null, 1);
  } catch (e) { return raw; }
}

function addCall(turn, call) {
  S.traceCalls.push({ turn, name: call.name });
  const out = h("pre", { class: "out muted", text: "running…" });
  pushItem(h("div", { class: "feed-item call", "data-call": call.id },
    h("div", { class: "feed-head" }, h("b", { text: call.name }), ` · turn ${turn}`),
    h("pre", { class: "args", text: prettyArgs(call.name, call.arguments) }),
    h("details", { open: true }, h("summary", { class: "small", text: "output" }), out)), call.id);
}

function attachOutput(ev) {
  const el = S.items.get(ev.tool_call_id);
  if (!el) return;
  const out = $("pre.out", el);
  out.classList.remove("muted");
  out.textContent = ev.content || "(empty)";
  $("summary", el).textContent = `output (${fmt(ev.chars)} chars${ev.chars > (ev.content || "").length ? ", preview" : ""})`;
  if (/^(error|Error)/.test(ev.content || "")) el.classList.add("fail");
}

function say(ev) {
  pushItem(h("div", { class: "feed-item say" }, h("div", { class: "feed-head" }, h("b", { text: "assistant" }), ` · turn ${ev.turn}`),
    h("pre", { text: ev.content })));
}

function onTrace(events) {
  for (const ev of events) {
    if (ev.t) { if (S.t0 === null) S.t0 = ev.t; S.t1 = ev.t; }
    if (ev.type === "message") {
      if (ev.role === "user") {
        if (S.question === null) { S.question = ev.content; $("#question").textContent = ev.content; }
        else if (ev.content === "Continue.") marker(`turn ${ev.turn} · Continue.`);
        else marker(`user: ${ev.content}`);
      } else if (ev.role === "assistant") {
        if (ev.usage) {
          const u = S.usage[ev.turn] || (S.usage[ev.turn] = { prompt: 0, completion: 0, cached: 0 });
          u.prompt += ev.usage.prompt || 0; u.completion += ev.usage.completion || 0; u.cached += ev.usage.cached || 0;
          S.ctx.push((ev.usage.prompt || 0) + (ev.usage.completion || 0));
          S.llmS += ev.usage.latency_s || 0;
        }
        if (ev.content) say(ev);
        for (const c of ev.tool_calls || []) addCall(ev.turn, c);
      } else if (ev.role === "tool") attachOutput(ev);
    } else if (ev.type === "compaction") marker(`compaction: ~${fmt(ev.estimated_before)} → ~${fmt(ev.estimated_after)} tokens`);
    else if (ev.type === "resume") marker(`resumed at turn ${ev.turn}`);
    else if (ev.type === "stop") marker(`stopped: ${ev.reason}${ev.detail ? " – " + ev.detail : ""}`, !["budget_spent", "first_turn_done", "token_budget_spent", "paused"].includes(ev.reason));
    else if (ev.type === "malformed") marker(`malformed reply: ${ev.error}`, true, ev.raw);
    else if (ev.type === "error") marker("harness error", true, ev.traceback);
  }
  scheduleRender();
}

// ---- derived views --------------------------------------------------------------------------
function tokenSeries() {
  const byTurn = new Map();
  for (const r of S.turns) byTurn.set(r.turn, { prompt: r.prompt_tokens, completion: r.completion_tokens, cached: r.cached_tokens });
  const done = S.turns.length ? Math.max(...S.turns.map(r => r.turn)) : 0;
  for (const [t, u] of Object.entries(S.usage)) if (+t > done) byTurn.set(+t, u); // the turn in progress, from the trace
  const xs = [...byTurn.keys()].sort((a, b) => a - b);
  return [xs, xs.map(t => byTurn.get(t).prompt), xs.map(t => byTurn.get(t).completion), xs.map(t => byTurn.get(t).cached)];
}

function renderDist() {
  const counts = new Map(), programs = new Map();
  const done = new Set(S.turns.map(r => r.turn));
  for (const c of S.calls) {
    counts.set(c.tool, (counts.get(c.tool) || 0) + 1);
    if (c.tool === "bash") for (const p of (c.programs && c.programs.length ? c.programs : ["(none)"])) programs.set(p, (programs.get(p) || 0) + 1);
  }
  const maxDone = done.size ? Math.max(...done) : 0;
  for (const c of S.traceCalls) if (c.turn > maxDone) counts.set(c.name, (counts.get(c.name) || 0) + 1);
  const el = $("#tool-dist");
  if (!counts.size) { el.textContent = "none yet"; return; }
  el.classList.remove("muted");
  const max = Math.max(...counts.values());
  const row = (name, n, sub) => h("div", { class: "dist-row", "data-tool": name },
    h("div", { class: `name${sub ? " sub" : ""}`, text: name, title: name }),
    h("div", { class: "bar" }, h("span", { style: `width:${(100 * n / max).toFixed(1)}%;background:${sub ? COLORS.other : COLORS.llm}` })),
    h("div", { text: n }));
  const rows = [];
  for (const [name, n] of [...counts.entries()].sort((a, b) => b[1] - a[1])) {
    rows.push(row(name, n, false));
    if (name === "bash") for (const [p, k] of [...programs.entries()].sort((a, b) => b[1] - a[1])) rows.push(row(`bash: ${p}`, k, true));
  }
  el.replaceChildren(...rows);
}

function renderTime() {
  const m = S.meta;
  let llm, tools, elapsed;
  if (m && m.status === "complete") { llm = m.llm_s || 0; tools = m.tool_s || 0; elapsed = m.elapsed_s || 0; }
  else {
    llm = S.llmS; tools = S.turns.reduce((a, r) => a + (r.tool_ms || 0), 0) / 1000;
    elapsed = S.t0 !== null ? (S.live && isRunning() ? Date.now() / 1000 : S.t1) - S.t0 : 0;
  }
  const other = Math.max(0, elapsed - llm - tools), total = Math.max(elapsed, llm + tools, 1e-9);
  const parts = [["LLM", llm, COLORS.llm], ["tools", tools, COLORS.tools], ["other", other, COLORS.other]];
  $("#time-bar").replaceChildren(...parts.map(([n, v, c]) => h("span", { title: `${n}: ${secs(v)}`, style: `width:${(100 * v / total).toFixed(2)}%;background:${c}` })));
  $("#time-legend").replaceChildren(...parts.map(([n, v, c]) => h("span", {}, h("span", { class: "swatch", style: `background:${c}` }), `${n} ${secs(v)}`)),
    h("span", { class: "muted", text: `total ${secs(elapsed)}` }));
}

function isRunning() { return S.job ? S.job.state === "running" : !(S.meta && S.meta.status === "complete"); }

function budgetInfo() {
  const m = S.meta || {};
  const budget = (S.job && S.job.budget) || m.budget || 0;
  const unit = m.budget_unit || "turns";
  if (unit === "tokens") {
    const metric = m.token_metric || "total";
    let spent = 0;
    for (const u of Object.values(S.usage)) spent += metric === "prompt" ? u.prompt : metric === "completion" ? u.completion
      : metric === "uncached_prompt" ? u.prompt - u.cached : u.prompt + u.completion;
    if (m.status === "complete" && m.tokens) spent = m.tokens[metric] ?? spent;
    return { used: spent, budget, text: `${fmt(spent)} / ${fmt(budget)} ${metric} tokens` };
  }
  const done = m.status === "complete" ? m.turns : S.turns.length;
  const current = Math.max(0, ...Object.keys(S.usage).map(Number));
  const extra = isRunning() && current > done ? ` (turn ${current} in progress)` : "";
  return { used: done, budget, text: `${done} / ${budget} turns${extra}${m.force_budget === false ? " · budget not forced" : ""}` };
}

function renderSummary() {
  const m = S.meta || {};
  const t = m.tokens || {};
  const kv = [
    ["status", S.job ? `${S.job.state}${S.job.pausing ? ` (${S.job.pausing} requested)` : ""}` : m.status],
    ["stop reason", m.status === "complete" ? `${m.stop_reason}${m.stop_detail ? " – " + m.stop_detail : ""}` : "–"],
    ["turns", m.status === "complete" ? m.turns : S.turns.length],
    ["tool calls", m.status === "complete" ? `${m.tool_calls} (${m.tool_errors || 0} errors)` : S.traceCalls.length],
    ["tokens", m.status === "complete" ? `${fmt(t.total)} total · ${fmt(t.prompt)} in · ${fmt(t.completion)} out · ${fmt(t.cached)} cached` : "–"],
    ["model", [m.model, m.served && m.served.model_id].filter(Boolean).join(" · ") || "–"],
    ["protocol", m.protocol || "–"], ["tools", (m.tools || []).join(", ") || "–"],
    ["dataroom", m.dataroom ? `${m.dataroom.files} files, ${bytes(m.dataroom.bytes || 0)}` : "–"],
    ["resumes", m.resumes || 0], ["answer", m.answer_source || "–"], ["run id", m.run_id || "–"],
  ];
  $("#summary").replaceChildren(...kv.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: v ?? "–" })]));
  const b = budgetInfo();
  $("#budget-bar").style.width = `${b.budget ? Math.min(100, 100 * b.used / b.budget) : 0}%`;
  $("#budget-text").textContent = b.text;
  const win = m.context_window || 0, last = S.ctx.length ? S.ctx[S.ctx.length - 1] : 0;
  $("#ctx-bar").style.width = `${win ? Math.min(100, 100 * last / win) : 0}%`;
  $("#ctx-text").textContent = win ? `${fmt(last)} / ${fmt(win)} tokens at the last call (${(100 * last / win).toFixed(1)}%)`
    : (last ? `${fmt(last)} tokens at the last call` : "–");
}

function renderStatus() {
  const st = S.job ? S.job.state : (S.meta ? S.meta.status : "?");
  $("#status").replaceChildren(badge(st));
  $("#ref").textContent = REF;
  if (!JOB_ID) return;
  $("#controls").hidden = false;
  const j = S.job || {};
  $("#pause").disabled = !["queued", "running", "paused"].includes(j.state) || !!j.pausing;
  $("#resume").disabled = !["held", "failed", "done"].includes(j.state);
  $("#cancel").disabled = !["queued", "running", "paused", "held", "failed"].includes(j.state);
  $("#job-error").textContent = j.error || "";
}

let timer = null;
function scheduleRender() { if (!timer) timer = setTimeout(render, 150); }
function render() {
  timer = null;
  const toks = tokenSeries();
  tokChart.setData(toks);
  $("#tokens-chart").dataset.turns = toks[0].length;
  const xs = S.ctx.map((_, i) => i + 1);
  ctxChart.setData([xs, S.ctx]);
  renderDist(); renderTime(); renderSummary(); renderStatus();
}

// ---- files and answer -----------------------------------------------------------------------
let lastFiles = 0;
async function refreshFiles(force = false) {
  if (!force && Date.now() - lastFiles < 2500) return;
  lastFiles = Date.now();
  try {
    const tree = await api(`/api/runs/${REF_URL}/files`);
    renderTree(tree);
  } catch (e) { $("#files").textContent = e.message; }
  try {
    const ans = await api(`/api/runs/${REF_URL}/answer`);
    const el = $("#answer");
    if (ans.present) { el.classList.remove("muted"); el.innerHTML = ans.html; } // server-rendered, every text escaped
  } catch (e) { /* keep the last one */ }
}

function renderTree(tree) {
  const root = { dirs: new Map(), files: [] };
  for (const [path, size] of [...tree.artifacts, ...tree.work]) {
    const parts = path.split("/");
    let node = root;
    for (const p of parts.slice(0, -1)) {
      if (!node.dirs.has(p)) node.dirs.set(p, { dirs: new Map(), files: [] });
      node = node.dirs.get(p);
    }
    node.files.push([parts[parts.length - 1], path, size]);
  }
  const open = new Set($$("#files details[open]").map(d => d.dataset.path));
  const build = (node, prefix) => [
    ...[...node.dirs.entries()].map(([name, child]) => {
      const path = prefix + name;
      const d = h("details", { "data-path": path, open: open.has(path) || path === "work" },
        h("summary", { text: name + "/" }), build(child, path + "/"));
      return d;
    }),
    ...node.files.map(([name, path, size]) => h("div", { class: "file", "data-path": path, onclick: () => viewFile(path) }, name, h("span", { text: bytes(size) }))),
  ];
  const el = $("#files");
  el.classList.remove("muted");
  el.replaceChildren(...build(root, ""), ...(tree.truncated ? [h("div", { class: "muted small", text: "(list truncated)" })] : []));
}

async function viewFile(path) {
  const box = $("#viewer");
  $("#viewer-title").textContent = path;
  try {
    const f = await api(`/api/runs/${REF_URL}/file?path=${encodeURIComponent(path)}`);
    const body = f.binary ? h("div", { class: "muted", text: `binary file, ${bytes(f.size)}` })
      : h("pre", { text: f.text + (f.truncated ? "\n… (truncated)" : "") });
    box.replaceChildren($("#viewer-title"), body);
  } catch (e) {
    box.replaceChildren($("#viewer-title"), h("div", { class: "error", text: e.message }));
  }
}

// ---- the stream -----------------------------------------------------------------------------
function connect() {
  if (S.es) S.es.close();
  const es = new EventSource(`/api/runs/${REF_URL}/events?offset=${S.offset}`);
  S.es = es;
  S.live = true;
  es.onopen = () => { $("#stream").textContent = "· live"; };
  es.onerror = () => { if (S.live) $("#stream").textContent = "· reconnecting…"; };
  es.addEventListener("trace", e => { S.offset = Number(e.lastEventId) || S.offset; onTrace(JSON.parse(e.data)); });
  es.addEventListener("turns", e => { S.turns = JSON.parse(e.data); scheduleRender(); refreshFiles(true); });
  es.addEventListener("calls", e => { S.calls = JSON.parse(e.data); scheduleRender(); });
  es.addEventListener("meta", e => {
    S.meta = JSON.parse(e.data);
    if (S.meta && S.meta.question) $("#question").textContent = S.meta.question;
    scheduleRender(); refreshFiles(true);
  });
  es.addEventListener("job", e => { S.job = JSON.parse(e.data); scheduleRender(); });
  es.addEventListener("end", () => {
    es.close(); S.live = false;
    $("#stream").textContent = "· finished (replayed from its logs)";
    scheduleRender(); refreshFiles(true);
  });
}

async function jobAction(what, body) {
  $("#job-error").textContent = "";
  try {
    const out = await postJSON(`/api/jobs/${encodeURIComponent(JOB_ID)}/${what}`, body);
    S.job = out.job; scheduleRender();
    if (!S.live) connect();
  } catch (e) { $("#job-error").textContent = e.message; }
}
$("#pause").addEventListener("click", () => jobAction("pause"));
$("#resume").addEventListener("click", () => jobAction("resume", $("#resume-budget").value ? { budget: $("#resume-budget").value } : {}));
$("#cancel").addEventListener("click", () => jobAction("cancel"));

connect();
refreshFiles(true);
setInterval(() => { if (S.live) { refreshFiles(); if (isRunning()) renderTime(); } }, 1000);
