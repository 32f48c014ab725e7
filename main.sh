#!/usr/bin/env bash
# The main job on the embedded default: install what is missing (setup also indexes the packaged corpus), sweep
# SmolLM2-135M on llama-server beside the three non-neural controls x tools none/high x budget 1/2 on the packaged
# corpus (experiments/experiment/main.yaml), grade, and draw the figures side by side.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/install.sh
name="${SWEEP_NAME:-main}"
python -m searchbox.sweep -m +experiment=main questions.limit="${QUESTIONS:-4}" sweep.name="$name" "$@"
python -m searchbox.report "outputs/sweeps/$name" --out "outputs/reports/$name" \
  --label "$name: SmolLM2-135M-Instruct on llama-server beside the non-neural controls (the 135M model's zeros show the pipeline; the controls show what the measurements separate)"
echo "figures and summary: outputs/reports/$name/ (summary.md); tables: outputs/sweeps/$name/{runs,turns,tool_calls}.parquet"
