"""The always-on tools (read, bash, grep, find, ls, write, edit), confined to the run's work/ directory.

Nothing here follows a link or opens a special file the model made: paths are taken apart
lexically and every component is checked with lstat; file contents go through searchbox.corpus.safefs;
ripgrep runs inside the same box as bash. Tool calls never overlap with the model's processes (a
bash call kills all of them when it ends), so nothing can swap an entry between check and use.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import stat
from pathlib import Path

from ..corpus import safefs
from . import sandbox
from . import fallback_grep
from .context import InvalidCall, ToolContext, ToolError, ToolResult

READ_CAP = 16 * 1024**2  # bytes read (or edited) from one file
WALK_CAP = 200_000  # entries find looks at before giving up
LS_CAP = 1000  # entries ls lists; the rest are counted (a 100K-file folder is not dumped on the model)
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
        bases = (ctx.inside,) if ctx.inside else (os.path.normpath(str(ctx.work)), os.path.realpath(ctx.work))
        for base in dict.fromkeys(bases):
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


def _base(ctx: ToolContext, parts: tuple[str, ...]) -> tuple[Path, tuple[str, ...]]:
    """Where a path's entry lives on the host: dataroom/... in the shared copy (ctx.dataroom_source), the rest in work/.

    The shared copy is read-only to everyone and was checked when it was made; work/dataroom itself (a mount point,
    or a link) is never walked through."""
    if ctx.dataroom_source is not None and parts[:1] == ("dataroom",):
        return Path(ctx.dataroom_source), parts[1:]
    return Path(ctx.work), parts


def _host(ctx: ToolContext, parts: tuple[str, ...]) -> Path:
    root, rest = _base(ctx, parts)
    return root.joinpath(*rest)


def _lstat(ctx: ToolContext, parts: tuple[str, ...], path: str) -> os.stat_result | None:
    """The entry's own stat, or None when missing; a link or a non-directory on the way is an error."""
    here, rest = _base(ctx, parts)
    skipped = len(parts) - len(rest)
    st = os.lstat(here)
    for i, name in enumerate(rest):
        shown = "/".join(parts[: skipped + i])
        if (i or skipped) and not stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{path}: {shown} is not a directory")
        here = here / name
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ToolError(f"{path}: {exc.strerror}") from exc
        if stat.S_ISLNK(st.st_mode):
            raise ToolError(f"{path}: {'/'.join(parts[: skipped + i + 1])} is a symbolic link; links are not followed")
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
    root, rest = _base(ctx, parts)
    data = safefs.read_bytes(root, "/".join(rest), cap=READ_CAP)
    if data is None:
        raise ToolError(f"{path}: not a regular file")
    return data


# ---- rendering: the text the model reads (programs read the data beside it) --------------------------
def render_read(path: str, rows: list[tuple[int, str]], more: int, next_offset: int, size: int, read: int, total: int) -> list[str]:
    """The lines of a read's text: numbered rows, then notes; the rows come first, one per line (see `shown`)."""
    out = [f"{n:6d}\t{line}" for n, line in rows]
    if more > 0:
        out.append(f"[{more} more lines; read with offset={next_offset}]")
    if size > read:
        out.append(f"[file is {size} bytes; only the first {read} were read]")
    return out or [f"{path}: empty (or offset past the end; {total} lines)"]


def render_grep(matches: list[tuple[str, int, str]], truncated: str) -> list[str]:
    """The lines of a grep's text: `path:line:text` per match, rows first."""
    out = [f"{p}:{n}:{text}" for p, n, text in matches] + ([truncated] if truncated else [])
    return out or ["no matches"]


def decode_grep(text: str) -> dict:
    """A grep's text read back as its data (a result delivered to a file is text): the inverse of render_grep."""
    matches = []
    for line in text.splitlines():
        m = re.match(r"^(.+?):(\d+):(.*)$", line)
        if m:
            matches.append({"path": m[1], "line": int(m[2]), "text": m[3]})
    return {"matches": matches, "truncated": any(line.startswith("[output truncated") for line in text.splitlines())}


