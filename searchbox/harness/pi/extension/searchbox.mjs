// searchbox's extension to Pi (harness=pi): the box's only way out, the run's tools, the run's date.
//
// Loaded with `pi --no-extensions -e` inside the run's box, which has no network. It does four things and
// nothing else; everything else is Pi as released (its loop, its prompt, its compaction):
//  1. Every HTTP request Pi makes (its model calls) goes over the harness-owned unix socket
//     ($SEARCHBOX_CHANNEL), where searchbox forwards it to the run's model, accounted.
//  2. Every tool the run selected is registered from the catalog the channel serves (name, description, JSON
//     schema), in place of Pi's own of the same name (read, bash, edit, write, grep, find, ls), and each call
//     runs in searchbox: the model's commands never run in Pi's box, so nothing they do can reach Pi.
//  3. Pi's "Current date:" line says the run's date ($SEARCHBOX_TODAY), as the task does, so a run's prompt
//     does not depend on the day it ran.
//  4. An error that ends Pi is written to stderr as one JSON line ({"searchbox_pi_error": ...}) before Node's
//     own report, so the harness names Pi's death by its cause (the last line Node prints is its version).
import { writeSync } from "node:fs";
import { createRequire } from "node:module";

// undici as Pi itself installs it (Pi's cli.js sets its global dispatcher the same way).
const require = createRequire(process.argv[1]);
const { Agent, setGlobalDispatcher } = require("undici");

const CHANNEL = process.env.SEARCHBOX_CHANNEL;
const TODAY = process.env.SEARCHBOX_TODAY;
const BASE = "http://searchbox.channel";

if (!CHANNEL) throw new Error("searchbox extension: SEARCHBOX_CHANNEL is not set");
// A monitor only: Node still reports the error and exits as it would.
process.on("uncaughtExceptionMonitor", (error, origin) => {
  try {
    const record = { origin, name: String(error?.name ?? typeof error), code: error?.code ?? null,
                     message: String(error?.message ?? error).slice(0, 2000) };
    writeSync(2, "\n" + JSON.stringify({ searchbox_pi_error: record }) + "\n");
  } catch {}
});
// No timeouts here: the harness enforces the run's and the turn's deadlines on its side of the socket.
setGlobalDispatcher(new Agent({ connect: { socketPath: CHANNEL }, bodyTimeout: 0, headersTimeout: 0 }));

async function post(path, body, signal) {
  const response = await fetch(BASE + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
  const reply = await response.json();
  if (!response.ok) throw new Error(reply?.error?.message ?? `searchbox channel: HTTP ${response.status}`);
  return reply;
}

export default async function (pi) {
  const response = await fetch(BASE + "/searchbox/tools");
  if (!response.ok) throw new Error(`searchbox extension: the channel answered ${response.status} for the tools`);
  const tools = await response.json();
  for (const tool of tools) {
    pi.registerTool({
      name: tool.name,
      label: tool.name,
      description: tool.description,
      promptSnippet: tool.description,
      parameters: tool.parameters,
      async execute(toolCallId, params, signal) {
        const out = await post("/searchbox/call", { id: toolCallId, name: tool.name, arguments: params }, signal);
        if (!out.ok) throw new Error(out.text);
        return { content: [{ type: "text", text: out.text }], details: {} };
      },
    });
  }
  if (TODAY) {
    pi.on("before_agent_start", async (event) => ({
      systemPrompt: event.systemPrompt.replace(/\nCurrent date: \d{4}-\d{2}-\d{2}/, `\nCurrent date: ${TODAY}`),
    }));
  }
}
