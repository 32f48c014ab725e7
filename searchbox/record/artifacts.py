"""Reading a run folder's own artifacts as untrusted input: never through a link, size-capped, depth-limited.

A run folder can be damaged (a killed write, a full disk) or edited by hand or by someone else (a link to a host
file in place of run_meta.json). Every reader of run_meta.json, state.json and the run's tables (done-checks,
collect, --resume) goes through here: the run folder itself and the artifact are opened with O_NOFOLLOW, only a
regular file is read, at most `cap` bytes, JSON no deeper than MAX_DEPTH. Anything else is a DamagedArtifact that
names the file and the problem in one line.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .. import bounds
from ..corpus import safefs
from ..errors import SearchboxError

META_CAP = 16 * 1024**2  # run_meta.json: a config, a 4,000-character answer, grades; far under this
STATE_CAP = 256 * 1024**2  # state.json holds the conversation the next request sends
TABLE_CAP = 1024**3  # turns/tool_calls.parquet (a text cell is capped at 1e6 characters by the Recorder)
MAX_DEPTH = 100  # the Recorder writes JSON at most about 66 levels deep (bounds.json_safe stops at 64)
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class DamagedArtifact(SearchboxError):
    """An artifact of a run folder that is missing, a link, a special file, too large, or does not parse."""


def _open(run_dir: Path, name: str) -> int:
    """An fd of the regular file `name` directly in run_dir, neither of them reached through a link."""
    run_dir = Path(run_dir)
    try:
        dfd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise DamagedArtifact(f"{run_dir}: no such run folder") from None
    except OSError:
        raise DamagedArtifact(f"{run_dir}: not a plain folder (a link or a file)") from None
    try:
        fd = os.open(name, _FLAGS, dir_fd=dfd)
    except FileNotFoundError:
        raise DamagedArtifact(f"{name}: missing") from None
    except OSError as exc:
        raise DamagedArtifact(f"{name}: a link or unreadable ({exc.strerror})") from None
    finally:
        os.close(dfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DamagedArtifact(f"{name}: not a regular file")
    return fd


def exists(run_dir: Path, name: str) -> bool:
    """Whether `name` is a regular file directly in run_dir (links are not)."""
    try:
        st = os.stat(Path(run_dir) / name, follow_symlinks=False)
        return stat.S_ISREG(st.st_mode) and stat.S_ISDIR(os.lstat(run_dir).st_mode)
    except OSError:
        return False


def read_bytes(run_dir: Path, name: str, cap: int) -> bytes:
    fd = _open(run_dir, name)
    try:
        size = os.fstat(fd).st_size
        if size > cap:
            raise DamagedArtifact(f"{name}: {size} bytes, over the cap of {cap}")
        data = safefs.read_fd(fd, cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise DamagedArtifact(f"{name}: over the cap of {cap} bytes")
    return data


def read_json(run_dir: Path, name: str, cap: int = META_CAP) -> Any:
    """The JSON value of an artifact; DamagedArtifact when it is empty, not UTF-8, not JSON or nested too deep."""
    data = read_bytes(run_dir, name, cap)
    if not data.strip():
        raise DamagedArtifact(f"{name}: empty")
    try:
        value = bounds.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DamagedArtifact(f"{name}: not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:
        raise DamagedArtifact(f"{name}: not JSON ({str(exc)[:120]})") from None
    if bounds.depth(value, MAX_DEPTH) > MAX_DEPTH:
        raise DamagedArtifact(f"{name}: nested deeper than {MAX_DEPTH} levels")
    return value


def read_table(run_dir: Path, name: str, schema: pa.Schema, cap: int = TABLE_CAP) -> pa.Table:
    """A run table, its columns those of `schema` that it has (each of the schema's type, else DamagedArtifact);
    columns the schema does not know are dropped unread."""
    data = read_bytes(run_dir, name, cap)
    try:
        pf = pq.ParquetFile(io.BytesIO(data))
        have = pf.schema_arrow
        wanted = [f.name for f in schema if f.name in have.names]
        for col in wanted:
            if have.field(col).type != schema.field(col).type:
                raise DamagedArtifact(f"{name}: column {col} is {have.field(col).type}, expected {schema.field(col).type}")
        return pf.read(columns=wanted)
    except DamagedArtifact:
        raise
    except (OSError, ValueError, TypeError, KeyError, IndexError, RecursionError, pa.ArrowException) as exc:
        raise DamagedArtifact(f"{name}: not a readable table ({type(exc).__name__}: {str(exc)[:120]})") from None
