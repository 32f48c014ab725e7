// Shared helpers: DOM building (text only, never HTML from data), the JSON API, formatting.
"use strict";
const $ = (sel, el = document) => el.querySelector(sel);
const $$ = (sel, el = document) => Array.from(el.querySelectorAll(sel));

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

async function api(path, opts = {}) {
  const resp = await fetch(path, { credentials: "same-origin", ...opts });
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  if (!resp.ok) throw new Error((body && (body.error || body.detail)) || `HTTP ${resp.status}`);
  return body;
}

function postJSON(path, data) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(data || {}) });
}

function fmt(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  if (typeof n !== "number") return String(n);
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

function secs(s) {
  if (s === null || s === undefined) return "–";
  return s < 60 ? `${s.toFixed(1)}s` : `${Math.floor(s / 60)}m ${Math.round(s % 60)}s`;
}

function badge(state) { return h("span", { class: `badge ${state || ""}`, text: state || "?" }); }

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 ** 2).toFixed(1)} MiB`;
}

function nav() {
  const top = h("header", { class: "top" },
    h("a", { class: "brand", href: "/", text: "searchbox" }),
    h("a", { href: "/", text: "Jobs" }),
    h("a", { href: "/sweeps", text: "Sweeps" }));
  document.body.prepend(top);
  const skip = document.querySelector("body > a.skip");
  if (skip) document.body.prepend(skip);  // the skip link stays the first tab stop, before the navigation
}

// ---- jobs: what each action does (the server says which apply and what they do) ----------
const ACTION_DONE = { pause: "paused", resume: "resumed", cancel: "cancelled" };

// Buttons for a job's actions. `after(job, action)` gets the job as the server returned it.
function actionButtons(job, after, extra = () => ({})) {
  return (job.actions || []).map(a => h("button", {
    class: `small ${a.action === "resume" ? "" : "secondary"}`, "data-action": a.action, type: "button", title: a.does, text: a.label,
    onclick: async ev => {
      if (a.confirm && !window.confirm(a.confirm)) return;
      ev.target.disabled = true;
      try {
        const out = await postJSON(`/api/jobs/${encodeURIComponent(job.id)}/${a.action}`, extra(a));
        after(out.job, a, null);
      } catch (e) { after(null, a, e); }
      finally { ev.target.disabled = false; }
    },
  }));
}

// What happened after an action, in words (the button's own description of what it does).
function actionMessage(job, action) {
  if (!job) return "";
  return `${action.label}: ${action.does}`;
}

// A line saying what an action did; it goes after a while (errors stay until the next action).
let flashTimer = null;
function flash(text, bad = false) {
  const el = $("#flash");
  el.textContent = text;
  el.classList.toggle("error", bad);
  clearTimeout(flashTimer);
  if (!bad) flashTimer = setTimeout(() => { el.textContent = ""; }, 12000);
}

function progressText(p) {
  if (!p) return "building the dataroom index: starting";
  const running = p.started && !p.finished ? Math.max(0, Date.now() / 1000 - p.started) : p.seconds;  // a build waiting writes nothing
  const took = running !== undefined ? ` · ${secs(running)}` : "";
  if (p.stage === "embed" && p.total) return `building index ${fmt(p.done)} / ${fmt(p.total)} chunks (${Math.floor(100 * p.done / p.total)}%)${took}`;
  if (p.stage === "read") return `building index: reading files (${fmt(p.done)} read)${took}`;
  if ((p.stage === "bm25" || p.stage === "ann") && p.total) return `building index: ${p.stage === "bm25" ? "BM25" : "ANN graph"} ${fmt(p.done)} / ${fmt(p.total)} chunks${took}`;
  if (p.finished) return `index ready (${fmt(p.chunks)} chunks)${took}`;
  return `building index: starting (loading the embedder)${took}`;
}

function waitText(job) {
  if (!job || !job.wait) return "";
  const w = job.wait;
  return w.position ? `${w.position} of ${w.of} ${w.where}: ${w.reason}` : cap(w.reason);
}
function cap(s) { return s ? s[0].toUpperCase() + s.slice(1) : ""; }

function shortModel(id) {
  if (!id) return "";
  const base = String(id).split("/").pop();
  return base || String(id);
}

// A grade for people: 1/0 as correct/wrong, fractions with 3 digits, missing as "n/a".
function gradeText(v) {
  if (v === null || v === undefined) return "n/a";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
  return String(v);
}
function scoreClass(v) {
  if (typeof v !== "number") return "score na";
  return v >= 0.999 ? "score good" : v <= 0.001 ? "score bad" : "score mid";
}
