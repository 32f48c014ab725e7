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
  form.append("harness", $("#harness").value);
  const tools = toolBoxes().filter(b => b.checked).map(b => b.value);
  form.append("tools", tools.length ? tools.join(",") : "none");
  form.append("model", $("#model").value);
  form.append("endpoint", $("#endpoint").value);
  for (const id of ["question_set", "question_id", "gold", "aliases", "retriever", "delivery", "policy", "noise", "seed", "temperature", "max_tokens"])
    form.append(id, $("#" + id).value);
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

function jobRow(j) {
  const terminal = j.terminal;
  const what = j.state === "done" ? `finished: ${j.stop_reason || "–"}` : j.state === "failed" ? "failed" : j.state === "cancelled" ? "cancelled by you" : "";
  return h("div", { class: `job ${j.state}`, "data-job": j.id },
    h("div", { class: "job-main" },
      h("a", { href: j.url, class: "job-q", text: j.question.length > 140 ? j.question.slice(0, 140) + "…" : j.question }),
      h("div", { class: "muted small", text: [`budget ${j.budget} ${j.budget_unit || "turns"}`, j.tools ? `tools ${j.tools}` : null, j.dataroom,
                                              new Date(j.created * 1000).toLocaleString(), j.id].filter(Boolean).join(" · ") })),
    h("div", { class: "job-state" }, badge(j.state),
      j.state === "preparing" ? h("div", { class: "small", "data-progress": "", text: progressText(j.progress) }) : null,
      !terminal && j.wait ? h("div", { class: "muted small wait", text: waitText(j) }) : null,
      what ? h("div", { class: "small", text: what }) : null,
      j.error ? h("div", { class: "error small", text: j.error }) : null),
    h("div", { class: "job-actions" }, actionButtons(j, (job, action, err) => {
      flash(err ? err.message : actionMessage(job, action), !!err);
      refreshJobs();
    })));
}

let lastJobs = "";
async function refreshJobs() {
  let data;
  try { data = await api("/api/jobs"); } catch (e) { return; }
  const key = JSON.stringify(data.jobs);
  if (key === lastJobs) return;  // unchanged: leave the buttons alone
  lastJobs = key;
  $("#jobs").replaceChildren(...(data.jobs.length ? data.jobs.map(jobRow) : [h("div", { class: "muted small", text: "No jobs yet." })]));
}

(async function init() {
  CONFIG = await api("/api/config");
  $("#max-upload").textContent = CONFIG.max_upload_mb;
  $("#endpoint").placeholder = CONFIG.endpoint;
  $("#model").placeholder = CONFIG.model || "the server's default";
  $("#server-info").textContent = `Model: ${CONFIG.endpoint}${CONFIG.model ? " · " + CONFIG.model : ""} · ${CONFIG.slots} slot(s). ` +
    "A new job takes the slot from the running one, which pauses and resumes by itself later; a job you pause or hold stays held " +
    "until you resume it. A job whose dataroom index is not built yet is preparing: the index is built outside the slots.";
  buildTools();
  // native: searchbox's loop; pi: the reference agent in the same box (python -m searchbox setup installs it)
  $("#harness").replaceChildren(...CONFIG.harnesses.map(k => h("option", { value: k, text: k })));
  $("#submit-form").addEventListener("submit", submit);
  setupQuestionSets(CONFIG.question_sets || []);
  refreshJobs();
  setInterval(refreshJobs, 1500);
})();

// A question of a packaged set brings its text, its gold (the run is graded) and its dataroom.
let SET_QUESTIONS = [];
function setupQuestionSets(sets) {
  const pick = $("#question_set"), which = $("#question_id");
  pick.append(...sets.map(s => h("option", { value: s.name, text: s.label })));
  pick.addEventListener("change", async () => {
    SET_QUESTIONS = [];
    which.replaceChildren(h("option", { value: "", text: pick.value ? "loading…" : "pick a set first" }));
    which.disabled = true;
    const chosen = !!pick.value;
    for (const id of ["gold", "aliases"]) $("#" + id).disabled = chosen;  // the set's gold is used
    $("#question").readOnly = chosen;
    if (!chosen) return;
    const out = await api(`/api/question_sets/${encodeURIComponent(pick.value)}`);
    SET_QUESTIONS = out.questions;
    which.replaceChildren(h("option", { value: "", text: `${out.questions.length} questions: pick one` }),
      ...out.questions.map(q => h("option", { value: q.id, text: `${q.id}: ${q.question.slice(0, 90)}` })));
    which.disabled = false;
  });
  which.addEventListener("change", () => {
    const q = SET_QUESTIONS.find(x => x.id === which.value);
    $("#question").value = q ? q.question : "";
  });
}
