// Home: the submit form (tools from the catalog, grouped by tier with a master toggle each) and the job list.
"use strict";
nav();
let CONFIG = null;

function toolBoxes() { return $$("#tiers input.tool"); }

function syncMasters() {
  for (const group of $$("#tiers .tier")) {
    const boxes = $$("input.tool", group);
    const on = boxes.filter(b => b.checked).length;
    const master = $("input.master", group);
    master.checked = on === boxes.length && on > 0;
    master.indeterminate = on > 0 && on < boxes.length;
  }
  const anyBuiltin = toolBoxes().some(b => b.checked && CONFIG.builtins.includes(b.value));
  $("#tools-note").textContent = anyBuiltin ? "Exactly the checked tools." :
    "No built-in checked: the catalog adds every built-in to the checked tools.";
}

function buildTools() {
  const tiers = $("#tiers");
  for (const tier of CONFIG.tiers) {
    const master = h("input", { type: "checkbox", class: "master", id: `tier-${tier.name}` });
    const group = h("div", { class: "tier", "data-tier": tier.name },
      h("div", { class: "tier-head" }, master, " ", h("label", { for: `tier-${tier.name}`, text: tier.label })),
      h("div", { class: "tier-tools" }, tier.tools.map(t => h("span", { title: t.description },
        h("input", { type: "checkbox", class: "tool", id: `tool-${t.name}`, value: t.name, checked: t.default }), " ",
        h("label", { for: `tool-${t.name}`, text: t.name })))));
    master.addEventListener("change", () => { for (const b of $$("input.tool", group)) b.checked = master.checked; syncMasters(); });
    tiers.append(group);
  }
  tiers.addEventListener("change", e => { if (e.target.classList.contains("tool")) syncMasters(); });
  for (const named of CONFIG.named) {
    $("#presets").append(h("button", { type: "button", class: "secondary small", title: named.description, text: named.name,
      onclick: () => { for (const b of toolBoxes()) b.checked = named.members.includes(b.value); syncMasters(); } }));
  }
  syncMasters();
}

async function submit(ev) {
  ev.preventDefault();
  $("#submit-error").textContent = "";
  const form = new FormData();
  form.append("question", $("#question").value);
  form.append("budget", $("#budget").value);
  form.append("budget_unit", $("#budget_unit").value);
  form.append("force_budget", $("#force_budget").checked ? "true" : "false");
  const tools = toolBoxes().filter(b => b.checked).map(b => b.value);
  form.append("tools", tools.length ? tools.join(",") : "none");
  form.append("model", $("#model").value);
  form.append("endpoint", $("#endpoint").value);
  const file = $("#dataroom").files[0];
  if (file) form.append("dataroom", file, file.name);
  $("#submit").disabled = true;
  try {
    const out = await api("/api/jobs", { method: "POST", body: form });
    location.href = out.job.url;
  } catch (e) {
    $("#submit-error").textContent = e.message;
  } finally {
    $("#submit").disabled = false;
  }
}

async function act(id, what) {
  try { await postJSON(`/api/jobs/${encodeURIComponent(id)}/${what}`); } catch (e) { alert(e.message); }
  refreshJobs();
}

async function refreshJobs() {
  let data;
  try { data = await api("/api/jobs"); } catch (e) { return; }
  const body = $("#jobs tbody");
  body.replaceChildren(...data.jobs.map(j => h("tr", { "data-job": j.id },
    h("td", {}, h("a", { href: j.url, text: j.question.length > 90 ? j.question.slice(0, 90) + "…" : j.question }),
      h("div", { class: "muted small", text: j.id })),
    h("td", {}, badge(j.state), j.pausing ? h("div", { class: "muted small", text: `${j.pausing} requested` }) : null),
    h("td", { text: j.budget }),
    h("td", { class: "small" }, j.stop_reason || "", j.error ? h("div", { class: "error", text: j.error }) : null),
    h("td", {},
      ["queued", "running", "paused"].includes(j.state) ? h("button", { class: "secondary small", text: "Pause", onclick: () => act(j.id, "pause") }) : null,
      ["held", "failed"].includes(j.state) ? h("button", { class: "secondary small", text: "Resume", onclick: () => act(j.id, "resume") }) : null,
      ["queued", "running", "paused", "held", "failed"].includes(j.state) ? h("button", { class: "secondary small", text: "Cancel", onclick: () => act(j.id, "cancel") }) : null))));
}

(async function init() {
  CONFIG = await api("/api/config");
  $("#max-upload").textContent = CONFIG.max_upload_mb;
  $("#endpoint").placeholder = CONFIG.endpoint;
  $("#model").placeholder = CONFIG.model || "the server's default";
  $("#server-info").textContent = `Model: ${CONFIG.endpoint}${CONFIG.model ? " · " + CONFIG.model : ""} · ${CONFIG.slots} slot(s). ` +
    "New jobs preempt the running one; paused jobs resume when the slot is free; a job you pause stays paused until you resume it.";
  buildTools();
  $("#submit-form").addEventListener("submit", submit);
  refreshJobs();
  setInterval(refreshJobs, 1500);
})();
