"""A sweep's plan before its first run (the grid, its runs done and to go, a time estimate) and its ETA while it runs.

Runs differ in cost by their budget (budget=30 is thirty turns, budget=1 one), so both the estimate and the ETA
weight every run by the turns it is expected to take, plus what any run costs besides (its first prefill of the
whole prompt, its set-up), priced at this machine's measured rate for the model and tool tier (a turn of SmolLM2
that answers at once costs a tenth of one that reads files): the rates stored under $SEARCHBOX_HOME by earlier
sweeps, else the pace the sweep measures on its own first runs. Averaging over runs instead made the ETA
jump thirty-fold as a sweep moved from budget=1 runs to budget=30 runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from ..humanize import duration
from ..paths import atomic_write, cache_dir

RATES_FILE = "rates.json"  # under $SEARCHBOX_HOME: seconds per run and per turn, per host and model, from finished runs
HOUR_S = 3600.0
MEMORY_RUNS = 50.0  # the stored rate follows the last fifty or so runs: a faster plan or build shows within a sweep
OVERHEAD_TURNS = 1.0  # a run's cost besides its turns, in turns, until a rate measures it (the first prefill is about one)
# Tokens a turn spends, to turn a token budget into turns before this machine has measured its own (SmolLM2 on the
# packaged corpus, 5 questions x 3 tiers x budget 2, spent about this many of each metric per turn).
TOKENS_PER_TURN = {"total": 1800.0, "prompt": 1650.0, "completion": 130.0, "uncached_prompt": 500.0, "input": 500.0}


@dataclass(frozen=True)
class GridPoint:
    """One job of the sweep: its overrides, how many runs it holds and has done, the turns each is expected to take."""

    job: int
    label: str  # the swept values, e.g. "tools=high budget=10"
    runs: int
    done: Optional[int]  # None: not known before the job starts (its server is not up yet)
    turns: float  # expected turns per run
    overhead: float = OVERHEAD_TURNS  # what a run costs besides its turns, in turns (Rate.overhead_turns)
    seconds: Optional[float] = None  # one run's seconds at this machine's rate for its model and tools; None: not measured
    levels: dict = field(default_factory=dict)  # the swept values of this point, {"tools": "high", "budget": "10"}
    priced_by: str = ""  # whose rate priced it: "<model>, tools=<tier>" (a key of describe's `rates`)

    @property
    def to_go(self) -> int:
        return max(0, self.runs - (self.done or 0))

    @property
    def weight(self) -> float:
        """One run's expected cost, the weight of the estimate and the ETA: its seconds where measured, else turns."""
        return self.seconds if self.seconds is not None else self.turns + self.overhead


@dataclass(frozen=True)
class Load:
    """How busy the machine is: runnable threads (the 1-minute load average) over the cores this process may use.

    Why: a rate measured while a test suite shared two cores priced a quiet machine's sweep at 36 min; it took 6.4.
    Seconds are stored as a machine with a core for every runnable thread would have taken them (divided by
    `contention`) and priced at the contention expected now. It is a linear model, and llama.cpp's pools wait for
    every thread at each step, so a loaded machine is slower than it says: the plan prints both loads."""

    average: float
    cores: int

    @property
    def contention(self) -> float:
        """1 while no core has more than one runnable thread, else how many share one (load / cores)."""
        return max(float(self.cores), self.average) / max(1, self.cores)

    @classmethod
    def now(cls, cores: Optional[int] = None) -> "Load":
        from ..model.threads import available_cores

        try:
            average = os.getloadavg()[0]
        except OSError:
            average = 0.0
        return cls(average, cores or available_cores())


def expected_load(thread_plan=None) -> Load:
    """The load a sweep will run under: the other work its thread plan measured (model.threads: searchbox's own left
    out) plus its embedded servers' threads, which spin while they decode; with no plan, the machine's load now."""
    if thread_plan is None:
        return Load.now()
    own = (thread_plan.server_threads or 0) * max(1, thread_plan.servers)
    return Load(float(thread_plan.load) + own, max(1, int(thread_plan.cores)))


