#!/usr/bin/env bash
# The main job on the embedded default: install what is missing, sweep tool tiers x budgets on the
# packaged corpus with SmolLM2-135M on llama-server, grade, and draw the figures.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/install.sh
name="${SWEEP_NAME:-main}"
python -m searchbox.sweep -m tools=high,low,none budget=1,2 questions.limit="${QUESTIONS:-3}" sweep.name="$name" "$@"
python -m searchbox.report "outputs/sweeps/$name" --out "outputs/reports/$name" \
  --label "$name: SmolLM2-135M-Instruct on llama-server (a 135M model: the figures show the pipeline, not a finding)"
echo "figures and summary: outputs/reports/$name/ (summary.md); tables: outputs/sweeps/$name/{runs,turns,tool_calls}.parquet"
