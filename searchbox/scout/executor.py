"""The bounded executor of scout actions over one repository: no shell, no links, no hidden or escaping paths.

Every action the model chooses lands here: `files(glob)` and `grep(pattern, glob)` run ripgrep (no
shell, no config file, no link following, hidden files skipped, files over the size cap skipped,
the repository's own ignore rules followed) with a deadline and a cap on what it may print; `read` and `finish` open files one component at a
time with O_NOFOLLOW (searchbox.corpus.safefs). The executor remembers which lines of which file version
the model was shown, so `finish` can only cite lines it actually read, and it re-hashes the file
before handing back the reference.

Ignore rules govern discovery, not access: `files` and `grep` never show a file the repository's
.gitignore/.ignore/.rgignore hides (a positive `--glob` would override them in ripgrep, so globbed
results are checked against the unglobbed inventory), while `read` of an explicitly named ignored file
works; the root directory is the access boundary.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import selectors
import shutil
import signal
import stat
import subprocess
import math
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Optional

from jsonschema import Draft202012Validator

from ..corpus import safefs
from ..errors import SetupError
from .actions import ACTIONS
from .config import ExecutorLimits

MAX_PATTERN_CHARS = 500
MAX_ARG_CHARS = 4096  # longest string argument of any action (paths, globs; a pattern is held to MAX_PATTERN_CHARS)
MAX_LINE = 10**9  # largest line number an action may name (a file under the 1 MB cap has far fewer)
REGEX_SIZE_LIMIT = "10M"  # a pattern that compiles past this is refused at once instead of eating memory
INVENTORY_BYTES = 16 * 1024**2  # the visible-file list a globbed result is checked against: paths only, so room for ~300k files
_VALIDATORS = {spec.name: Draft202012Validator(spec.parameters) for spec in ACTIONS}


class ActionError(Exception):
    """An action the executor refuses; the model reads the message as the action's result."""


@dataclass(frozen=True)
class Reference:
    """A verified answer: lines start..end (1-based, inclusive) of a file the model read, with its hash."""

    path: str
    start_line: int
    end_line: int
    sha256: str
    content: str = ""  # the cited lines as the file holds them (what the caller reads; max_chars bounds their sum)

    def to_dict(self) -> dict:
        return {"path": self.path, "start_line": self.start_line, "end_line": self.end_line, "sha256": self.sha256,
                "content": self.content}


@dataclass
class Match:
    path: str
    line: int
    text: str


@dataclass
class Result:
    """One executed action: what the model reads, and the structured data a control policy or the log uses."""

    action: str
    arguments: dict
    ok: bool
    text: str
    error: str = ""
    paths: list[str] = field(default_factory=list)
    data: Any = None  # files: [path]; grep: [Match]; read: (path, start, end, lines); finish: Reference
    output_chars: int = 0
    duration_ms: float = 0.0
    programs: list[str] = field(default_factory=list)


@dataclass
class _Seen:
    """The version of a file the model was shown, and which of its lines."""

    sha256: str
    ranges: list[tuple[int, int]] = field(default_factory=list)

    def covers(self, start: int, end: int) -> bool:
        nxt = start
        for a, b in sorted(self.ranges):
            if a <= nxt <= b:
                nxt = b + 1
            if nxt > end:
                return True
        return nxt > end


def split_lines(data: bytes) -> list[str]:
    """A file's lines as editors and ripgrep number them: split on \\n only, a final newline ends the last line."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ActionError(f"{name} must be a line number, got {_show(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ActionError(f"{name} must be a line number, got {value!r}")
    try:
        number = int(value)
    except (ValueError, OverflowError):
        raise ActionError(f"{name} must be a line number, got {_show(value)}") from None
    if isinstance(value, float) and value != number:
        raise ActionError(f"{name} must be a whole line number, got {value!r}")
    if not -MAX_LINE <= number <= MAX_LINE:
        raise ActionError(f"{name} must be a line number of at most {MAX_LINE}")
    return number


def _clean(text: str, limit: int = 600) -> str:
    """Text the model (and the log) may read back: cut, lone surrogates escaped (they cannot be encoded)."""
    text = text if len(text) <= limit else text[:limit] + "..."
    return text.encode("utf-8", errors="backslashreplace").decode("utf-8")


def _show(value: Any, limit: int = 80) -> str:
    """A model's value as an error names it: repr for scalars, the type for containers (they may nest deep)."""
    return _clean(repr(value) if not isinstance(value, (dict, list)) else f"a {type(value).__name__}", limit)


