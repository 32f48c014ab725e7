"""Tidy frames from sweep parquet (runs, turns, tool calls) and the statistics the figures share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import numpy as np
import pandas as pd

GRADERS = ("contains", "exact_match", "f1", "judge", "retrieval_hit")


@dataclass
class Frames:
    runs: pd.DataFrame
    turns: pd.DataFrame
    calls: pd.DataFrame


def load(dirs: Iterable[Path | str]) -> Frames:
    """Read runs/turns/tool_calls parquet from each sweep dir (collecting run dirs when the tables are absent)."""
    from ..collect import collect

    parts: dict[str, list[pd.DataFrame]] = {"runs": [], "turns": [], "tool_calls": []}
    for d in map(Path, dirs):
        if (d / "runs.parquet").exists():
            for name in parts:
                if (d / f"{name}.parquet").exists():
                    parts[name].append(pd.read_parquet(d / f"{name}.parquet"))
        else:
            runs, turns, calls = collect([d])
            parts["runs"].append(runs)
            parts["turns"].append(turns)
            parts["tool_calls"].append(calls)
    cat = lambda frames: pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    runs = cat(parts["runs"])
    if not runs.empty and "run_id" in runs:
        runs = runs.drop_duplicates("run_id", keep="last").reset_index(drop=True)
    return Frames(runs, cat(parts["turns"]), cat(parts["tool_calls"]))


def bootstrap_ci(values: Iterable[float], n_boot: int = 2000, alpha: float = 0.05, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): percentile bootstrap of the mean; NaN values are missing, not zero."""
    x = np.asarray([v for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))], dtype=float)
    if x.size == 0:
        return (np.nan, np.nan, np.nan)
    rng = np.random.default_rng(seed)
    means = rng.choice(x, size=(n_boot, x.size), replace=True).mean(axis=1)
    return float(x.mean()), float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def accuracy_table(runs: pd.DataFrame, grader: str = "contains", by: tuple[str, ...] = ("tools", "budget")) -> pd.DataFrame:
    """Mean of a grader per group with bootstrap 95% CIs and counts."""
    by = [b for b in by if b in runs.columns]
    rows = []
    if grader not in runs.columns:
        return pd.DataFrame(columns=[*by, "n", "mean", "ci_low", "ci_high"])
    for key, group in runs.groupby(by, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        mean, lo, hi = bootstrap_ci(group[grader].astype(float))
        rows.append({**dict(zip(by, key)), "n": int(group[grader].notna().sum()), "mean": mean, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def tool_usage(calls: pd.DataFrame, by: str = "tools") -> pd.DataFrame:
    """Counts of tool choices per group; bash calls are split into the programs they ran ("bash:grep")."""
    if calls.empty:
        return pd.DataFrame(columns=[by, "choice", "count", "share"])
    rows = []
    for _, call in calls.iterrows():
        group = call.get(by, "all")
        programs = call.get("programs")
        if call["tool"] == "bash" and programs is not None and len(programs):
            rows.extend({by: group, "choice": f"bash:{p}"} for p in programs)
        else:
            rows.append({by: group, "choice": call["tool"]})
    df = pd.DataFrame(rows).groupby([by, "choice"]).size().rename("count").reset_index()
    df["share"] = df["count"] / df.groupby(by)["count"].transform("sum")
    return df.sort_values([by, "count"], ascending=[True, False]).reset_index(drop=True)


def tokens_per_turn(turns: pd.DataFrame, by: Optional[str] = "tools") -> pd.DataFrame:
    """Mean uncached prompt, cached prompt and completion tokens per turn index."""
    if turns.empty:
        return pd.DataFrame(columns=["turn", "uncached_prompt", "cached_prompt", "completion"])
    df = turns.assign(uncached_prompt=turns["prompt_tokens"] - turns["cached_tokens"], cached_prompt=turns["cached_tokens"],
                      completion=turns["completion_tokens"])
    keys = [k for k in (by, "turn") if k and k in df.columns]
    return df.groupby(keys)[["uncached_prompt", "cached_prompt", "completion"]].mean().reset_index()


def time_split(runs: pd.DataFrame, by: str = "tools") -> pd.DataFrame:
    """Mean seconds per run in the model, in tools, and elsewhere (harness, retrieval setup, I/O)."""
    if runs.empty:
        return pd.DataFrame(columns=[by, "llm_s", "tool_s", "other_s"])
    df = runs.assign(other_s=(runs["elapsed_s"] - runs["llm_s"] - runs["tool_s"]).clip(lower=0))
    return df.groupby(by)[["llm_s", "tool_s", "other_s"]].mean().reset_index()


def search_style(calls: pd.DataFrame) -> pd.DataFrame:
    """Per run: did it search lexically (grep, bash grep/rg) and/or densely (search_dataroom, answer_question)?"""
    if calls.empty:
        return pd.DataFrame(columns=["run_id", "lexical", "dense"])
    lexical_programs = {"grep", "rg", "egrep", "ag", "ack"}

    def is_lexical(row) -> bool:
        progs = row.get("programs")
        return row["tool"] == "grep" or (row["tool"] == "bash" and progs is not None and bool(lexical_programs & set(progs)))

    df = calls.assign(lexical=calls.apply(is_lexical, axis=1), dense=calls["tool"].isin(["search_dataroom", "answer_question"]))
    return df.groupby("run_id")[["lexical", "dense"]].any().reset_index()


def search_style_table(frames: Frames, grader: str = "contains") -> pd.DataFrame:
    """Accuracy per question type and search style (none, grep only, dense only, both)."""
    runs = frames.runs
    if runs.empty:
        return pd.DataFrame(columns=["question_type", "style", "n", "mean", "ci_low", "ci_high"])
    styles = search_style(frames.calls)
    df = runs.merge(styles, on="run_id", how="left").fillna({"lexical": False, "dense": False})
    df["style"] = np.select([df["lexical"] & df["dense"], df["lexical"], df["dense"]], ["grep+dense", "grep", "dense"], "neither")
    if "question_type" not in df.columns:
        df["question_type"] = "all"
    df["question_type"] = df["question_type"].replace("", "unknown").fillna("unknown")
    return accuracy_table(df, grader, ("question_type", "style"))
