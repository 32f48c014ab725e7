// Two runs side by side: answers, gold and grades, the facts that differ, and what each did turn by turn.
"use strict";
nav();
const P = new URLSearchParams(location.search);
const REFS = [P.get("a"), P.get("b")];
const enc = ref => ref.split("/").map(encodeURIComponent).join("/");

async function loadRun(ref) {
  const [snap, result, answer] = await Promise.all([api(`/api/runs/${enc(ref)}/snapshot`), api(`/api/runs/${enc(ref)}/result`),
                                                    api(`/api/runs/${enc(ref)}/answer`)]);
  return { ref, meta: snap.meta || {}, turns: snap.turns, calls: snap.calls, result, answer };
}

function facts(r) {
  const m = r.meta, t = m.tokens || {}, g = (r.result && r.result.grades) || {};
  const rows = [["question", m.question], ["run id", m.run_id], ...Object.entries(m.axes || {}).map(([k, v]) => [k, v]),
    ["model", m.model], ["served as", shortModel((m.served || {}).model_id)], ["protocol", m.protocol], ["tools enabled", (m.tools || []).join(", ")],
    ["correct", gradeText(g.correct)], ["contains", gradeText(g.contains)], ["evidence recall", gradeText(g.evidence_recall)],
    ["exact match", gradeText(g.exact_match)], ["f1", gradeText(g.f1)],
    ["stop reason", m.stop_reason], ["turns", m.turns], ["tool calls", m.tool_calls], ["tool errors", m.tool_errors],
    ["tokens total", fmt(t.total)], ["tokens in", fmt(t.prompt)], ["tokens out", fmt(t.completion)], ["tokens cached", fmt(t.cached)],
    ["elapsed", secs(m.elapsed_s)], ["LLM time", secs(m.llm_s)], ["tool time", secs(m.tool_s)], ["setup time", secs(m.setup_s)],
    ["answer source", m.answer_source]];
  return rows.map(([k, v]) => [k, v === undefined || v === null || v === "" ? "–" : String(v)]);
}

function side(r, label) {
  const g = (r.result && r.result.grades) || {};
  const gold = r.result && r.result.gold;
  const ans = h("div", { class: "answer" });
  if (r.answer.present) ans.innerHTML = r.answer.html; // server-rendered, every text escaped
  else ans.append(h("span", { class: "muted", text: "no ANSWER.md" }));
  return h("section", { class: "card", "data-side": label },
    h("h2", {}, `${label}: `, h("a", { href: `/runs/${enc(r.ref)}`, text: r.meta.run_id || r.ref })),
    h("div", { class: "muted small", text: Object.entries(r.meta.axes || {}).map(([k, v]) => `${k}=${v}`).join(" · ") }),
    h("div", { class: "grades" }, ["correct", "contains", "evidence_recall"].map(n => h("div", { class: `grade${n === "correct" ? " primary" : ""}` },
      h("div", { class: "grade-name", text: n.replace("_", " ") }), h("div", { class: scoreClass(g[n]), text: gradeText(g[n]) })))),
    gold && gold.answer ? h("div", { class: "small" }, h("span", { class: "muted", text: "gold: " }), gold.answer) : null,
    h("h3", { text: "Answer" }), ans);
}

function perTurn(r) {
  const out = new Map();
  for (const c of r.calls) {
    const xs = out.get(c.turn) || [];
    xs.push(c.ok ? c.tool : `${c.tool} (error)`);
    out.set(c.turn, xs);
  }
  return out;
}

(async function () {
  const [a, b] = await Promise.all(REFS.map(loadRun));
  const sweep = (REFS[0].match(/^sweeps\/([^/]+)\//) || [])[1];
  $("#crumbs").replaceChildren(...(sweep ? [h("a", { href: "/sweeps", text: "Sweeps" }), " / ", h("a", { href: `/sweeps/${encodeURIComponent(sweep)}`, text: sweep }), " / compare"]
                                         : [h("a", { href: "/", text: "Jobs" }), " / compare"]));
  $("#sides").replaceChildren(side(a, "A"), side(b, "B"));
  const fa = facts(a), fb = new Map(facts(b));
  $("#diff thead").replaceChildren(h("tr", {}, h("th", { text: "" }), h("th", { text: "A" }), h("th", { text: "B" })));
  $("#diff tbody").replaceChildren(...fa.map(([k, v]) => {
    const w = fb.get(k) ?? "–";
    return h("tr", { class: v !== w ? "differs" : "" }, h("th", { text: k }), h("td", { text: v }), h("td", { text: w }));
  }));
  const ta = perTurn(a), tb = perTurn(b);
  const turns = [...new Set([...ta.keys(), ...tb.keys(), ...a.turns.map(t => t.turn), ...b.turns.map(t => t.turn)])].sort((x, y) => x - y);
  const tokens = (r, t) => { const row = r.turns.find(x => x.turn === t); return row ? `${fmt(row.prompt_tokens)} in · ${fmt(row.completion_tokens)} out` : ""; };
  $("#turns thead").replaceChildren(h("tr", {}, h("th", { text: "turn" }), h("th", { text: "A" }), h("th", { text: "B" })));
  $("#turns tbody").replaceChildren(...turns.map(t => h("tr", {}, h("th", { text: t }),
    h("td", {}, (ta.get(t) || []).join(", ") || "–", h("div", { class: "muted small", text: tokens(a, t) })),
    h("td", {}, (tb.get(t) || []).join(", ") || "–", h("div", { class: "muted small", text: tokens(b, t) })))));
})().catch(e => { $("#sides").replaceChildren(h("div", { class: "error", text: e.message })); });
