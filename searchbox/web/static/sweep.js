// One sweep: report figures (rendered on demand), the runs table (sortable, filtered by axis), links into run dashboards.
"use strict";
nav();
const NAME = decodeURIComponent(location.pathname.split("/")[2]);
const T = { data: null, sort: null, desc: false, filters: {} };

function renderFigures(names) {
  const el = $("#figures");
  const pngs = names.filter(n => n.endsWith(".png"));
  if (!pngs.length) return;
  el.replaceChildren(...pngs.map(n => h("figure", {},
    h("a", { href: `/sweeps/${encodeURIComponent(NAME)}/figures/${encodeURIComponent(n.replace(/\.png$/, ".svg"))}`, target: "_blank" },
      h("img", { src: `/sweeps/${encodeURIComponent(NAME)}/figures/${encodeURIComponent(n)}?v=${Date.now()}`, alt: n })),
    h("figcaption", { class: "muted small", text: n.replace(/\.png$/, "") }))));
}

function cell(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function renderTable() {
  const d = T.data;
  const cols = $("#all-cols").checked ? d.columns.filter(c => !c.startsWith("_")) : d.shown;
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
  $("#runs thead").replaceChildren(h("tr", {}, cols.map(c => h("th", {
    class: `sortable${T.sort === c ? (T.desc ? " sorted-desc" : " sorted-asc") : ""}`, "data-col": c, text: c,
    onclick: () => { if (T.sort === c) T.desc = !T.desc; else { T.sort = c; T.desc = false; } renderTable(); } }))));
  $("#runs tbody").replaceChildren(...rows.map(r => h("tr", {}, cols.map(c => h("td", {},
    c === "run_id" && r._ref ? h("a", { href: `/runs/${r._ref.split("/").map(encodeURIComponent).join("/")}`, text: cell(r[c]) }) : cell(r[c]))))));
  $("#row-count").textContent = `(${rows.length} of ${d.total_rows})`;
}

function renderFilters() {
  const el = $("#filters");
  el.replaceChildren(...T.data.axes.map(axis => {
    const values = [...new Set(T.data.rows.map(r => cell(r[axis])))].sort();
    const sel = h("select", { "data-axis": axis, onchange: e => { T.filters[axis] = e.target.value; renderTable(); } },
      h("option", { value: "", text: "all" }), values.map(v => h("option", { value: v, text: v })));
    return h("span", {}, h("label", { text: axis }), sel);
  }));
}

async function load() {
  T.data = await api(`/api/sweeps/${encodeURIComponent(NAME)}`);
  $("#name").textContent = NAME;
  renderFigures(T.data.figures);
  if (T.data.summary_html) { $("#summary").classList.remove("muted"); $("#summary").innerHTML = T.data.summary_html; } // escaped server-side
  renderFilters();
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
