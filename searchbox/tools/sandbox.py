"""Running the agent's shell commands: bubblewrap isolation (no network, writes only in work/), timeouts, caps."""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import SandboxError

FILE_SIZE_CAP = 512 * 1024**2  # no single file the agent writes may pass this
WRAPPERS = {"sudo", "env", "time", "nohup", "nice", "timeout", "command", "builtin", "exec", "then", "do", "else", "if", "while", "until", "!", "{", "}"}


@dataclass
class ShellResult:
    """What a command did: exit code, capped output, whether it timed out."""

    exit_code: int
    output: str
    timed_out: bool
    output_bytes: int
    duration_s: float


@lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """Whether bubblewrap can create the namespaces we need on this machine."""
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        proc = subprocess.run([exe, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev", "--proc", "/proc", "true"],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def resolve_mode(mode: str) -> str:
    """bwrap or none; raises SandboxError when isolation is wanted but unavailable."""
    if mode == "none":
        return "none"
    if bwrap_works():
        return "bwrap"
    raise SandboxError(
        "bash needs network isolation but bubblewrap is unavailable: `apt-get install bubblewrap`, "
        "or set harness.sandbox=none to run tools without isolation (unsafe)"
    )


def wrap(argv: list[str], work: Path, readonly: list[Path], mode: str) -> list[str]:
    """The argv that runs `argv` confined to `work` (read-only sub-paths) with no network."""
    if mode == "none":
        return argv
    work = str(Path(work).resolve())
    cmd = ["bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--bind", work, work]
    for path in readonly:
        cmd += ["--ro-bind", str(Path(path).resolve()), str(Path(path).resolve())]
    cmd += ["--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--die-with-parent", "--new-session", "--chdir", work, "--"]
    return cmd + argv


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_CAP, FILE_SIZE_CAP))


def run_shell(command: str, work: Path, readonly: list[Path], mode: str, timeout_s: float, cap_bytes: int) -> ShellResult:
    """Run `bash -c command` in its own process group; kill the whole group on timeout."""
    argv = wrap(["bash", "-c", command], work, readonly, mode)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_", "OPENAI_", "JINA_", "HF_TOKEN"))}
    env.update({"HOME": str(work), "TMPDIR": "/tmp", "PAGER": "cat", "GIT_PAGER": "cat"})
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env, preexec_fn=_limit_child)
    kept = bytearray()
    total = [0]

    def drain() -> None:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(65536):
            total[0] += len(chunk)
            if len(kept) < cap_bytes:
                kept.extend(chunk[: cap_bytes - len(kept)])

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # Kill the group even after a normal exit: background children must not outlive the call.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    reader.join(timeout=5)
    text = bytes(kept).decode("utf-8", errors="replace")
    return ShellResult(proc.returncode if not timed_out else -9, text, timed_out, total[0], time.monotonic() - start)


def programs(command: str) -> list[str]:
    """The programs a shell command runs, in order, e.g. 'cat a | grep x && wc -l' -> [cat, grep, wc]."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    out: list[str] = []
    expect = True
    skip_next = False
    for tok in tokens:
        if tok and set(tok) <= set(";&|()\n"):
            expect = True
            continue
        if tok and set(tok) <= set("<>"):
            skip_next = True
            continue
        if skip_next:
            skip_next = False
            continue
        if not expect:
            continue
        if "=" in tok and not tok.startswith("=") and tok.split("=", 1)[0].isidentifier():
            continue  # VAR=value prefix
        if tok in WRAPPERS or tok.startswith("-") or tok.replace(".", "", 1).isdigit():
            continue
        out.append(os.path.basename(tok))
        expect = False
    return out
