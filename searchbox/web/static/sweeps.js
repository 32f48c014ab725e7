// The list of sweeps.
"use strict";
nav();
(async function () {
  const data = await api("/api/sweeps");
  const body = $("#sweeps tbody");
  if (!data.sweeps.length) { body.append(h("tr", {}, h("td", { colspan: 6, class: "muted", text: "No sweeps yet: python -m searchbox.sweep -m …" }))); return; }
  body.replaceChildren(...data.sweeps.map(s => h("tr", {},
    h("td", {}, h("a", { href: `/sweeps/${encodeURIComponent(s.name)}`, text: s.name })),
    h("td", { text: s.runs }), h("td", { text: s.done }), h("td", { text: s.table ? "yes" : "no" }), h("td", { text: s.figures }),
    h("td", { class: "small", text: new Date(s.mtime * 1000).toLocaleString() }))));
})();
