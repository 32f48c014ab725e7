#!/usr/bin/env bash
# The reference design's one-shot command: bash scripts/run.sh "prompt" dataroom.zip BUDGET OUTDIR; then cat OUTDIR/ANSWER.md.
# It is `python -m searchbox.run` (same keys, box, logs; the env knobs apply), with the answer copied to OUTDIR/ANSWER.md.
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: bash scripts/run.sh \"prompt\" dataroom.zip BUDGET OUTDIR" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$here/.venv/bin/python}"
[ -x "$python" ] || python=python3
status=0
"$python" -m searchbox.run "$1" "$2" --budget "$3" --out "$4" || status=$?
if [ -f "$4/work/ANSWER.md" ] && [ ! -L "$4/work/ANSWER.md" ]; then
  cp "$4/work/ANSWER.md" "$4/ANSWER.md"
fi
exit "$status"
