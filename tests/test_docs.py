"""The README and docs stay true: every `python -m searchbox...` command they give runs (`--help`), every path they
name exists, every relative link resolves, and every figure they quote from results/ is the one its data holds.

A quoted figure is marked where it stands, so that a program reads the claim rather than guessing it from prose:

    <!-- q results/benchmarks/hostile.json:held -->111<!-- /q -->
    <!-- q results/grep_vs_vector/runs.parquet:mean(correct;model=control-oracle;delivery=inline) -->1.000<!-- /q -->

The source is a JSON file with a dotted path (list items by index), or a runs.parquet with mean(column;key=value;...)
(missing values left out, as every mean of the report does). The number in the text is compared at the precision
it is printed with; a quote ending in "%" is a share x 100, one ending in " min" or " h" a count of seconds.
"""

from __future__ import annotations

import glob
import json
import math
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250

COMMAND = re.compile(r"python -m (searchbox(?:\.[a-z_]+)*)(?: ([a-z][a-z-]*))?")
# Paths the docs name inside backticks or links, under the repository's own folders (generated folders excluded).
PATH = re.compile(r"(?<![\w./$~-])((?:searchbox|results|benchmarks|experiments|conf|notebooks|scripts|tests|docs|hydra_plugins)"
                  r"/[\w./{},*-]*[\w*}])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
QUOTE = re.compile(r"<!-- q (\S+?):(\S+) -->(.*?)<!-- /q -->", re.DOTALL)
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def text_of(doc: Path) -> str:
    return doc.read_text(encoding="utf-8")


def test_the_readme_is_a_door():
    lines = text_of(ROOT / "README.md").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move reference text to docs/"
    for page in (ROOT / "docs").glob("*.md"):  # every docs page is reachable from the README's table of links
        assert f"docs/{page.name}" in text_of(ROOT / "README.md"), f"docs/{page.name} is not linked from README.md"


def commands() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for doc in DOCS:
        for m in COMMAND.finditer(text_of(doc)):
            found.setdefault((m.group(1), m.group(2) or ""), []).append(doc.name)
    return found


@lru_cache(maxsize=None)
def helped(module: str, sub: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", module, *([sub] if sub else []), "--help"]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)


def subcommand_of(module: str, word: str) -> bool:
    """Whether `python -m module word` is a subcommand (else the word is a positional, e.g. a question)."""
    if not word:
        return False
    return word in subcommands(module)


def subcommands(module: str) -> list[str]:
    """The subcommands argparse lists in a module's usage: a {a,b} group that follows no option (`--grader {..}` is a
    choice of that option, not a subcommand)."""
    proc = helped(module, "")
    if proc.returncode != 0:
        return []
    usage = proc.stdout.split("\n\n", 1)[0]
    return [w for m in re.finditer(r"(-[\w-]+ )?\{([\w,-]+)\}", usage) if m.group(1) is None for w in m.group(2).split(",")]


def test_the_docs_give_commands():
    assert ("searchbox.sweep", "") in commands() or any(m == "searchbox.sweep" for m, _ in commands())


@pytest.mark.parametrize("module", sorted({m for m, _ in commands()}))
def test_every_documented_command_runs(module):
    proc = helped(module, "")
    assert proc.returncode == 0, f"python -m {module} --help failed:\n{proc.stderr[-2000:]}"


def test_every_documented_subcommand_exists():
    missing = []
    for (module, word), where in commands().items():
        if not word or not subcommands(module):
            continue  # no subcommands: the word is an argument
        if not subcommand_of(module, word):
            missing.append(f"python -m {module} {word} ({', '.join(sorted(set(where)))})")
        elif helped(module, word).returncode != 0:
            missing.append(f"python -m {module} {word} --help fails ({', '.join(sorted(set(where)))})")
    assert missing == []


def expand(path: str) -> list[str]:
    """A documented path with {a,b} alternatives and * globs, as the paths it names."""
    m = re.search(r"\{([^{}]*)\}", path)
    if m:
        return [p for alt in m.group(1).split(",") for p in expand(path[:m.start()] + alt + path[m.end():])]
    return [path]


def named_paths() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for m in PATH.finditer(text_of(doc)):
            raw = m.group(1).rstrip(".,:;")
            if raw.startswith(("tests/fakes/", )) and raw.endswith("/"):
                continue
            out.append((doc.name, raw))
    return out


def test_every_named_path_exists():
    missing = []
    for doc, raw in named_paths():
        if "<" in raw or "NAME" in raw or raw.startswith("results/my-"):
            continue  # a placeholder, not a path
        for path in expand(raw):
            hits = glob.glob(str(ROOT / path)) if "*" in path else [str(ROOT / path)] if (ROOT / path).exists() else []
            if not hits:
                missing.append(f"{doc}: {path}")
    assert missing == []


def test_every_relative_link_resolves():
    broken = []
    for doc in DOCS:
        for m in LINK.finditer(text_of(doc)):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert broken == []


@lru_cache(maxsize=None)
def _json(path: str):
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def _parquet(path: str) -> pd.DataFrame:
    return pd.read_parquet(ROOT / path)


def value_of(source: str, selector: str) -> float:
    if source.endswith(".json"):
        value = _json(source)
        for part in selector.split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
        return float(value)
    m = re.fullmatch(r"mean\((\w+)((?:;[\w.-]+=[^;)]+)*)\)", selector)
    assert m, f"unknown selector {selector!r}"
    frame = _parquet(source)
    for cond in filter(None, m.group(2).split(";")):
        key, _, want = cond.partition("=")
        frame = frame[frame[key].astype(str) == want]
    assert len(frame), f"{source}: no rows for {selector}"
    return float(frame[m.group(1)].dropna().astype(float).mean())


def quotes() -> list[tuple[str, str, str, str]]:
    return [(doc.name, *m.groups()) for doc in DOCS for m in QUOTE.finditer(text_of(doc))]


def test_some_figures_are_quoted():
    assert len(quotes()) >= 5


@pytest.mark.parametrize("doc,source,selector,shown", quotes(), ids=[f"{d}:{s}:{k}" for d, s, k, _ in quotes()])
def test_every_quoted_figure_matches_its_data(doc, source, selector, shown):
    number = NUMBER.search(shown)
    assert number, f"{doc}: no number in the quote {shown!r}"
    printed = number.group(0).replace(",", "")
    decimals = len(printed.partition(".")[2])
    actual = value_of(source, selector)
    unit = shown.strip().rsplit(" ", 1)[-1] if " " in shown.strip() else ""
    actual *= {"%": 100}.get(shown.strip()[-1:], 1) / {"min": 60, "h": 3600}.get(unit, 1)
    assert math.isclose(round(actual, decimals), float(printed), abs_tol=10 ** -decimals / 2 + 1e-9), \
        f"{doc} quotes {shown!r} for {source}:{selector}; the data says {actual}"


def test_a_wrong_quote_is_caught():
    """The check can fail: a figure that disagrees with its data is named."""
    hostile = _json("results/benchmarks/hostile.json")
    assert value_of("results/benchmarks/hostile.json", "held") == float(hostile["held"])
    assert not math.isclose(value_of("results/benchmarks/hostile.json", "held"), float(hostile["held"]) + 1)


def test_committed_results_name_the_grader_that_graded_them():
    """docs/benchmarks.md names the grader of the committed runs; every committed runs.parquet says the same."""
    said = set(re.findall(r"grader `(grader-[\w/.-]+)`", text_of(ROOT / "docs" / "benchmarks.md")))
    assert said, "docs/benchmarks.md names no grader version"
    for runs in sorted((ROOT / "results").glob("*/runs.parquet")):
        versions = set(_parquet(str(runs.relative_to(ROOT)))["grader_version"].dropna().astype(str))
        assert versions <= said, f"{runs.parent.name} was graded by {versions}, the docs say {said}"
