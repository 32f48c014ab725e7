"""Claude Code's box (launch.start) seen from inside, with a probe in Claude Code's place: the same binds, environment,
start script and forwarder. Nothing leaves it but the channel: no network, no host file, no host path on its command
line, its config folder its own. Skipped when Claude Code or bubblewrap is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchbox import paths
from searchbox.harness import channel as ch
from searchbox.harness.claudecode import install, launch
from searchbox.tools.sandbox import bwrap_works
from tests.conftest import REAL_HOME, make_cfg

REAL_CC = install.PIN.install_dir(Path(REAL_HOME) if REAL_HOME else paths.home())

# Runs in the box as Claude Code would (after the forwarder listens): tries every way out and prints what it found.
PROBE = r"""
const net = require("node:net"), dns = require("node:dns"), fs = require("node:fs"), http = require("node:http");
const out = {};
const tcp = (host, port) => new Promise((res) => { const s = net.connect({host, port, timeout: 3000}, () => { s.destroy(); res("connected"); });
  s.on("error", (e) => res(e.code || e.message)); s.on("timeout", () => { s.destroy(); res("timeout"); }); });
const get = (path, host) => new Promise((res) => { const r = http.request({host: "127.0.0.1", port: Number(process.env.SEARCHBOX_PORT), path,
  headers: host ? {Host: host} : {}}, (m) => { let b = ""; m.on("data", (c) => b += c); m.on("end", () => res([m.statusCode, b.slice(0, 200)])); });
  r.on("error", (e) => res([0, e.code])); r.end(); });
(async () => {
  out.outside = await tcp("1.1.1.1", 443);
  out.dns = await new Promise((res) => dns.lookup("api.anthropic.com", (e, a) => res(e ? e.code : a)));
  out.tools = await get("/searchbox/tools");
  out.elsewhere = await get("http://api.anthropic.com/v1/models", "api.anthropic.com");
  out.root = (() => { try { return fs.readdirSync("/root"); } catch (e) { return e.code; } })();
  out.searchbox = fs.readdirSync("/searchbox").sort();
  out.cwd = process.cwd(); out.cwd_files = fs.readdirSync(".");
  out.home = process.env.HOME; out.config = process.env.CLAUDE_CONFIG_DIR;
  try { fs.writeFileSync(process.env.CLAUDE_CONFIG_DIR + "/probe", "x"); out.config_writable = true; } catch (e) { out.config_writable = e.code; }
  try { fs.writeFileSync("/work/x", "x"); out.cwd_writable = true; } catch (e) { out.cwd_writable = e.code; }
  out.cmdlines = fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p)).map((p) => { try { return fs.readFileSync(`/proc/${p}/cmdline`, "utf-8"); } catch (e) { return ""; } });
  out.uid = process.getuid(); out.env = Object.keys(process.env).sort();
  process.stdout.write(JSON.stringify(out) + "\n");
})();
"""


def test_claude_codes_box_leads_nowhere_but_the_channel(tmp_path, isolated_home, monkeypatch):
    if not (REAL_CC / ".searchbox-installed").is_file():
        pytest.skip(f"Claude Code is not installed at {REAL_CC}: run `python -m searchbox setup`")
    if not bwrap_works():
        pytest.skip("bubblewrap unavailable (apt-get install bubblewrap)")
    target = install.install_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(REAL_CC.resolve())
    cc = install.require()
    monkeypatch.setattr(launch, "argv", lambda cc, cfg, spec, at, resume=None: [cc.node, at.start, f"{at.bridge}/forward.mjs", cc.node, "-e", PROBE])
    seen = []
    box = None
    channel = ch.Channel(ch.Routes(lambda body: ch.Reply(404, {}), lambda: (seen.append("tools"), ch.Reply(200, [{"name": "t"}]))[1],
                                   lambda body: ch.Reply(404, {})), lambda peer: box is not None and box.holds(peer.pid)).start()
    work = tmp_path / "work"
    work.mkdir()
    try:
        box, at = launch.start(cc, make_cfg(kind="claude-code"), None, tmp_path / "claude-code", channel.path, "bwrap", work)
        line = box.proc.stdout.readline()
        box.proc.wait(timeout=60)
        said = box.stderr_text()
    finally:
        if box is not None:
            box.kill()
            box.release()
        channel.close()
    out = json.loads(line)
    assert out["outside"] in ("ENETUNREACH", "EHOSTUNREACH", "ECONNREFUSED", "timeout"), out["outside"]
    assert out["dns"] in ("ENOTFOUND", "EAI_AGAIN"), out["dns"]
    assert out["tools"][0] == 200 and seen == ["tools"]  # the forwarder reaches the channel
    assert out["elsewhere"][0] == 404  # an absolute target or Host means nothing: the channel serves its routes only
    assert out["root"] in ("ENOENT", "EACCES") or out["root"] == []
    assert out["searchbox"] == ["bridge", "channel", "claude-code", "config", "start"] and out["cwd"] == "/work"
    assert sorted(out["cwd_files"]) == sorted(launch.HIDDEN)  # its project settings: shown empty, read-only
    assert out["home"] == out["config"] == "/searchbox/config" and out["config_writable"] is True
    assert (tmp_path / "claude-code" / "box" / "config" / "probe").is_file()  # its config folder: the run's, not ~/.claude
    # its cwd is an empty folder of its own (what it writes there is not the run's work/, which only the tools reach)
    assert out["cwd_writable"] is True and not (work / "x").exists() and (tmp_path / "claude-code" / "box" / "cwd" / "x").is_file()
    assert out["uid"] != 0
    host = str(tmp_path)
    assert all(host not in c and str(REAL_CC) not in c for c in out["cmdlines"]), out["cmdlines"]
    assert not {"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "HTTPS_PROXY", "HTTP_PROXY"} & set(out["env"])
    assert channel.strangers == 0, said