def render_find(hits: list[str], more: int, stopped: bool) -> str:
    out = hits + ([f"[stopped after {WALK_CAP} entries]"] if stopped else []) + ([f"[{more} more]"] if more else [])
    return "\n".join(out) if hits or stopped else "no files match"


def render_ls(entries: list[dict]) -> str:
    def row(e: dict) -> str:
        if e["kind"] == "dir":
            return f"{e['name']}/"
        if e["kind"] == "file":
            return f"{e['name']}\t{e['size']}"
        if e["kind"] == "link":
            return f"{e['name']}@\tsymbolic link (not followed)"
        return f"{e['name']}\t{e['kind']}"

    return "\n".join(map(row, entries)) or "(empty)"


def shown(rows: list[str], cap: int) -> tuple[int, int]:
    """(rows the model sees whole, characters it sees of the next) when a text of these rows and what follows them is
    cut at `cap` characters, as the toolset cuts every output: the data says only what the model saw."""
    at = 0
    for i, row in enumerate(rows):
        if at + len(row) > cap:
            return i, max(0, cap - at)
        at += len(row) + 1
    return len(rows), 0


def read(ctx: ToolContext, path: str, offset: int = 1, limit: int = 400) -> ToolResult:
    """The file's lines from `offset`, numbered; data: {path, offset, lines: [{n, text}], shown, partial, next, left, total}:
    `shown` lines reached the model whole under the output cap (and `partial` characters of the one after);
    `next` is where to go on (None at the end), `left` how many lines lie beyond it."""
    parts, st = _regular(ctx, path)
    data = _read(ctx, parts, path)
    rel_path = "/".join(parts)
    ctx.touch(rel_path)
    if b"\x00" in data[:8192]:
        return ToolResult(f"{path}: binary file, {st.st_size} bytes", {"path": rel_path, "binary": True, "bytes": st.st_size})
    lines = data.decode("utf-8", errors="replace").splitlines()
    chunk = lines[offset - 1 : offset - 1 + limit]
    more = len(lines) - (offset - 1 + len(chunk))
    rows = list(enumerate(chunk, start=offset))
    rendered = render_read(path, rows, more, offset + len(chunk), st.st_size, len(data), len(lines))
    whole, partial = shown(rendered[: len(rows)], ctx.harness.output_cap_chars)
    if whole == len(rows):
        nxt, partial = (offset + len(chunk) if more > 0 else None), 0
    elif whole > 0:  # the cap cut a line: go on from it
        nxt, partial = offset + whole, 0
    else:  # the first line alone is longer than the cap: the model saw its start; go on past it
        nxt, partial = offset + 1, max(0, partial - (len(rendered[0]) - len(chunk[0])))
    return ToolResult("\n".join(rendered), {
        "path": rel_path, "offset": offset, "lines": [{"n": n, "text": t} for n, t in rows], "shown": whole, "partial": partial,
        "next": nxt, "left": len(lines) - (nxt - 1) if nxt else 0, "total": len(lines), "file_bytes": st.st_size, "bytes_read": len(data)})


def bash(ctx: ToolContext, command: str, timeout: float | None = None) -> ToolResult:
    limit = min(float(timeout or ctx.harness.bash_timeout_s), ctx.harness.bash_timeout_s * 4)
    result = sandbox.run_shell(command, ctx.work, [ctx.bind], ctx.sandbox_mode, limit, ctx.harness.output_cap_chars * 4,
                               sandbox.limits_for(ctx.harness), inside=ctx.inside, observe_opens=True)
    ctx.opened = result.opened  # before any error below: a command that timed out still printed what it read
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
    text = f"{out}\n[exit code {result.exit_code}]" if result.exit_code else (out or "[no output, exit code 0]")
    return ToolResult(text, {"exit_code": result.exit_code})  # programs (the dashboard's error counts) read the exit code here


