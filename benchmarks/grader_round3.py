"""`correct` on issue 29's held-out style pairs (tests/grading/round3_pairs.py): accuracy by class, for this checkout.

    python benchmarks/grader_round3.py [--label NAME] [--json OUT]

Prints one JSON object: the grader version, right/total per class and overall, and the pairs it gets wrong. Run it
from a checkout of the code to measure (PYTHONPATH), the pairs from this one; results/benchmarks/grader_round3.md
records before (the code before issue 29) and after.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the pairs; the graders come first from PYTHONPATH

from searchbox.grading import GRADER_VERSION, Question, grade_text  # noqa: E402
from tests.grading.round3_pairs import PAIRS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    right, total, wrong = defaultdict(int), defaultdict(int), []
    for kind, question, gold, aliases, answer, want in PAIRS:
        got = grade_text(answer, Question("p", question, gold, list(aliases)))["correct"]
        total[kind] += 1
        if got == want:
            right[kind] += 1
        else:
            wrong.append({"class": kind, "gold": gold, "answer": answer, "want": want, "got": got})
    out = {"label": args.label, "grader_version": GRADER_VERSION, "right": sum(right.values()), "total": len(PAIRS),
           "by_class": {k: f"{right[k]}/{total[k]}" for k in total}, "wrong": wrong}
    text = json.dumps(out, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
