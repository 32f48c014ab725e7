// searchbox's loopback forwarder: for an agent whose HTTP client cannot be pointed at a unix socket (Claude Code's,
// Codex's), a TCP port on the box's own loopback that leads to the harness-owned channel and nowhere else.
//
// Run inside the run's box (its own network namespace: loopback only) as `node forward.mjs`, with
// $SEARCHBOX_CHANNEL (the channel socket in the box) and $SEARCHBOX_PORT (the port to listen on, 127.0.0.1 only).
// Every connection is piped byte for byte to a new connection to the channel, which checks the peer (this process is
// in the box's pid namespace), parses the HTTP and answers only its routes: the forwarder adds no route, reads no
// byte and cannot be told to go elsewhere. It prints one line, {"listening": PORT}, when it accepts connections, and
// exits when stdin closes (its harness went away), so it never outlives the run.
import { connect, createServer } from "node:net";

const CHANNEL = process.env.SEARCHBOX_CHANNEL;
const PORT = Number(process.env.SEARCHBOX_PORT);
if (!CHANNEL || !Number.isInteger(PORT) || PORT <= 0 || PORT > 65535) {
  process.stderr.write("searchbox forwarder: set SEARCHBOX_CHANNEL and SEARCHBOX_PORT (1-65535)\n");
  process.exit(2);
}
const server = createServer((client) => {
  const upstream = connect(CHANNEL);
  client.pipe(upstream);
  upstream.pipe(client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on("error", close);
  upstream.on("error", close);
  client.on("close", close);
  upstream.on("close", close);
});
server.on("error", (e) => {
  process.stderr.write(`searchbox forwarder: ${e.message}\n`);
  process.exit(3);
});
server.listen(PORT, "127.0.0.1", () => process.stdout.write(JSON.stringify({ listening: PORT }) + "\n"));
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