def grep(ctx: ToolContext, pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False) -> ToolResult:
    """Matches as `path:line:text` (path relative to work/), whether the target is a folder or one file; data:
    {pattern, path, matches: [{path, line, text}], shown (matches the model saw whole under the output cap), truncated}."""
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
    matches, truncated = _rg(ctx, rg, pattern, target, glob, ignore_case, cap) if rg else _py_grep(ctx, target, pattern, glob, ignore_case, cap)
    for p, _, _ in matches:
        ctx.touch(p)
    rendered = render_grep(matches, truncated)
    whole, _ = shown(rendered[: len(matches)], ctx.harness.output_cap_chars)
    return ToolResult("\n".join(rendered), {"pattern": pattern, "path": target, "matches": [{"path": p, "line": n, "text": t} for p, n, t in matches],
                                           "shown": whole, "truncated": bool(truncated) or whole < len(matches)})


def _rg(ctx: ToolContext, rg: str, pattern: str, target: str, glob: str | None, ignore_case: bool, cap: int) -> tuple[list[tuple[str, int, str]], str]:
    """ripgrep inside the box (a ripgrep outside the system dirs is bound in read-only)."""
    extra = {}
    real = os.path.realpath(rg)
    if ctx.sandbox_mode != "none" and not real.startswith(SYSTEM_PREFIXES):
        extra = {real: "/opt/searchbox/rg"}
        rg = "/opt/searchbox/rg"
    # The same files `grep -r` sees in bash: no ignore file of any kind (.ignore, .gitignore, .rgignore, git's
    # global excludes, parents'), hidden files searched, and no config file read. --sort path: ripgrep's threads
    # otherwise print files in whatever order they finish, so the same call gave a different listing (and, under
    # the output cap, different matches) from run to run: the same run key must give the same run.
    argv = [rg, "--no-config", "--no-ignore", "--hidden", "--no-heading", "--line-number", "--with-filename", "--null",
            "--color", "never", "--no-follow", "--max-columns", "300", "--max-count", "20", "--sort", "path"]
    sandbox.check_argument(pattern, "the pattern")
    if glob is not None:
        sandbox.check_argument(glob, "the glob")
    if ignore_case:
        argv.append("-i")
    if glob:
        argv += ["--glob", glob]
    argv += ["-e", pattern, "--", target]
    res = sandbox.run_confined(argv, ctx.work, [ctx.bind], ctx.sandbox_mode, ctx.harness.bash_timeout_s, cap,
                               sandbox.limits_for(ctx.harness), extra_ro=extra, merge_stderr=False, inside=ctx.inside)
    if res.timed_out or res.killed:
        raise ToolError(f"grep timed out after {ctx.harness.bash_timeout_s:g}s" if res.timed_out else f"grep killed: {res.killed}")
    if res.exit_code > 1 and not res.output:
        raise ToolError(res.errors.strip()[:500] or f"grep failed (exit {res.exit_code})")
    matches = []
    for line in res.output.splitlines():
        name, sep, rest = line.partition("\0")
        number, colon, text = rest.partition(":")
        if not sep or not colon or not number.isdigit():
            continue  # e.g. rg's note about a binary file, or a line cut by the output cap
        matches.append((name.removeprefix("./"), int(number), text))
    return matches, f"[output truncated: {res.output_bytes} bytes in all]" if res.output_bytes > len(res.output.encode()) else ""


def _py_grep(ctx: ToolContext, target: str, pattern: str, glob: str | None, ignore_case: bool, cap: int) -> tuple[list[tuple[str, int, str]], str]:
    """The fallback when ripgrep is missing (Python's regex dialect): a child process under the bash deadline."""
    parts = tuple(p for p in target.split("/") if p not in ("", "."))
    searches = [(_base(ctx, parts), "dataroom/" if _base(ctx, parts)[0] != Path(ctx.work) else "")]
    if not parts and ctx.dataroom_source is not None:
        searches.append(((Path(ctx.dataroom_source), ()), "dataroom/"))  # work/ holds only its mount point
    try:
        matches, cut = [], False
        for (root, rest), shown_prefix in searches:
            req = fallback_grep.Request(str(root.resolve()), "/".join(rest) or ".", pattern, glob, ignore_case, cap, READ_CAP)
            found, more = fallback_grep.search(req, ctx.harness.bash_timeout_s)
            matches += [(shown_prefix + p.removeprefix("./"), n, t) for p, n, t in found]
            cut = cut or more
    except fallback_grep.Timeout as exc:
        raise ToolError(str(exc)) from exc
    except fallback_grep.BadPattern as exc:
        raise ToolError(str(exc)) from exc  # like rg's own refusal of a bad pattern: an answer, not a malformed call
    return matches, "[output truncated]" if cut else ""


