"""`python -m searchbox.power SWEEP_DIR...`: what a finished (or pilot) sweep's questions can detect.

For every paired comparison of the design (analysis.compare) it prints the questions both arms share, the observed
discordance (the mean square of the per-question difference: for binary grades, the share of questions on which
the arms differ), the smallest difference detectable with 80% power at alpha, and the same at the strictest step
of the Holm correction over the comparison's family (alpha / m). With `--target-effect 0.05` it says how many
questions would detect that difference at the observed discordance. The formulas are in sweep/power.py.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from ..errors import SearchboxError, cli
from ..sweep.power import ALPHA, POWER, mde, questions_needed
from .compare import comparisons
from .frames import acting, load
from .multiplicity import DEFAULT_FAMILY, FAMILIES, adjust

COLUMNS = ["grader", "vary", "context", "a", "b", "n_questions", "discordance", "diff", "mde", "family_size", "mde_family"]


def table(pairs: pd.DataFrame, alpha: float = ALPHA, power: float = POWER, target_effect: float | None = None) -> pd.DataFrame:
    """The comparisons (adjusted, with family_size) with their detectable differences; `need` with a target effect."""
    rows = []
    for row in pairs.to_dict("records"):
        n, psi, m = int(row["n_questions"]), float(row.get("discordance", math.nan)), int(row.get("family_size") or 1)
        binary = row.get("test") == "mcnemar"
        out = {c: row.get(c) for c in COLUMNS if c in row}
        out["mde"] = mde(n, psi, alpha, power, binary) if n and psi > 0 else math.nan
        out["mde_family"] = mde(n, psi, alpha / max(1, m), power, binary) if n and psi > 0 else math.nan
        if target_effect is not None:
            out["need"] = questions_needed(target_effect, psi, alpha, power, binary) if psi > 0 else None
        rows.append(out)
    return pd.DataFrame(rows, columns=[*COLUMNS, *(["need"] if target_effect is not None else [])])


def report_lines(pairs: pd.DataFrame, alpha: float = ALPHA, power: float = POWER) -> list[str]:
    """One line per family for summary.md: the detectable difference at its median question count and discordance."""
    lines = []
    if pairs.empty or "family" not in pairs.columns or "discordance" not in pairs.columns:
        return lines
    for name, g in pairs[(pairs["family"] != "") & (pairs["n_questions"] > 0)].groupby("family", sort=False):
        m = int(g["family_size"].iloc[0])
        differ = g[g["discordance"] > 0]  # comparisons whose arms part on some question: the others have nothing to detect
        same = f"; {len(g) - len(differ)} of its comparisons have arms that agree on every question" if len(differ) < len(g) else ""
        if differ.empty:
            lines.append(f"Power (`{name}`): the arms of every comparison agree on every question: no detectable difference can be stated.")
            continue
        n, psi = int(differ["n_questions"].median()), float(differ["discordance"].median())
        binary = bool((differ["test"] == "mcnemar").all())
        fmt = lambda d: "none (too few questions differ)" if math.isnan(d) else f"{100 * d:.1f} points"
        lines.append(f"Power (`{name}`): at {n} questions and discordance {psi:.2f} (medians over the comparisons whose arms differ{same}), "
                     f"the smallest difference detected with {power:.0%} power is {fmt(mde(n, psi, alpha, power, binary))} at alpha={alpha:g}, "
                     f"and {fmt(mde(n, psi, alpha / m, power, binary))} at Holm's strictest step (alpha/{m}). A `diff` smaller than that "
                     "is no evidence that the arms are the same.")
    return lines


@cli
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.power", description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="sweep directories (with runs.parquet) or a results folder")
    parser.add_argument("--grader", default=None, help="the grade compared (default: the headline grader)")
    parser.add_argument("--alpha", type=float, default=ALPHA)
    parser.add_argument("--power", type=float, default=POWER)
    parser.add_argument("--target-effect", type=float, default=None, help="a difference (0.05 = 5 points): the questions it needs")
    parser.add_argument("--family", default=DEFAULT_FAMILY, choices=FAMILIES)
    args = parser.parse_args(argv)
    if not 0 < args.alpha < 1 or not 0 < args.power < 1:
        raise SearchboxError("--alpha and --power must lie between 0 and 1")
    if args.target_effect is not None and not 0 < args.target_effect <= 1:
        raise SearchboxError("--target-effect must lie in (0, 1]: a difference in accuracy, 0.05 for 5 points")
    missing = [d for d in args.dirs if not d.exists()]
    if missing:
        raise SearchboxError(f"no such sweep directory: {missing[0]}")
    frames = acting(load(args.dirs))
    if frames.runs.empty:
        raise SearchboxError(f"no finished runs in {', '.join(map(str, args.dirs))}")
    grader = args.grader or frames.headline
    if grader not in frames.runs.columns:
        raise SearchboxError(f"--grader {grader}: these runs carry no such grade")
    pairs = adjust(comparisons(frames.runs, grader, frames.design, conds=frames.conditions), args.family)
    if pairs.empty:
        print(f"{len(frames.runs)} runs, one condition: no paired comparison to power")
        return 0
    out = table(pairs, args.alpha, args.power, args.target_effect)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 40):
        print(out.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    for line in report_lines(pairs, args.alpha, args.power):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