@dataclass(frozen=True)
class Rate:
    """A run's seconds on this machine (s_per_run + s_per_turn x turns), and tokens per turn (for token budgets).
    Stored rates are a quiet machine's (Load); `priced_at` scales them to the contention expected now."""

    s_per_turn: float
    runs: int  # runs behind the figure
    tokens_per_turn: dict = field(default_factory=dict)
    source: str = "stored"  # stored (earlier sweeps here) | measured (this sweep's first runs)
    s_per_run: float = 0.0  # what a run costs besides its turns
    prefill_tps: Optional[float] = None  # llama.cpp's prompt tokens per second of prompt time, over the runs' calls
    decode_tps: Optional[float] = None  # its predicted tokens per second of predicted time; None: no server timings seen
    measured_contention: Optional[float] = None  # the mean Load.contention its runs finished under; None: not recorded
    priced_contention: float = 1.0  # the contention its seconds are scaled to (priced_at)

    @property
    def overhead_turns(self) -> float:
        return self.s_per_run / self.s_per_turn if self.s_per_turn > 0 else OVERHEAD_TURNS

    def priced_at(self, contention: float) -> "Rate":
        """This rate's seconds on a machine `contention` times oversubscribed (speeds are the server's own: unscaled)."""
        f = max(1.0, float(contention)) / self.priced_contention
        return dataclasses.replace(self, s_per_turn=self.s_per_turn * f, s_per_run=self.s_per_run * f,
                                   priced_contention=max(1.0, float(contention)))


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


ANY_TOOLS = "*"  # the model's rate over every tool tier, for a tier not measured yet


def _rate_key(model: str, tools: str, harness: str = "native") -> str:
    # The harness is in the key: Claude Code's first prompt is three times the native loop's, and a rate pooled over
    # harnesses priced a native sweep at their mean.
    return f"{socket.gethostname()}|{model}|{harness}|{tools}"


SUMS = ("n", "t", "tt", "s", "ts")  # runs, and sums of turns, turns^2, seconds, turns x seconds: a line fit
# The runs' calls as llama.cpp timed them: tokens prefilled and the ms it took, tokens decoded and their ms.
SPEED = ("prefill_tokens", "prefill_ms", "decode_tokens", "decode_ms")


def fit(sums: dict) -> tuple[float, float]:
    """(s_per_run, s_per_turn) from a run's seconds = s_per_run + s_per_turn x turns, least squares over the runs;
    runs that all took the same turns price the turn alone."""
    n, t, tt, sec, ts = (float(sums.get(k, 0.0)) for k in SUMS)
    if n <= 0 or t <= 0:
        return 0.0, 0.0
    mean_t, mean_s = t / n, sec / n
    var = tt / n - mean_t**2
    if var > 1e-6 * max(1.0, mean_t**2):
        per_turn = (ts / n - mean_t * mean_s) / var
        per_run = mean_s - per_turn * mean_t
        if per_turn > 0 and per_run >= 0:
            return per_run, per_turn
    return 0.0, sec / t


def load_rate(model: str, tools: str = ANY_TOOLS, harness: str = "native") -> Optional[Rate]:
    """The rate earlier sweeps measured here for this model (config model.name), harness kind and tool tier (the
    sweep's `tools` axis value), else for the model and harness over every tier, if any: a quiet machine's seconds."""
    with contextlib.suppress(OSError, ValueError, TypeError):
        rates = json.loads(_rates_path().read_text())
        for key in dict.fromkeys([_rate_key(model, tools, harness), _rate_key(model, ANY_TOOLS, harness)]):
            entry = rates.get(key)
            if entry:
                per_run, per_turn = fit(entry.get("sums") or {})
                if per_turn > 0:
                    prefill, decode = speeds(entry.get("speed") or {})
                    load = entry.get("load") or {}
                    n, total = float(load.get("n") or 0.0), float(load.get("contention") or 0.0)
                    return Rate(per_turn, int(entry.get("runs", 0)), dict(entry.get("tokens_per_turn") or {}), "stored", per_run,
                                prefill, decode, round(total / n, 2) if n > 0 and total >= n else None)
    return None


def speeds(speed: dict) -> tuple[Optional[float], Optional[float]]:
    """(prefill, decode) tokens per second from SPEED sums; None where no time was timed."""
    def rate(tokens: str, ms: str) -> Optional[float]:
        t, m = float(speed.get(tokens) or 0.0), float(speed.get(ms) or 0.0)
        return round(t / m * 1000, 1) if t > 0 and m > 0 else None

    return rate("prefill_tokens", "prefill_ms"), rate("decode_tokens", "decode_ms")


