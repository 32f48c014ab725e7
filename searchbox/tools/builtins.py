"""The always-on tools (read, bash, grep, find, ls, write, edit), confined to the run's work/ directory."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from pathlib import Path

from . import sandbox
from .context import ToolContext, ToolError


def resolve(ctx: ToolContext, path: str, *, writing: bool = False) -> Path:
    """A path inside work/ (relative or absolute); refuse escapes, and writes into dataroom/."""
    work = ctx.work.resolve()
    raw = Path(path or ".")
    target = (raw if raw.is_absolute() else work / raw).resolve()
    if target != work and work not in target.parents:
        raise ToolError(f"{path}: outside the working directory")
    if writing:
        dataroom = ctx.dataroom.resolve()
        if target == dataroom or dataroom in target.parents:
            raise ToolError(f"{path}: dataroom/ is read-only; write elsewhere in the working directory")
    return target


def rel(ctx: ToolContext, path: Path) -> str:
    return path.relative_to(ctx.work.resolve()).as_posix() or "."


def read(ctx: ToolContext, path: str, offset: int = 1, limit: int = 400) -> str:
    target = resolve(ctx, path)
    if not target.is_file():
        raise ToolError(f"{path}: no such file" + (" (it is a directory; use ls)" if target.is_dir() else ""))
    data = target.read_bytes()
    ctx.touch(rel(ctx, target))
    if b"\x00" in data[:8192]:
        return f"{path}: binary file, {len(data)} bytes"
    lines = data.decode("utf-8", errors="replace").splitlines()
    chunk = lines[offset - 1 : offset - 1 + limit]
    body = "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(chunk, start=offset))
    more = len(lines) - (offset - 1 + len(chunk))
    if more > 0:
        body += f"\n[{more} more lines; read with offset={offset + len(chunk)}]"
    return body or f"{path}: empty (or offset past the end; {len(lines)} lines)"


def bash(ctx: ToolContext, command: str, timeout: float | None = None) -> str:
    limit = min(float(timeout or ctx.harness.bash_timeout_s), ctx.harness.bash_timeout_s * 4)
    result = sandbox.run_shell(command, ctx.work, [ctx.dataroom], ctx.sandbox_mode, limit, ctx.harness.output_cap_chars * 4)
    ctx.programs.extend(sandbox.programs(command))
    ctx.touch_from_text(command)
    out = result.output
    if result.output_bytes > len(out.encode()):
        out += f"\n[output truncated: {result.output_bytes} bytes in all]"
    if result.timed_out:
        raise ToolError(f"command timed out after {limit:g}s and was killed\n{out}")
    return f"{out}\n[exit code {result.exit_code}]" if result.exit_code else (out or "[no output, exit code 0]")


def grep(ctx: ToolContext, pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False) -> str:
    target = resolve(ctx, path)
    if not target.exists():
        raise ToolError(f"{path}: no such file or directory")
    rg = shutil.which("rg")
    if rg:
        argv = [rg, "--no-heading", "--line-number", "--color", "never", "--max-columns", "300", "--max-count", "20", "--no-follow"]
        if ignore_case:
            argv.append("-i")
        if glob:
            argv += ["--glob", glob]
        argv += ["-e", pattern, "--", str(target)]
        try:
            proc = subprocess.run(argv, capture_output=True, cwd=ctx.work, timeout=ctx.harness.bash_timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise ToolError("grep timed out") from exc
        if proc.returncode > 1:
            raise ToolError(proc.stderr.decode("utf-8", errors="replace")[:500])
        lines = proc.stdout.decode("utf-8", errors="replace").splitlines()
    else:
        lines = _py_grep(target, pattern, glob, ignore_case)
    base = str(ctx.work.resolve()) + os.sep
    lines = [ln[len(base):] if ln.startswith(base) else ln for ln in lines]
    for ln in lines:
        ctx.touch(ln.split(":", 1)[0])
    if not lines:
        return "no matches"
    return "\n".join(lines)


def _py_grep(target: Path, pattern: str, glob: str | None, ignore_case: bool) -> list[str]:
    """The fallback when ripgrep is missing (Python's regex dialect)."""
    try:
        rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"invalid regular expression: {exc}") from exc
    files = [target] if target.is_file() else sorted(p for p in target.rglob("*") if p.is_file() and not p.is_symlink())
    out = []
    for f in files:
        if glob and not fnmatch.fnmatch(f.name, glob) and not fnmatch.fnmatch(str(f), glob):
            continue
        for n, line in enumerate(f.read_bytes().decode("utf-8", errors="replace").splitlines(), 1):
            if rx.search(line):
                out.append(f"{f}:{n}:{line[:300]}")
    return out


def find(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    root = resolve(ctx, path)
    if not root.is_dir():
        raise ToolError(f"{path}: not a directory")
    hits = []
    for dirpath, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            full = Path(dirpath) / name
            r = rel(ctx, full)
            if fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(r, pattern) or fnmatch.fnmatch(r, f"*/{pattern}"):
                hits.append(r)
    if not hits:
        return "no files match"
    return "\n".join(hits[:500]) + (f"\n[{len(hits) - 500} more]" if len(hits) > 500 else "")


def ls(ctx: ToolContext, path: str = ".") -> str:
    target = resolve(ctx, path)
    if not target.is_dir():
        raise ToolError(f"{path}: not a directory")
    rows = []
    for entry in sorted(target.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") and entry.parent == ctx.work.resolve():
            continue  # harness internals
        if entry.is_dir():
            rows.append(f"{entry.name}/")
        else:
            rows.append(f"{entry.name}\t{entry.lstat().st_size}")
    return "\n".join(rows[:1000]) or "(empty)"


def write(ctx: ToolContext, path: str, content: str) -> str:
    target = resolve(ctx, path, writing=True)
    if target.is_dir():
        raise ToolError(f"{path}: is a directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8", errors="replace")
    if len(data) > sandbox.FILE_SIZE_CAP:
        raise ToolError("content too large")
    target.write_bytes(data)
    return f"wrote {len(data)} bytes to {rel(ctx, target)}"


def edit(ctx: ToolContext, path: str, old: str, new: str, replace_all: bool = False) -> str:
    target = resolve(ctx, path, writing=True)
    if not target.is_file():
        raise ToolError(f"{path}: no such file")
    text = target.read_bytes().decode("utf-8", errors="replace")
    count = text.count(old) if old else 0
    if count == 0:
        raise ToolError("old string not found in file")
    if count > 1 and not replace_all:
        raise ToolError(f"old string occurs {count} times; give more context or set replace_all")
    target.write_text(text.replace(old, new) if replace_all else text.replace(old, new, 1), encoding="utf-8")
    return f"replaced {count if replace_all else 1} occurrence(s) in {rel(ctx, target)}"
