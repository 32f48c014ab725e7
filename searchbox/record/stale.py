"""Runs whose question is no longer in its file as it was asked: reworded or removed since the run.

A reworded question is another run (the question text is in the run key), so the old wording's run would stay in
the tables beside the new one: two rows for one question of the file. collect drops a run whose question file
(the run's own `questions_path`) now lacks its id or words it differently; a run without a question file, or whose
file is gone or unreadable, is kept (nothing says it is stale). Only `id` and `question` are read, bounded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .. import bounds

FILE_CAP = 256 * 1024**2  # bytes of a question file read to compare wordings
LINE_DEPTH = 32


class QuestionTexts:
    """id -> question text of each question file, read once per collect."""

    def __init__(self) -> None:
        self._files: dict[str, Optional[dict[str, str]]] = {}

    def of(self, path: str) -> Optional[dict[str, str]]:
        if path not in self._files:
            self._files[path] = read_texts(Path(path))
        return self._files[path]

    def why_stale(self, meta: dict) -> Optional[str]:
        """Why the run's row would be stale ("reworded in FILE", "removed from FILE"), or None to keep it."""
        path = meta.get("questions_path")
        qid = meta.get("question_id")
        if not isinstance(path, str) or not path or not isinstance(qid, str) or not qid:
            return None
        texts = self.of(path)
        if texts is None:
            return None
        if qid not in texts:
            return f"question {qid} removed from {path}"
        if texts[qid] != meta.get("question"):
            return f"question {qid} reworded in {path}"
        return None


def read_texts(path: Path) -> Optional[dict[str, str]]:
    """id -> question of a jsonl question file; None when it is not a readable regular file of at most FILE_CAP."""
    try:
        if not path.is_file() or path.stat().st_size > FILE_CAP:
            return None
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            raw = bounds.loads(line)
        except ValueError:
            continue
        if isinstance(raw, dict) and isinstance(raw.get("question"), str) and isinstance(raw.get("id"), (str, int)) \
                and not isinstance(raw.get("id"), bool):
            out.setdefault(str(raw["id"]), raw["question"])
    return out
