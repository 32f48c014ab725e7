"""The always-on tools (read, bash, grep, find, ls, write, edit), confined to the run's work/ directory.

Nothing here follows a link or opens a special file the model made: paths are taken apart
lexically and every component is checked with lstat; file contents go through searchbox.safefs;
ripgrep runs inside the same box as bash. Tool calls never overlap with the model's processes (a
bash call kills all of them when it ends), so nothing can swap an entry between check and use.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat
from pathlib import Path

from .. import safefs
from . import sandbox
from . import fallback_grep
from .context import InvalidCall, ToolContext, ToolError

READ_CAP = 16 * 1024**2  # bytes read (or edited) from one file
WALK_CAP = 200_000  # entries find looks at before giving up
MAX_GLOB_CHARS = 4096  # fnmatch's translation is quadratic in a glob's unclosed brackets: 140 KB of "[a" never ends
SYSTEM_PREFIXES = tuple(os.path.realpath(d) + os.sep for d in ("/usr", "/bin", "/sbin", "/lib", "/lib64"))


def _parts(ctx: ToolContext, path: str) -> tuple[str, ...]:
    """The path's components below work/, taken apart lexically (no link is resolved); escapes refused."""
    raw = path or "."
    if "\x00" in raw:
        raise ToolError(f"{path!r}: NUL byte in path")
    try:
        os.fsencode(raw)
    except UnicodeEncodeError as exc:  # a lone surrogate: no file can have this name
        raise InvalidCall(f"{path!r}: not valid Unicode (a lone surrogate, e.g. half an emoji)") from exc
    norm = os.path.normpath(raw)
    if os.path.isabs(norm):
        for base in dict.fromkeys((os.path.normpath(str(ctx.work)), os.path.realpath(ctx.work))):
            if norm == base:
                return ()
            if norm.startswith(base + os.sep):
                norm = norm[len(base) + 1:]
                break
        else:
            raise ToolError(f"{path}: outside the working directory")
    if norm == "..":
        raise ToolError(f"{path}: outside the working directory")
    if norm.startswith("../"):
        raise ToolError(f"{path}: outside the working directory")
    return tuple(p for p in norm.split("/") if p not in ("", "."))


def _lstat(ctx: ToolContext, parts: tuple[str, ...], path: str) -> os.stat_result | None:
    """The entry's own stat, or None when missing; a link or a non-directory on the way is an error."""
    here = Path(ctx.work)
    st = os.lstat(here)
    for i, name in enumerate(parts):
        if i and not stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{path}: {'/'.join(parts[:i])} is not a directory")
        here = here / name
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ToolError(f"{path}: {exc.strerror}") from exc
        if stat.S_ISLNK(st.st_mode):
            raise ToolError(f"{path}: {'/'.join(parts[: i + 1])} is a symbolic link; links are not followed")
    return st


def _kind(st: os.stat_result) -> str:
    mode = st.st_mode
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a regular file"


def _in_dataroom(parts: tuple[str, ...]) -> bool:
    return bool(parts) and parts[0] == "dataroom"


def resolve(ctx: ToolContext, path: str, *, writing: bool = False) -> Path:
    """A path inside work/ reached without links; for writing: not in dataroom/, and not a non-file."""
    parts = _parts(ctx, path)
    st = _lstat(ctx, parts, path)
    if writing:
        if not parts:
            raise ToolError(f"{path}: is the working directory itself")
        if _in_dataroom(parts):
            raise ToolError(f"{path}: dataroom/ is read-only; write elsewhere in the working directory")
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{path}: is a directory" if stat.S_ISDIR(st.st_mode) else f"{path}: {_kind(st)}")
    return ctx.work.resolve().joinpath(*parts)


def rel(ctx: ToolContext, path: Path) -> str:
    return path.relative_to(ctx.work.resolve()).as_posix() or "."


def _regular(ctx: ToolContext, path: str) -> tuple[tuple[str, ...], os.stat_result]:
    parts = _parts(ctx, path)
    st = _lstat(ctx, parts, path)
    if st is None:
        raise ToolError(f"{path}: no such file")
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path}: is a directory; use ls")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{path}: {_kind(st)}; only regular files can be read")
    return parts, st


def _read(ctx: ToolContext, parts: tuple[str, ...], path: str) -> bytes:
    data = safefs.read_bytes(ctx.work, "/".join(parts), cap=READ_CAP)
    if data is None:
        raise ToolError(f"{path}: not a regular file")
    return data


