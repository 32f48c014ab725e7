"""Reading a data set's files as a stream of records: jsonl, a JSON array, or parquet, in bounded memory.

Every record comes with where it was read (file and line or index), so a bad one is named in one line:
`DatasetError("corpus.jsonl:12: record 'doc7': field 'text' is missing")`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..errors import ConfigError

CHUNK = 1 << 20  # bytes read at a time from a JSON array
MAX_RECORD = 256 << 20  # a JSON array element larger than this is refused, not buffered without end


class DatasetError(ConfigError):
    """A data set's file or record cannot be imported; the message names the record and the field."""


@dataclass(frozen=True)
class Record:
    where: str  # "file:line" (jsonl), "file[index]" (JSON array, parquet)
    data: dict

    def label(self, id_field: str = "") -> str:
        rid = self.data.get(id_field) if id_field else None
        return f"{self.where}: record {json.dumps(str(rid))}" if rid not in (None, "") else f"{self.where}"

    def fail(self, field: str, problem: str, id_field: str = "") -> DatasetError:
        return DatasetError(f"{self.label(id_field)}: field {field!r} {problem}")

    def text(self, field: str, id_field: str = "", required: bool = True) -> str:
        """A string field (numbers are taken as their text); DatasetError when missing or of another type."""
        value = self.data.get(field)
        if value is None:
            if required:
                raise self.fail(field, "is missing", id_field)
            return ""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail(field, f"must be a string, not {type(value).__name__}", id_field)
        return str(value)

    def items(self, field: str, id_field: str = "", required: bool = True) -> list:
        value = self.data.get(field)
        if value is None:
            if required:
                raise self.fail(field, "is missing", id_field)
            return []
        if not isinstance(value, list):
            raise self.fail(field, f"must be a list, not {type(value).__name__}", id_field)
        return value


def records(path: Path) -> Iterator[Record]:
    """The records of one file, by its suffix: .jsonl, .json (an array, or one object per line), .parquet."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    if path.suffix == ".parquet":
        yield from _parquet(path)
    elif path.suffix == ".json" and _first_char(path) == "[":
        yield from _array(path)
    else:
        yield from _jsonl(path)


def _first_char(path: Path) -> str:
    with open(path, "rb") as fh:
        while chunk := fh.read(4096):
            stripped = chunk.lstrip()
            if stripped:
                return chr(stripped[0])
    return ""


def _checked(where: str, value: Any) -> Record:
    if not isinstance(value, dict):
        raise DatasetError(f"{where}: a record must be a JSON object, not {type(value).__name__}")
    return Record(where, value)


def _jsonl(path: Path) -> Iterator[Record]:
    with open(path, encoding="utf-8", errors="strict") as fh:
        n = 0
        while True:
            n += 1
            try:
                line = fh.readline()
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{path.name}:{n}: not UTF-8 ({exc.reason})") from exc
            if not line:
                return
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise DatasetError(f"{path.name}:{n}: not JSON ({exc.msg} at column {exc.colno})") from exc
            yield _checked(f"{path.name}:{n}", value)


def _array(path: Path) -> Iterator[Record]:
    """The elements of a top-level JSON array, decoded one at a time (a 2 GB file never sits in memory whole)."""
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8", errors="strict") as fh:
        buf, pos, index, eof = "", 0, 0, False

        def more() -> bool:
            nonlocal buf, pos, eof
            try:
                chunk = fh.read(CHUNK)
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{path.name}[{index}]: not UTF-8 ({exc.reason})") from exc
            buf, pos = buf[pos:] + chunk, 0
            eof = not chunk
            return bool(chunk)

        more()
        buf = buf.lstrip()
        if not buf.startswith("["):
            raise DatasetError(f"{path.name}: not a JSON array")
        pos = 1
        while True:
            while True:  # skip blanks and one comma
                while pos < len(buf) and buf[pos] in " \t\r\n,":
                    pos += 1
                if pos < len(buf) or not more():
                    break
            if pos >= len(buf):
                raise DatasetError(f"{path.name}[{index}]: the array is cut short (no closing ']')")
            if buf[pos] == "]":
                return
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                    break
                except ValueError as exc:
                    if len(buf) - pos > MAX_RECORD:
                        raise DatasetError(f"{path.name}[{index}]: a record over {MAX_RECORD >> 20} MiB") from exc
                    if eof or not more():
                        raise DatasetError(f"{path.name}[{index}]: not JSON ({exc.msg})") from exc
            yield _checked(f"{path.name}[{index}]", value)
            index, pos = index + 1, end


def _parquet(path: Path) -> Iterator[Record]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not parquet
        raise DatasetError(f"{path.name}: not a parquet file ({exc})") from exc
    index = 0
    for batch in pf.iter_batches(batch_size=512):
        for row in batch.to_pylist():
            yield Record(f"{path.name}[{index}]", row)
            index += 1
