// Claude Code's box starts here: the loopback forwarder first (harness/bridge/forward.mjs, a child that lives while
// this process holds its stdin), then Claude Code itself on this process's stdin, stdout and stderr, so the harness
// speaks to Claude Code directly. When Claude Code ends, so does the forwarder and then this process, with Claude
// Code's exit code (128 + the signal's number when a signal ended it): nothing of the box outlives the agent.
//
//   node start.mjs <forward.mjs> <claude binary> [claude's arguments...]
// $SEARCHBOX_CHANNEL and $SEARCHBOX_PORT are the forwarder's (see forward.mjs); Claude Code's ANTHROPIC_BASE_URL
// names that port on the box's own loopback.
import { spawn } from "node:child_process";
import { constants } from "node:os";

const [forward, binary, ...args] = process.argv.slice(2);
if (!forward || !binary) {
  process.stderr.write("searchbox start: usage: node start.mjs <forward.mjs> <claude> [args...]\n");
  process.exit(2);
}
const fwd = spawn(process.execPath, [forward], { stdio: ["pipe", "pipe", "inherit"] });
let started = false;
let seen = "";
fwd.on("exit", (code, signal) => {
  if (!started) {
    process.stderr.write(`searchbox start: the forwarder ended before it listened (${signal ?? code})\n`);
    process.exit(3);
  }
});
fwd.stdout.on("data", (chunk) => {
  if (started) return;
  seen += chunk.toString("utf-8");
  if (!seen.includes("\n")) return;
  started = true;
  const agent = spawn(binary, args, { stdio: "inherit" });
  agent.on("error", (e) => {
    process.stderr.write(`searchbox start: ${binary}: ${e.message}\n`);
    fwd.stdin.end();
    process.exit(127);
  });
  agent.on("exit", (code, signal) => {
    fwd.stdin.end();
    fwd.kill("SIGKILL");
    process.exit(code ?? 128 + (constants.signals[signal] ?? 0));
  });
});