def read(ctx: ToolContext, path: str, offset: int = 1, limit: int = 400) -> str:
    parts, st = _regular(ctx, path)
    data = _read(ctx, parts, path)
    ctx.touch("/".join(parts))
    if b"\x00" in data[:8192]:
        return f"{path}: binary file, {st.st_size} bytes"
    lines = data.decode("utf-8", errors="replace").splitlines()
    chunk = lines[offset - 1 : offset - 1 + limit]
    body = "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(chunk, start=offset))
    more = len(lines) - (offset - 1 + len(chunk))
    if more > 0:
        body += f"\n[{more} more lines; read with offset={offset + len(chunk)}]"
    if st.st_size > len(data):
        body += f"\n[file is {st.st_size} bytes; only the first {len(data)} were read]"
    return body or f"{path}: empty (or offset past the end; {len(lines)} lines)"


def bash(ctx: ToolContext, command: str, timeout: float | None = None) -> str:
    limit = min(float(timeout or ctx.harness.bash_timeout_s), ctx.harness.bash_timeout_s * 4)
    result = sandbox.run_shell(command, ctx.work, [ctx.dataroom], ctx.sandbox_mode, limit, ctx.harness.output_cap_chars * 4,
                               sandbox.limits_for(ctx.harness))
    ctx.programs.extend(sandbox.programs(command))
    ctx.touch_from_text(command)
    out = result.output
    if result.output_bytes > len(out.encode()):
        out += f"\n[output truncated: {result.output_bytes} bytes in all]"
    if result.timed_out:
        raise ToolError(f"command timed out after {limit:g}s and was killed\n{out}")
    if result.killed:
        raise ToolError(f"command killed: {result.killed}\n{out}")
    if result.full:
        raise ToolError(f"{result.full}\n{out}\n[exit code {result.exit_code}]")
    return f"{out}\n[exit code {result.exit_code}]" if result.exit_code else (out or "[no output, exit code 0]")


def grep(ctx: ToolContext, pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False) -> str:
    """Matches as `path:line:text` (path relative to work/), whether the target is a folder or one file."""
    _check_glob(glob, "glob")
    parts = _parts(ctx, path)
    st = _lstat(ctx, parts, path)
    if st is None:
        raise ToolError(f"{path}: no such file or directory")
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise ToolError(f"{path}: {_kind(st)}; only regular files and folders can be searched")
    target = "/".join(parts) or "."
    rg = shutil.which("rg")
    cap = ctx.harness.output_cap_chars * 4
    lines = _rg(ctx, rg, pattern, target, glob, ignore_case, cap) if rg else _py_grep(ctx, target, pattern, glob, ignore_case, cap)
    for ln in lines:
        ctx.touch(ln.split(":", 1)[0])
    return "\n".join(lines) if lines else "no matches"


def _rg(ctx: ToolContext, rg: str, pattern: str, target: str, glob: str | None, ignore_case: bool, cap: int) -> list[str]:
    """ripgrep inside the box (a ripgrep outside the system dirs is bound in read-only)."""
    extra = {}
    real = os.path.realpath(rg)
    if ctx.sandbox_mode != "none" and not real.startswith(SYSTEM_PREFIXES):
        extra = {real: "/opt/searchbox/rg"}
        rg = "/opt/searchbox/rg"
    # The same files `grep -r` sees in bash: no ignore file of any kind (.ignore, .gitignore, .rgignore, git's
    # global excludes, parents'), hidden files searched, and no config file read.
    argv = [rg, "--no-config", "--no-ignore", "--hidden", "--no-heading", "--line-number", "--with-filename", "--null",
            "--color", "never", "--no-follow", "--max-columns", "300", "--max-count", "20"]
    sandbox.check_argument(pattern, "the pattern")
    if glob is not None:
        sandbox.check_argument(glob, "the glob")
    if ignore_case:
        argv.append("-i")
    if glob:
        argv += ["--glob", glob]
    argv += ["-e", pattern, "--", target]
    res = sandbox.run_confined(argv, ctx.work, [ctx.dataroom], ctx.sandbox_mode, ctx.harness.bash_timeout_s, cap,
                               sandbox.limits_for(ctx.harness), extra_ro=extra, merge_stderr=False)
    if res.timed_out or res.killed:
        raise ToolError(f"grep timed out after {ctx.harness.bash_timeout_s:g}s" if res.timed_out else f"grep killed: {res.killed}")
    if res.exit_code > 1 and not res.output:
        raise ToolError(res.errors.strip()[:500] or f"grep failed (exit {res.exit_code})")
    lines = []
    for line in res.output.splitlines():
        name, sep, rest = line.partition("\0")
        if not sep:
            continue  # e.g. rg's note about a binary file, or a line cut by the output cap
        lines.append(f"{name.removeprefix('./')}:{rest}")
    if res.output_bytes > len(res.output.encode()):
        lines.append(f"[output truncated: {res.output_bytes} bytes in all]")
    return lines