def check_arguments(action: str, args: dict) -> None:
    """Refuse (ActionError) arguments an action cannot take as sent: off its schema, non-finite or out-of-range
    numbers, strings with NUL, lone surrogates or past MAX_ARG_CHARS. Every action's arguments pass here first."""
    for key, value in args.items():
        if isinstance(value, str):
            if len(value) > MAX_ARG_CHARS:
                raise ActionError(f"{key}: {len(value)} characters; at most {MAX_ARG_CHARS}")
            if "\x00" in value:
                raise ActionError(f"{key}: contains a NUL byte")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ActionError(f"{key}: not valid Unicode (a lone surrogate such as half an emoji)") from None
        elif isinstance(value, float) and not math.isfinite(value):
            raise ActionError(f"{key}: {value!r} is not a number an action takes")
        elif isinstance(value, int) and not isinstance(value, bool) and not -MAX_LINE <= value <= MAX_LINE:
            raise ActionError(f"{key}: a number past {MAX_LINE}")
        elif isinstance(value, (dict, list)):
            raise ActionError(f"{key}: {_show(value)} is not a value an action takes")
    validator = _VALIDATORS.get(action)
    error = next(iter(validator.iter_errors(args)), None) if validator is not None else None
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        what = error.message if error.validator != "type" else f"{_show(error.instance)} is not of type {error.validator_value!r}"
        raise ActionError(f"bad arguments for {action}: {(where + ': ') if where else ''}{_clean(what, 300)}")


