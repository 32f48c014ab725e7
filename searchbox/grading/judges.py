"""Several judges at once (`grading.judges=[{name, endpoint, model, prompt}, ...]`), each greedy, each cached by its
prompt hash, the model its endpoint serves, the question and the answer (judge.py). Each judge's verdict and identity
go into the grades as `judge_<name>` and `judge_<name>_model|_endpoint|_prompt`; analysis/agreement.py measures how
often two of them, or one and the reference `correct` grade, agree."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from ..config import ModelConfig
from ..errors import ConfigError, ModelError
from .judge import PROMPTS, Judge

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass(frozen=True)
class JudgeSpec:
    name: str
    endpoint: str
    model: Optional[str] = None
    prompt: str = "searchbox"

    @classmethod
    def parse(cls, raw, n: int) -> "JudgeSpec":
        if not isinstance(raw, dict) or not raw.get("endpoint") or not raw.get("name"):
            raise ConfigError(f"grading.judges[{n}] needs a name and an endpoint, e.g. {{name: a, endpoint: http://127.0.0.1:8081}}")
        unknown = set(raw) - {"name", "endpoint", "model", "prompt"}
        if unknown:
            raise ConfigError(f"grading.judges[{n}]: unknown field {sorted(unknown)[0]!r} (name, endpoint, model, prompt)")
        if not _NAME.match(str(raw["name"])):
            raise ConfigError(f"grading.judges[{n}].name {raw['name']!r}: lower-case letters, digits and _ (it names a column)")
        if str(raw.get("prompt") or "searchbox") not in PROMPTS:
            raise ConfigError(f"grading.judges[{n}].prompt {raw.get('prompt')!r}: one of {', '.join(PROMPTS)}")
        return cls(str(raw["name"]), str(raw["endpoint"]), raw.get("model"), str(raw.get("prompt") or "searchbox"))


def connect(raw: list, base: Optional[ModelConfig] = None) -> list[tuple[str, Judge]]:
    raw = [dict(r.items()) if hasattr(r, "items") else r for r in (raw or [])]  # a Hydra DictConfig reads as a dict
    specs = [JudgeSpec.parse(r, n) for n, r in enumerate(raw)]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"grading.judges: two judges are named {next(n for n in names if names.count(n) > 1)!r}")
    return [(s.name, Judge.connect(s.endpoint, s.model, base, s.prompt)) for s in specs]


def verdicts(judges: list[tuple[str, Judge]], question: str, golds: list[str], answer: str) -> dict:
    out: dict = {}
    for name, judge in judges:
        try:
            ident = judge.identity()
            out.update({f"judge_{name}_{k.removeprefix('judge_')}": v for k, v in ident.items()})
            v = judge(question, golds, answer)
            out[f"judge_{name}"] = None if math.isnan(v) else v
        except ModelError as exc:
            out[f"judge_{name}"], out[f"judge_{name}_error"] = None, str(exc)[:300]
    return out