def _py_grep(ctx: ToolContext, target: str, pattern: str, glob: str | None, ignore_case: bool, cap: int) -> list[str]:
    """The fallback when ripgrep is missing (Python's regex dialect): a child process under the bash deadline."""
    req = fallback_grep.Request(str(ctx.work.resolve()), target, pattern, glob, ignore_case, cap, READ_CAP)
    try:
        lines = fallback_grep.search(req, ctx.harness.bash_timeout_s)
    except fallback_grep.Timeout as exc:
        raise ToolError(str(exc)) from exc
    except fallback_grep.BadPattern as exc:
        raise ToolError(str(exc)) from exc  # like rg's own refusal of a bad pattern: an answer, not a malformed call
    return lines


def _check_glob(glob: str | None, what: str) -> None:
    if glob is not None and len(glob) > MAX_GLOB_CHARS:
        raise InvalidCall(f"the {what} is {len(glob)} characters; the most is {MAX_GLOB_CHARS}")


class _WalkCap(Exception):
    """find looked at WALK_CAP entries."""


def find(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    _check_glob(pattern, "pattern")
    parts = _parts(ctx, path)
    st = _lstat(ctx, parts, path)
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path}: not a directory")
    hits, seen = [], [0]

    def visit(entry: safefs.Entry) -> bool:  # lists links, never descends into them; any depth (fd-relative)
        if stat.S_ISDIR(entry.st.st_mode):
            return True
        seen[0] += 1
        if seen[0] > WALK_CAP:
            raise _WalkCap
        r = "/".join(parts + entry.parts)
        if fnmatch.fnmatch(entry.name, pattern) or fnmatch.fnmatch(r, pattern) or fnmatch.fnmatch(r, f"*/{pattern}"):
            hits.append(r)
        return False

    try:
        safefs.walk(Path(ctx.work).joinpath(*parts), visit)
    except _WalkCap:
        pass
    hits.sort(key=safefs.walk_order)
    if seen[0] > WALK_CAP:
        hits.append(f"[stopped after {WALK_CAP} entries]")
    if not hits:
        return "no files match"
    return "\n".join(hits[:500]) + (f"\n[{len(hits) - 500} more]" if len(hits) > 500 else "")


def ls(ctx: ToolContext, path: str = ".") -> str:
    parts = _parts(ctx, path)
    st = _lstat(ctx, parts, path)
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path}: not a directory")
    rows = []
    with os.scandir(Path(ctx.work).joinpath(*parts)) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:  # hidden entries too: the same view as `ls -A`
        est = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(est.st_mode):
            rows.append(f"{entry.name}/")
        elif stat.S_ISREG(est.st_mode):
            rows.append(f"{entry.name}\t{est.st_size}")
        elif stat.S_ISLNK(est.st_mode):
            rows.append(f"{entry.name}@\tsymbolic link (not followed)")
        else:
            rows.append(f"{entry.name}\t{_kind(est)}")
    return "\n".join(rows[:1000]) or "(empty)"


def write(ctx: ToolContext, path: str, content: str) -> str:
    parts = _parts(ctx, path)
    resolve(ctx, path, writing=True)  # refuses dataroom/, links on the way, and a non-file in place
    data = content.encode("utf-8", errors="replace")
    if len(data) > sandbox.FILE_SIZE_CAP:
        raise ToolError("content too large")
    _write(ctx, parts, path, data)
    return f"wrote {len(data)} bytes to {'/'.join(parts)}"


def _write(ctx: ToolContext, parts: tuple[str, ...], path: str, data: bytes) -> None:
    try:
        safefs.write_bytes(ctx.work, "/".join(parts), data)
    except safefs.UnsafePath as exc:
        raise ToolError(f"{path}: cannot write ({exc})") from exc


def edit(ctx: ToolContext, path: str, old: str, new: str, replace_all: bool = False) -> str:
    resolve(ctx, path, writing=True)
    parts, st = _regular(ctx, path)
    if st.st_size > READ_CAP:
        raise ToolError(f"{path}: {st.st_size} bytes is too large to edit (limit {READ_CAP})")
    text = _read(ctx, parts, path).decode("utf-8", errors="replace")
    count = text.count(old) if old else 0
    if count == 0:
        raise ToolError("old string not found in file")
    if count > 1 and not replace_all:
        raise ToolError(f"old string occurs {count} times; give more context or set replace_all")
    _write(ctx, parts, path, (text.replace(old, new) if replace_all else text.replace(old, new, 1)).encode("utf-8", errors="replace"))
    return f"replaced {count if replace_all else 1} occurrence(s) in {'/'.join(parts)}"
