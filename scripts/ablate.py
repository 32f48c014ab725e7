"""`python -m scripts.ablate`: one question, one dataroom, one budget, over a matrix of configs (the reference
design's ablation command), through the same run machinery as every run: keys, grading, key.json, parquet.

    python -m scripts.ablate --query "Who wrote it?" --dataroom room.zip --budget 3 [--matrix FILE] --out DIR \
                             [--gold ANSWER [--alias A ...] [--gold-file PATH ...]] [--endpoint URL] [--model ID]

The matrix is a JSON or YAML mapping {name: overrides} (or a list of {name, ...overrides}); overrides are
RunConfig fields, e.g. `{tools: high}` or `{tools: [grep, read], harness: {delivery: file}}`. The default
matrix is the design's: high_level (tools=high), low_level (tools=low), no_tools (tools=none).

DIR/results.jsonl gets one row per config, in matrix order, written as each run ends: name, the overrides,
run_id (its key), run_dir, stop_reason, turns, tool_calls, tokens, the answer, and its grades (when --gold is
given; else null). DIR/runs/NAME/ is each run's folder. DIR must be new or empty.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from searchbox import knobs
from searchbox.config import RunConfig
from searchbox.corpus.dataroom import packaged_corpus
from searchbox.errors import ConfigError, SearchboxError, cli

DEFAULT_MATRIX = {"high_level": {"tools": "high"}, "low_level": {"tools": "low"}, "no_tools": {"tools": "none"}}
NAME_CHARS = 64
MATRIX_BYTES = 1024**2


def read_matrix(path: Optional[Path]) -> dict[str, dict]:
    """{name: overrides} from a JSON or YAML file (one-line ConfigError for anything else)."""
    if path is None:
        return copy.deepcopy(DEFAULT_MATRIX)
    if not path.is_file() or path.stat().st_size > MATRIX_BYTES:
        raise ConfigError(f"--matrix {path}: not a regular file of at most {MATRIX_BYTES} bytes")
    text = path.read_text(encoding="utf-8", errors="strict")
    import yaml

    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise ConfigError(f"--matrix {path}: not valid {kind} ({(str(exc).splitlines() or [''])[0][:120]})") from None
    if isinstance(data, list):
        if not all(isinstance(item, dict) and isinstance(item.get("name"), str) for item in data):
            raise ConfigError(f"--matrix {path}: a list must hold mappings, each with a `name`")
        data = {item["name"]: {k: v for k, v in item.items() if k != "name"} for item in data}
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"--matrix {path}: expected a mapping of config names to overrides")
    for name, overrides in data.items():
        if not isinstance(name, str) or not name or len(name) > NAME_CHARS or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
            raise ConfigError(f"--matrix {path}: config name {str(name)[:40]!r} (letters, digits, - _ . ; at most {NAME_CHARS})")
        if not isinstance(overrides, dict):
            raise ConfigError(f"--matrix {path}: {name}: expected a mapping of overrides")
    return data


def _merge(base: dict, overrides: dict, where: str) -> dict:
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict):
            if not isinstance(out.get(key), dict):
                raise ConfigError(f"{where}: {key} is not a config section")
            out[key] = _merge(out[key], value, f"{where}.{key}")
        else:
            out[key] = value
    return out


def config_of(base: RunConfig, name: str, overrides: dict) -> RunConfig:
    try:
        return RunConfig.from_dict(_merge(asdict(base), overrides, name))
    except ConfigError as exc:
        raise ConfigError(f"matrix config {name}: {exc}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scripts.ablate", description=__doc__.splitlines()[0].split(": ", 1)[-1])
    parser.add_argument("--query", required=True, help="the question")
    parser.add_argument("--dataroom", default=None, help="zip or folder (default: the packaged corpus)")
    parser.add_argument("--budget", type=int, default=1, help="turns (default 1)")
    parser.add_argument("--matrix", type=Path, default=None, help="JSON or YAML {name: overrides} (default: high_level, low_level, no_tools)")
    parser.add_argument("--out", type=Path, required=True, help="new or empty folder: results.jsonl and runs/NAME/")
    parser.add_argument("--gold", default=None, help="the gold answer (the rows are graded when given)")
    parser.add_argument("--alias", action="append", default=[], help="another accepted answer (repeatable)")
    parser.add_argument("--gold-file", action="append", default=[], help="a file that holds the answer, dataroom-relative (repeatable)")
    parser.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL (default: $LLAMA_URL, else the embedded llama-server)")
    parser.add_argument("--model", default=None, help="model id sent in requests (default: $MODEL_ID)")
    parser.add_argument("--policy", choices=["keyword", "dense", "oracle"], default=None, help="a non-neural control instead of a model")
    return parser


@cli
def main(argv: Optional[list[str]] = None) -> int:
    from searchbox.grading import Question, grade
    from searchbox.run.cli import prepare_out
    from searchbox.run.identity import dataroom_identity
    from searchbox.run.runner import endpoint_for, execute

    args = _parser().parse_args(argv)
    if args.budget < 1:
        raise SearchboxError("--budget must be at least 1")
    matrix = read_matrix(args.matrix)
    base = RunConfig()
    base.harness.budget, base.model.model, base.model.policy = args.budget, args.model, args.policy
    given = frozenset({"harness.budget"} | ({"model.model"} if args.model else set()))
    knobs.apply(base, given)  # $SEARCHBOX_TOOLS ... as for searchbox.run; the matrix's own overrides win over them
    configs = {name: config_of(base, name, overrides) for name, overrides in matrix.items()}  # every config checked first
    dataroom = args.dataroom or packaged_corpus()
    dataroom_identity(dataroom)
    prepare_out(args.out, overwrite=False)
    question = Question(id="ablate", question=args.query, answer=args.gold or "", aliases=args.alias, gold_files=args.gold_file) if args.gold else None
    results = args.out / "results.jsonl"
    with endpoint_for(next(iter(configs.values())), args.endpoint) as url:
        for name, cfg in configs.items():
            run_dir = args.out / "runs" / name
            meta = execute(cfg, args.query, dataroom, run_dir, url)
            answer = (run_dir / "work" / "ANSWER.md").read_text(encoding="utf-8", errors="replace") if (run_dir / "work" / "ANSWER.md").is_file() else ""
            row: dict[str, Any] = {"name": name, "overrides": matrix[name], "run_id": meta.get("run_id"), "run_dir": str(run_dir),
                                   "stop_reason": meta.get("stop_reason"), "turns": meta.get("turns"), "tool_calls": meta.get("tool_calls"),
                                   "tokens": meta.get("tokens"), "answer": answer, "grades": grade(run_dir, question) if question else None}
            with results.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, default=str) + "\n")
            print(f"{name}: {row['stop_reason']}, {row['turns']} turns, {row['tool_calls']} tool calls"
                  + (f", correct {row['grades']['correct']}" if question else ""), file=sys.stderr)
    print(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
