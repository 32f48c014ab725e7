// searchbox's MCP bridge: the run's dataroom tools as an MCP server (stdio), for an agent that takes extra tools
// over MCP (Claude Code's --mcp-config, Codex's [mcp_servers]) in place of its own.
//
// Run by the agent, inside the run's box, as `node mcp.mjs`; it reads $SEARCHBOX_CHANNEL (the harness-owned unix
// socket, harness/channel.py) and nothing else. It speaks MCP's stdio transport (one JSON-RPC 2.0 message a line)
// and does three things: `initialize`, `tools/list` (the tools the channel serves: the run's, from the catalog)
// and `tools/call` (POST /searchbox/call: the call runs in searchbox, through the run's Toolset, which writes the
// tool row). No tool runs here and no state is kept here: the bridge is a pipe with a schema, so whatever the
// model makes a tool do, it does in searchbox's box, accounted, and a forged line on stdin reaches only the channel.
// Node's own modules only (no SDK): the box has no network and the agent's own node_modules are not ours to lean on.
import { request } from "node:http";
import { createInterface } from "node:readline";

const CHANNEL = process.env.SEARCHBOX_CHANNEL;
const PROTOCOLS = ["2025-06-18", "2025-03-26", "2024-11-05"]; // MCP revisions this bridge answers in
const MAX_LINE = 32 * 1024 * 1024; // bytes of one JSON-RPC message; longer ones are refused, not buffered

function channel(method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body), "utf-8");
    const headers = data ? { "content-type": "application/json", "content-length": data.length } : {};
    const req = request({ socketPath: CHANNEL, host: "searchbox.channel", path, method, headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        try {
          resolve({ status: res.statusCode, body: JSON.parse(Buffer.concat(chunks).toString("utf-8")) });
        } catch (e) {
          reject(new Error(`searchbox channel: an answer that is not JSON (HTTP ${res.statusCode})`));
        }
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    if (data) req.write(data);
    req.end();
  });
}

function send(message) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
}

async function answer(method, params) {
  if (method === "initialize") {
    const asked = params?.protocolVersion;
    return {
      protocolVersion: PROTOCOLS.includes(asked) ? asked : PROTOCOLS[0],
      capabilities: { tools: { listChanged: false } },
      serverInfo: { name: "searchbox", version: "1" },
    };
  }
  if (method === "ping") return {};
  if (method === "tools/list") {
    const out = await channel("GET", "/searchbox/tools");
    if (out.status !== 200) throw new Error(out.body?.error?.message ?? `searchbox channel: HTTP ${out.status}`);
    return { tools: out.body.map((t) => ({ name: t.name, description: t.description, inputSchema: t.parameters })) };
  }
  if (method === "tools/call") {
    const out = await channel("POST", "/searchbox/call", { id: "", name: params?.name, arguments: params?.arguments ?? {} });
    if (out.status !== 200) return { content: [{ type: "text", text: out.body?.error?.message ?? `HTTP ${out.status}` }], isError: true };
    return { content: [{ type: "text", text: String(out.body.text ?? "") }], isError: !out.body.ok };
  }
  const error = new Error(`method not found: ${String(method).slice(0, 100)}`);
  error.code = -32601;
  throw error;
}

if (!CHANNEL) {
  process.stderr.write("searchbox MCP bridge: SEARCHBOX_CHANNEL is not set\n");
  process.exit(2);
}
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
const pending = new Set(); // calls still running when stdin closes are answered before the bridge exits
lines.on("line", (line) => {
  const work = handle(line);
  pending.add(work);
  work.finally(() => pending.delete(work));
});
lines.on("close", async () => {
  await Promise.allSettled([...pending]);
  process.exit(0);
});

async function handle(line) {
  if (!line.trim()) return;
  if (line.length > MAX_LINE) return send({ id: null, error: { code: -32600, message: "message too long" } });
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return send({ id: null, error: { code: -32700, message: "parse error" } });
  }
  if (message === null || typeof message !== "object" || Array.isArray(message)) {
    return send({ id: null, error: { code: -32600, message: "invalid request" } });
  }
  const { id, method, params } = message;
  if (id === undefined || id === null) return; // a notification (notifications/initialized, cancelled): nothing to say
  try {
    send({ id, result: await answer(method, params) });
  } catch (e) {
    send({ id, error: { code: e.code ?? -32603, message: String(e.message ?? e).slice(0, 2000) } });
  }
}
