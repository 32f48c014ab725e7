"""Tidy frames from sweep parquet (runs, turns, tool calls), the conditions of a design, and the tables figures share.

A *condition* is one combination of every design column that varies across the loaded runs
(axes, config keys, dataroom, served model); tables and figures never pool two conditions.
Seeds are replicates, not conditions; operational fields (config.OPERATIONAL_FIELDS) do not change what a run
computes, and a question selection (questions.limit, questions.ids) only says which questions ran: none of them
splits a condition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import numpy as np
import pandas as pd

from ..config import OPERATIONAL_FIELDS
from ..record.collect import IDENTITY_COLUMNS
from .facts import with_facts
from .stats import cluster_bootstrap

GRADERS = ("correct", "contains", "exact_match", "f1", "judge", "evidence_recall")
HEADLINE_ORDER = ("judge", "correct", "contains")  # the judge when the sweep was graded with one; contains only for tables graded before `correct`
LENIENT = "contains"
MALFORMED = "(malformed)"  # schema-1 tool_calls rows that were malformed replies, not calls
# Axis names of tables written before the design was recorded in their metadata.
KNOWN_AXES = ("model", "tools", "budget", "budget_unit", "token_metric", "force_budget", "retriever", "backend", "dataroom",
              "questions", "noise", "delivery", "experiment")
IDENTITY = IDENTITY_COLUMNS  # what served the run, the dataroom, what it sent: conditions where they vary
REPLICATES = frozenset({"seed", "model.seed", "noise.seed", "distractors.seed"})
# Which questions a sweep ran, not how: a run's key is its question, so a run kept from a launch at questions.limit=20
# is the same run at 40. question_id says which questions each condition has.
SELECTION = frozenset({"questions.limit", "questions.ids"})
DRAWN_WITH_NOISE = ("dataroom_sha256",)  # identity columns that change with each distractor draw
LABEL_FIRST = ("tools", "budget", "model", "retriever", "force_budget")  # preferred order of condition columns


@dataclass
class Frames:
    runs: pd.DataFrame
    turns: pd.DataFrame
    calls: pd.DataFrame
    design: list[str] = field(default_factory=list)  # design column names ([]: guess from the column names)
    inert: pd.DataFrame = field(default_factory=pd.DataFrame)  # set by acting(): conditions left out, their values and `why`
    pinned: list[str] = field(default_factory=list)  # set by acting(): the conditions of all the runs, kept after some left

    @property
    def conditions(self) -> list[str]:
        if self.pinned:  # leaving runs out must not merge the conditions that remain (a model that now follows its tier)
            return [c for c in self.pinned if c in self.runs.columns]
        return conditions(self.runs, self.design)

    @property
    def headline(self) -> str:
        """The headline grader of these runs (headline_grader)."""
        return headline_grader(self.runs)


def _design_candidates(runs: pd.DataFrame, design: Optional[Iterable[str]]) -> list[str]:
    named = list(design or [])
    guessed = [c for c in KNOWN_AXES if c in runs.columns] + [c for c in runs.columns if "." in str(c)]
    return [c for c in dict.fromkeys([*named, *guessed, *IDENTITY]) if c in runs.columns]


def _key(s: pd.Series) -> pd.Series:
    return s.astype(object).where(s.notna(), "<missing>").astype(str)  # a missing value is a value (groupby drops NaN keys)


def conditions(runs: pd.DataFrame, design: Optional[Iterable[str]] = None) -> list[str]:
    """The design columns that vary across these runs, one per distinct split (a column that adds no split
    to the earlier ones, such as served_model_id beside model or model.protocol beside model, is left out)."""
    if runs.empty:
        return []
    cands = [c for c in _design_candidates(runs, design) if c not in REPLICATES and c not in SELECTION and c not in OPERATIONAL_FIELDS]
    varying = [c for c in cands if _key(runs[c]).nunique() > 1]
    rank = {c: i for i, c in enumerate(LABEL_FIRST)}
    varying.sort(key=lambda c: (rank.get(c, len(rank)), "." in c, c in IDENTITY))
    kept: list[str] = []
    for col in varying:
        if not (kept and _follows(runs, col, kept)):
            kept.append(col)
    # the dataroom's content hash follows the noise draw: with the design and the distractor seed fixed it is fixed,
    # so it names no condition of its own and the seeds stay replicates
    seeds = [c for c in ("noise.seed", "distractors.seed") if c in runs.columns]
    design_cols = [k for k in kept if k not in IDENTITY]
    return [k for k in kept if not (k in DRAWN_WITH_NOISE and seeds and _follows(runs, k, design_cols + seeds))]


def _follows(runs: pd.DataFrame, col: str, by: list[str]) -> bool:
    """col takes one value within each combination of the `by` columns."""
    return bool((_key(runs[col]).groupby([_key(runs[b]) for b in by]).nunique() == 1).all())


# ---- runs that cannot act ------------------------------------------------------------------------
def cannot_act(runs: pd.DataFrame) -> pd.Series:
    """Per run, why it could not act at all ('' when it could), read from its record: a control policy whose tools are
    not all among the run's enabled tools (searchbox.model.controls.NEEDS), which answered nothing. Such a run scores 0 by
    construction; it is no result about the control or the tier (control-dense under grep_only has nothing to call)."""
    from ..model.controls import row_cannot_act

    why = pd.Series("", index=runs.index, dtype=object)
    if runs.empty or "tools_enabled" not in runs.columns:
        return why
    cols = [c for c in ("served_policy", "model.policy", "tools_enabled", "answer_present") if c in runs.columns]
    for i, row in enumerate(runs[cols].to_dict("records")):
        why.iloc[i] = row_cannot_act(row)
    return why


def acting(frames: Frames) -> Frames:
    """The frames without runs that could not act (cannot_act), each condition either wholly kept or wholly left out;
    `inert` of the result holds the conditions left out (condition values and `why`). Idempotent."""
    runs = frames.runs
    why = cannot_act(runs)
    if not why.ne("").any():
        return frames
    conds = frames.conditions
    left: list[dict] = []
    keep = pd.Series(True, index=runs.index)
    for key, group in cells(runs, conds):
        reasons = why.loc[group.index]
        if reasons.ne("").all():  # every run of the condition could not act: the condition is no result
            keep.loc[group.index] = False
            left.append({**key, "why": reasons.iloc[0]})
    ids = set(runs.loc[keep, "run_id"]) if "run_id" in runs.columns else None
    sub = (lambda df: df[df["run_id"].isin(ids)].reset_index(drop=True) if ids is not None and "run_id" in df.columns else df)
    inert = pd.concat([frames.inert, pd.DataFrame(left)], ignore_index=True) if len(frames.inert) else pd.DataFrame(left)
    return Frames(runs[keep].reset_index(drop=True), sub(frames.turns), sub(frames.calls), frames.design, inert, conds)


def inert_why(inert: pd.DataFrame, key: dict) -> str:
    """Why the condition these values name was left out (acting), or '' when it was not; values compare as text."""
    if inert is None or inert.empty:
        return ""
    cols = [c for c in inert.columns if c != "why"]
    if not set(cols) <= set(key):  # a coarser key (a group of conditions) is never wholly left out
        return ""
    match = pd.Series(True, index=inert.index)
    for col in cols:
        match &= inert[col].astype(str) == str(key[col])
    hits = inert.loc[match, "why"]
    return str(hits.iloc[0]) if len(hits) else ""


def same_n(table: pd.DataFrame) -> str:
    """'n=6/6q' when every graded row of an accuracy table has the same runs and questions (a figure says it once), else ''."""
    ns = {(int(n), int(q)) for n, q in zip(table["n"], table["n_questions"]) if n > 0}
    if len(ns) != 1:
        return ""
    n, q = ns.pop()
    return f"n={n}/{q}q"


def label(values: dict, sep: str = ", ") -> str:
    return sep.join(f"{k}={v}" for k, v in values.items()) or "all runs"


def cells(df: pd.DataFrame, keys: list[str]) -> list[tuple[dict, pd.DataFrame]]:
    """(condition values, rows) for each combination of keys present in df, in sorted order."""
    keys = [k for k in keys if k in df.columns]
    if not keys:
        return [({}, df)]
    out = []
    for key, group in df.groupby(keys, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        out.append((dict(zip(keys, key)), group))
    return out


# ---- loading ----------------------------------------------------------------------------------
def load(dirs: Iterable[Path | str]) -> Frames:
    """Read runs/turns/tool_calls from each sweep dir (collecting run dirs when the tables are absent); each run once."""
    from ..record.collect import collect, read_design

    parts: dict[str, list[pd.DataFrame]] = {"runs": [], "turns": [], "tool_calls": []}
    design: list[str] = []
    for source, d in enumerate(map(Path, dirs)):
        if (d / "runs.parquet").exists():
            tables = {name: pd.read_parquet(d / f"{name}.parquet") if (d / f"{name}.parquet").exists() else pd.DataFrame()
                      for name in parts}
            design += read_design(d / "runs.parquet")
        else:
            runs, turns, calls = collect([d])
            tables = {"runs": runs, "turns": turns, "tool_calls": calls}
            design += runs.attrs.get("design", [])
        for name, df in tables.items():
            parts[name].append(df.assign(_source=source))
    cat = lambda frames: pd.concat([f for f in frames if not f.empty] or [pd.DataFrame(columns=["_source"])], ignore_index=True)
    runs, turns, calls = cat(parts["runs"]), cat(parts["turns"]), cat(parts["tool_calls"])
    if "run_id" in runs.columns:
        runs = runs.drop_duplicates("run_id", keep="last").reset_index(drop=True)  # the same run in two sweeps: once
        owner = runs.set_index("run_id")["_source"]
        turns, calls = (_owned(df, owner) for df in (turns, calls))
    turns, calls, runs = _split_malformed(turns, calls, runs)
    runs = runs.drop(columns=["_source", "retrieval_hit"], errors="ignore")  # retrieval_hit: schema-1 paths, not evidence
    runs = with_facts(runs)  # questions that ask one fact resample together in every CI (analysis/facts.py)
    frames = Frames(runs, turns.drop(columns=["_source"], errors="ignore"), calls.drop(columns=["_source"], errors="ignore"),
                    list(dict.fromkeys(design)))
    for name in ("turns", "calls"):
        setattr(frames, name, with_conditions(getattr(frames, name), frames.runs, frames.conditions))
    for g in GRADERS:
        if g in frames.runs.columns:
            frames.runs[g] = pd.to_numeric(frames.runs[g], errors="coerce")  # None-filled grades arrive as objects
    return frames


def _owned(df: pd.DataFrame, owner: pd.Series) -> pd.DataFrame:
    if df.empty or "run_id" not in df.columns:
        return df
    return df[df["run_id"].map(owner) == df["_source"]].reset_index(drop=True)


def _split_malformed(turns: pd.DataFrame, calls: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Tables from schema-1 sweeps hold malformed replies as tool calls: move them to per-turn and per-run counts."""
    if calls.empty or "tool" not in calls.columns or not (calls["tool"] == MALFORMED).any():
        return turns, calls, runs
    bad = calls[calls["tool"] == MALFORMED]
    per_turn = bad.groupby(["run_id", "turn"]).size()
    per_run = bad.groupby("run_id").size()
    calls = calls[calls["tool"] != MALFORMED].reset_index(drop=True)
    if not turns.empty and "malformed" not in turns.columns:
        idx = pd.MultiIndex.from_frame(turns[["run_id", "turn"]])
        m = pd.Series(per_turn.reindex(idx).fillna(0).astype(int).to_numpy(), index=turns.index)
        turns = turns.assign(malformed=m, tool_calls=(turns["tool_calls"] - m).clip(lower=0))
    if not runs.empty and "malformed_replies" not in runs.columns:
        m = runs["run_id"].map(per_run).fillna(0).astype(int)
        runs = runs.assign(malformed_replies=m, tool_calls=(runs["tool_calls"] - m).clip(lower=0))
    return turns, calls, runs


