"""A sweep's plan before its first run (the grid, its runs done and to go, a time estimate) and its ETA while it runs.

Runs differ in cost by their budget (budget=30 is thirty turns, budget=1 one), so both the estimate and the ETA
weight every run by the turns it is expected to take and price a turn at this machine's measured rate: the rate
stored under $SEARCHBOX_HOME by earlier sweeps, else the rate the sweep measures on its own first runs. Averaging
over runs instead made the ETA jump thirty-fold as a sweep moved from budget=1 runs to budget=30 runs.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Optional

from .paths import atomic_write, cache_dir

RATES_FILE = "rates.json"  # under $SEARCHBOX_HOME: seconds per turn, per host and model, from finished runs
HOUR_S = 3600.0
MEMORY_TURNS = 300.0  # the stored rate follows the last few hundred turns: a faster plan or build shows within a sweep
# Turns a token budget is expected to take before this machine has measured tokens per turn (SmolLM2 on the
# packaged corpus spent about this many of each metric per turn); replaced by the measured figure after one run.
TOKENS_PER_TURN = {"total": 9000.0, "prompt": 8600.0, "completion": 400.0, "uncached_prompt": 3000.0}


@dataclass(frozen=True)
class GridPoint:
    """One job of the sweep: its overrides, how many runs it holds and has done, the turns each is expected to take."""

    job: int
    label: str  # the swept values, e.g. "tools=high budget=10"
    runs: int
    done: Optional[int]  # None: not known before the job starts (its server is not up yet)
    turns: float  # expected turns per run: the weight

    @property
    def to_go(self) -> int:
        return max(0, self.runs - (self.done or 0))


@dataclass(frozen=True)
class Rate:
    """Seconds one run spends per turn on this machine, and tokens per turn (to turn a token budget into turns)."""

    s_per_turn: float
    runs: int  # runs behind the figure
    tokens_per_turn: dict = field(default_factory=dict)
    source: str = "stored"  # stored (earlier sweeps here) | measured (this sweep's first runs)


def expected_turns(budget: int, unit: str, force_budget: bool, max_turns: int, metric: str = "total",
                   tokens_per_turn: Optional[dict] = None) -> float:
    """The turns a run is expected to take: its turn budget when forced (one turn when not), or a token budget over
    the tokens a turn spends (measured, else TOKENS_PER_TURN), capped by harness.max_turns."""
    if unit == "tokens":
        per_turn = (tokens_per_turn or {}).get(metric) or TOKENS_PER_TURN.get(metric, TOKENS_PER_TURN["total"])
        return float(min(max_turns, max(1.0, budget / per_turn)))
    return float(max(1, min(budget, max_turns)) if force_budget else 1)


# ---- the rate this machine measured -----------------------------------------------------------
def _rates_path():
    return cache_dir() / RATES_FILE


def _rate_key(model: str) -> str:
    return f"{socket.gethostname()}|{model}"


def load_rate(model: str) -> Optional[Rate]:
    """The rate earlier sweeps measured here for this model (config model.name), if any."""
    with contextlib.suppress(OSError, ValueError):
        entry = json.loads(_rates_path().read_text()).get(_rate_key(model))
        if entry and entry.get("s_per_turn", 0) > 0:
            return Rate(float(entry["s_per_turn"]), int(entry.get("runs", 0)), dict(entry.get("tokens_per_turn") or {}), "stored")
    return None


def record_run(meta: dict) -> None:
    """Fold a finished run (run_meta.json) into this machine's stored rate for its model; runs without turns add nothing."""
    turns, elapsed = int(meta.get("turns") or 0), float(meta.get("elapsed_s") or 0.0)
    model = str(meta.get("model") or "")
    if turns <= 0 or elapsed <= 0 or not model:
        return
    path = _rates_path()
    rates: dict = {}
    with contextlib.suppress(OSError, ValueError):
        rates = json.loads(path.read_text())
    entry = rates.get(_rate_key(model)) or {}
    weight = min(float(entry.get("turns", 0.0)), MEMORY_TURNS)  # older turns count for at most MEMORY_TURNS
    tokens = meta.get("tokens") or {}

    def mix(old: float, new_total: float) -> float:
        return (old * weight + new_total) / (weight + turns)

    per_turn = dict(entry.get("tokens_per_turn") or {})
    for metric in TOKENS_PER_TURN:
        if isinstance(tokens.get(metric), (int, float)):
            per_turn[metric] = round(mix(float(per_turn.get(metric, tokens[metric] / turns)), float(tokens[metric])), 1)
    rates[_rate_key(model)] = {"s_per_turn": round(mix(float(entry.get("s_per_turn", elapsed / turns)), elapsed), 4),
                               "turns": weight + turns, "runs": int(entry.get("runs", 0)) + 1, "tokens_per_turn": per_turn,
                               "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write(path, json.dumps(rates, indent=2, sort_keys=True))


# ---- the estimate ---------------------------------------------------------------------------------
def turns_to_go(points: list[GridPoint]) -> float:
    return sum(p.turns * p.to_go for p in points)


def estimate_s(points: list[GridPoint], rate: Rate, in_flight: int) -> float:
    """Wall seconds for the runs to go: their expected turns at the rate, `in_flight` runs at a time."""
    return turns_to_go(points) * rate.s_per_turn / max(1, in_flight)


def suggest_limit(points: list[GridPoint], rate: Rate, in_flight: int, questions: int) -> Optional[int]:
    """The questions.limit that brings a sweep estimated over an hour under one (None when it is under already)."""
    if estimate_s(points, rate, in_flight) <= HOUR_S or questions <= 1:
        return None
    per_question = sum(p.turns for p in points) * rate.s_per_turn / max(1, in_flight)  # one more question on every point
    return max(1, min(questions - 1, int(HOUR_S // per_question))) if per_question > 0 else None


def duration(seconds: float) -> str:
    """12 s, 7 min 33 s, 1 h 45 min, 2 d 3 h: as precise as an estimate deserves."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < HOUR_S:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 48 * HOUR_S:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def describe(points: list[GridPoint], grid: dict[str, list[str]], questions: int, rate: Optional[Rate], in_flight: int,
             fixed: Optional[list[str]] = None) -> list[str]:
    """The plan as lines for people: grid, runs done and to go, and the estimate (or why there is none yet)."""
    runs = sum(p.runs for p in points)
    known = [p for p in points if p.done is not None]
    done = sum(p.done or 0 for p in known)
    done_text = f"{done:,} done" + (f" (of {len(known)} grid points whose server is known)" if len(known) < len(points) else "")
    lines = [f"plan: {len(points)} grid point(s) x {questions} question(s) = {runs:,} run(s), {done_text}, {runs - done:,} to go"]
    width = max([len(k) for k in grid] + [6])
    lines += [f"  {key:<{width}}  {', '.join(values)}" for key, values in grid.items()]
    if fixed:
        lines.append(f"  {'fixed':<{width}}  {' '.join(fixed)}")
    turns = turns_to_go(points)
    if rate is None:
        lines.append(f"  {'time':<{width}}  {turns:,.0f} turn(s) to go; no rate measured for this model here yet: "
                     "the first runs measure it, and the ETA follows")
        return lines
    where = f"measured here over {rate.runs} run(s)" if rate.source == "stored" else "measured on this sweep's first run(s)"
    total = estimate_s(points, rate, in_flight)
    lines.append(f"  {'time':<{width}}  {turns:,.0f} turn(s) to go x {rate.s_per_turn:.1f} s/turn ({where}), {in_flight} run(s) "
                 f"in flight: about {duration(total)}")
    limit = suggest_limit(points, rate, in_flight, questions)
    if limit is not None:
        lines.append(f"  {'':<{width}}  that is over an hour: questions.limit={limit} runs {limit * len(points)} run(s) in about "
                     f"{duration(sum(p.turns for p in points) * limit * rate.s_per_turn / max(1, in_flight))}")
    return lines


def plan_record(points: list[GridPoint], grid: dict, questions: int, rate: Optional[Rate], in_flight: int) -> dict:
    """What a launch stores (.launches/<id>/plan.json) for its jobs' progress lines."""
    return {"points": [asdict(p) for p in points], "grid": grid, "questions": questions, "in_flight": in_flight,
            "rate": asdict(rate) if rate else None}


# ---- the ETA while the sweep runs -----------------------------------------------------------------
@dataclass
class Pace:
    """Wall seconds a job has run and the expected turns it finished meanwhile (one file per job of a launch)."""

    wall_s: float = 0.0
    turns: float = 0.0


def eta_s(turns_left: float, paces: list[Pace], jobs_at_once: int) -> Optional[float]:
    """Seconds to go: the turns left at the launch's pace so far (wall seconds per finished expected turn, pooled
    over its jobs), shared over the jobs running at once; None before any turn finished."""
    wall = sum(p.wall_s for p in paces)
    turns = sum(p.turns for p in paces)
    if turns <= 0:
        return None
    return max(0.0, turns_left) * wall / turns / max(1, jobs_at_once)


def first_estimate(points: list[GridPoint], turns_left: float, paces: list[Pace], jobs_at_once: int, questions: int) -> list[str]:
    """After a sweep's first run, when no stored rate priced its plan: the estimate from what it measured."""
    seconds = eta_s(turns_left, paces, jobs_at_once)
    if seconds is None:
        return []
    turns = sum(p.turns for p in paces)
    s_per_turn = sum(p.wall_s for p in paces) / turns / max(1, jobs_at_once)
    lines = [f"plan: measured {s_per_turn:.1f} s per turn on the first run(s): about {duration(seconds)} to go"]
    limit = suggest_limit(points, Rate(s_per_turn, 0, source="measured"), 1, questions) if points else None
    if limit is not None and seconds > HOUR_S:
        lines.append(f"plan: that is over an hour: questions.limit={limit} would run {limit * len(points)} run(s) in about "
                     f"{duration(sum(p.turns for p in points) * limit * s_per_turn)}")
    return lines
