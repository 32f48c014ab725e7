// Run dashboard: everything comes from the run's own artifacts, streamed over SSE (trace lines, tables, meta, job).
"use strict";
nav();
const REF = decodeURIComponent(location.pathname.replace(/^\/runs\//, "")).replace(/\/+$/, "");
const REF_URL = REF.split("/").map(encodeURIComponent).join("/");
const JOB_ID = (REF.match(/^web\/jobs\/([^/]+)$/) || [])[1] || null;
const SWEEP = (REF.match(/^sweeps\/([^/]+)\/runs\/([^/]+)$/) || []).slice(1);
const COLORS = { input: "#2f6fde", output: "#e07b24", cached: "#2aa876", llm: "#2f6fde", tools: "#e07b24", setup: "#9b59b6", other: "#b9bfcc" };
const RESULT_STOPS = ["budget_spent", "first_turn_done", "token_budget_spent", "ceiling_seconds", "context_exhausted"];
const S = { usage: {}, ctx: [], llm: [], llmS: 0, t0: null, t1: null, turns: [], calls: [], meta: null, job: null, traceCalls: [],
            tools: new Map(), msgs: [], exits: new Map(), items: 0, offset: 0, live: true, es: null, question: null, compactedAt: [],
            hits: [], hitIndex: -1, result: null, resultFor: null };
window.sbDash = S; // for scripts and the browser test

// ---- charts ---------------------------------------------------------------------------------
const tokChart = makeChart($("#tokens-chart"), 220, [
  { label: "input", color: COLORS.input }, { label: "output", color: COLORS.output }, { label: "cached", color: COLORS.cached }], "turn");
const ctxChart = makeChart($("#ctx-chart"), 170, [{ label: "context tokens", color: COLORS.output }], "call");
ctxChart.sbYMax = () => (S.meta && S.meta.context_window) || 0; // the y axis ends at the window
const tpsChart = makeChart($("#tps-chart"), 220, [{ label: "output tok/s", color: COLORS.output, digits: 1 },
                                                  { label: "prefill tok/s", color: COLORS.input, digits: 1, dash: [4, 3] }], "call");
window.addEventListener("resize", () => resizeCharts([tokChart, ctxChart, tpsChart]));

// ---- the transcript -------------------------------------------------------------------------
const feed = $("#feed");

function push(el) {
  const stick = $("#follow").checked && S.following;  // only once the run is known to be running (a replay starts at the top)
  feed.append(el);
  S.items += 1;
  $("#feed-count").textContent = `(${fmt(S.items)} entries)`;
  if (stick) feed.scrollTop = feed.scrollHeight;
  return el;
}

function marker(ev, text, bad = false, detail = null) {
  return push(h("div", { class: `item marker${bad ? " fail" : ""}`, "data-at": ev.at },
    h("div", { class: "head", text }), detail ? h("details", {}, h("summary", { text: "details" }), h("pre", { text: detail })) : null));
}

function prettyArgs(name, raw) {
  try {
    const obj = JSON.parse(raw);
    if (name === "bash" && obj && typeof obj.command === "string") return "$ " + obj.command;
    return JSON.stringify(obj, null, 1);
  } catch (e) { return raw; }
}

// A preview that the trace clipped gets a button that fetches its line whole.
function fullButton(at, have, chars, pick) {
  if (!(chars > have)) return null;
  return h("button", { class: "secondary small more", type: "button", text: `show all ${fmt(chars)} characters`, onclick: async ev => {
    try {
      const got = await api(`/api/runs/${REF_URL}/line?at=${at}`);
      const pre = ev.target.previousElementSibling;
      pre.textContent = pick(got.line);
      ev.target.remove();
      if (S.query) highlight(pre, S.query);
    } catch (e) { ev.target.textContent = e.message; }
  } });
}

function tokensPerSecond(u) {
  const t = (u && u.timings) || {};
  const out = t.predicted_ms > 0 && t.predicted_n ? 1000 * t.predicted_n / t.predicted_ms : (u.latency_s > 0 ? (u.completion || 0) / u.latency_s : null);
  const pre = t.prompt_ms > 0 && t.prompt_n ? 1000 * t.prompt_n / t.prompt_ms : null;
  return [out, pre];
}

function inputList(upto) {
  const msgs = S.msgs.filter(m => m.at < upto);
  const compacted = S.compactedAt.filter(at => at < upto).length;
  return [
    compacted ? h("div", { class: "muted small", text: `The context was compacted ${compacted}× before this call: earlier tool outputs were trimmed or turns dropped, so the request held less than the messages listed (see the compaction entries).` }) : null,
    h("ol", { class: "inputs" }, msgs.map(m => h("li", {},
      h("a", { href: "#", text: `${m.role}${m.name ? " " + m.name : ""}`, onclick: e => { e.preventDefault(); jumpTo(m.at); } }),
      h("span", { class: "muted", text: ` · ${m.preview}` })))),
  ];
}

function addAssistant(ev) {
  const u = ev.usage || {};
  const k = S.llm.length + 1;
  const [tps, pre] = tokensPerSecond(u);
  if (ev.usage) {
    const t = S.usage[ev.turn] || (S.usage[ev.turn] = { prompt: 0, completion: 0, cached: 0 });
    t.prompt += u.prompt || 0; t.completion += u.completion || 0; t.cached += u.cached || 0;
    S.ctx.push((u.prompt || 0) + (u.completion || 0));
    S.llmS += u.latency_s || 0;
    S.llm.push({ k, tps, pre });
  }
  const facts = ev.usage ? [`${fmt(u.prompt)} in${u.cached ? ` (${fmt(u.cached)} cached)` : ""}`, `${fmt(u.completion)} out`,
    u.latency_s !== undefined ? secs(u.latency_s) : null, tps ? `${fmt(tps, 1)} tok/s` : null, u.finish_reason || null,
    u.estimated ? "usage estimated" : null].filter(Boolean).join(" · ") : "no usage reported";
  const input = h("details", { class: "input" }, h("summary", { class: "small", text: `input: the ${S.msgs.length} messages before it` }));
  input.addEventListener("toggle", () => { if (input.open && input.children.length === 1) input.append(...inputList(ev.at)); });
  const el = h("div", { class: "item call", "data-at": ev.at },
    h("div", { class: "head" }, h("b", { text: `Model call ${k}` }), ` · turn ${ev.turn} · ${facts}`),
    input,
    ev.reasoning ? h("details", { class: "reasoning" }, h("summary", { class: "small", text: "reasoning" }), h("pre", { text: ev.reasoning })) : null,
    ev.content ? h("pre", { class: "say", text: ev.content }) : null,
    ev.content ? fullButton(ev.at, ev.content.length, ev.chars, line => String((line.message || {}).content || "")) : null,
    (ev.tool_calls || []).map(c => toolBlock(ev.turn, c, ev.at)));
  push(el);
}

function toolBlock(turn, call, at) {
  S.traceCalls.push({ turn, name: call.name, id: call.id });
  const el = h("div", { class: "tool", "data-call": call.id },
    h("div", { class: "tool-head" }, h("b", { text: call.name }), " ", h("span", { class: "status muted small", text: "running…" })),
    h("pre", { class: "args", text: prettyArgs(call.name, call.arguments) }),
    h("details", { open: true, class: "result" }, h("summary", { class: "small", text: "result" }), h("pre", { class: "out muted", text: "…" })));
  S.tools.set(call.id, el);
  return el;
}

function attachOutput(ev) {
  const el = S.tools.get(ev.tool_call_id);
  S.msgs.push({ at: ev.at, role: "tool", name: ev.name, preview: (ev.content || "").slice(0, 80).replace(/\s+/g, " ") });
  if (!el) { marker(ev, `tool ${ev.name}: ${(ev.content || "").slice(0, 200)}`); return; }
  el.dataset.at = ev.at;
  const out = $("pre.out", el);
  out.classList.remove("muted");
  out.textContent = ev.content || "(empty)";
  const more = fullButton(ev.at, (ev.content || "").length, ev.chars, line => String((line.message || {}).content || ""));
  if (more) out.after(more);
  const bad = ev.exit_code ? `exit ${ev.exit_code}` : (/^Error: /.test(ev.content || "") ? "error" : null);
  if (ev.exit_code !== undefined) S.exits.set(ev.tool_call_id, ev.exit_code);
  $(".status", el).textContent = bad || `ok · ${fmt(ev.chars)} chars`;
  $(".status", el).classList.toggle("bad", !!bad);
  el.classList.toggle("fail", !!bad);
}

function markRows() {  // the rows say which calls failed (ok = false) and how long each took
  for (const r of S.calls) {
    const el = S.tools.get(r.call_id);
    if (!el) continue;
    const exit = S.exits.get(r.call_id);
    const bad = !r.ok ? "error" : (exit ? `exit ${exit}` : null);
    $(".status", el).textContent = [bad || "ok", `${fmt(r.output_chars)} chars`, `${fmt(r.duration_ms)} ms`,
      r.setup_ms > 1 ? `+ ${secs(r.setup_ms / 1000)} setup` : null].filter(Boolean).join(" · ");
    $(".status", el).classList.toggle("bad", !!bad);
    el.classList.toggle("fail", !!bad);
  }
}

function onTrace(events) {
  for (const ev of events) {
    if (ev.t) { if (S.t0 === null) S.t0 = ev.t; S.t1 = ev.t; }
    if (ev.type === "message") {
      if (ev.role === "system") {
        S.msgs.push({ at: ev.at, role: "system", preview: "system prompt" });
        push(h("details", { class: "item system", "data-at": ev.at }, h("summary", { text: `System prompt · ${fmt(ev.chars)} characters` }),
          h("pre", { text: ev.content }), fullButton(ev.at, (ev.content || "").length, ev.chars, line => String((line.message || {}).content || ""))));
      } else if (ev.role === "user") {
        S.msgs.push({ at: ev.at, role: "user", preview: (ev.content || "").slice(0, 80) });
        if (S.question === null) {
          S.question = ev.content;
          if (!S.meta) $("#question").textContent = ev.content;
          push(h("div", { class: "item user", "data-at": ev.at }, h("div", { class: "head" }, h("b", { text: "Question" }), ` · turn ${ev.turn}`),
            h("pre", { text: ev.content })));
        } else if (ev.content === "Continue.") {
          push(h("div", { class: "item turn-mark", "data-at": ev.at, text: `End of turn ${ev.turn}: the harness sent “Continue.” (the budget is not spent)` }));
        } else push(h("div", { class: "item user", "data-at": ev.at }, h("div", { class: "head", text: `user · turn ${ev.turn}` }), h("pre", { text: ev.content })));
      } else if (ev.role === "assistant") {
        addAssistant(ev);
        S.msgs.push({ at: ev.at, role: "assistant", preview: (ev.content || (ev.tool_calls || []).map(c => c.name).join(", ")).slice(0, 80) });
      } else if (ev.role === "tool") attachOutput(ev);
    } else if (ev.type === "compaction") {
      S.compactedAt.push(ev.at);
      marker(ev, `context compacted: ~${fmt(ev.estimated_before)} → ~${fmt(ev.estimated_after)} tokens (${fmt(ev.messages)} messages kept)`);
    } else if (ev.type === "resume") marker(ev, `resumed at turn ${ev.turn}`);
    else if (ev.type === "stop") marker(ev, `stopped: ${ev.reason}${ev.detail ? " – " + ev.detail : ""}`, ![...RESULT_STOPS, "paused"].includes(ev.reason));
    else if (ev.type === "malformed") marker(ev, `malformed reply: ${ev.error}`, true, ev.raw);
    else if (ev.type === "error") marker(ev, "harness error", true, ev.traceback);
    else if (ev.type === "index") marker(ev, progressText(ev));
    else if (ev.type === "row_bounded") marker(ev, `a ${ev.table} row was bounded before it was kept (${ev.fields})`);
    else if (ev.type === "skipped") marker(ev, `a trace line of ${bytes(ev.bytes)} was too long to show`, true);
  }
  if (S.query) scheduleSearch();
  scheduleRender();
}

// ---- search ---------------------------------------------------------------------------------
let searchTimer = null;
function scheduleSearch() { clearTimeout(searchTimer); searchTimer = setTimeout(runSearch, 300); }

function highlight(el, q) {
  for (const m of $$("mark", el)) m.replaceWith(document.createTextNode(m.textContent));
  el.normalize();
  if (!q) return;
  const needle = q.toLowerCase();
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const text = node.textContent, low = text.toLowerCase();
    if (!low.includes(needle)) continue;
    const frag = document.createDocumentFragment();
    let i = 0, j;
    while ((j = low.indexOf(needle, i)) >= 0) {
      frag.append(text.slice(i, j), h("mark", { text: text.slice(j, j + q.length) }));
      i = j + q.length;
    }
    frag.append(text.slice(i));
    node.replaceWith(frag);
  }
}

async function runSearch() {
  const q = $("#search").value.trim();
  S.query = q;
  for (const el of $$("#feed .hit")) { el.classList.remove("hit"); highlight(el, ""); }
  feed.classList.toggle("only-hits", !!q && $("#only-hits").checked);
  if (!q) { S.hits = []; $("#search-count").textContent = ""; return; }
  let found;
  try { found = await api(`/api/runs/${REF_URL}/search?q=${encodeURIComponent(q)}`); } catch (e) { $("#search-count").textContent = e.message; return; }
  if ($("#search").value.trim() !== q) return;  // typed on meanwhile
  const items = [];
  for (const at of found.hits) {
    const el = feed.querySelector(`[data-at="${at}"]`);
    const item = el && (el.closest(".item") || el);
    if (item && !items.includes(item)) items.push(item);
  }
  for (const item of items) { item.classList.add("hit"); highlight(item, q); if (item.tagName === "DETAILS") item.open = true; }
  S.hits = items;
  $("#search-count").textContent = `${found.hits.length} match${found.hits.length === 1 ? "" : "es"}${found.truncated ? " (first ones)" : ""}`;
  if (S.hitIndex >= items.length || S.hitIndex < 0) S.hitIndex = -1;
}

function step(dir) {
  if (!S.hits.length) return;
  S.hitIndex = (S.hitIndex + dir + S.hits.length) % S.hits.length;
  for (const el of S.hits) el.classList.remove("current");
  const el = S.hits[S.hitIndex];
  el.classList.add("current");
  $("#follow").checked = false;
  feed.scrollTop = el.offsetTop - feed.offsetTop - 20;
  $("#search-count").textContent = `${S.hitIndex + 1} of ${S.hits.length} entries`;
}

function jumpTo(at) {
  const el = feed.querySelector(`[data-at="${at}"]`);
  if (!el) return;
  $("#follow").checked = false;
  const item = el.closest(".item") || el;
  feed.scrollTop = item.offsetTop - feed.offsetTop - 20;
  item.classList.add("flash-item");
  setTimeout(() => item.classList.remove("flash-item"), 1200);
}

$("#search").addEventListener("input", scheduleSearch);
$("#search").addEventListener("keydown", e => { if (e.key === "Enter") { e.preventDefault(); step(e.shiftKey ? -1 : 1); } });
$("#search-next").addEventListener("click", () => step(1));
$("#search-prev").addEventListener("click", () => step(-1));
$("#only-hits").addEventListener("change", () => feed.classList.toggle("only-hits", !!S.query && $("#only-hits").checked));

// ---- derived views --------------------------------------------------------------------------
function finished() { return !!(S.meta && S.meta.status === "complete") && !isRunning(); }
function isRunning() { return S.job ? ["running", "preparing"].includes(S.job.state) : !(S.meta && S.meta.status === "complete"); }
function started() { return !!(S.meta || S.items); }

function tokenSeries() {
  const byTurn = new Map();
  for (const r of S.turns) byTurn.set(r.turn, { prompt: r.prompt_tokens, completion: r.completion_tokens, cached: r.cached_tokens });
  const done = S.turns.length ? Math.max(...S.turns.map(r => r.turn)) : 0;
  for (const [t, u] of Object.entries(S.usage)) if (+t > done) byTurn.set(+t, u); // the turn in progress, from the trace
  const xs = [...byTurn.keys()].sort((a, b) => a - b);
  return [xs, xs.map(t => byTurn.get(t).prompt), xs.map(t => byTurn.get(t).completion), xs.map(t => byTurn.get(t).cached)];
}

function errorCounts() {
  const refused = S.calls.filter(r => !r.ok).length;
  const exits = [...S.exits.values()].filter(code => code !== 0).length;
  return { refused, exits, total: refused + exits };
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
  const errs = errorCounts();
  $("#tool-errors").textContent = errs.total ? `(${errs.total} error${errs.total > 1 ? "s" : ""})` : "";
  if (!counts.size) {
    el.textContent = finished() || (S.meta && S.meta.status === "complete") ? "none: the run made no tool calls" : (started() ? "none yet" : "the run has not started");
    el.classList.add("muted");
    return;
  }
  el.classList.remove("muted");
  const max = Math.max(...counts.values());
  const row = (name, n, sub) => h("div", { class: "dist-row", "data-tool": name, title: `${name}: ${n} call${n > 1 ? "s" : ""}` },
    h("div", { class: `name${sub ? " sub" : ""}`, text: name }),
    h("div", { class: "bar" }, h("span", { style: `width:${(100 * n / max).toFixed(1)}%;background:${sub ? COLORS.other : COLORS.llm}` })),
    h("div", { class: "num", text: n }));
  const rows = [];
  for (const [name, n] of [...counts.entries()].sort((a, b) => b[1] - a[1])) {
    rows.push(row(name, n, false));
    if (name === "bash") for (const [p, k] of [...programs.entries()].sort((a, b) => b[1] - a[1])) rows.push(row(`bash: ${p}`, k, true));
  }
  el.replaceChildren(...rows);
}

function renderTime() {
  const m = S.meta;
  const prep = (S.job && S.job.prepare && S.job.prepare.seconds) || 0;  // the web job's index build, before its run
  let llm, tools, setup, elapsed;
  if (m && m.status === "complete") { llm = m.llm_s || 0; tools = m.tool_s || 0; setup = m.setup_s || 0; elapsed = m.elapsed_s || 0; }
  else {
    llm = S.llmS; tools = S.turns.reduce((a, r) => a + (r.tool_ms || 0), 0) / 1000; setup = S.turns.reduce((a, r) => a + (r.setup_ms || 0), 0) / 1000;
    elapsed = S.t0 !== null ? (S.live && isRunning() ? Date.now() / 1000 : S.t1) - S.t0 : 0;
  }
  setup += prep; elapsed += prep;
  const other = Math.max(0, elapsed - llm - tools - setup), total = Math.max(elapsed, llm + tools + setup, 1e-9);
  const parts = [["LLM", llm, COLORS.llm, "waiting for the model"], ["tools", tools, COLORS.tools, "running tool calls (their own time)"],
                 ["setup", setup, COLORS.setup, "building indexes, loading the embedder or reranker"], ["other", other, COLORS.other, "the harness itself"]];
  $("#time-bar").replaceChildren(...parts.map(([n, v, c, what]) => h("span", { title: `${n}: ${secs(v)} (${(100 * v / total).toFixed(0)}%): ${what}`,
                                                                           style: `width:${(100 * v / total).toFixed(2)}%;background:${c}` })));
  $("#time-legend").replaceChildren(...parts.map(([n, v, c, what]) => h("span", { title: what }, h("span", { class: "swatch", style: `background:${c}` }), `${n} ${secs(v)}`)),
    h("span", { class: "muted", text: `total ${secs(elapsed)}` }));
}

function budgetInfo() {
  const m = S.meta || {};
  const budget = (S.job && S.job.budget) || m.budget || 0;
  const unit = m.budget_unit || (S.job && S.job.budget_unit) || "turns";
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

function rate(values) {
  const xs = values.filter(v => v > 0);
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

function renderSummary() {
  const m = S.meta || {};
  const t = m.tokens || {};
  const served = (m.served || {}).model_id;
  const errs = errorCounts();
  const nCalls = m.status === "complete" ? m.tool_calls : S.traceCalls.length;
  const outRate = rate(S.llm.map(c => c.tps)), server = m.server || {};
  const kv = [
    ["status", S.job ? `${S.job.state}${S.job.pausing ? ` (${S.job.pausing} requested)` : ""}` : (m.status || "–")],
    ["stop reason", m.status === "complete" ? `${m.stop_reason}${m.stop_detail ? " – " + m.stop_detail : ""}` : "–"],
    ["turns", m.status === "complete" ? m.turns : S.turns.length],
    ["tool calls", nCalls ? `${nCalls} · ${errs.total ? `${errs.total} error${errs.total > 1 ? "s" : ""} (${errs.refused} refused or failed, ${errs.exits} bash non-zero exit${errs.exits === 1 ? "" : "s"})` : "no errors"}` : "0"],
    ["tokens", m.status === "complete" ? `${fmt(t.total)} total · ${fmt(t.prompt)} in · ${fmt(t.completion)} out · ${fmt(t.cached)} cached` : "–"],
    ["tokens/s", [outRate ? `${fmt(outRate, 1)} out per call (mean)` : null, server.decode_tokens_per_s ? `server: decode ${fmt(server.decode_tokens_per_s, 1)}, prefill ${fmt(server.prefill_tokens_per_s, 1)}` : null].filter(Boolean).join(" · ") || "–"],
    ["model", [m.model, served && shortModel(served) !== m.model ? `served as ${shortModel(served)}` : null].filter(Boolean).join(" · ") || (S.job && S.job.model) || "–", served || ""],
    ["protocol", m.protocol || "–"],
    ["context window", m.context_window ? `${fmt(m.context_window)} tokens` : "–"],
    ["tools", (m.tools || (S.job && S.job.tool_names) || []).join(", ") || "–"],
    ["dataroom", m.dataroom ? `${m.dataroom.files} files, ${bytes(m.dataroom.bytes || 0)}` : ((S.job && S.job.dataroom) || "–")],
    ["resumes", m.resumes || 0], ["answer", m.answer_source || "–"], ["run id", m.run_id || "–"],
  ];
  if (m.axes && Object.keys(m.axes).length) kv.splice(1, 0, ["axes", Object.entries(m.axes).map(([k, v]) => `${k}=${v}`).join(" · ")]);
  $("#summary").replaceChildren(...kv.flatMap(([k, v, title]) => [h("dt", { text: k }), h("dd", { text: v ?? "–", title: title || null, "data-k": k })]));
  const b = budgetInfo();
  $("#budget-bar").style.width = `${b.budget ? Math.min(100, 100 * b.used / b.budget) : 0}%`;
  $("#budget-text").textContent = b.text;
  const win = m.context_window || 0, last = S.ctx.length ? S.ctx[S.ctx.length - 1] : 0;
  $("#ctx-bar").style.width = `${win ? Math.min(100, 100 * last / win) : 0}%`;
  $("#ctx-text").textContent = win ? `${fmt(last)} / ${fmt(win)} tokens at the last call (${(100 * last / win).toFixed(1)}%)`
    : (last ? `${fmt(last)} tokens at the last call` : (m.status ? "no call yet" : "–"));
  $("#tps-note").textContent = S.llm.some(c => c.pre) ? "(llama.cpp timings)" : (S.llm.length ? "(output tokens / call latency)" : "");
  $("#answer-source").textContent = m.answer_source && m.answer_source !== "none" ? `(${m.answer_source === "backstop" ? "written by the backstop from the last reply" : "written by the model"})` : "";
}

function renderStatus() {
  const j = S.job;
  const st = j ? j.state : (S.meta ? S.meta.status : "…");
  $("#status").replaceChildren(badge(st));
  $("#wait").textContent = j ? (j.error && j.state === "failed" ? "" : waitText(j)) : "";
  const crumbs = SWEEP.length ? [h("a", { href: "/sweeps", text: "Sweeps" }), " / ", h("a", { href: `/sweeps/${encodeURIComponent(SWEEP[0])}`, text: SWEEP[0] }), ` / run ${SWEEP[1]}`]
    : JOB_ID ? [h("a", { href: "/", text: "Jobs" }), ` / job ${JOB_ID}`] : [REF];
  $("#crumbs").replaceChildren(...crumbs);
  if (j && !S.meta && !S.question) $("#question").textContent = j.question;
  const prep = j && j.state === "preparing";
  $("#progress").hidden = !prep;
  if (prep) {
    const p = j.progress;
    $("#progress-bar").style.width = p && p.stage === "embed" && p.total ? `${(100 * p.done / p.total).toFixed(1)}%` : "2%";
    $("#progress-text").textContent = progressText(p);
  }
  const waiting = j && !started();  // nothing ran yet: say what it waits for instead of empty charts
  $("#not-started").hidden = !waiting;
  for (const id of ["#result-row", "#charts", "#transcript-card"]) $(id).hidden = !!waiting;
  if (waiting) {
    const why = j.state === "held" ? "Held before it started: nothing has run yet. Resume puts it back in the queue."
      : j.state === "cancelled" ? "Cancelled before it started: nothing ran."
      : j.state === "failed" ? `Failed before its run began: ${j.error || "no reason recorded"}`
      : j.state === "preparing" ? "Preparing: its dataroom's index is being built outside the model slots; the run starts once it is ready and a slot is free."
      : `Not started yet. ${waitText(j)}`;
    $("#not-started").replaceChildren(h("h2", { text: "No run yet" }), h("p", { text: why }),
      h("p", { class: "muted small", text: `Budget ${j.budget} ${j.budget_unit || "turns"} · tools ${(j.tool_names || []).join(", ") || "default"}${j.dataroom ? " · dataroom " + j.dataroom : ""}` }));
  }
  if (!JOB_ID) return;
  $("#controls").hidden = false;
  if (j && j.error) $("#job-error").textContent = j.error;
  $("#log-card").hidden = false;
  const key = j ? JSON.stringify([j.id, j.actions]) : "";
  if (key === S.actionsKey) return;  // rebuilt only when they change (never under a click)
  S.actionsKey = key;
  $("#actions").replaceChildren(...actionButtons(j || {}, (job, action, err) => {
    if (err) { $("#job-error").textContent = err.message; return; }
    $("#job-error").textContent = "";
    flash(actionMessage(job, action));
    S.job = job; scheduleRender();
    if (!S.live) connect();
  }, a => a.label === "Continue" || (a.action === "resume" && $("#resume-budget").value) ? { budget: $("#resume-budget").value } : {}));
  $("#budget-field").hidden = !(j && (j.actions || []).some(a => a.action === "resume"));
  if (j) $("#resume-budget").placeholder = String(j.state === "done" ? (j.budget || 0) + 1 : j.budget || "");
}

let timer = null;
function scheduleRender() { if (!timer) timer = setTimeout(render, 150); }
function render() {
  timer = null;
  const toks = tokenSeries();
  tokChart.setData(toks);
  $("#tokens-chart").dataset.turns = toks[0].length;
  ctxChart.setData([S.ctx.map((_, i) => i + 1), S.ctx]);
  tpsChart.setData([S.llm.map(c => c.k), S.llm.map(c => c.tps), S.llm.map(c => c.pre)]);
  $("#tps-chart").dataset.calls = S.llm.length;
  for (const c of [tokChart, ctxChart, tpsChart]) showLast(c);
  renderDist(); renderTime(); renderSummary(); renderStatus(); markRows();
  if (!S.following && S.job !== undefined && (S.meta || S.job) && isRunning() && S.live) {  // live: follow the newest entries
    S.following = true;
    if ($("#follow").checked) feed.scrollTop = feed.scrollHeight;
  }
  if (S.meta && S.meta.status === "complete" && S.resultFor !== S.meta.finished_at) loadResult();
  else if (!S.result) renderGoldOnly();
}

// ---- gold, grades and evidence --------------------------------------------------------------
const GRADE_INFO = {
  correct: "primary grade: the answer asserts the gold (or an alias) and nothing contradicting it",
  contains: "lenient grade: the gold's tokens occur somewhere in the answer, whatever else it says",
  exact_match: "the answer line's tokens are exactly a gold's", f1: "best token F1 of the answer line against a gold",
  judge: "an LLM judge's verdict (when one is configured)",
  evidence_recall: "gold files whose answer-bearing passage reached the agent in a tool output",
};

function goldBlock(gold) {
  if (!gold || !gold.answer) return h("div", { class: "muted small", text: "No gold answer recorded for this run (submitted jobs have none)." });
  return h("div", { class: "gold" }, h("div", { class: "small muted", text: "gold answer" }), h("div", { class: "gold-answer", text: gold.answer }),
    gold.aliases && gold.aliases.length ? h("div", { class: "small muted", text: `also accepted: ${gold.aliases.join(" · ")}` }) : null);
}

function renderGoldOnly() {
  const gold = S.meta && S.meta.gold;
  if (!gold) return;
  $("#grades").classList.remove("muted");
  $("#grades").replaceChildren(goldBlock(gold), h("div", { class: "muted small", text: "Grades come when the run is finished and graded." }));
}

async function loadResult() {
  S.resultFor = S.meta.finished_at;
  try { S.result = await api(`/api/runs/${REF_URL}/result`); } catch (e) { return; }
  renderResult();
}

function chip(name, v, big = false) {
  return h("div", { class: `grade${big ? " primary" : ""}`, title: GRADE_INFO[name] || name, "data-grade": name },
    h("div", { class: "grade-name", text: name.replace("_", " ") }), h("div", { class: scoreClass(v), text: gradeText(v) }));
}

function renderResult() {
  const r = S.result, g = r.grades || {};
  const el = $("#grades");
  el.classList.remove("muted");
  const parts = [goldBlock(r.gold)];
  if (Object.keys(g).length) {
    parts.push(h("div", { class: "grades" }, chip("correct", g.correct, true), chip("contains", g.contains), chip("evidence_recall", g.evidence_recall),
      chip("exact_match", g.exact_match), chip("f1", g.f1), g.judge !== null && g.judge !== undefined ? chip("judge", g.judge) : null));
    if (r.verdict) {
      const v = r.verdict;
      const lists = [["asserted", v.asserted], ["denied", v.denied], ["contradicting", v.contradicting], ["offered only", v.offered]]
        .filter(([, xs]) => xs && xs.length).map(([k, xs]) => `${k}: ${xs.join(" · ")}`);
      parts.push(h("div", { class: "small verdict" }, h("b", { text: "why correct says so: " }), v.reason || "–",
        lists.length ? h("div", { class: "muted", text: lists.join("; ") }) : null,
        v.claim ? h("div", { class: "muted", text: `graded claim: “${v.claim}”` }) : null));
    }
  } else if (r.gold) parts.push(h("div", { class: "muted small", text: "Not graded yet (python -m searchbox.grade, or the sweep grades at its end)." }));
  const ev = r.evidence;
  if (ev && ev.files) {
    parts.push(h("h3", { text: "Evidence" }),
      h("div", { class: "small muted", text: `${ev.recall === null ? "not measurable" : `recall ${gradeText(ev.recall)}`}` +
        (ev.first_turn ? ` · first reached the agent in turn ${ev.first_turn} through ${ev.tools.join(", ")}` : "") }),
      h("ul", { class: "evidence" }, ev.files.map(f => h("li", { class: f.received ? "good" : f.measured ? "bad" : "na" },
        h("span", { class: "mark", text: f.received ? "✓" : f.measured ? "✗" : "–" }), " ",
        h("a", { href: "#", text: f.path, onclick: e => { e.preventDefault(); viewFile(`work/dataroom/${f.path}`); } }),
        h("span", { class: "muted", text: f.received ? " its answer-bearing passage reached the agent" : f.measured ? " never shown to the agent" : " holds no occurrence of the gold (not measured)" })))));
  } else if (ev && ev.error) parts.push(h("div", { class: "muted small", text: `evidence: ${ev.error}` }));
  el.replaceChildren(...parts);
}

// ---- files and answer -----------------------------------------------------------------------
let lastFiles = 0;
async function refreshFiles(force = false) {
  if (!force && Date.now() - lastFiles < 2500) return;
  lastFiles = Date.now();
  try {
    renderTree(await api(`/api/runs/${REF_URL}/files`));
  } catch (e) { $("#files").textContent = e.message; }
  try {
    const ans = await api(`/api/runs/${REF_URL}/answer`);
    const el = $("#answer");
    if (ans.present) { el.classList.remove("muted"); el.innerHTML = ans.html; } // server-rendered, every text escaped
    else if (S.meta && S.meta.status === "complete") el.textContent = "The run left no ANSWER.md.";
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
      return h("details", { "data-path": path, open: open.has(path) || path === "work" }, h("summary", { text: name + "/" }), build(child, path + "/"));
    }),
    ...node.files.map(([name, path, size]) => h("div", { class: "file", "data-path": path, tabindex: "0", role: "button", onclick: () => viewFile(path),
      onkeydown: ev => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); viewFile(path); } } }, name, h("span", { text: bytes(size) }))),
  ];
  const el = $("#files");
  el.classList.remove("muted");
  const items = build(root, "");
  el.replaceChildren(...(items.length ? items : [h("span", { class: "muted", text: "no files yet" })]),
    ...(tree.truncated ? [h("div", { class: "muted small", text: "(list truncated)" })] : []));
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
  if (window.innerWidth < 800) box.scrollIntoView({ block: "start" });
}

// ---- the process log (web jobs) -------------------------------------------------------------
async function refreshLog() {
  if (!JOB_ID || !$("#log-details").open) return;
  try {
    const log = await api(`/api/jobs/${encodeURIComponent(JOB_ID)}/log`);
    const pre = $("#log");
    const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 10;
    pre.textContent = (log.truncated ? "… (earlier lines left out)\n" : "") + (log.text || "(empty)");
    $("#log-size").textContent = `(${bytes(log.bytes)})`;
    if (stick) pre.scrollTop = pre.scrollHeight;
  } catch (e) { $("#log").textContent = e.message; }
}
$("#log-details").addEventListener("toggle", refreshLog);

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
    $("#stream").textContent = S.job ? `· ${S.job.state}: nothing more to stream` : "· finished (replayed from its logs)";
    scheduleRender(); refreshFiles(true); refreshLog();
  });
}

connect();
refreshFiles(true);
setInterval(() => { if (S.live) { refreshFiles(); if (isRunning()) renderTime(); refreshLog(); } }, 1500);