def with_conditions(df: pd.DataFrame, runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Join the run-level condition columns (and question id/type) onto a per-turn or per-call table by run_id."""
    cols = [c for c in dict.fromkeys([*keys, "question_id", "question_type"]) if c in runs.columns]
    if df.empty:
        return df.assign(**{c: pd.Series(dtype=runs[c].dtype) for c in cols if c not in df.columns})
    if "run_id" not in df.columns or not cols:
        return df
    return df.drop(columns=[c for c in cols if c in df.columns]).merge(runs[["run_id", *cols]], on="run_id", how="left")


# ---- tables -------------------------------------------------------------------------------------
def headline_grader(runs: pd.DataFrame) -> str:
    """The grade the headline figures and tables use: `judge` when these runs were graded with one, else `correct`
    (the primary string grade), else `contains` (tables graded before `correct` existed: regrade them)."""
    for grader in HEADLINE_ORDER:
        if grader in runs.columns and pd.to_numeric(runs[grader], errors="coerce").notna().any():
            return grader
    return "correct"


def grades(runs: pd.DataFrame, grader: str) -> pd.Series:
    return pd.to_numeric(runs[grader], errors="coerce") if grader in runs.columns else pd.Series(np.nan, index=runs.index)


def accuracy_table(runs: pd.DataFrame, grader: Optional[str] = None, by: Iterable[str] = (), design: Optional[Iterable[str]] = None,
                   n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Mean of a grader (default: the headline grader) per condition (the `by` columns plus every condition), with a
    95% CI that resamples questions (cluster bootstrap; by fact group where the runs carry `fact_group`: questions that ask
    one fact resample together), the number of graded runs `n` and of questions `n_questions`.

    The mean weighs each question equally (the mean over questions of each question's mean grade)."""
    grader = grader or headline_grader(runs)
    keys = [k for k in dict.fromkeys([*by, *conditions(runs, design)]) if k in runs.columns]
    cols = [*keys, "n", "n_questions", "mean", "ci_low", "ci_high"]
    if runs.empty or grader not in runs.columns:
        return pd.DataFrame(columns=cols)
    rows = []
    qid = runs["question_id"] if "question_id" in runs.columns else pd.Series(range(len(runs)), index=runs.index)
    values = grades(runs, grader)
    facts = runs["fact_group"] if "fact_group" in runs.columns else None  # questions of one fact resample together
    for key, group in cells(runs, keys):
        v = values.loc[group.index]
        ok = v.notna()
        mean, lo, hi = cluster_bootstrap(v[ok].to_numpy(), qid.loc[group.index][ok].to_numpy(), n_boot=n_boot, seed=seed,
                                         groups=None if facts is None else facts.loc[group.index][ok].to_numpy())
        rows.append({**key, "n": int(ok.sum()), "n_questions": int(qid.loc[group.index][ok].nunique()), "mean": mean, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows, columns=cols)


def tool_usage(calls: pd.DataFrame, by: Iterable[str] | str = ()) -> pd.DataFrame:
    """Counts and shares of tool choices per group; bash calls split into the programs they ran ("bash:grep")."""
    by = [by] if isinstance(by, str) else list(by)
    by = [b for b in by if b in calls.columns]
    cols = [*by, "choice", "count", "share"]
    if calls.empty or "tool" not in calls.columns:
        return pd.DataFrame(columns=cols)
    calls = calls[calls["tool"] != MALFORMED]
    rows = []
    for _, call in calls.iterrows():
        group = {b: call[b] for b in by}
        programs = call.get("programs")
        if call["tool"] == "bash" and programs is not None and len(programs):
            rows.extend({**group, "choice": f"bash:{p}"} for p in programs)
        else:
            rows.append({**group, "choice": call["tool"]})
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows).groupby([*by, "choice"], dropna=False).size().rename("count").reset_index()
    df["share"] = df["count"] / (df.groupby(by, dropna=False)["count"].transform("sum") if by else df["count"].sum())
    return df.sort_values([*by, "count"], ascending=[True] * len(by) + [False]).reset_index(drop=True)


def tokens_per_turn(turns: pd.DataFrame, by: Iterable[str] | str | None = ()) -> pd.DataFrame:
    """Mean uncached prompt, cached prompt and completion tokens per turn index (per group)."""
    by = [by] if isinstance(by, str) else list(by or [])
    parts = ["uncached_prompt", "cached_prompt", "completion"]
    keys = [k for k in (*by, "turn") if k in turns.columns]
    if turns.empty or "prompt_tokens" not in turns.columns:
        return pd.DataFrame(columns=[*keys, *parts])
    df = turns.assign(uncached_prompt=turns["prompt_tokens"] - turns["cached_tokens"], cached_prompt=turns["cached_tokens"],
                      completion=turns["completion_tokens"])
    return df.groupby(keys, dropna=False)[parts].mean().reset_index()


def time_split(runs: pd.DataFrame, by: Iterable[str] | str = ()) -> pd.DataFrame:
    """Mean seconds per run in setup (model load, first embedding), the model, tools, and elsewhere."""
    by = [by] if isinstance(by, str) else list(by)
    keys = [k for k in by if k in runs.columns]
    parts = ["setup_s", "llm_s", "tool_s", "other_s"]
    if runs.empty or not {"elapsed_s", "llm_s", "tool_s"} <= set(runs.columns):
        return pd.DataFrame(columns=[*keys, *parts])
    setup = runs["setup_s"].fillna(0) if "setup_s" in runs.columns else 0.0
    df = runs.assign(setup_s=setup, other_s=(runs["elapsed_s"] - runs["llm_s"] - runs["tool_s"] - setup).clip(lower=0))
    if not keys:
        return df[parts].mean().to_frame().T
    return df.groupby(keys, dropna=False)[parts].mean().reset_index()


LEXICAL_PROGRAMS = {"grep", "rg", "egrep", "fgrep", "ag", "ack", "git-grep"}
DENSE_TOOLS = {"search_dataroom", "answer_question"}


def search_style(calls: pd.DataFrame) -> pd.DataFrame:
    """Per run: did it search lexically (grep, bash grep/rg) and/or densely (search_dataroom, answer_question)?"""
    if calls.empty or "tool" not in calls.columns:
        return pd.DataFrame({"run_id": pd.Series(dtype=str), "lexical": pd.Series(dtype=bool), "dense": pd.Series(dtype=bool)})

    def is_lexical(row) -> bool:
        progs = row.get("programs")
        return row["tool"] == "grep" or (row["tool"] == "bash" and progs is not None and bool(LEXICAL_PROGRAMS & set(progs)))

    df = calls.assign(lexical=calls.apply(is_lexical, axis=1).astype(bool), dense=calls["tool"].isin(DENSE_TOOLS))
    return df.groupby("run_id")[["lexical", "dense"]].any().reset_index()


def search_style_table(frames: Frames, grader: Optional[str] = None) -> pd.DataFrame:
    """Accuracy (default: the headline grader) per condition, question type and search style (neither, grep, dense, grep+dense)."""
    runs = frames.runs
    grader = grader or headline_grader(runs)
    if runs.empty:
        return pd.DataFrame(columns=[*frames.conditions, "question_type", "style", "n", "n_questions", "mean", "ci_low", "ci_high"])
    df = runs.merge(search_style(frames.calls), on="run_id", how="left")
    lexical = df["lexical"].fillna(False).astype(bool).to_numpy()  # runs without calls: neither
    dense = df["dense"].fillna(False).astype(bool).to_numpy()
    df["style"] = np.select([lexical & dense, lexical, dense], ["grep+dense", "grep", "dense"], "neither")
    qt = df["question_type"] if "question_type" in df.columns else pd.Series("", index=df.index)
    df["question_type"] = qt.fillna("").replace("", "unknown")
    return accuracy_table(df, grader, ("question_type", "style", *frames.conditions), frames.design)
