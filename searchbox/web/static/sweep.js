// One sweep: the report's figures (each once), the runs table (scores first, sticky run id, filters on what varies),
// the columns every run shares, the summary, and two runs side by side.
"use strict";
nav();
const NAME = decodeURIComponent(location.pathname.split("/")[2]);
const T = { data: null, sort: null, desc: false, filters: {}, picked: [] };
const SCORE_TIPS = { correct: "primary grade", contains: "lenient grade", evidence_recall: "gold passage reached the agent" };

function figUrl(n) { return `/sweeps/${encodeURIComponent(NAME)}/figures/${encodeURIComponent(n)}`; }

function renderFigures(figs) {
  const el = $("#figures");
  $("#fig-note").textContent = figs.length ? `(${figs.length}, from ${T.data.report.folder})` : "";
  if (!figs.length) return;
  const stamp = Date.now();
  el.replaceChildren(...figs.map(f => h("figure", { "data-figure": f.name },
    h("figcaption", { text: f.title }),
    h("a", { href: figUrl(f.svg || f.src), target: "_blank", title: "open the figure on its own" },
      h("img", { src: `${figUrl(f.src)}?v=${stamp}`, alt: f.src, loading: "lazy" })))));
}

function cell(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function runUrl(r) { return `/runs/${r._ref.split("/").map(encodeURIComponent).join("/")}`; }

function td(c, r) {
  const v = r[c];
  if (c === "run_id") {
    const box = h("input", { type: "checkbox", class: "pick", title: "pick for side-by-side comparison", checked: T.picked.includes(r._ref),
      disabled: !r._ref, onchange: e => pick(r._ref, e.target.checked) });
    return h("td", { class: "sticky" }, box, " ", r._ref ? h("a", { href: runUrl(r), text: cell(v) }) : cell(v));
  }
  if (T.data.scores.includes(c)) return h("td", { class: scoreClass(v), title: c }, gradeText(v));
  const text = cell(v);
  if (text.length > 60) return h("td", { title: text }, text.slice(0, 58) + "…");
  return h("td", {}, text);
}

function rowsNow() {
  const d = T.data;
  let rows = d.rows.filter(r => Object.entries(T.filters).every(([k, v]) => v === "" || cell(r[k]) === v));
  if (T.sort) {
    const k = T.sort, dir = T.desc ? -1 : 1;
    rows = [...rows].sort((a, b) => {
      const x = a[k], y = b[k];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * dir;
    });
  }
  return rows;
}

function renderTable() {
  const d = T.data;
  const cols = $("#all-cols").checked ? d.columns : d.shown;
  const rows = rowsNow();
  // Each header sorts through a button inside it, so the keyboard reaches it (Tab, then Enter or Space).
  $("#runs thead").replaceChildren(h("tr", {}, cols.map((c, i) => h("th", {
    class: `sortable${i === 0 ? " sticky" : ""}${d.scores.includes(c) ? " score-col" : ""}${T.sort === c ? (T.desc ? " sorted-desc" : " sorted-asc") : ""}`,
    "data-col": c, title: SCORE_TIPS[c] || null, "aria-sort": T.sort === c ? (T.desc ? "descending" : "ascending") : "none",
    onclick: () => { if (T.sort === c) T.desc = !T.desc; else { T.sort = c; T.desc = d.scores.includes(c); } renderTable();
                     const again = $(`#runs th[data-col="${CSS.escape(c)}"] button`); if (again) again.focus(); } },
    h("button", { type: "button", class: "th-sort", text: c, "aria-label": `sort by ${c}` })))));
  $("#runs tbody").replaceChildren(...rows.map(r => h("tr", { "data-run": r.run_id }, cols.map(c => td(c, r)))));
  const means = d.scores.filter(c => cols.includes(c)).map(c => {
    const xs = rows.map(r => r[c]).filter(v => typeof v === "number");
    return xs.length ? `${c} ${(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3)}` : null;
  }).filter(Boolean);
  $("#row-count").textContent = `(${rows.length} of ${d.total_rows}${means.length ? " · mean " + means.join(" · ") : ""})`;
}

function renderFilters() {
  const el = $("#filters");
  const d = T.data;
  el.replaceChildren(...d.filters.map(col => {
    const values = [...new Set(d.rows.map(r => cell(r[col])))].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
    const sel = h("select", { "data-axis": col, onchange: e => { T.filters[col] = e.target.value; renderTable(); } },
      h("option", { value: "", text: "all" }), values.map(v => h("option", { value: v, text: v === "" ? "(none)" : v })));
    return h("span", { class: "filter" }, h("label", { text: col }), sel);
  }));
  if (!d.filters.length) el.replaceChildren(h("span", { class: "muted small", text: "Every run has the same axes: nothing to filter." }));
}

function renderConstants() {
  const c = T.data.constants, keys = Object.keys(c), derived = Object.entries(T.data.derived || {});
  $("#constants summary").textContent = `The same in every run: ${keys.length} columns` +
    (derived.length ? ` · decided by the conditions: ${derived.length}` : "");
  $("#constants dl").replaceChildren(...keys.flatMap(k => [h("dt", { text: k }), h("dd", { text: cell(c[k]) || "–" })]),
    ...derived.flatMap(([k, by]) => [h("dt", { text: k }), h("dd", { class: "muted", text: `one value per ${by}` })]));
  $("#constants").hidden = !keys.length && !derived.length;
}

function pick(ref, on) {
  T.picked = T.picked.filter(r => r !== ref);
  if (on) T.picked.push(ref);
  if (T.picked.length > 2) T.picked = T.picked.slice(-2);
  $("#compare").disabled = T.picked.length !== 2;
  $("#compare").textContent = T.picked.length === 2 ? "Compare 2 runs" : `Compare 2 runs (${T.picked.length} picked)`;
  for (const box of $$("#runs input.pick")) box.checked = false;
  for (const tr of $$("#runs tbody tr")) {
    const r = T.data.rows.find(x => x.run_id === tr.dataset.run);
    const box = $("input.pick", tr);
    if (box && r) box.checked = T.picked.includes(r._ref);
  }
}

$("#compare").addEventListener("click", () => {
  if (T.picked.length === 2) location.href = `/compare?a=${encodeURIComponent(T.picked[0])}&b=${encodeURIComponent(T.picked[1])}`;
});

async function load() {
  T.data = await api(`/api/sweeps/${encodeURIComponent(NAME)}`);
  const d = T.data;
  $("#name").textContent = NAME;
  document.title = `searchbox: ${NAME}`;
  const short = v => { const t = cell(v); return t.length > 32 ? t.slice(0, 30) + "…" : t; };
  const fixed = d.axes.filter(a => !d.varying_axes.includes(a) && a in d.constants).map(a => `${a}=${short(d.constants[a])}`);
  $("#sweep-facts").textContent = [`${d.total_rows} runs`, `conditions: ${d.varying_axes.join(" × ") || "one"}`,
    fixed.length ? `fixed: ${fixed.join(", ")}` : null, `scores: ${d.scores.join(", ") || "none yet"}`].filter(Boolean).join(" · ");
  $("#render").textContent = d.figures.length ? "Render the figures again" : "Render figures";
  $("#render").title = `python -m searchbox.report into OUTPUTS/${d.report.render_to}`;
  renderFigures(d.figures);
  if (d.summary_html) {
    $("#summary").classList.remove("muted");
    $("#summary").innerHTML = d.summary_html; // escaped server-side
    $("#summary-note").textContent = `(${d.report.folder}/summary.md; its figures are above)`;
  }
  renderFilters();
  renderConstants();
  renderTable();
}

$("#all-cols").addEventListener("change", renderTable);
$("#render").addEventListener("click", async () => {
  $("#render").disabled = true;
  $("#render-status").textContent = "rendering (searchbox.report)…";
  try {
    await api(`/api/sweeps/${encodeURIComponent(NAME)}/report`, { method: "POST" });
    $("#render-status").textContent = "done";
    await load();
  } catch (e) { $("#render-status").textContent = e.message; }
  finally { $("#render").disabled = false; }
});
load().catch(e => { $("#name").textContent = e.message; });