class Executor:
    """Runs actions against one repository root; holds what the model has read (one per scout run)."""

    def __init__(self, root: Path, limits: Optional[ExecutorLimits] = None, rg: Optional[str] = None, max_chars: Optional[int] = None):
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ActionError(f"{root}: not a directory")
        self.limits = limits or ExecutorLimits()
        self.max_chars = max_chars  # characters of source all accepted finishes may cite together (None: no cap)
        self.returned_chars = 0
        self.rg = rg or shutil.which("rg")
        if not self.rg:
            raise SetupError("ripgrep (rg) not found: apt-get install ripgrep")
        self.seen: dict[str, _Seen] = {}

    # ---- dispatch -----------------------------------------------------------------------------
    def execute(self, action: str, arguments: Optional[dict] = None) -> Result:
        """Run one action; a refusal comes back as a failed Result, never as an exception."""
        args = dict(arguments or {})
        start = time.monotonic()
        handlers = {"files": self.files, "grep": self.grep, "read": self.read, "finish": self.finish, "not_found": self.not_found}
        handler = handlers.get(action)
        try:
            if handler is None:
                raise ActionError(f"unknown action {_show(action)}; use one of {', '.join(handlers)}")
            check_arguments(action, args)
            result = handler(**args)
        except TypeError as exc:
            result = Result(action, args, False, "", f"bad arguments for {action}: {exc}")
        except (ActionError, safefs.UnsafePath) as exc:
            result = Result(action, args, False, "", _clean(str(exc)))
        except (ValueError, UnicodeError, OverflowError, RecursionError) as exc:  # found later (exec, an encoding): still the model's
            result = Result(action, args, False, "", f"bad arguments for {action}: {type(exc).__name__}: {_clean(str(exc), 300)}")
        result.action, result.arguments = action, args
        if not result.ok:
            result.text = f"Error: {result.error}"
        result.output_chars = len(result.text)
        result.duration_ms = (time.monotonic() - start) * 1000
        return result

    # ---- paths --------------------------------------------------------------------------------
    def normalize(self, path: Any) -> str:
        """A repository-relative POSIX path, or ActionError naming why it is refused."""
        if not isinstance(path, str) or not path.strip():
            raise ActionError("path must be a non-empty string relative to the repository root")
        parts = safefs.parts_of(path.strip())
        if not parts:
            raise ActionError(f"{path}: not a file path")
        for part in parts:
            if part.startswith("."):
                raise ActionError(f"{path}: hidden paths (a component starting with '.') are not searched")
        return "/".join(parts)

    def _check(self, rel: str) -> os.stat_result:
        """lstat every component for a precise refusal message (the read itself re-checks with O_NOFOLLOW)."""
        parts = rel.split("/")
        current = self.root
        for i, name in enumerate(parts):
            current = current / name
            so_far = "/".join(parts[: i + 1])
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                raise ActionError(f"{rel}: no such file") from None
            except OSError as exc:
                raise ActionError(f"{rel}: cannot open ({exc.strerror})") from None
            if stat.S_ISLNK(st.st_mode):
                raise ActionError(f"{rel}: {so_far} is a symbolic link; links are not followed")
            if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
                raise ActionError(f"{rel}: {so_far} is not a directory")
        if stat.S_ISDIR(st.st_mode):
            raise ActionError(f"{rel}: is a directory; list it with files(\"{rel}/**\")")
        if not stat.S_ISREG(st.st_mode):
            raise ActionError(f"{rel}: not a regular file")
        if st.st_size > self.limits.max_file_bytes:
            raise ActionError(f"{rel}: {st.st_size} bytes; files over {self.limits.max_file_bytes} bytes are refused")
        return st

    def load(self, path: Any) -> tuple[str, bytes]:
        """(normalized path, bytes) of a regular file reached without links, within the size cap."""
        rel = self.normalize(path)
        self._check(rel)
        data = safefs.read_bytes(self.root, rel, cap=self.limits.max_file_bytes + 1)
        if data is None:
            raise ActionError(f"{rel}: changed into a link or special file while being opened; refused")
        if len(data) > self.limits.max_file_bytes:
            raise ActionError(f"{rel}: over {self.limits.max_file_bytes} bytes; files over the cap are refused")
        return rel, data

    # ---- actions ------------------------------------------------------------------------------
    def files(self, glob: Optional[str] = None) -> Result:
        argv = ["--files"]
        globbed = glob not in (None, "", "*", "**", "**/*")
        if globbed:
            argv += ["--glob", self._glob(glob)]
        lines, note = self._rg(argv)
        paths = [p for p in (self._display(line) for line in lines) if p]
        if globbed:
            paths, more = self._visible(paths)
            note += more
        paths = self._prioritized(paths)
        if not paths:
            return Result("files", {}, True, f"no files match {glob!r}" + note, data=[], programs=["rg"])
        shown = paths[: self.limits.files_max]
        text = "\n".join(shown)
        if len(paths) > len(shown):
            text += f"\n[{len(paths) - len(shown)} more files; use a narrower glob]"
        return Result("files", {}, True, text + note, paths=shown, data=paths, programs=["rg"])

    def grep(self, pattern: Any = None, glob: Optional[str] = None) -> Result:
        if not isinstance(pattern, str) or not pattern:
            raise ActionError("pattern must be a non-empty regular expression")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise ActionError(f"pattern is {len(pattern)} characters; at most {MAX_PATTERN_CHARS}")
        case = {"insensitive": "--ignore-case", "smart": "--smart-case", "sensitive": "--case-sensitive"}[self.limits.grep_case]
        argv = ["--line-number", "--with-filename", "--null", "--no-heading", case,
                "--max-count", str(self.limits.grep_max_per_file), "--max-columns", str(self.limits.line_max_chars),
                "--max-columns-preview", "--regex-size-limit", REGEX_SIZE_LIMIT, "--regexp", pattern]
        globbed = glob not in (None, "", "*", "**", "**/*")
        if globbed:
            argv += ["--glob", self._glob(glob)]
        lines, note = self._rg(argv)
        matches = []
        for line in lines:
            name, sep, rest = line.partition("\0")
            number, sep2, body = rest.partition(":")
            path = self._display(name)
            if not (sep and sep2 and number.isdigit() and path):
                continue
            matches.append(Match(path, int(number), body))
        if globbed:
            visible, more = self._visible([m.path for m in matches])
            keep = set(visible)
            matches = [m for m in matches if m.path in keep]
            note += more
        first = self._prioritized(list(dict.fromkeys(m.path for m in matches)))
        order = {p: i for i, p in enumerate(first)}
        matches.sort(key=lambda m: order[m.path])  # stable: line order within a file stays
        if not matches:
            return Result("grep", {}, True, "no matches" + note, data=[], programs=["rg"])
        shown = matches[: self.limits.grep_max_lines]
        text = "\n".join(f"{m.path}:{m.line}: {m.text}" for m in shown)
        if len(matches) > len(shown):
            files = len({m.path for m in matches})
            text += f"\n[{len(matches) - len(shown)} more matching lines (in {files} files in all); narrow the pattern or glob]"
        paths = list(dict.fromkeys(m.path for m in shown))
        return Result("grep", {}, True, text + note, paths=paths, data=matches, programs=["rg"])

    def read(self, path: Any = None, start: Any = 1, end: Any = None) -> Result:
        rel, data = self.load(path)
        if b"\x00" in data[:8192]:
            raise ActionError(f"{rel}: binary file ({len(data)} bytes); not shown")
        lines = split_lines(data)
        n = len(lines)
        first = _int(start if start is not None else 1, "start")
        first = max(first, 1)
        if n == 0:
            raise ActionError(f"{rel}: empty file")
        if first > n:
            raise ActionError(f"{rel}: start={first} is past the end (the file has {n} lines)")
        last = n if end is None else _int(end, "end")
        if last < first:
            raise ActionError(f"{rel}: end={last} is before start={first}")
        last = min(last, n, first + self.limits.read_max_lines - 1)
        cap = self.limits.line_max_chars
        shown, size = [], 0
        for i, ln in enumerate(lines[first - 1:last], first):
            row = f"{i:5d}  {ln if len(ln) <= cap else ln[:cap] + ' [line cut]'}"
            if shown and size + len(row) + 1 > self.limits.read_max_chars:
                break  # whole lines only; the first line always shows (it is at most line_max_chars long)
            shown.append(row)
            size += len(row) + 1
        last = first + len(shown) - 1
        digest = sha256_hex(data)
        seen = self.seen.get(rel)
        changed = seen is not None and seen.sha256 != digest
        if seen is None or changed:
            seen = self.seen[rel] = _Seen(digest)  # lines read of an older version no longer count
        seen.ranges = _merge(seen.ranges + [(first, last)])
        body = "\n".join(shown)
        head = f"{rel} (lines {first}-{last} of {n})" + (" [the file changed since you last read it]" if changed else "")
        tail = f"\n[{n - last} more lines; read on with start={last + 1}]" if last < n else ""
        return Result("read", {}, True, f"{head}:\n{body}{tail}", paths=[rel], data=(rel, first, last, lines[first - 1:last]))

    def finish(self, path: Any = None, start: Any = None, end: Any = None) -> Result:
        rel = self.normalize(path)
        if start is None or end is None:
            raise ActionError("finish needs path, start and end (line numbers you have read)")
        first, last = _int(start, "start"), _int(end, "end")
        if first < 1 or last < first:
            raise ActionError(f"finish refused: lines {first}-{last} are not a range (need 1 <= start <= end)")
        seen = self.seen.get(rel)
        if seen is None:
            raise ActionError(f"finish refused: you have not read {rel}; read the lines you cite first")
        if not seen.covers(first, last):
            read = ", ".join(f"{a}-{b}" for a, b in seen.ranges)
            raise ActionError(f"finish refused: lines {first}-{last} of {rel} lie outside the lines you read ({read})")
        _, data = self.load(rel)
        digest = sha256_hex(data)
        if digest != seen.sha256:
            raise ActionError(f"finish refused: {rel} changed since you read it (sha256 {seen.sha256[:12]}... then, "
                              f"{digest[:12]}... now); read it again")
        content = "\n".join(split_lines(data)[first - 1:last])
        if self.max_chars is not None and self.returned_chars + len(content) > self.max_chars:
            left = self.max_chars - self.returned_chars
            raise ActionError(f"finish refused: lines {first}-{last} of {rel} are {len(content)} characters of source and "
                              f"{left} of the {self.max_chars} allowed (max_chars) are left; cite a shorter range")
        self.returned_chars += len(content)
        ref = Reference(rel, first, last, digest, content)
        return Result("finish", {}, True, f"reference accepted: {rel}:{first}-{last}", paths=[rel], data=ref)

    def not_found(self) -> Result:
        return Result("not_found", {}, True, "not_found recorded: the search ends without a reference")

    # ---- ripgrep ------------------------------------------------------------------------------
    def _glob(self, glob: Any) -> str:
        if not isinstance(glob, str):
            raise ActionError(f"glob must be a string such as '*.py' or 'src/**', got {glob!r}")
        body = glob.lstrip("!")
        if body.startswith("/") or ".." in PurePosixPath(body).parts:
            raise ActionError(f"glob {glob!r} leaves the repository; use a relative glob such as 'src/**/*.py'")
        if glob.endswith("/"):
            glob += "**"  # a directory: everything under it (ripgrep alone would match only the directory itself)
        return glob

    def _visible(self, paths: list[str]) -> tuple[list[str], str]:
        """Those of `paths` the unglobbed inventory shows: a positive glob overrides ignore rules in ripgrep,
        and ignore rules must govern discovery whatever glob the model sends."""
        if not self.limits.ignore_rules or not paths:
            return paths, ""
        lines, note = self._rg(["--files"], INVENTORY_BYTES)
        inventory = {p for p in (self._display(line) for line in lines) if p}
        return [p for p in paths if p in inventory], note

    def top_level(self, limit: int = 40) -> str:
        """The repository's top level as discovery sees it (ignored entries left out), for the first message."""
        lines, _ = self._rg(["--files"], INVENTORY_BYTES)
        names = sorted({p.split("/")[0] + ("/" if "/" in p else "") for p in (self._display(line) for line in lines) if p})
        more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
        return ", ".join(names[:limit]) + more

    def _prioritized(self, paths: list[str]) -> list[str]:
        """Paths under the priority folders first, in their order (src/, then lib/), then the rest; within each group
        ripgrep's sorted path order stays."""
        prefixes = [d if d.endswith("/") else d + "/" for d in self.limits.priority_dirs]
        if not prefixes:
            return paths
        return sorted(paths, key=lambda p: next((i for i, d in enumerate(prefixes) if p.startswith(d)), len(prefixes)))

    def _display(self, raw: str) -> Optional[str]:
        """ripgrep's path as a repository-relative path; None for anything hidden (defence in depth)."""
        path = raw[2:] if raw.startswith("./") else raw
        if not path or any(p.startswith(".") for p in path.split("/")):
            return None
        return path

    def _rg(self, args: list[str], cap: Optional[int] = None) -> tuple[list[str], str]:
        """Run ripgrep under the deadline and output cap; (lines, note for the model). Errors raise ActionError."""
        lim = self.limits
        cap = max(cap or 0, lim.grep_output_bytes)
        # The repository's own ignore rules, with or without a .git folder, and nothing from outside it (a parent's
        # .gitignore or the user's global excludes would make the same repository search differently elsewhere).
        ignore = ["--no-require-git", "--no-ignore-parent", "--no-ignore-global"] if lim.ignore_rules else ["--no-ignore"]
        argv = [self.rg, "--no-config", *ignore, "--no-follow", "--no-messages", "--color", "never", "--sort", "path",
                "--max-filesize", str(lim.max_file_bytes), *args, "--", "./"]
        proc = subprocess.Popen(argv, cwd=self.root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"})
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + lim.grep_timeout_s
        timed_out = capped = False
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        try:
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for key, _ in sel.select(timeout=min(left, 0.5)):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    key.data.extend(chunk)
                if len(out) >= cap:
                    capped = True
                    break
        finally:
            sel.close()
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        if timed_out:
            raise ActionError(f"ripgrep was stopped at the {lim.grep_timeout_s:g}s deadline: the pattern is too expensive "
                              "over this repository; use a simpler pattern or a narrower glob")
        if proc.returncode == 2 and not out:
            message = err.decode("utf-8", errors="replace").strip().splitlines()
            raise ActionError("ripgrep refused the request: " + (" ".join(message)[:400] if message else "error"))
        text = bytes(out[:cap]).decode("utf-8", errors="replace")
        lines = text.split("\n")
        lines.pop()  # the empty string after the final newline, or a line cut by the cap
        note = f"\n[output stopped at {cap} bytes; results are incomplete]" if capped else ""
        return lines, note

