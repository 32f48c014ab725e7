#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU: builds llama-server with CUDA, answers one question on it
# (every layer offloaded), and runs the retrieval benchmark with the embedder on cuda and on cpu, in one go.
#
#   bash benchmarks/gpu_check.sh            # results in results/benchmarks/gpu/ (OUT=... to change)
#
# Needs: nvidia-smi and a visible GPU, nvcc with cuBLAS (the CUDA toolkit), cmake and g++, a CUDA build of
# torch for the embedder, and ../shared/data (jina-corpus.zip, jina-qa.jsonl) for the retrieval benchmark.
# Without a GPU it stops at once with exit code 2 and says what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
OUT=${OUT:-results/benchmarks/gpu}
LIMIT=${LIMIT:-50}   # questions for the retrieval benchmark

fail() { echo "gpu_check: $*" >&2; exit 2; }

command -v nvidia-smi >/dev/null || fail "no nvidia-smi on PATH: this machine shows no NVIDIA GPU"
GPUS=$(nvidia-smi --query-gpu=name,compute_cap,memory.total,memory.free --format=csv,noheader 2>/dev/null) || fail "nvidia-smi sees no GPU"
[ -n "$GPUS" ] || fail "nvidia-smi lists no GPU"
command -v nvcc >/dev/null || fail "no nvcc on PATH: install the CUDA toolkit to build llama-server with CUDA"
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
  || fail "torch has no CUDA here ($("$PY" -c 'import torch; print(torch.__version__)')): the embedder cannot use the GPU"
mkdir -p "$OUT"
echo "== GPU: $GPUS"

echo "== build plan"
"$PY" -m searchbox setup --dry-run | tee "$OUT/build_plan.txt"
grep -q "^build: cuda" "$OUT/build_plan.txt" || fail "the build plan is not CUDA (see $OUT/build_plan.txt)"

echo "== setup (CUDA build of llama-server; the bundled model)"
"$PY" -m searchbox setup
"$PY" -m searchbox doctor --only llama-server build threads embedder | tee "$OUT/doctor.txt"
grep -q "GPU build" "$OUT/doctor.txt" || fail "the llama-server found is not a GPU build (see $OUT/doctor.txt)"

echo "== one question on the embedded CUDA server"
RUN="$OUT/run"
rm -rf "$RUN"
env -u LLAMA_URL "$PY" -m searchbox.run "How tall is the Gannet Rock lighthouse?" --budget 2 --tools high --out "$RUN"
"$PY" - "$RUN" <<'EOF'
import json, sys
from pathlib import Path
meta = json.loads((Path(sys.argv[1]) / "run_meta.json").read_text())
server = meta.get("server") or {}
print(f"stop {meta['stop_reason']}, {meta['turns']} turns, decode {server.get('decode_tokens_per_s')} tok/s, "
      f"prefill {server.get('prefill_tokens_per_s')} tok/s, answer: {meta.get('answer', '')[:120]!r}")
sys.exit(0 if meta["stop_reason"] not in ("model_error", "tool_error") else 1)
EOF
LOG=$(ls -t "${SEARCHBOX_HOME:-$HOME/.cache/searchbox}"/logs/llama-server-*.log | head -1)
grep -E "offloaded [0-9]+/[0-9]+ layers to GPU" "$LOG" | tail -1 || fail "the server log $LOG shows no layers offloaded to the GPU"

echo "== retrieval benchmark: embedder on cuda, then on cpu (device=auto; the cpu run hides the GPU)"
"$PY" -c "from searchbox.config import RetrievalConfig; from searchbox.retrieval.embedder import LocalEmbedder; e = LocalEmbedder(RetrievalConfig()); print('auto picks', e.device, '-', e.device_reason); assert e.device == 'cuda'"
"$PY" benchmarks/retrieval.py --out "$OUT" --name retrieval_cuda --limit "$LIMIT"
CUDA_VISIBLE_DEVICES= "$PY" -c "from searchbox.config import RetrievalConfig; from searchbox.retrieval.embedder import LocalEmbedder; e = LocalEmbedder(RetrievalConfig()); print('auto picks', e.device, '-', e.device_reason); assert e.device == 'cpu'"
CUDA_VISIBLE_DEVICES= "$PY" benchmarks/retrieval.py --out "$OUT" --name retrieval_cpu --limit "$LIMIT"
"$PY" - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = []
for device in ("cuda", "cpu"):
    r = json.loads((out / f"retrieval_{device}.json").read_text())
    lat = r.get("search_latency_ms", {})
    rows.append(f"| {device} | {r.get('cold', {}).get('chunks_per_s')} | {r.get('direct_encode', {}).get('chunks_per_s')} | "
                f"{lat.get('new_query_p50')} | {lat.get('new_query_p95')} | {lat.get('repeated_query_p50')} |")
text = "\n".join(["# GPU check: retrieval on cuda vs cpu", "",
                  "| embedder | cold chunks/s (harness) | chunks/s (bare encode) | new query p50 ms | p95 ms | repeated p50 ms |",
                  "|---|---|---|---|---|---|", *rows, ""])
(out / "gpu_check.md").write_text(text)
print(text)
EOF
echo "gpu_check: ok -> $OUT"