def trace_speed(trace: Path, max_lines: int = 100_000) -> dict:
    """A run's SPEED sums from its trace: every call's llama.cpp timings (prompt_n/prompt_ms, predicted_n/predicted_ms).
    A server that sends no timings (an OpenAI endpoint, a control) gives zeros: nothing to price with."""
    sums = dict.fromkeys(SPEED, 0.0)
    with contextlib.suppress(OSError), trace.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f):
            if n >= max_lines:
                break
            if '"timings"' not in line:
                continue
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                timings = (json.loads(line).get("usage") or {}).get("timings") or {}
                values = [float(timings.get(k) or 0.0) for k in ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms")]
                if all(v >= 0 and v == v and v != float("inf") for v in values):
                    for key, v in zip(SPEED, values):
                        sums[key] += v
    return sums


def harness_of(meta: dict) -> str:
    """A run record's harness kind (records from before the harness seam are the native loop's)."""
    harness = ((meta.get("config") or {}).get("harness") or {}) if isinstance(meta.get("config"), dict) else {}
    kind = harness.get("kind") if isinstance(harness, dict) else None
    return kind if isinstance(kind, str) and kind else "native"


def record_run(meta: dict, speed: Optional[dict] = None, load: Optional[Load] = None) -> None:
    """Fold a finished run (run_meta.json, its calls' SPEED sums from trace_speed, and the Load it finished under)
    into this machine's stored rates for its model and harness, for its tool tier and over all tiers; runs without
    turns add nothing. Its seconds are stored divided by the load's contention (a quiet machine's seconds)."""
    turns, elapsed = int(meta.get("turns") or 0), float(meta.get("elapsed_s") or 0.0)
    model = str(meta.get("model") or "")
    if turns <= 0 or elapsed <= 0 or not model:
        return
    path = _rates_path()
    rates: dict = {}
    with contextlib.suppress(OSError, ValueError):
        rates = json.loads(path.read_text())
    tools = str((meta.get("axes") or {}).get("tools") or ANY_TOOLS)
    harness = harness_of(meta)
    for key in dict.fromkeys([_rate_key(model, tools, harness), _rate_key(model, ANY_TOOLS, harness)]):
        rates[key] = _folded(rates.get(key) or {}, turns, elapsed, meta.get("tokens") or {}, speed or {}, load)
    atomic_write(path, json.dumps(rates, indent=2, sort_keys=True))


def _folded(entry: dict, turns: int, elapsed: float, tokens: dict, speed: dict, load: Optional[Load] = None) -> dict:
    """A stored rate with one more run in it (older runs fading after MEMORY_RUNS)."""
    sums = {k: float((entry.get("sums") or {}).get(k, 0.0)) for k in SUMS}
    timed = {k: float((entry.get("speed") or {}).get(k, 0.0)) for k in SPEED}
    loads = {k: float((entry.get("load") or {}).get(k, 0.0)) for k in ("n", "contention")}
    if sums["n"] >= MEMORY_RUNS:  # older runs fade: the sums keep the weight of MEMORY_RUNS - 1 runs
        fade = (MEMORY_RUNS - 1) / sums["n"]
        sums = {k: v * fade for k, v in sums.items()}
        timed = {k: v * fade for k, v in timed.items()}
        loads = {k: v * fade for k, v in loads.items()}
    if load is not None:
        elapsed /= load.contention
        loads = {"n": loads["n"] + 1.0, "contention": loads["contention"] + load.contention}
    for k in SPEED:
        timed[k] += float(speed.get(k) or 0.0)
    for k, v in zip(SUMS, (1.0, turns, turns * turns, elapsed, turns * elapsed)):
        sums[k] += v
    per_turn = dict(entry.get("tokens_per_turn") or {})
    seen = sums["t"] - turns  # the turns behind the stored figures, faded like the sums
    for metric in TOKENS_PER_TURN:
        if isinstance(tokens.get(metric), (int, float)):
            old = float(per_turn.get(metric, tokens[metric] / turns))
            per_turn[metric] = round((old * seen + float(tokens[metric])) / (seen + turns), 1)
    per_run_s, per_turn_s = fit(sums)
    return {"sums": {k: round(v, 4) for k, v in sums.items()}, "speed": {k: round(v, 1) for k, v in timed.items()},
            "load": {k: round(v, 4) for k, v in loads.items()}, "runs": int(entry.get("runs", 0)) + 1, "s_per_turn": round(per_turn_s, 3),
            "s_per_run": round(per_run_s, 3), "tokens_per_turn": per_turn, "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


# ---- the estimate ---------------------------------------------------------------------------------
def turns_to_go(points: list[GridPoint]) -> float:
    return sum(p.turns * p.to_go for p in points)


def run_s(turns: float, rate: Rate) -> float:
    """One run's seconds at a rate: its own cost plus its expected turns."""
    return rate.s_per_run + rate.s_per_turn * turns


def priced(points: list[GridPoint]) -> bool:
    return bool(points) and all(p.seconds is not None for p in points)


def estimate_s(points: list[GridPoint], in_flight: int) -> float:
    """Wall seconds for the runs to go, each at its measured seconds, `in_flight` at a time (priced points only)."""
    return sum(p.to_go * (p.seconds or 0.0) for p in points) / max(1, in_flight)


def suggest_limit(points: list[GridPoint], in_flight: int, questions: int) -> Optional[int]:
    """The questions.limit that brings a sweep estimated over an hour under one (None when it is under already)."""
    if not priced(points) or estimate_s(points, in_flight) <= HOUR_S or questions <= 1:
        return None
    per_question = sum(p.seconds or 0.0 for p in points) / max(1, in_flight)  # one more question on every point
    return max(1, min(questions - 1, int(HOUR_S // per_question))) if per_question > 0 else None


def level_costs(points: list[GridPoint]) -> dict[str, list[tuple[str, float]]]:
    """Each swept axis's levels with their share of the cost to go (seconds where priced, else expected turns and run
    overheads), costliest first."""
    total = sum(p.weight * p.to_go for p in points)
    by_axis: dict[str, dict[str, float]] = {}
    for p in points:
        for axis, value in p.levels.items():
            by_axis.setdefault(axis, {}).setdefault(str(value), 0.0)
            by_axis[axis][str(value)] += p.weight * p.to_go
    if total <= 0:
        return {}
    return {axis: sorted(((v, c / total) for v, c in levels.items()), key=lambda vc: -vc[1]) for axis, levels in by_axis.items()}


def costliest_level(points: list[GridPoint]) -> Optional[tuple[str, str, float]]:
    """(axis, level, share) of the costliest level among the axes with three or more levels: dropping it leaves the
    axis a comparison (an axis of two levels dropped to one is no longer part of the design)."""
    best = None
    for axis, levels in level_costs(points).items():
        if len(levels) >= 3 and (best is None or levels[0][1] > best[2]):
            best = (axis, levels[0][0], levels[0][1])
    return best


def reductions(points: list[GridPoint], in_flight: int, questions: int) -> list[str]:
    """For an estimate over an hour, the reductions that keep the design: the questions.limit that brings it under an
    hour, and dropping the costliest level of an axis of three or more levels, each with its runs and time."""
    if not priced(points) or estimate_s(points, in_flight) <= HOUR_S:
        return []
    offers = []
    limit = suggest_limit(points, in_flight, questions)
    if limit is not None:
        offers.append(f"questions.limit={limit} runs {limit * len(points):,} run(s) in about "
                      f"{duration(sum(p.seconds or 0.0 for p in points) * limit / max(1, in_flight))}")
    level = costliest_level(points)
    if level is not None:
        axis, value, share = level
        kept = [p for p in points if str(p.levels.get(axis)) != value]
        offers.append(f"dropping {axis}={value} ({share:.0%} of the time) runs {sum(p.to_go for p in kept):,} run(s) in about "
                      f"{duration(estimate_s(kept, in_flight))}")
    return [f"that is over an hour; reductions that keep the design: {'; or '.join(offers)}"] if offers else []


def rate_line(label: str, rate: Rate) -> str:
    """One model and tier's rate as the plan prices with it: seconds a turn and a run, and the server's own speeds."""
    speed = [f"{name} {tps:,.0f} tok/s" for name, tps in (("prefill", rate.prefill_tps), ("decode", rate.decode_tps)) if tps]
    load = ""
    if rate.source == "stored":
        if not rate.measured_contention:
            load = ", load not recorded"
        elif rate.measured_contention > 1.0:
            load = f", measured {rate.measured_contention:.1f}x oversubscribed"
        else:
            load = ", measured with a core for every thread"
    now = f", priced {rate.priced_contention:.1f}x oversubscribed as now" if rate.priced_contention > 1.0 else ""
    return (f"{label}: {rate.s_per_turn:.1f} s a turn + {rate.s_per_run:.1f} s a run"
            + (f", {', '.join(speed)}" if speed else ", no server timings (prefill and decode speeds unknown)")
            + f" ({rate.runs} run(s), {rate.source}{load}{now})")


def cost_lines(points: list[GridPoint], in_flight: int, top: int = 3) -> list[str]:
    """Which runs cost the most: each axis's levels by their share, and the costliest grid points' runs."""
    costs = level_costs(points)
    if not costs:
        return []
    unit = "time" if priced(points) else "expected turns"
    lines = [" | ".join(f"{axis} " + ", ".join(f"{v} {share:.0%}" for v, share in levels) for axis, levels in costs.items())
             + f" (share of the {unit} to go)"]
    worst = sorted((p for p in points if p.to_go), key=lambda p: -p.weight)[:top]
    each = [f"{p.label} {duration(p.seconds) if p.seconds is not None else f'{p.weight:.0f} turn(s)'} a run" for p in worst]
    if each:
        lines.append("costliest runs: " + ", ".join(each))
    return lines


def describe(points: list[GridPoint], grid: dict[str, list[str]], questions: int, in_flight: int,
             fixed: Optional[list[str]] = None, measured_runs: int = 0, epochs: int = 1,
             rates: Optional[dict[str, Rate]] = None) -> list[str]:
    """The plan as lines for people: grid, runs done and to go, the rates it priced with, the estimate (or why there is
    none yet), which runs cost the most, and reductions that keep the design when it is over an hour.
    `epochs`: the runs of each question (repeats, seeds seed+0..epochs-1); `rates`: the stored rate of each
    "<model>, tools=<tier>" the grid points name in `priced_by`."""
    runs = sum(p.runs for p in points)
    known = [p for p in points if p.done is not None]
    done = sum(p.done or 0 for p in known)
    done_text = f"{done:,} done" + (f" (of {len(known)} grid points whose server is known)" if len(known) < len(points) else "")
    repeats = f" x {epochs} epoch(s)" if epochs > 1 else ""
    lines = [f"plan: {len(points)} grid point(s) x {questions} question(s){repeats} = {runs:,} run(s), {done_text}, {runs - done:,} to go"]
    width = max([len(k) for k in grid] + [6])
    lines += [f"  {key:<{width}}  {', '.join(values)}" for key, values in grid.items()]
    if fixed:
        lines.append(f"  {'fixed':<{width}}  {' '.join(fixed)}")
    turns = turns_to_go(points)
    if not priced(points):
        lines.append(f"  {'time':<{width}}  {turns:,.0f} turn(s) to go; no rate measured for this model here yet: "
                     "the first runs measure it, and the ETA follows")
    else:
        lines.append(f"  {'time':<{width}}  {turns:,.0f} turn(s) to go, priced at this machine's rate for each model and tool tier "
                     f"({measured_runs} run(s) measured), {in_flight} run(s) in flight: about {duration(estimate_s(points, in_flight))}")
    for n, (label, rate) in enumerate(sorted((rates or {}).items())):
        lines.append(f"  {'rates' if n == 0 else '':<{width}}  {rate_line(label, rate)}")
    for n, line in enumerate(cost_lines(points, in_flight)):
        lines.append(f"  {'cost' if n == 0 else '':<{width}}  {line}")
    lines += [f"  {'':<{width}}  {line}" for line in reductions(points, in_flight, questions)]
    return lines


def plan_record(points: list[GridPoint], grid: dict, questions: int, in_flight: int, measured_runs: int = 0) -> dict:
    """What a launch stores (.launches/<id>/plan.json) for its jobs' progress lines."""
    return {"points": [asdict(p) for p in points], "grid": grid, "questions": questions, "in_flight": in_flight,
            "priced": priced(points), "measured_runs": measured_runs}


# ---- the ETA while the sweep runs -----------------------------------------------------------------
@dataclass
class Pace:
    """Wall seconds a job has run and the weight (expected turns and run overheads, in turns) it finished meanwhile
    (one file per job of a launch)."""

    wall_s: float = 0.0
    turns: float = 0.0


def eta_s(weight_left: float, paces: list[Pace], jobs_at_once: int) -> Optional[float]:
    """Seconds to go: the weight left at the launch's pace so far (wall seconds per finished unit of weight, pooled
    over its jobs), shared over the jobs running at once; None before anything finished."""
    wall = sum(p.wall_s for p in paces)
    done = sum(p.turns for p in paces)
    if done <= 0:
        return None
    return max(0.0, weight_left) * wall / done / max(1, jobs_at_once)


def first_estimate(points: list[GridPoint], weight_left: float, paces: list[Pace], jobs_at_once: int, questions: int) -> list[str]:
    """After a sweep's first run, when no stored rate priced its plan: the estimate from the pace it measured."""
    seconds = eta_s(weight_left, paces, jobs_at_once)
    if seconds is None or not points:
        return []
    unit = sum(p.wall_s for p in paces) / sum(p.turns for p in paces) / max(1, jobs_at_once)  # wall seconds per unit of weight
    lines = [f"plan: measured {unit:.1f} s per turn on the first run(s): about {duration(seconds)} to go"]
    timed = [dataclasses.replace(p, seconds=unit * p.weight) for p in points]
    lines += [f"plan: {line}" for line in cost_lines(timed, 1)]
    if seconds > HOUR_S:
        lines += [f"plan: {line}" for line in reductions(timed, 1, questions)]
    return lines