def _check_glob(glob: str | None, what: str) -> None:
    if glob is not None and len(glob) > MAX_GLOB_CHARS:
        raise InvalidCall(f"the {what} is {len(glob)} characters; the most is {MAX_GLOB_CHARS}")


class _WalkCap(Exception):
    """find looked at WALK_CAP entries."""


def find(ctx: ToolContext, pattern: str, path: str = ".") -> ToolResult:
    """Files whose name or path matches a glob; data: {pattern, path, files, more (beyond the 500 listed), stopped}."""
    _check_glob(pattern, "pattern")
    parts = _parts(ctx, path)
    st = _lstat(ctx, parts, path)
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path}: not a directory")
    hits, seen = [], [0]

    prefix = [parts]

    def visit(entry: safefs.Entry) -> bool:  # lists links, never descends into them; any depth (fd-relative)
        if not prefix[0] and entry.parts == ("dataroom",) and ctx.dataroom_source is not None:
            return False  # the mount point (or link): the shared copy is walked below, as dataroom/
        if stat.S_ISDIR(entry.st.st_mode):
            return True
        seen[0] += 1
        if seen[0] > WALK_CAP:
            raise _WalkCap
        r = "/".join(prefix[0] + entry.parts)
        if fnmatch.fnmatch(entry.name, pattern) or fnmatch.fnmatch(r, pattern) or fnmatch.fnmatch(r, f"*/{pattern}"):
            hits.append(r)
        return False

    try:
        safefs.walk(_host(ctx, parts), visit)
        if not parts and ctx.dataroom_source is not None:
            prefix[0] = ("dataroom",)
            safefs.walk(Path(ctx.dataroom_source), visit)
    except _WalkCap:
        pass
    hits.sort(key=safefs.walk_order)
    stopped, more = seen[0] > WALK_CAP, max(0, len(hits) - 500)
    return ToolResult(render_find(hits[:500], more, stopped),
                      {"pattern": pattern, "path": "/".join(parts) or ".", "files": hits[:500], "more": more, "stopped": stopped})


def ls(ctx: ToolContext, path: str = ".") -> ToolResult:
    """A folder's entries; data: {path, entries: [{name, kind (dir, file, link or what it is), size (files)}]}."""
    parts = _parts(ctx, path)
    st = _lstat(ctx, parts, path)
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path}: not a directory")
    rows = []
    with os.scandir(_host(ctx, parts)) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries[:LS_CAP]:  # hidden entries too: the same view as `ls -A`
        est = entry.stat(follow_symlinks=False)
        if not parts and entry.name == "dataroom" and ctx.dataroom_source is not None:
            rows.append({"name": entry.name, "kind": "dir"})  # the shared copy's mount point (or link)
        elif stat.S_ISDIR(est.st_mode):
            rows.append({"name": entry.name, "kind": "dir"})
        elif stat.S_ISREG(est.st_mode):
            rows.append({"name": entry.name, "kind": "file", "size": est.st_size})
        elif stat.S_ISLNK(est.st_mode):
            rows.append({"name": entry.name, "kind": "link"})
        else:
            rows.append({"name": entry.name, "kind": _kind(est)})
    left = max(0, len(entries) - LS_CAP)
    text = render_ls(rows) + (f"\n[{left} more entries not listed; use find or a narrower path]" if left else "")
    return ToolResult(text, {"path": "/".join(parts) or ".", "entries": rows, "more": left})


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
