"""`python -m searchbox.report SWEEP_DIR... --out results/NAME`: figures (PNG + SVG) and a markdown summary.

Every table splits by every condition (each varying design column); CIs resample questions, those that ask one fact
together (analysis/facts.py), and the summary says how many questions and distinct facts there are;
paired comparisons hold every other condition fixed, and every one of them is written: all in
paired_comparisons.csv, and in summary.md up to MD_PAIRS rows (summary.md says which), each with its p-value adjusted
over its family (`--family`, `--adjust`: analysis.multiplicity) and the family's size and detectable difference
stated. Repeats of a question (epochs, seeds) are reduced per question (analysis.repeats). The headline
grade (`--grader auto`, the default) is the judge when the runs were graded with one, else `correct`
(the answer line asserts the gold and nothing contradicting it); `contains` is shown beside it as the
lenient measure. The paper-style figures (analysis/paper.py) are drawn when the design has the axes
they need, and so are the others (analysis/figures.py `applies`): no accuracy-vs-budget figure without a budget
axis, no grep-vs-dense figure where the tool selection decides the search style. A condition in which no run could
act (a control whose tool is not offered: it answers nothing by construction, analysis.frames.acting) is "n/a" in
the tables and left out of the figures and the comparisons. summary.md names every figure left out and why.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from . import FIGURES, LENIENT, Frames, accuracy_table, comparisons, headline_grader, load, save, search_style_table, time_split, tool_usage
from .figures import applies as figure_applies
from .facts import counts as fact_counts, resampled
from .frames import acting, inert_why
from .multiplicity import DEFAULT_FAMILY, DEFAULT_METHOD, FAMILIES, METHOD_NAME, METHODS, adjust
from .multiplicity import describe as describe_families
from .paper import PAPER_FIGURES, applies
from .power import report_lines as power_lines
from .repeats import has_repeats, reducers, variance_split
from ..errors import SearchboxError, cli
from ..grading.measures import MEASURES, sentence

GRADER_CHOICES = ("auto", "correct", "contains", "exact_match", "f1", "judge")
PAIRS_CSV = "paired_comparisons.csv"
MD_PAIRS = 100  # paired comparisons shown in summary.md; all of them are in PAIRS_CSV
MEANING = {g: MEASURES[g] for g in ("judge", "correct", "contains", "exact_match", "f1")}  # one sentence each: grading/measures.py


def _fmt(value, floatfmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return floatfmt.format(value)
    return str(value).replace("|", "\\|")


def _md(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    if df is None or df.empty:
        return "_no data_"
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v, floatfmt) for v in row) + " |")
    return "\n".join(lines)


def _per_condition(runs: pd.DataFrame, conds: list[str], inert: pd.DataFrame) -> pd.DataFrame:
    """Runs, questions, answers, malformed replies and stop reasons of each condition; why a condition could not act."""
    rows = []
    for key, g in (runs.groupby(conds, dropna=False, sort=True) if conds else [((), runs)]):
        key = key if isinstance(key, tuple) else (key,)
        stops = g["stop_reason"].value_counts() if "stop_reason" in g else pd.Series(dtype=int)
        row = {**dict(zip(conds, key)), "runs": len(g), "questions": g["question_id"].nunique() if "question_id" in g else None,
               "answered": int(g["answer_present"].fillna(False).astype(bool).sum()) if "answer_present" in g else None,
               "malformed_replies": int(g["malformed_replies"].fillna(0).sum()) if "malformed_replies" in g else None,
               "stop_reasons": ", ".join(f"{k} {v}" for k, v in stops.items())}
        if len(inert):
            why = inert_why(inert, dict(zip(conds, key)))
            row["note"] = f"n/a: {why}" if why else ""
        rows.append(row)
    return pd.DataFrame(rows)


NA_NOTE = ("n/a: no run of the condition could act (a control whose tool the selection does not offer answers nothing by "
           "construction); it is left out of the figures and the comparisons.")


def _with_na(table: pd.DataFrame, inert: pd.DataFrame) -> pd.DataFrame:
    """An accuracy table with 'n/a' for the conditions in which no run could act (not a 0 that reads as a finding)."""
    if table.empty or inert is None or inert.empty:
        return table
    table = table.astype({c: object for c in ("mean", "ci_low", "ci_high") if c in table.columns})
    for i, row in table.iterrows():
        if inert_why(inert, row.to_dict()):
            table.loc[i, ["mean", "ci_low", "ci_high"]] = "n/a"
    return table


def resolve_grader(runs: pd.DataFrame, grader: str | None) -> str:
    """`auto` (or None) is the headline grader of these runs; any other name is itself."""
    return headline_grader(runs) if grader in (None, "auto") else grader


def _resampled(runs: pd.DataFrame) -> str:
    """What the CIs resample: facts when some questions share one (analysis/facts.py), else questions."""
    return "facts (questions that ask one fact resample together)" if resampled(runs) == "facts" else "questions"


def _ci_sentence(runs: pd.DataFrame) -> str:
    """How the CIs were drawn, with "N questions, M distinct facts" (questions of one answer file and normalised gold)."""
    n, m = fact_counts(runs)
    return (f"95% CIs resample {_resampled(runs)}: {n} questions, {m} distinct facts "
            "(a fact: one answer file and gold value, normalised as the grader does).")


def _headline_note(runs: pd.DataFrame, grader: str) -> list[str]:
    line = f"Headline grade: `{grader}`: {MEANING.get(grader, grader)}."
    if grader == LENIENT and "correct" not in runs:
        line += (" These tables carry no `correct` grade (graded before grader-3): regrade them with "
                 "`python -m searchbox.grade SWEEP_DIR` for the strict grade.")
    elif grader != LENIENT:
        line += f" `{LENIENT}` is shown beside it as the lenient measure ({MEANING[LENIENT]})."
    return [line]


def summary(frames: Frames, grader: str | None, label: str, skipped: dict[str, str] | None = None, pairs: pd.DataFrame | None = None,
            pairs_csv: str | None = None, family: str = DEFAULT_FAMILY, method: str = DEFAULT_METHOD) -> str:
    """The markdown summary; `skipped`: paper figures not drawn, with why (not in this design); `pairs`: the paired
    comparisons (computed when None), all of which are in `pairs_csv` when it is given; `family` and `method`: how
    their p-values are adjusted (analysis.multiplicity) when `pairs` does not carry p_adj already."""
    every = frames
    frames = acting(frames)  # the runs that could act: the figures, comparisons and means over runs
    inert = frames.inert
    runs, conds = every.runs, every.conditions
    grader = resolve_grader(runs, grader)
    parts = [f"# searchbox report: {label}", ""]
    if runs.empty:
        return "\n".join(parts + ["No finished runs found.", "", "Not drawn (not in this design): no finished runs."]) + "\n"
    models = sorted(map(str, runs["model"].dropna().unique())) if "model" in runs else []
    served = sorted(map(str, runs["served_model_id"].dropna().unique())) if "served_model_id" in runs else []
    versions = sorted(map(str, runs["grader_version"].dropna().unique())) if "grader_version" in runs else []
    parts += [f"{len(runs)} runs, {runs['question_id'].nunique() if 'question_id' in runs else '?'} questions; "
              f"model(s): {', '.join(models) or '?'}" + (f" (served as {', '.join(served)})" if served else "") + ".",
              f"Conditions (every design column that varies): {', '.join(conds) if conds else 'one condition'}.",
              f"Grader version(s): {', '.join(versions) or 'unknown'}. Means weigh each question equally; {_ci_sentence(runs)}",
              *_headline_note(runs, grader), ""]
    if conds and "question_id" in runs and runs.groupby(conds, dropna=False)["question_id"].apply(lambda q: frozenset(q.astype(str))).nunique() > 1:
        parts += ["Question sets differ between conditions (see `questions` per row): compare means only over the same questions; "
                  "the paired comparisons below use the questions both arms share.", ""]
    na = [NA_NOTE, ""] if len(inert) else []
    parts += ["## Runs per condition", "", _md(_per_condition(runs, conds, inert)), ""]
    parts += [f"## Accuracy ({grader}) per condition", "", _md(_with_na(accuracy_table(runs, grader, design=every.design), inert)), "", *na]
    for other in ("correct", LENIENT, "exact_match", "f1", "judge"):
        if other != grader and other in runs and runs[other].notna().any():
            title = f"{other} (lenient)" if other == LENIENT else other
            parts += [f"### {title}", "", sentence(other), "",
                      _md(_with_na(accuracy_table(runs, other, design=every.design), inert)), ""]
    if "evidence_recall" in runs and runs["evidence_recall"].notna().any():
        parts += ["## Evidence recall per condition", "",
                  sentence("evidence_recall"), "",
                  _md(_with_na(accuracy_table(runs, "evidence_recall", design=every.design), inert)), ""]
    from .metrics import section as beside_accuracy

    parts += beside_accuracy(runs, conds, grader, _md)  # citations, document recall, search calls, calibration, judge agreement
    runs, conds = frames.runs, frames.conditions  # from here on: the runs that could act
    pairs = comparisons(runs, grader, frames.design, conds=conds) if pairs is None else pairs
    pairs = pairs if "p_adj" in pairs.columns else adjust(pairs, family, method)
    shown = pairs[pairs["grader"] == grader] if "grader" in pairs else pairs
    where = (f"All {len(shown)} are below" if len(shown) <= MD_PAIRS else f"The first {MD_PAIRS} of {len(shown)} are below")
    also = f" (and the same for `{LENIENT}`)" if grader != LENIENT and "grader" in pairs and (pairs["grader"] == LENIENT).any() else ""
    where += f"; every one{also} is in [{pairs_csv}]({pairs_csv})." if pairs_csv else "."
    parts += [f"## Paired comparisons ({grader}, same questions)", "",
              f"a minus b per question, averaged; CI from resampling {_resampled(runs)}; `p`: McNemar's exact test on binary grades "
              f"(a_only: a right and b wrong), else the sign-flip test on per-question means (`sign-flip by fact` where questions share a fact: "
              f"each fact's questions flip together); `p_adj`: {METHOD_NAME[method]}-adjusted "
              f"over its `family` (`--family {family}`). {where}", "", *describe_families(pairs, method), "",
              *power_lines(shown), "", _md(shown.drop(columns=["mcnemar_p"], errors="ignore").head(MD_PAIRS)), ""]  # `p` holds it
    if has_repeats(runs, conds):
        parts += ["## Repeats (reducers over each question's runs in a condition)", "",
                  "Each question counts once: its repeats reduced to one value (mean; majority: the most frequent answer's grade; "
                  "pass@k: at least one of k right, unbiased estimate); CIs resample questions, not repeats.", "",
                  _md(reducers(runs, grader, conds)), "",
                  "Variance of the grade split between questions and repeats (repeat_share 0: every repeat agreed, as at "
                  "temperature 0 or for a control); token F1 beside the headline grade, since it moves where a binary grade "
                  "that is always 0 cannot.", "", _md(_splits(runs, grader, conds), "{:.4f}"), ""]
    tok_cols = [c for c in ("tokens_prompt", "tokens_cached", "tokens_completion", "tokens_total", "turns", "tool_calls",
                            "malformed_replies") if c in runs]
    if tok_cols:
        means = runs.groupby(conds, dropna=False)[tok_cols].mean().reset_index() if conds else runs[tok_cols].mean().to_frame().T
        parts += ["## Tokens, tool calls and malformed replies per run (mean)", "", _md(means, "{:.1f}"), ""]
    usage = tool_usage(frames.calls, conds)
    parts += ["## Tool use per condition", "", _md(usage, "{:.3f}") if not usage.empty else "_no tool calls_", ""]
    parts += ["## Wall time per run (mean seconds)", "", _md(time_split(runs, conds), "{:.2f}"), ""]
    parts += ["## Grep vs dense per question type", "", _md(search_style_table(frames, grader)), ""]
    if skipped is None:
        skipped = not_drawn(frames)
    drawn = [name for name in (*FIGURES, *PAPER_FIGURES) if name not in skipped]
    parts += ["## Figures", ""] + [f"![{name}]({name}.png)" for name in drawn]
    if skipped:
        parts += ["", "Not drawn (not in this design): " + "; ".join(f"`{name}` ({why})" for name, why in skipped.items()) + "."]
    return "\n".join(parts) + "\n"


def _splits(runs: pd.DataFrame, grader: str, conds: list[str]) -> pd.DataFrame:
    """The variance split of the headline grade and of token F1 (when graded), one table with a `grade` column."""
    parts = [variance_split(runs, g, conds).assign(grade=g) for g in dict.fromkeys([grader, "f1"])
             if g in runs and pd.to_numeric(runs[g], errors="coerce").notna().any()]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    return table[["grade", *[c for c in table.columns if c != "grade"]]]


def not_drawn(frames: Frames) -> dict[str, str]:
    """The figures this design does not fit, each with why (judged on the runs that could act)."""
    frames = acting(frames)
    generic = {name: why for name in FIGURES if (why := figure_applies(frames, name))}
    return {**generic, **{name: why for name in PAPER_FIGURES if (why := applies(frames, name))}}


SHOWN_REGRADES = 10  # regraded runs named one a line on stderr; the rest counted


def regrade_stale(dirs: list[Path]) -> list[str]:
    """Before any table is read: regrade every run whose question file's gold changed since it was graded (record/stale.py)
    and rewrite its sweep's tables, so no summary states a grade of an old gold; one line for each run regraded.

    A run that cannot be regraded here (graded by a judge this report has not got) and a committed result's row whose
    question file now holds another answer or alias than its `graded_gold` (the tables alone, no run folders to grade)
    are a SearchboxError of one line naming the run, the question and the command that regrades it. Of a result's
    tables only the answer and aliases can be compared: `grade tables` regrades the answer grades alone and evidence
    needs the run folders."""
    from ..grading.cli import stale_regrader
    from ..record.collect import collect, run_dirs, stale_grades, write

    said: list[str] = []
    regrade = stale_regrader(said=said)
    for d in map(Path, dirs):
        stale = stale_grades([d])
        for rd, meta, why in stale:
            try:
                regrade(rd, meta)
            except SearchboxError as exc:
                raise SearchboxError(f"{rd}: {why}, and it cannot be regraded here: {str(exc).splitlines()[0]}") from None
        if stale and (d / "runs.parquet").is_file():
            write(d, *collect([d]))  # the sweep's tables follow the new grades
        if not run_dirs([d]) and (d / "runs.parquet").is_file():
            _refuse_stale_table(d)
    return said


def _refuse_stale_table(result: Path) -> None:
    """A committed result whose rows were graded against an answer or alias their question file no longer holds:
    refused in one line (nothing here can regrade the evidence; `grade tables` regrades the answer grades)."""
    import pyarrow.parquet as pq

    from ..record.stale import QuestionTexts, gold_changed

    cols = ["run_id", "question_id", "question", "questions_path", "graded_gold", "gold_source"]
    names = set(pq.read_schema(result / "runs.parquet").names)
    if not {"question_id", "questions_path", "graded_gold"} <= names:
        return
    rows = pd.read_parquet(result / "runs.parquet", columns=[c for c in cols if c in names])
    texts, stale = QuestionTexts(), []
    for row in rows.to_dict("records"):
        meta = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        meta["question_id"] = None if meta.get("question_id") is None else str(meta["question_id"])
        path = meta.get("questions_path")
        asked = texts.of(path) if isinstance(path, str) and path and texts.why_stale(meta) is None else None
        now = (asked or {}).get(meta.get("question_id") or "")  # a reworded or removed question is not a changed gold
        if now is not None and gold_changed({"graded_gold": meta.get("graded_gold"), "gold_source": meta.get("gold_source")}, "", now.golds):
            stale.append(meta)
    if stale:
        first = stale[0]
        more = f" (and {len(stale) - 1} more rows)" if len(stale) > 1 else ""
        raise SearchboxError(f"{result}: run {first.get('run_id')} was graded against another gold of question {first['question_id']} than "
                             f"{first['questions_path']} now holds{more}; regrade the tables: python -m searchbox.grade tables {result}")


def build(dirs: list[Path], out: Path, grader: str = "auto", label: str | None = None, family: str = DEFAULT_FAMILY,
          method: str = DEFAULT_METHOD) -> list[Path]:
    said = regrade_stale(dirs)
    if said:
        print(f"searchbox: regraded {len(said)} run(s) whose question's gold changed since they were graded:", file=sys.stderr)
        for line in said[:SHOWN_REGRADES]:
            print(f"  {line}", file=sys.stderr)
        if len(said) > SHOWN_REGRADES:
            print(f"  ... and {len(said) - SHOWN_REGRADES} more", file=sys.stderr)
    every = load(dirs)
    frames = acting(every)  # a condition in which no run could act is no result: in the tables as n/a, nowhere else
    grader = resolve_grader(every.runs, grader)
    out.mkdir(parents=True, exist_ok=True)
    pairs = comparisons(frames.runs, grader, frames.design, conds=frames.conditions)
    if grader != LENIENT and LENIENT in frames.runs:
        pairs = pd.concat([pairs, comparisons(frames.runs, LENIENT, frames.design, conds=frames.conditions)], ignore_index=True)
    pairs = adjust(pairs, family, method)
    pairs.to_csv(out / PAIRS_CSV, index=False)
    written = [out / PAIRS_CSV]
    skipped = not_drawn(frames)
    for name, make in {**FIGURES, **PAPER_FIGURES}.items():  # the figures whose axes the design has
        if name not in skipped:
            written += save(make(frames, grader), out, name)
    from .metrics import figure as reliability

    written += [p for p in [reliability(frames.runs, grader, out)] if p]
    (out / "summary.md").write_text(summary(every, grader, label or out.name, skipped, pairs, PAIRS_CSV, family, method), encoding="utf-8")
    written.append(out / "summary.md")
    return written


@cli
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.report", description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="sweep directories (with runs.parquet, or run dirs to collect)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--grader", default="auto", choices=GRADER_CHOICES,
                        help="the headline grade (auto: the judge when configured, else correct; contains is the lenient one)")
    parser.add_argument("--label", default=None)
    parser.add_argument("--family", default=DEFAULT_FAMILY, choices=FAMILIES,
                        help="what one family of comparisons is, for the multiplicity correction: grader (every comparison of one "
                             "grader), all (the whole table), vary (each grader and varied column apart)")
    parser.add_argument("--adjust", default=DEFAULT_METHOD, choices=METHODS,
                        help="holm (family-wise error, the default) or bh (Benjamini-Hochberg false discovery rate)")
    args = parser.parse_args(argv)
    missing = [d for d in args.dirs if not d.exists()]
    if missing:
        raise SearchboxError(f"no such sweep directory: {missing[0]}")
    written = build(args.dirs, args.out, args.grader, args.label, args.family, args.adjust)
    print(f"wrote {len(written)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
